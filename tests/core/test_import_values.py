"""What an imported value may be (core/importer.py: PER_US_BOUND, LEVEL_BOUND, MEASURE's
times): every value outside MEASURE's range is a positioned problem like the others, nothing
is stored, and no database error reaches the user (the command line or POST /import); a
property test over the row checker against the database finds no value it lets through that
the database or the tiers cannot take."""

from __future__ import annotations

import io

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.importer import LEVEL_BOUND, MAX_DELTA_US, ImportFailed, csv_rows, import_rows
from tests.core.test_import_export import CPU_HEADER, M15, SYSTEM, counts, env, iso, run, write  # noqa: F401

pytestmark = pytest.mark.reliability  # the reliability suite (pytest -m reliability)

I64 = (1 << 63) - 1


def row(busy: object = 1, qtime: object = 0, swaps: object = 0, frm: str | None = None, to: str | None = None,
        delta: object = M15, response: object = 0) -> str:
    return ",".join(map(str, [SYSTEM, 0, frm or iso(9, 0), to or iso(9, 15), delta, busy, qtime, swaps, 0, 0, 0,
                              response]))


def problems_of(url: str, lines: list[str], **kw) -> list[tuple[int, str, str]]:
    text = "\n".join([",".join(CPU_HEADER), *lines]) + "\n"
    with psycopg.connect(url) as c:
        try:
            import_rows(c, csv_rows(io.BytesIO(text.encode())), where="f.csv", **kw)
        except ImportFailed as exc:
            c.rollback()
            return [(p.line, p.field, p.message) for p in exc.problems]
        finally:
            c.rollback()
    return []


def test_values_outside_measure_are_positioned_problems(env, tmp_path) -> None:  # noqa: F811
    lines = [
        row(busy=I64),                                    # 2: the 64-bit maximum: busy past the interval
        row(swaps=I64),                                   # 3: a count far past any rate
        row(busy=-5),                                     # 4: negative
        row(busy=M15 + 1),                                # 5: busy longer than the interval
        row(frm="0001-01-01T00:00:00+00:00", to="0001-01-01T00:15:00+00:00"),   # 6: year 1
        row(frm="9999-12-31T23:00:00+00:00", to="9999-12-31T23:15:00+00:00"),   # 7: year 9999
        row(busy=1 << 64),                                # 8: past 64 bits
        row(frm="2026-03-02T00:00:00+00:00", to="2027-03-05T00:00:00+00:00", delta=""),  # 9: a year and more
        row(qtime=M15 * 65536 + 1),                       # 10: a queue of more than 65,536 all the time
        row(response=M15 * 65536),                        # 11: fine (at the bound)
    ]
    got = problems_of(env, lines)
    fields = [(line, f) for line, f, _ in got]
    assert fields == [(2, "CPU-BUSY-TIME"), (3, "SWAPS"), (4, "CPU-BUSY-TIME"), (5, "CPU-BUSY-TIME"),
                      (6, "FROM-TIMESTAMP"), (6, "TO-TIMESTAMP"), (7, "FROM-TIMESTAMP"), (7, "TO-TIMESTAMP"),
                      (8, "CPU-BUSY-TIME"), (9, "TO-TIMESTAMP"), (10, "CPU-QTIME")], got
    text = {(line, f): m for line, f, m in got}
    assert text[(2, "CPU-BUSY-TIME")] == (f"{I64} µs is longer than the interval (900000000 µs): a busy time is "
                                          "at most DELTA-TIME")
    assert text[(3, "SWAPS")].startswith(f"{I64} is more than 131,072 per µs of the interval (900000000 µs)")
    assert text[(4, "CPU-BUSY-TIME")] == "-5 is negative: an interval's counter value is never below 0"
    assert text[(6, "FROM-TIMESTAMP")] == "0001-01-01T00:00:00+00:00 is outside MEASURE's times (1975-01-01 to 2199-12-31)"
    assert text[(8, "CPU-BUSY-TIME")] == f"{1 << 64} does not fit in 64 bits"
    assert text[(9, "TO-TIMESTAMP")].endswith("an interval is at most 366 days")
    assert counts(env)["interval_run"] == 0


def test_the_command_line_and_the_api_answer_a_64_bit_maximum_in_words(env, tmp_path) -> None:  # noqa: F811
    from tests.api.conftest import make_client
    from tests.tokens import create_token

    path = write(tmp_path, "max.csv", "\n".join([",".join(CPU_HEADER), row(swaps=I64)]) + "\n")
    out = run("import", path)
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert f"max.csv:2: SWAPS: {I64} is more than 131,072 per µs" in out.output.replace(path, "max.csv")
    token = create_token(env, "values-write", "write")
    with make_client(env) as c:
        r = c.post("/import", content=open(path, "rb").read(),
                   headers={"Authorization": f"Bearer {token}", "Content-Type": "text/csv"})
    assert r.status_code == 422, r.text
    assert r.json()["problems"][0]["field"] == "SWAPS"


