"""Dashboard panel queries (issue 7): every query of dashboards/*.json (panels, annotations,
template variables) expanded as Grafana would (tests/dashboards/grafana.py, TimescaleDB off),
run as measure_reader over the last 30 days and over a year of the reference node. Median of 5.
Targets: ≤ 200 ms at 30 days, ≤ 500 ms at 1 year, for every query.

The year is synthetic, with the entities of the reference node \\REF16
(collector/node/nodes/ref16.yaml) as its simulation has them at start: 16 CPUs, 16 TMF, 46 disc
paths (23 volumes), 16 lines, 1,600 terminals, 327 processes, 320 user counters, 644 FILE opens
and 10,244 DISCOPEN opens (66 file names). Nothing of it was measured: every value is a daily
load curve with a yearly trend and hashed jitter (LOAD below; busy hours break the default
thresholds), written straight into the tables condensing keeps, for one measurement:

- the hour tiers _measure.*_hour and _measure.terminal_hour, then every month condensed by
  _measure.condense_upper (shifts, months, years, threshold violations and rollups) and
  _measure.condense_terminal_rollups, as the collector would leave them after a year;
- the record tiers the process, file and transaction-resource reports read (schema/
  090-record-tiers.sql): _measure.record_tier hour rows per CPU, process and FILE counter
  record (every counter plausible, best = true), day and month rows built by
  _measure.condense_record_rollup; _measure.response_hist hour rows (~60-150 1 % bins of
  terminal response around a load-dependent mean, ~96,000 records an hour), rolled up by
  _measure.condense_hist_rollup; _measure.discopen_file_tier (per file name, the measurement
  and the best copy, measurement_id 0) with day and month sums written here as
  _measure.condense_discopen writes them, and _measure.discopen_open_hours (90 % of the opens
  active every hour, 10 % only 08-18 UTC);
- raw interval records (1-minute, every CPU, process, FILE, DISCOPEN and TERMINAL entity) for
  the two UTC hours that the 30-day window cuts: the hour holding its start and the hour
  holding the end of both windows, staged in pg_temp._interval_in and stored as interval runs
  (_measure.interval_run, one row per counter record and hour) by _measure.store_intervals;
  those two hours are then condensed by _measure.condense_records (so their tier rows, and
  their days and months, come from the records, as in production) and their condensing marks
  (_measure.tier_dirty, set by store_intervals) cleared. The windows end 6 h 37 min 13 s
  before the end of the data (Grafana's now-30d is never hour-aligned); the report panels
  widen them to whole UTC hours (measure.hour_start / hour_end), so the edge hours are read
  from their condensed tier rows, not from the interval records (an hour of every DISCOPEN
  is 600,000 records: ~2 s).

The hour tiers, the record tiers and the DISCOPEN tiers are generated independently (the same
load curve, not the same numbers): a chart and a report over the same hours need not agree,
and nothing here checks results, only timings. Simulating the year itself would take days
(bench_node: a day of \\REF16 in 80 s, then condensing). The report functions read the record
tiers through _measure.window_sums, discopen_window and transaction_response; the table marks
those queries.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import warnings
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from core import schema
from core.database import drop_database, ensure_database, start_embedded, with_dbname
from tests.dashboards.grafana import TimeRange, expand
from tests.dashboards.panels import dashboard_files, queries_of

warnings.filterwarnings("ignore")
END = datetime(2025, 1, 1, tzinfo=UTC)
START = END - timedelta(days=365)
NODE = "ref16"
# BENCH_REUSE=1: keep the database of the previous run (same data) and only re-apply the
# schema; for iterating on SQL. Reported figures come from a fresh run (the default).
REUSE = os.environ.get("BENCH_REUSE") == "1"
DATA_DIR = Path(os.environ.get("BENCH_PANELS_DATA_DIR", ".data/bench-panels"))
# the windows end off the hour, as Grafana's now-30d does: partial hours at both edges
END_R = END - timedelta(hours=6, minutes=37, seconds=13)
# the report functions that read the record tiers (panels widen their range to whole hours)
RECORD_TIERS = ("report_busy_process", "report_process_activity", "report_process_summary", "report_file_summary",
                "report_discopen_summary", "report_transaction_resource")
TYPES = ("cpu", "tmf", "disc", "line", "terminal", "process", "userdef", "file", "discopen")
# the UTC hours cut by the windows (start of the 30-day one, end of both): raw interval records
EDGE_HOURS = tuple(sorted({(END_R - timedelta(days=30)).replace(minute=0, second=0, microsecond=0),
                           END_R.replace(minute=0, second=0, microsecond=0)}))
LOAD = ("least(1.0, greatest(0.05, 0.45 + 0.35 * sin(2 * pi() * (extract(epoch FROM h) / 3600.0 - 8) / 24)"
        " + 0.1 * extract(epoch FROM h - %(start)s) / (365 * 86400.0)"
        " + 0.1 * (mod(extract(epoch FROM h)::bigint / 3600 * 7919 + e.entity_id * 104729, 1000) / 1000.0 - 0.5)))")


def entities() -> tuple[str, list[tuple[str, int, dict]], str]:
    """The system name, the measured entities of the reference node at start (its own simulation:
    node tables and MEASMON's identifying fields) and the default CONTAB's JSON."""
    from collector.measure.measmon import entity_ids
    from collector.node.engine import Node
    from collector.node.topology import load_node
    from collector.service import DEFAULT_WORKLOADS, default_contab
    from core.catalog import load_catalog

    topo = load_node(NODE)
    node = Node(topo, DEFAULT_WORKLOADS[NODE], seed=1986, start_us=int(START.timestamp()) * 10**6,
                catalog=load_catalog(), step_us=60 * 10**6)
    out = []
    for etype in TYPES:
        table = node.tables[etype]
        for slot in range(table.n):
            if table.alive[slot]:
                out.append((etype, int(table.cpu[slot]), entity_ids(table, slot)))
    return topo.system_name, out, default_contab(topo).model_dump_json()


STEPS: list[tuple[str, float]] = []  # setup steps and their seconds, in order


def step(name: str, t0: float) -> float:
    """Record (and print at once) a setup step that began at t0; returns now."""
    t = time.perf_counter()
    STEPS.append((name, t - t0))
    print(f"  setup: {name}: {t - t0:.1f} s", file=sys.stderr, flush=True)
    return t


def months_of(lo: datetime, hi: datetime) -> list[tuple[datetime, datetime]]:
    """The UTC months [m, next) covering [lo, hi), cut to [lo, hi)."""
    out, m = [], lo
    while m < hi:
        nxt = min(hi, (m.replace(day=1) + timedelta(days=32)).replace(day=1))
        out.append((m, nxt))
        m = nxt
    return out


def counter_expr(entity: str, counter: str, kind: str, sec: int) -> str:
    """SQL for one counter's sum over `sec` seconds of one entity: f = load (0.05-1), w = the
    entity's weight (0.2-1.8), h = the period's start. Plausible orders of magnitude only."""
    us = sec * 10**6
    mean = "(300000 + 900000 * f)"  # the mean response (us), as in terminal_hour
    special = {
        ("cpu", "cpu_busy_time"): f"f * {us} * 0.95",
        ("cpu", "transactions"): f"f * {sec} * 2.5",  # 1,600 terminals x 1.5 a minute / 16 CPUs
        ("cpu", "response_time"): f"f * {sec} * 2.5 * {mean}",
        ("process", "cpu_busy_time"): f"f * {us} * 0.03 * w",  # 327 processes: ~10 of the 16 CPUs
        ("process", "messages_sent"): f"1 + f * w * 20 * {sec}",
        ("process", "messages_received"): f"1 + f * w * 20 * {sec}",
        ("discopen", "driver_input_calls"): f"1 + f * w * 2 * {sec}",
        ("discopen", "driver_output_calls"): f"1 + f * w * {sec}",
        # 1-2 transactions a minute per terminal (interval records only)
        ("terminal", "transactions"): "1 + floor(2 * j)",
        ("terminal", "response_time"): f"(1 + floor(2 * j)) * {mean} * (0.6 + 0.8 * j)",
    }
    if (entity, counter) in special:
        return special[(entity, counter)]
    if entity == "file" and counter in ("reads", "writes", "updates_or_replies", "deletes_or_writereads",
                                        "info_calls"):
        return f"1 + f * w * 5 * {sec}"
    return {"busy": f"f * w * {us} * 0.02", "qbusy": f"f * w * {us} * 0.02", "queue": f"f * f * {us} * 0.3",
            "maxq": "1 + f * 5", "maxvalue": "f * 50000", "snapshot": "1000",
            "incrementing": f"f * w * {sec}", "accumulating": f"f * w * {sec} * 2000",
            "response": f"f * w * {sec} * {mean}"}[kind]


def counter_array(defs: list[tuple[str, str]], entity: str, sec: int, scale: str = "1",
                  kept: set[tuple[str, str]] | None = None) -> str:
    """ARRAY[...] of every counter of the entity type, in _measure.counter_def order; with kept
    (tier rows), NULL for the counters the tiers do not sum (_measure.record_tier_counter)."""
    return "ARRAY[" + ", ".join(
        "NULL::bigint" if kept is not None and (entity, c) not in kept
        else f"greatest(0, round(({scale}) * ({counter_expr(entity, c, k, sec)})))::bigint"
        for c, k in defs) + "]"


# per entity: the load at h and a weight; j = a hashed jitter of (entity, minute) in [0, 1). OFFSET 0
# keeps the subquery from being pulled up: else LOAD is evaluated once per counter (10 times slower)
FW = (f"CROSS JOIN LATERAL (SELECT {LOAD} AS f, 0.2 + 1.6 * mod(e.entity_id * 7919, 1000) / 1000.0 AS w, "
      "mod(extract(epoch FROM h)::bigint / 60 * 7919 + e.entity_id * 104729, 997) / 997.0 AS j OFFSET 0) x")


def populate_records(c: psycopg.Connection, sys_id: int, meas: int) -> None:
    """The record tiers, response histograms, DISCOPEN tiers and the edge hours' interval
    records (see the module docstring), each step timed."""
    c.execute("SET TimeZone = 'UTC'")
    codes = dict(c.execute("SELECT entity, type_code FROM _measure.entity_type").fetchall())
    defs: dict[str, list[tuple[str, str]]] = {}
    for ent, counter, kind in c.execute("SELECT entity, counter, kind FROM _measure.counter_def ORDER BY entity, position"):
        defs.setdefault(ent, []).append((counter, kind))
    tiered = [r[0] for r in c.execute("SELECT entity FROM _measure.record_tier_type ORDER BY 1")]
    kept = set(c.execute("SELECT entity, counter FROM _measure.record_tier_counter").fetchall())
    months = months_of(START, END)
    args = {"sys": sys_id, "m": meas, "start": START, "end": END}

    t = time.perf_counter()
    for ent in tiered:  # hour rows, one month at a time in time order (as condensing writes them)
        for lo, hi in months:
            c.execute(
                "INSERT INTO _measure.record_tier (system_id, type_code, grain, bucket_at, entity_id, record_at, "
                "measurement_id, best, cpu, first_at, last_at, samples, run_us, counters) "
                "SELECT e.system_id, e.type_code, 'h', h, e.entity_id, %(start)s, %(m)s, true, coalesce(e.cpu, 0), "
                f"h, h + INTERVAL '1 hour', 60, 3600000000, {counter_array(defs[ent], ent, 3600, kept=kept)} "
                "FROM generate_series(%(lo)s, %(hi)s - INTERVAL '1 hour', INTERVAL '1 hour') h "
                f"CROSS JOIN _measure.entity e {FW} "
                "WHERE e.system_id = %(sys)s AND e.type_code = %(code)s ORDER BY h, e.entity_id",
                {**args, "lo": lo, "hi": hi, "code": codes[ent]})
            c.commit()
        t = step(f"record_tier hour rows, {ent}", t)
    c.execute("ANALYZE _measure.record_tier")
    for ent in tiered:
        for lo, hi in months:
            days = [lo + timedelta(days=i) for i in range((hi - lo).days)]
            c.execute("SELECT _measure.condense_record_rollup(%s::smallint, %s::smallint, 'd', %s::timestamptz[])",
                      (sys_id, codes[ent], days))
            c.execute("SELECT _measure.condense_record_rollup(%s::smallint, %s::smallint, 'm', %s::timestamptz[])",
                      (sys_id, codes[ent], [lo]))
            c.commit()
        t = step(f"record_tier day and month rows (condense_record_rollup), {ent}", t)

    # terminal response: per hour ~60-150 bins around the mean of the hour's load, a normal
    # shape, ~96,000 records (1,600 terminals x 60) of 1.5 transactions
    load0 = LOAD.replace("e.entity_id", "0")
    c.execute(
        "INSERT INTO _measure.response_hist (system_id, type_code, grain, bucket_at, bin, records, transactions, "
        "response_us, mean_max_us) "
        f"WITH hrs AS (SELECT h, {load0} AS f "
        "               FROM generate_series(%(start)s, %(end)s - INTERVAL '1 hour', INTERVAL '1 hour') h), "
        "c AS (SELECT h, _measure.response_bin((300000 + 900000 * f)::numeric, 1) AS c0, (30 + 45 * f)::integer AS w FROM hrs), "
        "b AS (SELECT h, c0 + k AS bin, exp(-0.5 * (k / (w / 2.5)) ^ 2) AS wt "
        "        FROM c CROSS JOIN LATERAL generate_series(-w, w) k), "
        "r AS (SELECT h, bin, greatest(1, round(96000 * wt / sum(wt) OVER (PARTITION BY h)))::bigint AS n FROM b) "
        "SELECT %(sys)s, %(code)s, 'h', h, bin, n, (3 * n + 1) / 2, "
        "       round((3 * n + 1) / 2 * power(1.01, bin - 0.5))::bigint, round(power(1.01, bin - 0.1)::numeric, 3) "
        "  FROM r ORDER BY h, bin", {**args, "code": codes["terminal"]})
    c.commit()
    t = step("response_hist hour rows", t)
    for lo, hi in months:
        days = [lo + timedelta(days=i) for i in range((hi - lo).days)]
        c.execute("SELECT _measure.condense_hist_rollup(%s::smallint, 'd', %s::timestamptz[])", (sys_id, days))
        c.execute("SELECT _measure.condense_hist_rollup(%s::smallint, 'm', %s::timestamptz[])", (sys_id, [lo]))
        c.commit()
    t = step("response_hist day and month rows (condense_hist_rollup)", t)

    # DISCOPEN: 10 % of the opens (entity_id divisible by 10) have I/O only 08-18 UTC
    day_only = "mod(e.entity_id, 10) = 0"
    dload = LOAD.replace("e.entity_id", "fl.k")
    dcode = codes["discopen"]
    c.execute(
        "INSERT INTO _measure.discopen_file_tier (system_id, grain, bucket_at, file_name, measurement_id, samples, "
        "counters) "
        f"WITH fl AS (SELECT e.ids->>'file_name' AS file_name, min(e.entity_id) AS k, "
        f"                   count(*) FILTER (WHERE NOT {day_only}) AS n_all, count(*) FILTER (WHERE {day_only}) AS n_day "
        "              FROM _measure.entity e WHERE e.system_id = %(sys)s AND e.type_code = %(code)s GROUP BY 1), "
        "x AS MATERIALIZED (SELECT h, fl.file_name, fl.n_all + CASE WHEN extract(hour FROM h) BETWEEN 8 AND 17 THEN fl.n_day "
        f"                                         ELSE 0 END AS n, {dload} AS f, 1 AS w "
        "        FROM generate_series(%(start)s, %(end)s - INTERVAL '1 hour', INTERVAL '1 hour') h CROSS JOIN fl) "
        f"SELECT %(sys)s, 'h', h, file_name, mid, 60 * n, {counter_array(defs['discopen'], 'discopen', 3600, 'n', kept)} "
        "  FROM x CROSS JOIN (VALUES (%(m)s), (0)) v (mid) WHERE n > 0 ORDER BY h, file_name, mid",
        {**args, "code": dcode})
    c.commit()
    t = step("discopen_file_tier hour rows", t)
    sums = c.execute("SELECT _measure.record_sums_sql(%s::smallint, 'r.counters', false, '::bigint')",
                     (dcode,)).fetchone()[0]
    for lo, hi in months:  # as _measure.condense_discopen: days from hours, the month from days
        for grain, unit, src in (("d", "day", "h"), ("m", "month", "d")):
            c.execute(
                "INSERT INTO _measure.discopen_file_tier (system_id, grain, bucket_at, file_name, measurement_id, "
                "samples, counters) "
                f"SELECT %(sys)s, %(g)s, date_trunc('{unit}', r.bucket_at, 'UTC'), r.file_name, r.measurement_id, "
                f"       sum(r.samples)::integer, {sums} "
                "  FROM _measure.discopen_file_tier r "
                "WHERE r.system_id = %(sys)s AND r.grain = %(src)s AND r.bucket_at >= %(lo)s AND r.bucket_at < %(hi)s "
                "GROUP BY 3, 4, 5", {**args, "g": grain, "src": src, "lo": lo, "hi": hi})
        c.commit()
    t = step("discopen_file_tier day and month rows", t)
    c.execute(
        "INSERT INTO _measure.discopen_open_hours (system_id, month_at, entity_id, record_at, measurement_id, "
        "file_name, hours) "
        "WITH mo AS MATERIALIZED (SELECT m, _measure.hour_bits(ARRAY(SELECT h FROM generate_series(greatest(m, %(start)s), "
        "                      least(m + INTERVAL '1 month', %(end)s) - INTERVAL '1 hour', INTERVAL '1 hour') h), m) AS all_h, "
        "                   _measure.hour_bits(ARRAY(SELECT h FROM generate_series(greatest(m, %(start)s), "
        "                      least(m + INTERVAL '1 month', %(end)s) - INTERVAL '1 hour', INTERVAL '1 hour') h "
        "                      WHERE extract(hour FROM h) BETWEEN 8 AND 17), m) AS day_h "
        "              FROM generate_series(date_trunc('month', %(start)s::timestamptz), %(end)s - INTERVAL '1 hour', "
        "                                   INTERVAL '1 month') m) "
        f"SELECT e.system_id, mo.m, e.entity_id, %(start)s, v.mid, e.ids->>'file_name', "
        f"       CASE WHEN {day_only} THEN mo.day_h ELSE mo.all_h END "
        "  FROM mo CROSS JOIN _measure.entity e CROSS JOIN (VALUES (%(m)s), (0)) v (mid) "
        " WHERE e.system_id = %(sys)s AND e.type_code = %(code)s ORDER BY mo.m, e.entity_id, v.mid",
        {**args, "code": dcode})
    c.commit()
    t = step("discopen_open_hours", t)

    # the interval records of the edge hours, minute by minute: staged in pg_temp._interval_in
    # and stored as runs (one per counter record and UTC hour) by _measure.store_intervals,
    # an entity type and an hour at a time
    c.execute("CREATE TEMP TABLE IF NOT EXISTS _interval_in (LIKE _measure.interval_record)")
    for ent in ("cpu", "process", "file", "discopen", "terminal"):
        for eh in EDGE_HOURS:
            c.execute(
                "INSERT INTO pg_temp._interval_in (measurement_id, entity_id, record_at, from_at, to_at, delta_us, "
                "closing_kind, system_id, type_code, cpu, error, counters) "
                "SELECT %(m)s, e.entity_id, %(start)s, h, h + INTERVAL '1 minute', 60000000, 3, e.system_id, "
                f"       e.type_code, coalesce(e.cpu, 0), 0, {counter_array(defs[ent], ent, 60)} "
                "  FROM generate_series(%(eh)s::timestamptz, %(eh)s::timestamptz + INTERVAL '59 minutes', "
                "                       INTERVAL '1 minute') h "
                f" CROSS JOIN _measure.entity e {FW} "
                " WHERE e.system_id = %(sys)s AND e.type_code = %(code)s",
                {**args, "eh": eh, "code": codes[ent]})
            c.execute("SELECT _measure.store_intervals()")
            c.commit()
    n, runs = c.execute("SELECT coalesce(sum(n), 0), count(*) FROM _measure.interval_run").fetchone()
    t = step(f"interval records of the {len(EDGE_HOURS)} edge hours ({n:,} records in {runs:,} runs, "
             "_measure.store_intervals)", t)
    c.execute("ANALYZE")
    t = time.perf_counter()
    c.execute("SELECT _measure.condense_records(%s::smallint, %s::timestamptz[])", (sys_id, list(EDGE_HOURS)))
    # store_intervals marked the edge hours for condensing (_measure.tier_dirty); they are
    # condensed now (their hour tiers are the synthetic ones above): unmarked, as condense
    # would leave them, or the report panels would read them from the interval records
    c.execute("DELETE FROM _measure.tier_dirty WHERE system_id = %s AND hour_at = ANY (%s::timestamptz[])",
              (sys_id, list(EDGE_HOURS)))
    c.commit()
    step(f"_measure.condense_records of the {len(EDGE_HOURS)} edge hours (tiers, histograms, DISCOPEN; "
         "their days and months again)", t)


def populate(url: str) -> Counter:
    from collector.sink import entity_key

    t = time.perf_counter()
    name, ents, contab = entities()
    t = step("entities of the node's simulation", t)
    with psycopg.connect(url) as c:
        sys_id = c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                           "VALUES (%s, 16, 'America/New_York') RETURNING system_id", (name,)).fetchone()[0]
        meas = c.execute("INSERT INTO _measure.measurement (system_id, name, contab, state) "
                         "VALUES (%s, 'DEFAULT', %s, 'running') RETURNING measurement_id",
                         (sys_id, contab)).fetchone()[0]
        codes = dict(c.execute("SELECT entity, type_code FROM _measure.entity_type").fetchall())
        fields = {e: f.split(";") for e, f in c.execute("SELECT entity, array_to_string(id_fields, ';') "
                                                        "FROM _measure.entity_type")}
        with c.cursor().copy("COPY _measure.entity (system_id, type_code, key, ids, cpu, first_seen_at) "
                             "FROM STDIN") as cp:
            for etype, cpu, ids in ents:
                cp.write_row((sys_id, codes[etype], entity_key(tuple(fields[etype]), ids),
                              json.dumps(ids, default=str), cpu, START))
        c.commit()
        t = step("entity rows", t)
        for etype in ("cpu", "disc", "line", "process", "userdef", "tmf", "terminal"):
            cols = [r[0] for r in c.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = '_measure' "
                "AND table_name = %s ORDER BY ordinal_position", (etype + "_hour",))]
            fixed = {"system_id": "e.system_id", "entity_id": "e.entity_id", "measurement_id": "%(m)s",
                     "hour_at": "h", "cpu": "e.cpu", "samples": "60", "elapsed_us": "3600000000",
                     "first_from_at": "h", "last_to_at": "h + INTERVAL '1 hour'",
                     "transactions": "(f * 400)::bigint", "response_us": "(f * 400 * (300000 + 900000 * f))::bigint",
                     "response_max_us": "300000 + 2000000 * f * f"}

            def expr(col: str, fixed: dict[str, str] = fixed) -> str:
                if col in fixed:
                    return fixed[col]
                if col.endswith("_us"):
                    return "f * f * 3600000000 * 0.9" if "qlen" in col else "f * 3600000000 * 0.9"
                if col.endswith("_min"):
                    return "f * 60"
                if col.endswith("_max"):
                    return "f * 100" if "busy" in col else "f * 3"
                return "f * 100000"

            c.execute(
                f"INSERT INTO _measure.{etype}_hour ({', '.join(cols)}) "
                f"SELECT {', '.join(expr(col) for col in cols)} FROM _measure.entity e "
                f"CROSS JOIN generate_series(%(start)s, %(end)s - INTERVAL '1 hour', INTERVAL '1 hour') h "
                f"CROSS JOIN LATERAL (SELECT {LOAD} AS f OFFSET 0) x "  # evaluated once per row
                f"WHERE e.system_id = %(sys)s AND e.type_code = %(code)s",
                {"m": meas, "start": START, "end": END, "sys": sys_id, "code": codes[etype]})
            c.commit()
        t = step("hour tiers (_measure.*_hour, terminal_hour)", t)
        # complete from the start: every month below is resolved as it is condensed
        c.execute("INSERT INTO _measure.breach_state (system_id) VALUES (%s)", (sys_id,))
        month = START
        while month < END:
            nxt = min(END, (month + timedelta(days=32)).replace(day=1))
            hours = "ARRAY(SELECT generate_series(%s::timestamptz, %s::timestamptz - INTERVAL '1 hour', INTERVAL '1 hour'))"
            c.execute(f"SELECT _measure.condense_upper(%s::smallint, {hours})", (sys_id, month, nxt))
            c.execute(f"SELECT _measure.condense_terminal_rollups(%s::smallint, {hours})", (sys_id, month, nxt))
            c.commit()
            month = nxt
        # (condense_upper also ran _measure.condense_records, on no interval records: the
        # record tiers are written below, after it)
        t = step("condense_upper and condense_terminal_rollups, month by month", t)
        populate_records(c, sys_id, meas)
    t = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("VACUUM ANALYZE")
    step("VACUUM ANALYZE", t)
    return Counter(etype for etype, _, _ in ents)


def _populated(admin: str) -> bool:
    with psycopg.connect(admin, autocommit=True) as c:
        return c.execute("SELECT 1 FROM pg_database WHERE datname = 'bench_panels'").fetchone() is not None


def variables(conn: psycopg.Connection, path: Path, tr: TimeRange) -> tuple[dict, list[str]]:
    dash = json.loads(path.read_text(encoding="utf-8"))
    values: dict[str, object] = {}
    multi: list[str] = []
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            cur = conn.execute(expand(v["query"], tr, variables=values, multi=multi))
            cols = [d.name for d in cur.description]
            k = cols.index("__value") if "__value" in cols else 0
            vals = [str(r[k]) for r in cur.fetchall()] or ["none"]
            if v.get("multi") or v.get("includeAll"):
                values[v["name"]], _ = vals, multi.append(v["name"])
            else:
                values[v["name"]] = vals[0]
        elif v["type"] in ("custom", "textbox"):
            values[v["name"]] = v["current"]["value"]
    return values, multi


def median_ms(conn: psycopg.Connection, sql: str, n: int = 5) -> tuple[float, int]:
    times, rows = [], 0
    for _ in range(n):
        t = time.perf_counter()
        rows = len(conn.execute(sql).fetchall())
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), rows


def main() -> None:
    server = start_embedded(DATA_DIR, dbname="postgres")
    admin = server.admin_url()
    url = with_dbname(admin, "bench_panels")
    t = time.perf_counter()
    if REUSE and _populated(admin):
        schema.apply(url, mode="off")  # the schema of this checkout on the data of the last run
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("VACUUM ANALYZE")
        step("reused the last run's data: schema re-applied, VACUUM ANALYZE", t)
    else:
        drop_database(admin, "bench_panels")
        ensure_database(admin, "bench_panels")
        schema.apply(url, mode="off")
        step("schema", t)
        populate(url)
    setup_s = time.perf_counter() - t
    ranges = {"30 d": (TimeRange(END_R - timedelta(days=30), END_R), 6 * 3600),
              "1 y": (TimeRange(END_R - timedelta(days=365), END_R), 86400)}
    with psycopg.connect(url) as c:
        counts = dict(c.execute("SELECT entity, count(*) FROM measure.entity GROUP BY 1").fetchall())
        hours = c.execute("SELECT (SELECT count(*) FROM _measure.process_hour), "
                          "(SELECT count(*) FROM _measure.terminal_hour), "
                          "(SELECT count(*) FROM _measure.hour_breach)").fetchone()
        tiers = c.execute("SELECT (SELECT count(*) FROM _measure.record_tier), "
                          "(SELECT count(*) FROM _measure.response_hist), "
                          "(SELECT count(*) FROM _measure.discopen_file_tier), "
                          "(SELECT count(*) FROM _measure.discopen_open_hours), "
                          "(SELECT coalesce(sum(n), 0) FROM _measure.interval_run)").fetchone()
        sys_id = c.execute("SELECT system_id FROM _measure.system").fetchone()[0]
        plans = {}
        for label, (tr, _) in ranges.items():
            # as the report panels ask: the range widened to whole hours
            g = dict(c.execute("SELECT grain::text, count(*) FROM _measure.window_plan(%s::smallint, "
                               "measure.hour_start(%s), measure.hour_end(%s)) GROUP BY 1",
                               (sys_id, tr.start, tr.end)).fetchall())
            plans[label] = ", ".join(f"{g.get(k, 0)} {n}" for k, n in
                                     (("m", "months"), ("d", "days"), ("h", "hours"), ("r", "record ranges")))
    load0 = os.getloadavg()[0]
    fmt = "%Y-%m-%d %H:%M:%S"
    lines = ["### bench_panels: dashboard queries, a year of the reference node's tiers (median of 5, ms)", "",
             f"Entities as \\REF16 has them at start: {', '.join(f'{counts.get(e, 0):,} {e}' for e in TYPES)}; "
             f"a synthetic year of hour rows ({hours[0]:,} process hours, {hours[1]:,} terminal hours, "
             f"{hours[2]:,} stored threshold violations), condensed month by month; record tiers "
             f"({tiers[0]:,} record_tier rows, {tiers[1]:,} response_hist, {tiers[2]:,} discopen_file_tier, "
             f"{tiers[3]:,} discopen_open_hours) and {tiers[4]:,} interval records of the hours "
             f"{', '.join(h.strftime('%Y-%m-%d %H:00') for h in EDGE_HOURS)} UTC. "
             f"Windows end {END_R.strftime(fmt)} UTC (off the hour): "
             f"30 d [{ranges['30 d'][0].start.strftime(fmt)}, …) = {plans['30 d']}; "
             f"1 y [{ranges['1 y'][0].start.strftime(fmt)}, …) = {plans['1 y']} (_measure.window_plan of the range "
             "widened to whole hours, as the report panels read it). "
             f"Setup {setup_s:.0f} s: " + "; ".join(f"{n} {sec:.0f} s" for n, sec in STEPS) + ". "
             "$__interval 6 h (30 d), 1 d (1 y). Targets: 30 d ≤ 200 ms, 1 y ≤ 500 ms. "
             "`record tiers` = a report function reading _measure.record_tier, response_hist or the DISCOPEN "
             "tiers.", "",
             "| dashboard | query | reads | 30 d | rows | 1 y | rows | targets met |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    worst = {"30 d": 0.0, "1 y": 0.0}
    missed = 0
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET ROLE measure_reader")
        for path in dashboard_files():
            res: dict[str, dict[str, tuple[float, int]]] = {}
            for label, (tr, interval_s) in ranges.items():
                values, multi = variables(conn, path, tr)
                for q in queries_of(path):
                    sql = expand(q.sql, tr, variables=values, multi=multi, interval_ns=interval_s * 10**9)
                    res.setdefault(q.where, {})[label] = median_ms(conn, sql)
            for where, r in res.items():
                (a, ra), (b, rb) = r["30 d"], r["1 y"]
                rec = any(f in next(q.sql for q in queries_of(path) if q.where == where) for f in RECORD_TIERS)
                ok = "yes" if a <= 200 and b <= 500 else "**no**"
                missed += ok == "**no**"
                worst["30 d"], worst["1 y"] = max(worst["30 d"], a), max(worst["1 y"], b)
                name = where.split("/", 1)[1]
                lines.append(f"| {path.stem} | {name} | {'record tiers' if rec else ''} | {a:.1f} | {ra} | "
                             f"{b:.1f} | {rb} | {ok} |")
    load1 = os.getloadavg()[0]
    lines += ["", f"Slowest query: {worst['30 d']:.0f} ms (30 d), {worst['1 y']:.0f} ms (1 y); "
              f"{missed} quer{'y' if missed == 1 else 'ies'} over target. Load average (1 min) "
              f"{load0:.1f} before and {load1:.1f} after the timings (2 cores shared)."]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
