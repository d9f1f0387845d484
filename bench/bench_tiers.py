"""The performance data base (issue 5): reports from the tiers against the same reports
computed straight from interval records, and the cost of condensing.

Data, built the way production builds it (plain PostgreSQL branch; no TimescaleDB here):
* a year of 1-minute interval records of the 16 CPUs of a node (8.4 million records,
  generated in SQL with a daily load curve and per-minute noise, a month at a time staged in
  pg_temp._interval_in and stored by _measure.store_intervals as interval runs: one row of
  _measure.interval_run per CPU and UTC hour, 60 intervals each), condensed into the hour,
  shift, month and year tiers by _measure.note_intervals + _measure.condense, exactly as
  the collector does after each slice. The CPU reports read only CPU tiers, so the year has
  only CPU records; in production raw records are kept 35 days, so "from interval records
  over a year" is what the tiers spare, not something production could still run;
* one more day of 1-minute interval records of the whole node: 16 CPUs, 128 disc paths
  (64 volumes) and 1,856 processes = 2,000 entities, 2.88 million records (stored the same
  way, 6 hours at a time).

Measured (medians; the tables say of how many runs):
* threshold report (measure.report_threshold, Figure 1/9) of one day, from the tiers and
  from interval records (RAW_THRESHOLD computes the whole report, every column, from the
  records of the shift day only, read unpacked from their runs by _measure.intervals, one
  row per interval record; both results are compared row for row);
* CPU trend report (measure.report_cpu_trend, Figure 2) over 365 days, both ways (RAW_TREND,
  the whole report too);
* condensing the 2,000-entity day into every tier (note_intervals + condense of its 24
  hours: hour tiers and record tiers from interval records, then its shifts, months and year).
Targets: each tier report ≤ 50 ms; raw / tier ≥ 20×; condensing the day ≤ 10 s.
The embedded server lives in .data/bench-tiers (its own; dropped and rebuilt every run unless
BENCH_REUSE=1, which keeps the data of the last run and re-applies the schema, for iterating).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from core import schema
from core.catalog import load_catalog
from core.database import drop_database, ensure_database, start_embedded, with_dbname

warnings.filterwarnings("ignore")
SYSTEM = "\\BIG"
ZONE = "Europe/Amsterdam"
START = datetime(2024, 1, 1, tzinfo=UTC)
END = datetime(2025, 1, 1, tzinfo=UTC)          # the year: [START, END)
DAY = END                                        # the whole-node day: [END, END + 1 day)
THRESHOLD_DAY = date(2024, 6, 12)
N_VOLUMES, N_PROCESSES = 64, 1856

# per-minute load of an entity: a daily curve (peak mid-afternoon UTC), a slow growth over
# the year and deterministic noise from the minute and the entity
LOAD = ("least(1.0, greatest(0.02, 0.45 + 0.35 * sin(2 * pi() * (extract(epoch FROM t) / 3600.0 - 8) / 24)"
        " + 0.1 * extract(epoch FROM t - TIMESTAMPTZ '2024-01-01 00:00+00') / (366 * 86400.0)"
        " + 0.3 * (mod(extract(epoch FROM t)::bigint / 60 * 7919 + e.entity_id * 104729, 1000) / 1000.0 - 0.5)))")

# counter values of a 60 s interval by position (1-based), as fractions of DELTA-TIME for
# times, plain numbers for counts; the rest are small counts
D = "60000000"
CPU = {1: f"f * {D}", 2: f"f * f * 2.2 * {D}", 3: "ceil(f * 5)", 4: f"f * 0.05 * {D}", 5: "1",
       6: "f * 90000", 7: "f * f * f * 240", 8: f"f * 0.3 * {D}", 9: f"f * 0.02 * {D}",
       10: f"f * 0.1 * {D}", 11: "f * 12000", 12: "f * 9000", 13: "f * 1800", 14: "f * 1800 * 400000"}
DISC = {1: "f * 3000", 2: f"f * f * 1.5 * {D}", 3: "ceil(f * 4)", 4: "f * 2000", 5: "f * 1000",
        6: "f * 8000000", 7: "f * 4000000", 12: f"f * 0.8 * {D}", 14: f"f * 0.2 * {D}",
        15: f"f * 0.3 * {D}", 17: "f * 1500", 18: "f * 500", 20: "f * 3"}
PROCESS = {1: f"f * 0.05 * {D}", 2: f"f * 0.02 * {D}", 3: "f * 600", 5: "f * 5", 6: "f * 300",
           7: "f * 300", 15: f"f * f * 0.5 * {D}", 16: "ceil(f * 3)", 17: "f * 40"}


def counters(entity: str, fill: dict[int, str]) -> str:
    n = len(load_catalog().entity(entity).counters)
    return "ARRAY[" + ", ".join(f"({fill[k]})::bigint" if k in fill else "(f * 10)::bigint"
                                for k in range(1, n + 1)) + "]"


def entities() -> list[tuple[str, int, dict]]:
    out: list[tuple[str, int, dict]] = [("cpu", c, {"cpu": c}) for c in range(16)]
    for v in range(N_VOLUMES):
        for path, cpu in (("P", (2 * v) % 16), ("B", (2 * v + 1) % 16)):
            out.append(("disc", cpu, {"cpu": cpu, "device_name": f"$DATA{v:02d}", "pin": 5, "path": path}))
    for n in range(N_PROCESSES):
        out.append(("process", n % 16, {"cpu": n % 16, "pin": 30 + n // 16, "process_name": f"$S{n:04d}",
                                        "program_file_name": f"$APPL.ET1.SERV{n % 40:02d}", "priority": 150}))
    return out


def insert_intervals(c: psycopg.Connection, ids: dict, entity: str, fill: dict, lo: datetime,
                     hi: datetime, chunk: timedelta | None = None) -> None:
    """The 1-minute interval records of [lo, hi) of every entity of a type, generated in SQL,
    staged in pg_temp._interval_in and stored as runs by _measure.store_intervals (one run per
    counter record and UTC hour, the hours marked for condensing), `chunk` at a time."""
    c.execute("CREATE TEMP TABLE IF NOT EXISTS _interval_in (LIKE _measure.interval_record)")
    at = lo
    while at < hi:
        end = min(hi, at + chunk) if chunk else hi
        c.execute(
            "INSERT INTO pg_temp._interval_in (measurement_id, entity_id, record_at, from_at, to_at, delta_us,"
            " closing_kind, system_id, type_code, cpu, error, counters)"
            f" SELECT %(m)s, e.entity_id, %(start)s, t, t + INTERVAL '1 minute', {D}, 3, e.system_id, e.type_code,"
            f" e.cpu, 0, {counters(entity, fill)}"
            " FROM _measure.entity e"
            " CROSS JOIN generate_series(%(lo)s, %(hi)s - INTERVAL '1 minute', INTERVAL '1 minute') t"
            f" CROSS JOIN LATERAL (SELECT {LOAD} AS f) x"
            " WHERE e.system_id = %(sys)s AND e.type_code = %(code)s",
            {**ids, "code": ids[entity], "lo": at, "hi": end})
        c.execute("SELECT _measure.store_intervals()")
        at = end


def reuse(url: str) -> dict | None:
    """BENCH_REUSE=1: the data of the previous run (same sizes), with this checkout's schema
    applied on top; for iterating on SQL. Reported figures come from a fresh run."""
    try:
        with psycopg.connect(url, autocommit=True) as c:
            row = c.execute("SELECT s.system_id, m.measurement_id FROM _measure.system s "
                            "JOIN _measure.measurement m USING (system_id) WHERE s.system_name = %s",
                            (SYSTEM,)).fetchone()
    except psycopg.OperationalError:
        return None
    if row is None:
        return None
    schema.apply(url, mode="off")
    with psycopg.connect(url, autocommit=True) as c:
        ids = {"sys": row[0], "m": row[1], "gen_year_s": 0.0, "condense_year_s": 0.0, "gen_day_s": 0.0}
        ids["records"] = c.execute("SELECT coalesce(sum(n), 0) FROM _measure.interval_run").fetchone()[0]
        ids["day_records"] = c.execute("SELECT coalesce(sum(n), 0) FROM _measure.interval_run WHERE from_at >= %s",
                                       (DAY,)).fetchone()[0]
        # what the new schema computes on its first condensing (stored violations) is done here
        c.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)", (row[0], DAY, DAY))
        c.execute("SELECT _measure.condense(%s::smallint, 1000000)", (row[0],))
        c.execute("VACUUM ANALYZE")
    return ids


def populate(url: str) -> dict:
    ids: dict = {}
    with psycopg.connect(url, autocommit=True) as c:
        ids["sys"] = c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                               "VALUES (%s, 9, %s) RETURNING system_id", (SYSTEM, ZONE)).fetchone()[0]
        ids["m"] = c.execute("INSERT INTO _measure.measurement (system_id, name, contab, state) "
                             "VALUES (%s, 'CPLNYEAR', '{}', 'running') RETURNING measurement_id",
                             (ids["sys"],)).fetchone()[0]
        ids["start"] = START
        ids.update(dict(c.execute("SELECT entity, type_code FROM _measure.entity_type").fetchall()))
        with c.cursor() as cur:
            cur.executemany(
                "INSERT INTO _measure.entity (system_id, type_code, key, ids, cpu, first_seen_at) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                [(ids["sys"], ids[etype], "|".join(f"{k}={v}" for k, v in e.items()), json.dumps(e), cpu, START)
                 for etype, cpu, e in entities()])
        t = time.perf_counter()
        months, month = [], START
        while month < END:
            nxt = (month + timedelta(days=32)).replace(day=1)
            months.append((month, nxt))
            month = nxt

        def gen(span: tuple[datetime, datetime]) -> None:
            with psycopg.connect(url, autocommit=True) as g:
                insert_intervals(g, ids, "cpu", CPU, *span)

        # the daily partitions of the runs, made before the two writers start: two
        # store_intervals making partitions at once can deadlock each other
        c.execute("SELECT _measure.run_partitions_for(%s, %s)", (START, DAY + timedelta(hours=23)))
        with ThreadPoolExecutor(2) as pool:  # two connections: the generation is CPU-bound SQL
            list(pool.map(gen, months))
        ids["gen_year_s"] = time.perf_counter() - t
        t = time.perf_counter()
        c.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)", (ids["sys"], START, END - timedelta(minutes=1)))
        while c.execute("SELECT _measure.condense(%s::smallint, 240)", (ids["sys"],)).fetchone()[0]:
            pass
        ids["condense_year_s"] = time.perf_counter() - t
        t = time.perf_counter()
        for etype, fill in (("cpu", CPU), ("disc", DISC), ("process", PROCESS)):
            insert_intervals(c, ids, etype, fill, DAY, DAY + timedelta(days=1), chunk=timedelta(hours=6))
        ids["gen_day_s"] = time.perf_counter() - t
        ids["records"] = c.execute("SELECT coalesce(sum(n), 0) FROM _measure.interval_run").fetchone()[0]
        ids["day_records"] = c.execute("SELECT coalesce(sum(n), 0) FROM _measure.interval_run WHERE from_at >= %s",
                                       (DAY,)).fetchone()[0]
        c.execute("VACUUM ANALYZE")
    return ids


# ---------------------------------------------------------------- the reports, both ways

TIER_THRESHOLD = "SELECT * FROM measure.report_threshold(%(system)s, %(day)s, NULL) ORDER BY cpu, hour_at"
TIER_TREND = "SELECT * FROM measure.report_cpu_trend(%(system)s, %(from)s, %(to)s) ORDER BY day"

# Figure 9 / Figure 1 from interval records, the whole report (every column of
# measure.report_threshold): the hours of the shift day (from its shifts' bounds: only the
# records it needs), per CPU, measurement and hour the Figure 9 items (interval extremes and
# time-weighted averages), one measurement per CPU-hour (the most measured time), each hour
# placed in its shift, the thresholds in force evaluated, the broken ones listed.
# Both raw queries read the interval records from their runs with _measure.intervals (one row
# per interval, counter p of it c[i][p]) and take the counters they need out of the run's
# array in a subquery kept apart (OFFSET 0) before grouping: else the planner sorts or hashes
# rows that still carry the whole decompressed array of their run (60 x 33 counters), which
# spilled 360 MB to disk for one day and took minutes for the year.
RAW_THRESHOLD = """
WITH span AS (
    SELECT min(b.start_at) AS lo, max(b.end_at) AS hi
      FROM _measure.system_shift ss
     CROSS JOIN LATERAL _measure.shift_bounds(%(sys)s::smallint, %(day)s::date, ss.shift_no) b
     WHERE ss.system_id = %(sys)s),