def test_max_problems_caps_header_problems(env, tmp_path) -> None:  # noqa: F811
    header = ",".join(["SYSTEM", "CPU", "FROM-TIMESTAMP", "TO-TIMESTAMP"] + [f"BOGUS{i}" for i in range(10_000)])
    path = write(tmp_path, "wide.csv", header + "\n")
    out = run("import", path, "--entity", "cpu", "--max-problems", "5")
    assert out.exit_code == 2
    lines = out.output.strip().splitlines()
    assert len(lines) == 6, lines[:8]
    assert "cannot be imported (10000 problems, the first 5 listed); nothing was stored" in " ".join(lines[-1:])


# ------------------------------------------------------------------ property: the checker and the database

VALUE = st.one_of(st.integers(min_value=-(1 << 64), max_value=1 << 64),
                  st.sampled_from([0, 1, M15, M15 + 1, -1, I64, I64 + 1, LEVEL_BOUND, M15 * (1 << 17),
                                   M15 * (1 << 17) + 1]))
DELTA = st.sampled_from([1, 60_000_000, M15, MAX_DELTA_US])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(busy=VALUE, qtime=VALUE, swaps=VALUE, response=VALUE, delta=DELTA)
def test_whatever_the_checker_lets_through_the_database_takes(env, busy, qtime, swaps, response,  # noqa: F811
                                                              delta) -> None:
    """Rows of arbitrary counter values: the import either stores them and condenses every
    tier, or refuses them with positioned problems; never another error."""
    from datetime import datetime, timedelta

    frm = datetime.fromisoformat(iso(9, 0))
    line = ",".join(map(str, [SYSTEM, 1, frm.isoformat(), (frm + timedelta(microseconds=delta)).isoformat(),
                              delta, busy, qtime, swaps, 0, 0, 0, response]))
    text = "\n".join([",".join(CPU_HEADER), line]) + "\n"
    with psycopg.connect(env) as c:
        try:
            result = import_rows(c, csv_rows(io.BytesIO(text.encode())), where="p.csv")
        except ImportFailed as exc:
            assert exc.problems and all(p.line == 2 for p in exc.problems), exc.problems
            assert any(v < 0 or v > I64 for v in (busy, qtime, swaps, response)) or busy > delta or \
                max(qtime, response) > delta * 65536 or swaps > delta * (1 << 17), exc.problems
        else:
            assert result.stored == 1
            assert 0 <= busy <= delta and 0 <= qtime <= delta * 65536 and 0 <= swaps <= delta * (1 << 17)
            assert c.execute("SELECT count(*) FROM measure.cpu_hour").fetchone()[0] >= 1
        finally:
            c.rollback()


def test_a_month_of_maximal_values_condenses(env) -> None:  # noqa: F811
    """The largest values the checker takes, every minute of a month, condense into every
    tier without overflow (the bounds keep every 64-bit sum under 2^63)."""
    from datetime import datetime, timedelta

    t0 = datetime.fromisoformat("2026-03-01T00:00:00-05:00")
    minute, n = 60_000_000, 31 * 24 * 60
    lines = [",".join(CPU_HEADER)]
    for i in range(n):
        f = t0 + timedelta(minutes=i)
        lines.append(",".join(map(str, [SYSTEM, 2, f.isoformat(), (f + timedelta(minutes=1)).isoformat(), minute,
                                        minute, minute * 65536, minute * (1 << 17), minute * (1 << 17),
                                        minute * (1 << 17), minute * (1 << 17), minute * 65536])))
    with psycopg.connect(env) as c:
        result = import_rows(c, csv_rows(io.BytesIO(("\n".join(lines) + "\n").encode())), where="month.csv")
        assert result.stored == n
        assert c.execute("SELECT count(*) FROM measure.cpu_hour WHERE cpu = 2").fetchone()[0] == 31 * 24
        month_busy = c.execute(
            "SELECT sum((t.counters)[d.position]) FROM _measure.record_tier t"
            " JOIN _measure.counter_def d ON d.entity = 'cpu' AND d.counter = 'cpu_busy_time'"
            " WHERE t.grain = 'm' AND t.type_code = 1 AND t.cpu = 2 AND t.measurement_id = 0").fetchone()[0]
        assert month_busy == n * minute
        c.rollback()
