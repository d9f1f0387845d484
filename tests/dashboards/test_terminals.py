"""TERMINAL counters for the lines and terminals dashboard (schema/idempotent/040-dashboards.sql,
schema/060-dashboard-rollups.sql): condensing keeps them per terminal and hour, shift and month,
exactly as summed here from the simulated week's interval records, and they add up to the
LINE counters, which MEASURE sums over the line's subdevices."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import psycopg
import pytest

from tests.dashboards import simulated
from tests.dashboards.reference import shift_of, shifts_of

SYS = simulated.SYSTEM
COUNTERS = ("requests", "reads", "writes", "transactions", "input_bytes", "output_bytes", "response_time")
HOUR_COLUMNS = ("samples", "elapsed_us", "requests", "reads", "writes", "transactions", "input_bytes",
                "output_bytes", "response_us", "response_max_us")


@pytest.fixture
def db(dash_db: str):
    with psycopg.connect(dash_db) as c:
        yield c
        c.rollback()


def from_records(conn) -> dict[tuple, tuple]:
    """(entity_id, hour) -> HOUR_COLUMNS, summed here from the interval records."""
    pos = dict(conn.execute("SELECT counter, position FROM measure.counter_def WHERE entity = 'terminal'").fetchall())
    acc: dict[tuple, list] = {}
    for entity, meas, from_at, delta, counters in conn.execute(
            "SELECT r.entity_id, r.measurement_id, r.from_at, r.delta_us, r.counters FROM measure.interval_record r "
            "JOIN measure.entity_type t USING (type_code) WHERE t.entity = 'terminal'"):
        hour = from_at.replace(minute=0, second=0, microsecond=0)
        c = {k: max(counters[pos[k] - 1], 0) for k in COUNTERS}
        a = acc.setdefault((entity, hour, meas), [0, 0, 0, 0, 0, 0, 0, 0, 0, None])
        for i, v in enumerate((1, delta, c["requests"], c["reads"], c["writes"], c["transactions"],
                               c["input_bytes"], c["output_bytes"], c["response_time"])):
            a[i] += v
        if c["transactions"]:
            m = Decimal(c["response_time"]) / Decimal(c["transactions"])
            a[9] = m if a[9] is None else max(a[9], m)
    best: dict[tuple, tuple] = {}
    for (entity, hour, _meas), a in sorted(acc.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[1][1], kv[0][2])):
        best.setdefault((entity, hour), tuple(a))
    return best


def test_terminal_hours_are_the_interval_records_summed(db) -> None:
    want = from_records(db)
    got = {(r[0], r[1]): tuple(r[2:]) for r in db.execute(
        f"SELECT entity_id, hour_at, {', '.join(HOUR_COLUMNS)} FROM _measure.terminal_hour")}
    assert set(got) == set(want) and len(want) == 6 * 24 * simulated.DAYS    # 6 terminals, every hour
    for k, w in want.items():
        g = got[k]
        assert g[:9] == w[:9], k
        assert (g[9] is None and w[9] is None) or abs(g[9] - w[9]) < Decimal("1e-9"), k
    assert sum(w[5] for w in want.values()) > 10_000                        # transactions of a week


def test_terminals_add_up_to_their_line(db) -> None:
    lines = {(r[0], r[1]): (r[2], r[3]) for r in db.execute(
        "SELECT e.ids->>'device_name', h.hour_at, h.transactions, h.response_us FROM _measure.line_hour h "
        "JOIN measure.entity e USING (entity_id)")}
    terms: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for line, hour, tx, resp in db.execute(
            "SELECT e.ids->>'line_name', h.hour_at, h.transactions, h.response_us FROM _measure.terminal_hour h "
            "JOIN measure.entity e USING (entity_id)"):
        terms[line, hour][0] += tx
        terms[line, hour][1] += resp
    assert {k: tuple(v) for k, v in terms.items()} == lines and lines


def expected_rollup(conn) -> dict[tuple, tuple]:
    """(grain, start_at, shift_no, entity_id) -> (end_at, bucket, hours, sums ..., response_max_us)."""
    tz, shifts = shifts_of(conn)
    out: dict[tuple, list] = {}
    rows = conn.execute(f"SELECT entity_id, hour_at, {', '.join(HOUR_COLUMNS)} FROM _measure.terminal_hour").fetchall()
    for entity, hour, *v in rows:
        day, no, start, end = shift_of(hour, tz, shifts)
        month = day.replace(day=1)
        first = datetime(month.year, month.month, 1, tzinfo=tz).astimezone(UTC)
        nxt = datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=tz).astimezone(UTC)
        for key, head in ((("shift", start, no, entity), [end, day]), (("month", first, no, entity), [nxt, month])):
            a = out.setdefault(key, head + [0] * 10 + [None])
            a[2] += 1
            for i in range(9):
                a[3 + i] += v[i]
            if v[9] is not None:
                a[12] = v[9] if a[12] is None else max(a[12], v[9])
    return {k: tuple(a) for k, a in out.items()}


def test_shift_and_month_rollups_are_the_hours_summed(db) -> None:
    got = {tuple(r[:4]): tuple(r[4:]) for r in db.execute(
        "SELECT grain, start_at, shift_no, entity_id, end_at, bucket, hours, samples, elapsed_us, requests, reads, "
        "writes, transactions, input_bytes, output_bytes, response_us, response_max_us FROM _measure.terminal_rollup")}
    want = expected_rollup(db)
    assert got == want and {k[0] for k in want} == {"shift", "month"}


def test_terminal_series_combines_the_chosen_shifts_of_a_month(db) -> None:
    got = db.execute("SELECT * FROM measure.terminal_series(%s, %s, %s, ARRAY[2, 3], ARRAY['$X251'])",
                     (SYS, simulated.START - timedelta(days=150), simulated.START + timedelta(days=60))).fetchall()
    names = {r[0]: (r[1], r[2]) for r in db.execute(
        "SELECT entity_id, ids->>'line_name', ids->>'subdev_name' FROM measure.entity WHERE entity = 'terminal'")}
    sums: dict[tuple, list] = {}
    for (grain, start, no, entity), r in expected_rollup(db).items():
        if grain == "month" and no in (2, 3) and names[entity][0] == "$X251":
            a = sums.setdefault((start, *names[entity]), [0] * 6 + [None])
            for i, col in enumerate((4, 8, 9, 10, 11, 5)):   # elapsed, tx, in, out, resp, requests
                a[i] += r[col]
            a[6] = r[12] if a[6] is None else max(a[6], r[12])
    want = []
    for (start, line, term), (el, tx, inb, outb, resp, req, rmax) in sorted(sums.items()):
        want.append((start, "month", None, line, term, Decimal(el) / Decimal(10**6), Decimal(tx),
                     Decimal(tx) * 10**6 / el, Decimal(resp) / tx / 10**6 if tx else None, rmax / 10**6,
                     Decimal(req) * 10**6 / el, Decimal(inb + outb) * 10**6 / el))
    assert len(got) == len(want) == 3
    for g, w in zip(got, want, strict=True):
        assert g[:7] == w[:7]
        assert all(abs(a - b) < Decimal("1e-12") for a, b in zip(g[7:], w[7:], strict=True)), list(zip(g[7:], w[7:], strict=True))


def test_purged_records_leave_the_terminal_hours_alone(db) -> None:
    day = (simulated.START + timedelta(days=1), simulated.START + timedelta(days=2))
    before = db.execute("SELECT * FROM _measure.terminal_hour ORDER BY hour_at, entity_id").fetchall()
    db.execute("DELETE FROM _measure.interval_record WHERE type_code = (SELECT type_code FROM measure.entity_type "
               "WHERE entity = 'terminal') AND from_at >= %s AND from_at < %s", day)
    sys_id = db.execute("SELECT measure.system_id_of(%s)", (SYS,)).fetchone()[0]
    assert db.execute("SELECT _measure.recondense(%s::smallint, %s, %s)", (sys_id, day[0], day[1])).fetchone()[0] > 0
    assert db.execute("SELECT * FROM _measure.terminal_hour ORDER BY hour_at, entity_id").fetchall() == before


def _week_hours(db) -> list[tuple]:
    return db.execute(
        "SELECT h.hour_at, e.ids->>'line_name', e.ids->>'subdev_name', h.elapsed_us, h.requests, h.transactions, "
        "h.input_bytes + h.output_bytes, h.response_us, h.response_max_us FROM _measure.terminal_hour h "
        "JOIN measure.entity e USING (entity_id)").fetchall()


def test_spread_is_the_terminals_averages_per_hour(db) -> None:
    per_hour: dict[datetime, list[tuple[int, int]]] = defaultdict(list)
    for hour, _, _, _, _, tx, _, resp, _ in _week_hours(db):
        per_hour[hour].append((tx, resp))
    got = db.execute("SELECT bucket_at, tier, terminals, response_seconds_mean, response_seconds_p90, "
                     "response_seconds_max FROM measure.terminal_spread(%s, %s, %s)",
                     (SYS, simulated.START, simulated.START + timedelta(days=simulated.DAYS))).fetchall()
    assert [g[0] for g in got] == sorted(per_hour) and {g[1] for g in got} == {"hour"}
    for hour, _tier, n, mean, p90, worst in got:
        avgs = sorted(resp / tx for tx, resp in per_hour[hour] if tx)
        assert n == len(avgs) > 0
        exact = Decimal(sum(r for _, r in per_hour[hour])) / sum(t for t, _ in per_hour[hour]) / 10**6
        assert abs(mean - exact) < Decimal("1e-15")
        pos = 0.9 * (len(avgs) - 1)
        lo = int(pos)
        want = avgs[lo] + (pos - lo) * (avgs[min(lo + 1, len(avgs) - 1)] - avgs[lo])
        assert abs(p90 - want / 1e6) < 1e-9
        assert abs(worst - Decimal(max(avgs)) / 10**6) < Decimal("1e-9")


def test_summary_lists_the_slowest_terminals_of_the_chosen_lines(db) -> None:
    tot: dict[tuple, list] = {}
    for _, line, term, el, req, tx, byt, resp, rmax in _week_hours(db):
        if line == "$X252":
            a = tot.setdefault((line, term), [0, 0, 0, 0, 0, 0, None])
            for i, v in enumerate((1, el, req, tx, byt, resp)):
                a[i] += v
            a[6] = rmax if a[6] is None else (max(a[6], rmax) if rmax is not None else a[6])
    want = sorted(((line, term, h, Decimal(tx), Decimal(tx) * 10**6 / el, Decimal(resp) / tx / 10**6, rmax / 10**6,
                    Decimal(req) * 10**6 / el, Decimal(byt) * 10**6 / el)
                   for (line, term), (h, el, req, tx, byt, resp, rmax) in tot.items()),
                  key=lambda r: (-r[5], r[0], r[1]))[:2]
    got = db.execute("SELECT * FROM measure.terminal_summary(%s, %s, %s, NULL, ARRAY['$X252'], 2)",
                     (SYS, simulated.START, simulated.START + timedelta(days=simulated.DAYS))).fetchall()
    assert [g[:4] for g in got] == [w[:4] for w in want] and len(got) == 2
    for g, w in zip(got, want, strict=True):
        assert all(abs(a - b) < Decimal("1e-12") for a, b in zip(g[4:], w[4:], strict=True)), (g, w)


@pytest.mark.parametrize(("start", "end", "shifts", "lines"), [
    (timedelta(hours=3, minutes=30), timedelta(days=5, hours=2, minutes=15), None, None),   # cuts shifts at both ends
    (timedelta(hours=9), timedelta(days=6, hours=22), [2], None),                          # one shift number
    (timedelta(0), timedelta(days=7), [1, 3], ["$X251"]),                                   # whole shifts, one line
    (timedelta(days=2, hours=1), timedelta(days=2, hours=5), None, None),                   # inside one shift
])
def test_top_terminals_over_ranges_that_cut_shifts(db, start, end, shifts, lines) -> None:
    """On the hour tier the totals read whole shifts from the shift rollup and the cut ones by
    their hours: the same as summing every hour row of the range and the chosen shifts."""
    tz, defs = shifts_of(db)
    lo, hi = simulated.START + start, simulated.START + end
    tot: dict[tuple, list] = {}
    hours: dict[tuple, set] = defaultdict(set)
    for hour, line, term, el, req, tx, byt, resp, rmax in _week_hours(db):
        if not lo <= hour <= hi or (shifts and shift_of(hour, tz, defs)[1] not in shifts) \
                or (lines and line not in lines):
            continue
        a = tot.setdefault((line, term), [0, 0, 0, 0, 0, 0, None])
        for i, v in enumerate((1, el, req, tx, byt, resp)):
            a[i] += v
        a[6] = rmax if a[6] is None else (max(a[6], rmax) if rmax is not None else a[6])
        hours[line, term].add(hour)
    want = sorted(((line, term, h, Decimal(tx), Decimal(resp) / tx / 10**6 if tx else None, rmax / 10**6)
                   for (line, term), (h, el, req, tx, byt, resp, rmax) in tot.items()),
                  key=lambda r: (-(r[4] or -1), r[0], r[1]))
    got = db.execute("SELECT line, terminal, hours, transactions, response_seconds_avg, response_seconds_max "
                     "FROM measure.terminal_summary(%s, %s, %s, %s, %s)", (SYS, lo, hi, shifts, lines)).fetchall()
    assert [g[:4] for g in got] == [w[:4] for w in want] and len(want) >= 3
    assert all(abs(g[4] - w[4]) < Decimal("1e-12") and abs(g[5] - w[5]) < Decimal("1e-12")
               for g, w in zip(got, want, strict=True)), list(zip(got, want, strict=True))
    top = db.execute("SELECT bucket_at, tier, line, terminal FROM measure.terminal_series(%s, %s, %s, %s, %s, 3)",
                     (SYS, lo, hi, shifts, lines)).fetchall()
    assert {r[1] for r in top} == {"hour"}
    assert sorted((r[2], r[3], r[0]) for r in top) == sorted((w[0], w[1], h) for w in want[:3] for h in hours[w[0], w[1]])