ir AS (  -- the interval records, the counters of the report read out of their runs
    SELECT ir.entity_id, ir.measurement_id, ir.cpu, ir.delta_us,
           date_bin(INTERVAL '1 hour', ir.from_at, TIMESTAMPTZ '2000-01-01 00:00+00') AS hour_at,
           ir.c[ir.i][1] AS busy, ir.c[ir.i][2] AS qlen, ir.c[ir.i][7] AS swaps, ir.c[ir.i][8] AS ibusy
      FROM span CROSS JOIN LATERAL _measure.intervals(%(sys)s::smallint, 1::smallint, span.lo, span.hi) ir
    OFFSET 0),
hr AS (
    SELECT ir.entity_id, ir.measurement_id, min(ir.cpu) AS cpu, ir.hour_at,
           sum(ir.delta_us) AS elapsed_us,
           max(greatest(ir.qlen, 0)::numeric / ir.delta_us) AS qlen_max,
           min(greatest(ir.qlen, 0)::numeric / ir.delta_us) AS qlen_min,
           max(1000000.0 * greatest(ir.swaps, 0) / ir.delta_us) AS swap_max,
           max(100.0 * greatest(ir.busy, 0) / ir.delta_us) AS busy_max,
           min(100.0 * greatest(ir.busy, 0) / ir.delta_us) AS busy_min,
           max(100.0 * greatest(ir.ibusy, 0) / ir.delta_us) AS ibusy_max,
           sum(greatest(ir.qlen, 0)) AS qlen_us, sum(greatest(ir.swaps, 0)) AS swaps,
           sum(greatest(ir.busy, 0)) AS busy_us, sum(greatest(ir.ibusy, 0)) AS ibusy_us
      FROM ir
     GROUP BY ir.entity_id, ir.measurement_id, ir.hour_at),
