"""Same answers on both engines: one fixed data set loaded into plain PostgreSQL and into
TimescaleDB gives the same interval records, copies, tiers, reports, dashboard functions
and API reads, row by row.

The data set: eight hours of the demo node (Europe/Amsterdam) across the night the clocks
went forward (2026-03-29), measured by the collector with a fixed seed and origin, a second
measurement of the CPUs and processes over part of it; late data (interval records of an
hour already condensed, written through _measure.interval_record); history two years old
(older than every retention horizon, loaded after a retention run on the empty database:
it must be condensed, not dropped); on TimescaleDB a chunk compressed and late data written
into it.

The TimescaleDB side runs on an embedded server of its own that preloads TimescaleDB
(installed into the wheel by `make timescaledb`; `make test-timescaledb` does it first).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient

from collector.measure.contab import ContabBuilder
from collector.measure.read import ReadQuery, read
from collector.service import Collector
from collector.settings import CollectorSettings
from core import schema
from core.database import DatabaseError, start_embedded
from tests.snapshot import differences, snapshot

REPO = Path(__file__).resolve().parents[1]
SECOND = 1_000_000
START = datetime(2026, 3, 28, 20, 0, tzinfo=UTC)      # 21:00 CET; the clocks go forward at 01:00 UTC
HOURS = 8
OLD = START - timedelta(days=730)


def timescaledb_admin_url():
    try:
        return start_embedded(REPO / ".data" / "test-engines-ts", dbname="postgres", timescaledb=True)
    except DatabaseError as exc:
        pytest.skip(f"TimescaleDB is not installed in the embedded PostgreSQL ({exc}); `make test-timescaledb` "
                    "installs it and runs this test")


def _second_contab() -> str:
    b = ContabBuilder()
    b.add("CPU")
    b.add("PROCESS")
    return b.build().model_dump_json()


def load(url: str, tmp: Path) -> None:
    with psycopg.connect(url) as c:  # a retention run on the empty database first: horizons move
        c.execute("SELECT _measure.retention_run(false, %s, 'test')", (START,))
    settings = CollectorSettings(node="demo", seed=5, interval_seconds=60, backfill_days=0, data_dir=tmp,
                                 spool_dir=tmp / "spool")
    col = Collector(settings, url)
    col.register(epoch_us=int(START.timestamp()) * SECOND)
    col.build()
    with psycopg.connect(url) as c:  # a second measurement, from the second hour to the fifth
        c.execute("INSERT INTO _measure.measurement (system_id, name, contab, start_at, stop_at, interval_us, state)"
                  " SELECT system_id, 'CPLN', %s, %s, %s, 300000000, 'scheduled' FROM _measure.system",
                  (_second_contab(),
                   START + timedelta(hours=1), START + timedelta(hours=5)))
    col.poll_control()
    col.backfill(int((START + timedelta(hours=HOURS)).timestamp()) * SECOND)
    col.close()
    with psycopg.connect(url) as c:
        sid, mid = c.execute("SELECT system_id, min(measurement_id) FROM _measure.measurement GROUP BY 1").fetchone()
        cpu = c.execute("SELECT entity_id FROM _measure.entity WHERE type_code = 1 ORDER BY key LIMIT 1").fetchone()[0]
        n = c.execute("SELECT count(*) FROM _measure.counter_def WHERE entity = 'cpu'").fetchone()[0]
        # late data: a CPU record of another incarnation in an hour already condensed
        late = START + timedelta(hours=2, minutes=10)
        c.execute("INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, to_at,"
                  " delta_us, closing_kind, system_id, type_code, cpu, counters)"
                  " SELECT %s, %s, %s, t, t + INTERVAL '1 minute', 60000000, 3, %s, 1, 0,"
                  "        array_fill(7000000::bigint, ARRAY[%s])"
                  "   FROM generate_series(%s::timestamptz, %s::timestamptz, INTERVAL '1 minute') t",
                  (mid, cpu, late, sid, n, late, late + timedelta(minutes=9)))
        # history two years old, older than every retention horizon
        c.execute("INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, to_at,"
                  " delta_us, closing_kind, system_id, type_code, cpu, counters)"
                  " SELECT %s, %s, %s, t, t + INTERVAL '1 minute', 60000000, 3, %s, 1, 0,"
                  "        array_fill((extract(minute FROM t) * 500000)::bigint, ARRAY[%s])"
                  "   FROM generate_series(%s::timestamptz, %s::timestamptz, INTERVAL '1 minute') t",
                  (mid, cpu, OLD, sid, n, OLD, OLD + timedelta(hours=3, minutes=59)))
        c.execute("SELECT _measure.condense()")
        timescale = c.execute("SELECT timescaledb FROM _measure.install_info").fetchone()[0]
    if timescale:  # a compressed chunk, and late data written into it
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("SELECT compress_chunk(p.part) FROM _measure.run_parts() p WHERE p.lo <= %s AND p.hi > %s",
                      (START, START))
            assert c.execute("SELECT bool_or(compressed) FROM _measure.run_parts()").fetchone()[0]
        with psycopg.connect(url) as c:
            c.execute("INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, to_at,"
                      " delta_us, closing_kind, system_id, type_code, cpu, counters)"
                      " SELECT %s, %s, %s, t, t + INTERVAL '1 minute', 60000000, 3, %s, 1, 0,"
                      "        array_fill(3000000::bigint, ARRAY[%s])"
                      "   FROM generate_series(%s::timestamptz, %s::timestamptz, INTERVAL '1 minute') t",
                      (mid, cpu, START + timedelta(minutes=5), sid, n, START + timedelta(minutes=5),
                       START + timedelta(minutes=20)))
            c.execute("SELECT _measure.condense()")
    else:  # the same late rows on plain PostgreSQL
        with psycopg.connect(url) as c:
            c.execute("INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, to_at,"
                      " delta_us, closing_kind, system_id, type_code, cpu, counters)"
                      " SELECT %s, %s, %s, t, t + INTERVAL '1 minute', 60000000, 3, %s, 1, 0,"
                      "        array_fill(3000000::bigint, ARRAY[%s])"
                      "   FROM generate_series(%s::timestamptz, %s::timestamptz, INTERVAL '1 minute') t",
                      (mid, cpu, START + timedelta(minutes=5), sid, n, START + timedelta(minutes=5),
                       START + timedelta(minutes=20)))
            c.execute("SELECT _measure.condense()")


def reads(url: str) -> list[str]:
    """MEASREAD of every kind the API serves (collector/measure/read.py), as text."""
    out = []
    with psycopg.connect(url) as c:
        mid = c.execute("SELECT min(measurement_id) FROM _measure.measurement").fetchone()[0]
        mid2 = c.execute("SELECT max(measurement_id) FROM _measure.measurement").fetchone()[0]
        queries = [("cpu", {}), ("process", {}), ("disc", {"counters": ["reads", "writes"]}),
                   ("cpu", {"at": START + timedelta(hours=3, minutes=7), "tolerance": timedelta(minutes=10)}),
                   ("cpu", {"from_at": START + timedelta(minutes=30), "to_at": START + timedelta(hours=4)}),
                   ("terminal", {"from_at": START, "to_at": START + timedelta(hours=HOURS)}),
                   ("cpu", {"from_at": START + timedelta(hours=1, minutes=3), "to_at": START + timedelta(hours=2),
                            "all_records": True, "limit": None}),
                   ("cpu", {"from_at": START + timedelta(minutes=3), "to_at": START + timedelta(hours=1, minutes=50),
                            "snap": "nearest"})]
        for m in (mid, mid2):
            for entity, kw in queries:
                res = read(c, m, ReadQuery(entity=entity, **kw))
                out += [f"{m} {entity} {kw} {r.key} {r.from_at} {r.to_at} {r.delta_us} {r.intervals} {r.values} {r.raw}"
                        for r in res.records] + [f"next {res.next_cursor}"]
    return out


def api_reads(url: str) -> list[str]:
    """What the API answers (counter reads followed page by page, tiers, every report), as text."""
    from api.main import create_app
    from api.settings import ApiSettings
    from core.reports import REPORTS
    from tests.tokens import create_token

    headers = {"Authorization": f"Bearer {create_token(url, 'engines', 'read')}"}
    with psycopg.connect(url) as c:
        mids = [r[0] for r in c.execute("SELECT measurement_id FROM _measure.measurement ORDER BY 1")]
    lo, hi = START.isoformat(), (START + timedelta(hours=HOURS)).isoformat()
    mid_lo, mid_hi = (START + timedelta(minutes=37)).isoformat(), (START + timedelta(hours=5, minutes=11)).isoformat()
    gets = []
    for m in mids:
        for entity in ("cpu", "disc", "process", "terminal", "file", "userdef"):
            gets += [(f"/measurements/{m}/counters/{entity}", {}),
                     (f"/measurements/{m}/counters/{entity}", {"from_at": mid_lo, "to_at": mid_hi}),
                     (f"/measurements/{m}/counters/{entity}", {"at": mid_hi, "tolerance_seconds": 600}),
                     (f"/measurements/{m}/counters/{entity}", {"from_at": lo, "to_at": hi, "rate": "false",
                                                               "all_records": "true", "limit": 1000})]
    for entity in ("cpu", "disc", "process", "line", "userdef", "tmf"):
        for tier in ("hour", "shift", "month", "year", "auto"):
            gets.append((f"/tiers/{entity}/{tier}", {"from": lo, "to": hi, "limit": 5000}))
    day = {"system": "\\DEMO", "date": str(START.date())}
    days = {"system": "\\DEMO", "from": str(START.date()), "to": str((START + timedelta(days=1)).date())}
    window = {"system": "\\DEMO", "from": mid_lo, "to": mid_hi}
    for name, rep in sorted(REPORTS.items()):
        params = day if "day" in rep.params else days if "date_from" in rep.params else window
        if "cpu" in rep.params:
            params = {**params, "cpu": 1}
        gets += [(f"/reports/{name}", params), (f"/reports/{name}", {**params, "format": "text"})]
    out = []
    with TestClient(create_app(ApiSettings(cache_enabled=False), database_url=url)) as client:
        for path, params in gets:
            while True:
                r = client.get(path, params=params, headers=headers)
                assert r.status_code == 200, (path, params, r.text)
                out.append(f"{path} {params} {r.text}")
                body = r.json() if "json" in r.headers["content-type"] else None
                cursor = body.get("next_cursor") if isinstance(body, dict) else None
                if not cursor:
                    break
                params = {**params, "cursor": cursor}
    return out


@pytest.fixture(scope="module")
def engines(fresh_database, tmp_path_factory) -> dict[str, str]:
    plain = fresh_database("_engines_plain")
    schema.apply(plain, mode="off")
    load(plain, tmp_path_factory.mktemp("plain"))
    server = timescaledb_admin_url()
    from core.database import drop_database, ensure_database, with_dbname

    admin = server.admin_url()
    drop_database(admin, "engines_ts")
    ensure_database(admin, "engines_ts")
    ts = with_dbname(admin, "engines_ts")
    assert schema.apply(ts, mode="on").timescaledb
    load(ts, tmp_path_factory.mktemp("ts"))
    yield {"plain": plain, "timescaledb": ts}
    drop_database(admin, "engines_ts")
    server.stop()


def test_every_tier_report_panel_and_read_is_the_same_on_both_engines(engines) -> None:
    days = [START.date(), (START + timedelta(days=1)).date()]
    windows = [(START, START + timedelta(hours=HOURS)),
               (START + timedelta(minutes=37), START + timedelta(hours=5, minutes=11)),
               (OLD, OLD + timedelta(hours=4))]
    snaps = {}
    for name, url in engines.items():
        with psycopg.connect(url) as c:
            snaps[name] = snapshot(c, "\\DEMO", days, windows)
            snaps[name]["reads"] = reads(url)
            snaps[name]["api"] = api_reads(url)
            # the old history is condensed, not dropped: hours, shifts and months of 2024
            snaps[name]["old"] = [str(r) for r in c.execute(
                "SELECT count(*), min(busy_avg), max(busy_max) FROM measure.cpu_hour WHERE hour_at < %s",
                (OLD + timedelta(days=1),)).fetchall()]
    # minute m of each hour is busy m * 0.5 s of 60 s: mean 29.5 / 120, peak 59 / 120
    assert snaps["plain"]["old"] == ["(4, Decimal('24.5833333333333333'), Decimal('49.1666666666666667'))"]
    assert all(snaps["plain"][k] for k in ("interval_record", "counter_copy", "cpu_hour", "cpu_month",
                                            "process_summary[0]", "terminal_summary[0]", "reads", "api"))
    assert differences(snaps["plain"], snaps["timescaledb"]) == []
