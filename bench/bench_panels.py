"""Dashboard panel queries (issue 7): every query of dashboards/*.json (panels, annotations,
template variables) expanded as Grafana would (tests/dashboards/grafana.py, TimescaleDB off),
run as measure_reader over the last 30 days and over a year of the reference node. Median of 5.
Targets: ≤ 200 ms at 30 days, ≤ 500 ms at 1 year.

The year is synthetic and lives in the tiers only, with the entities of the reference node
\\REF16 (collector/node/nodes/ref16.yaml) as its simulation has them at start: 16 CPUs, 16 TMF,
46 disc paths (23 volumes), 16 lines, 1,600 terminals, 327 processes, 320 user counters. Their
hour rows are written straight into _measure.*_hour and _measure.terminal_hour (a daily load
curve with a yearly trend and hashed jitter: busy hours break the default thresholds), then
every month is condensed by _measure.condense_upper (shifts, months, years, threshold
violations and rollups) and _measure.condense_terminal_rollups, as the collector would leave
them after a year. Simulating the year itself would take days (bench_node: a day of \\REF16 in
80 s, then condensing). Raw interval records are kept 35 days in production; here there are
none, so the panels that read them (process and file reports, transaction resource) run on
empty input and are marked "raw" (their cost is that of window_sums over 30 days of records,
not measured here).
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
from collector import schema
from collector.database import drop_database, ensure_database, start_embedded, with_dbname
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
RAW = ("report_busy_process", "report_process_activity", "report_process_summary", "report_file_summary",
       "report_discopen_summary", "report_transaction_resource")
TYPES = ("cpu", "tmf", "disc", "line", "terminal", "process", "userdef")
LOAD = ("least(1.0, greatest(0.05, 0.45 + 0.35 * sin(2 * pi() * (extract(epoch FROM h) / 3600.0 - 8) / 24)"
        " + 0.1 * extract(epoch FROM h - %(start)s) / (365 * 86400.0)"
        " + 0.1 * (mod(extract(epoch FROM h)::bigint / 3600 * 7919 + e.entity_id * 104729, 1000) / 1000.0 - 0.5)))")


def entities() -> tuple[str, list[tuple[str, int, dict]], str]:
    """The system name, the measured entities of the reference node at start (its own simulation:
    node tables and MEASMON's identifying fields) and the default CONTAB's JSON."""
    from collector.catalog import load_catalog
    from collector.measure.measmon import entity_ids
    from collector.node.engine import Node
    from collector.node.topology import load_node
    from collector.service import DEFAULT_WORKLOADS, default_contab

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


def populate(url: str) -> Counter:
    from collector.sink import entity_key

    name, ents, contab = entities()
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
        for etype in ("cpu", "disc", "line", "process", "userdef", "tmf", "terminal"):
            cols = [r[0] for r in c.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = '_measure' "
                "AND table_name = %s ORDER BY ordinal_position", (etype + "_hour",))]
            fixed = {"system_id": "e.system_id", "entity_id": "e.entity_id", "measurement_id": "%(m)s",
                     "hour_at": "h", "cpu": "e.cpu", "samples": "60", "elapsed_us": "3600000000",
                     "first_from_at": "h", "last_to_at": "h + INTERVAL '1 hour'",
                     "transactions": "(f * 400)::bigint", "response_us": "(f * 400 * (300000 + 900000 * f))::bigint",
                     "response_max_us": "300000 + 2000000 * f * f"}

            def expr(col: str) -> str:
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
                f"CROSS JOIN LATERAL (SELECT {LOAD} AS f) x "
                f"WHERE e.system_id = %(sys)s AND e.type_code = %(code)s",
                {"m": meas, "start": START, "end": END, "sys": sys_id, "code": codes[etype]})
            c.commit()
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
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("VACUUM ANALYZE")
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
    else:
        drop_database(admin, "bench_panels")
        ensure_database(admin, "bench_panels")
        schema.apply(url, mode="off")
        populate(url)
    setup_s = time.perf_counter() - t
    with psycopg.connect(url) as c:
        counts = dict(c.execute("SELECT entity, count(*) FROM measure.entity GROUP BY 1").fetchall())
        hours = c.execute("SELECT (SELECT count(*) FROM _measure.process_hour), "
                          "(SELECT count(*) FROM _measure.terminal_hour), "
                          "(SELECT count(*) FROM _measure.hour_breach)").fetchone()
    ranges = {"30 d": (TimeRange(END - timedelta(days=30), END), 6 * 3600),
              "1 y": (TimeRange(START, END), 86400)}
    load0 = os.getloadavg()[0]
    lines = ["### bench_panels: dashboard queries, a year of the reference node's tiers (median of 5, ms)", "",
             f"Entities as \\REF16 has them at start: {', '.join(f'{counts.get(e, 0):,} {e}' for e in TYPES)}; "
             f"a synthetic year of hour rows ({hours[0]:,} process hours, {hours[1]:,} terminal hours, "
             f"{hours[2]:,} stored threshold violations), condensed month by month. "
             f"Setup (schema, hour rows, condensing): {setup_s:.0f} s. $__interval 6 h (30 d), 1 d (1 y). "
             "Targets: 30 d ≤ 200 ms, 1 y ≤ 500 ms. `raw` = reads raw interval records (none here).", "",
             "| dashboard | query | 30 d | rows | 1 y | rows | targets met |", "|---|---|---:|---:|---:|---:|---|"]
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
                raw = any(f in next(q.sql for q in queries_of(path) if q.where == where) for f in RAW)
                ok = "raw" if raw else ("yes" if a <= 200 and b <= 500 else "**no**")
                missed += ok == "**no**"
                if not raw:
                    worst["30 d"], worst["1 y"] = max(worst["30 d"], a), max(worst["1 y"], b)
                name = where.split("/", 1)[1]
                lines.append(f"| {path.stem} | {name} | {a:.1f} | {ra} | {b:.1f} | {rb} | {ok} |")
    load1 = os.getloadavg()[0]
    lines += ["", f"Slowest tier-reading query: {worst['30 d']:.0f} ms (30 d), {worst['1 y']:.0f} ms (1 y); "
              f"{missed} quer{'y' if missed == 1 else 'ies'} over target. Load average (1 min) "
              f"{load0:.1f} before and {load1:.1f} after the timings (2 cores shared)."]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