best AS (
    SELECT DISTINCT ON (hr.entity_id, hr.hour_at) hr.*
      FROM hr ORDER BY hr.entity_id, hr.hour_at, hr.elapsed_us DESC, hr.measurement_id),
fig AS (
    SELECT b.cpu, b.hour_at, sh.shift_no, b.qlen_max, b.qlen_max - b.qlen_min AS qlen_delt, b.swap_max,
           b.busy_max, b.busy_max - b.busy_min AS busy_delt, b.ibusy_max,
           measure.avg_queue_length(b.qlen_us, b.elapsed_us) AS qlen_avg,
           measure.per_second(b.swaps, b.elapsed_us) AS swap_avg,
           measure.busy_percent(b.busy_us, b.elapsed_us) AS busy_avg,
           measure.busy_percent(b.ibusy_us, b.elapsed_us) AS ibusy_avg
      FROM best b CROSS JOIN LATERAL _measure.shift_of(%(sys)s::smallint, b.hour_at) sh
     WHERE sh.shift_day = %(day)s)
SELECT f.cpu, to_char(f.hour_at AT TIME ZONE s.time_zone, 'HH24:MI') AS time_of_day, f.hour_at, f.shift_no,
       f.qlen_max, f.qlen_delt, f.swap_max, f.busy_max, f.busy_delt, f.ibusy_max, f.qlen_avg, f.swap_avg,
       f.busy_avg, f.ibusy_avg, s.os_version,
       array_agg(t.item || ' ' || t.operator || ' ' || t.limit_value ORDER BY t.item) AS broken
  FROM fig f
  JOIN _measure.system s ON s.system_id = %(sys)s
 CROSS JOIN LATERAL (VALUES ('qlen_max', f.qlen_max), ('qlen_delt', f.qlen_delt), ('swap_max', f.swap_max),
                            ('busy_max', f.busy_max), ('busy_delt', f.busy_delt), ('ibusy_max', f.ibusy_max),
                            ('qlen_avg', f.qlen_avg), ('swap_avg', f.swap_avg), ('busy_avg', f.busy_avg),
                            ('ibusy_avg', f.ibusy_avg)) x (item, value)
  JOIN measure.threshold t ON t.system_id = %(sys)s AND t.entity = 'cpu' AND t.item = x.item
 WHERE measure.breaks(x.value, t.operator, t.limit_value)
 GROUP BY f.cpu, f.hour_at, f.shift_no, f.qlen_max, f.qlen_delt, f.swap_max, f.busy_max, f.busy_delt,
          f.ibusy_max, f.qlen_avg, f.swap_avg, f.busy_avg, f.ibusy_avg, s.os_version, s.time_zone
 ORDER BY f.cpu, f.hour_at
"""

# Figure 2 from interval records, the whole report (every column of measure.report_cpu_trend):
# CPU-hours of the local days (one measurement per CPU-hour), then per local day the hour and
# CPU with the largest average queue length, the extremes over the CPUs of that hour.
RAW_TREND = """
WITH ir AS (  -- the interval records, the counters of the report read out of their runs
    SELECT ir.entity_id, ir.measurement_id, ir.cpu, ir.delta_us,
           date_bin(INTERVAL '1 hour', ir.from_at, TIMESTAMPTZ '2000-01-01 00:00+00') AS hour_at,
           ir.c[ir.i][1] AS busy, ir.c[ir.i][2] AS qlen, ir.c[ir.i][7] AS swaps
      FROM _measure.intervals(%(sys)s::smallint, 1::smallint,
                              (%(from)s::date + time '00:00') AT TIME ZONE %(zone)s,
                              (%(to)s::date + 1 + time '00:00') AT TIME ZONE %(zone)s) ir
    OFFSET 0),
hr AS (
    SELECT ir.entity_id, ir.measurement_id, min(ir.cpu) AS cpu, ir.hour_at,
           sum(ir.delta_us) AS elapsed_us,
           measure.avg_queue_length(sum(greatest(ir.qlen, 0)), sum(ir.delta_us)) AS qlen_avg,
           measure.per_second(sum(greatest(ir.swaps, 0)), sum(ir.delta_us)) AS swap_avg,
           measure.busy_percent(sum(greatest(ir.busy, 0)), sum(ir.delta_us)) AS busy_avg
      FROM ir
     GROUP BY ir.entity_id, ir.measurement_id, ir.hour_at),
best AS (
    SELECT DISTINCT ON (hr.entity_id, hr.hour_at) hr.*
      FROM hr ORDER BY hr.entity_id, hr.hour_at, hr.elapsed_us DESC, hr.measurement_id),
h AS (
    SELECT b.*, (b.hour_at AT TIME ZONE %(zone)s)::date AS day,
           max(b.qlen_avg) OVER w AS hq_max, min(b.qlen_avg) OVER w AS hq_min,
           max(b.swap_avg) OVER w AS hs_max, max(b.busy_avg) OVER w AS hb_max, min(b.busy_avg) OVER w AS hb_min
      FROM best b WINDOW w AS (PARTITION BY b.hour_at))
SELECT DISTINCT ON (h.day) s.system_name, h.day, measure.loadid(h.hour_at AT TIME ZONE s.time_zone) AS loadid,
       h.cpu, e.ids->>'cpu_type' AS cpu_type, s.os_version, h.hq_max AS qlen_max, h.hq_max - h.hq_min AS qlen_delt,
       h.hs_max AS swap_max, h.hb_max AS busy_max, h.hb_max - h.hb_min AS busy_delt
  FROM h JOIN _measure.system s ON s.system_id = %(sys)s JOIN _measure.entity e ON e.entity_id = h.entity_id
 WHERE h.day BETWEEN %(from)s AND %(to)s
 ORDER BY h.day, h.qlen_avg DESC NULLS LAST, h.hour_at, h.cpu
"""


def digest(sql: str, order: str) -> str:
    """The whole result computed by the server, returned as one row: its row count and the md5
    of every row's text in order (what is measured is the report, not the driver decoding
    hundreds of numerics; equal digests = identical reports)."""
    return f"SELECT count(*), md5(string_agg(r::text, '|' ORDER BY {order})) FROM ({sql}) r"


def median_ms(conn: psycopg.Connection, sql: str, args: dict, n: int, warm: int = 0) -> tuple[float, list]:
    """Median of n timed runs after `warm` untimed ones (a session's first call also parses
    and plans the report's functions)."""
    for _ in range(warm):
        conn.execute(sql, args).fetchall()
    times, rows = [], []
    for _ in range(n):
        t = time.perf_counter()
        rows = conn.execute(sql, args).fetchall()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), rows


def main() -> None:
    load_start = os.getloadavg()[0]
    server = start_embedded(Path(".data/bench-tiers"), dbname="postgres")
    admin = server.admin_url()
    url = with_dbname(admin, "bench_tiers")
    ids = reuse(url) if os.environ.get("BENCH_REUSE") == "1" else None
    if ids is None:
        drop_database(admin, "bench_tiers")
        ensure_database(admin, "bench_tiers")
        schema.apply(url, mode="off")
        ids = populate(url)
    args = {"system": SYSTEM, "sys": ids["sys"], "zone": ZONE, "day": THRESHOLD_DAY,
            "from": START.date(), "to": (END - timedelta(days=1)).date()}
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SET ROLE measure_reader")
        thr_tier, thr_dig = median_ms(c, digest(TIER_THRESHOLD, "r.cpu, r.hour_at"), args, 15, warm=2)
        thr_fetch, thr_rows = median_ms(c, TIER_THRESHOLD, args, 15, warm=2)
        trend_tier, trend_dig = median_ms(c, digest(TIER_TREND, "r.day"), args, 15, warm=2)
        trend_fetch, trend_rows = median_ms(c, TIER_TREND, args, 15, warm=2)
        c.execute("RESET ROLE")
        thr_raw, thr_raw_dig = median_ms(c, digest(RAW_THRESHOLD, "r.cpu, r.hour_at"), args, 5, warm=2)
        trend_raw, trend_raw_dig = median_ms(c, digest(RAW_TREND, "r.day"), args, 3)
        hours = c.execute("SELECT count(*) FROM _measure.cpu_hour WHERE hour_at < %s", (END,)).fetchone()[0]
        condense = []
        for _ in range(3):  # mark the day's 24 hours dirty again and condense them
            c.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)",
                      (ids["sys"], DAY, DAY + timedelta(days=1) - timedelta(minutes=1)))
            t = time.perf_counter()
            n = c.execute("SELECT _measure.condense(%s::smallint, 1000000)", (ids["sys"],)).fetchone()[0]
            condense.append(time.perf_counter() - t)
            assert n == 24, n
    server.stop()
    load_end = os.getloadavg()[0]

    def same(a: list, b: list, rows: list) -> str:
        return f"{a[0][0]} ({'yes' if a == b and a[0][0] == len(rows) else 'NO'})"

    cond_s = statistics.median(condense)
    ok = lambda b: "yes" if b else "**NO**"
    print("### bench_tiers: reports from the tiers vs from interval records; condensing (plain PostgreSQL)")
    print()
    print(f"A year ({START.date()} .. {(END - timedelta(days=1)).date()}) of 1-minute CPU interval records of a "
          f"16-CPU node ({ids['records'] - ids['day_records']:,} records, generated and stored as interval runs by "
          f"_measure.store_intervals in {ids['gen_year_s']:.0f} s), "
          f"condensed by note_intervals + condense into {hours:,} CPU hour rows and their shift/month/"
          f"year tiers in {ids['condense_year_s']:.0f} s; plus one day of the whole node "
          f"(16 CPUs, {2 * N_VOLUMES} disc paths, {N_PROCESSES} processes = 2,000 entities, "
          f"{ids['day_records']:,} records, stored in {ids['gen_day_s']:.0f} s). The raw way reads the interval "
          "records unpacked from their runs (_measure.intervals). Both ways compute the whole report on the server and return its "
          "digest (row count, md5 of the rows in order: equal = identical reports); tier reports run as "
          "measure_reader, median of 15 after 2 untimed runs, and are also timed fetching every row into Python "
          "(psycopg, numerics decoded); the raw threshold query median of 5 after 2 untimed runs, the raw trend "
          "query median of 3. TimescaleDB: not measured (not installable here). Load average (1 min) at the "
          f"start / end of the run: {load_start:.1f} / {load_end:.1f} on {os.cpu_count()} cores.")
    print()
    print("| measurement | tiers (ms) | tiers, all rows fetched (ms) | interval records (ms) | raw / tiers "
          "| rows (same?) | targets met |")
    print("|---|---:|---:|---:|---:|---|---|")
    print(f"| threshold report, 1 day ({THRESHOLD_DAY}) | {thr_tier:.1f} | {thr_fetch:.1f} | {thr_raw:.0f} "
          f"| {thr_raw / thr_tier:.0f}× | {same(thr_dig, thr_raw_dig, thr_rows)} "
          f"| {ok(thr_fetch <= 50 and thr_raw / thr_tier >= 20)} |")
    print(f"| CPU trend report, 365 days | {trend_tier:.1f} | {trend_fetch:.1f} | {trend_raw:.0f} "
          f"| {trend_raw / trend_tier:.0f}× | {same(trend_dig, trend_raw_dig, trend_rows)} "
          f"| {ok(trend_fetch <= 50 and trend_raw / trend_tier >= 20)} |")
    print()
    print("| condensing | median (s) | runs (s) | target | met |")
    print("|---|---:|---|---|---|")
    print(f"| one day of 2,000 entities (CPU, DISC, PROCESS; 24 hours) into hour, record, shift, month, year tiers "
          f"| {cond_s:.2f} | {', '.join(f'{x:.2f}' for x in condense)} | ≤ 10 s | {ok(cond_s <= 10)} |")


if __name__ == "__main__":
    main()
