"""Dashboard panel queries (issue 7): every query of dashboards/*.json (panels, annotations,
template variables) expanded as Grafana would (tests/dashboards/grafana.py, TimescaleDB off),
run as measure_reader over the last 30 days and over a year of a 16-CPU node. Median of 5.
Targets: ≤ 200 ms at 30 days, ≤ 500 ms at 1 year.

The year is synthetic and lives in the tiers only: hour rows written straight into
_measure.*_hour (16 CPUs, 16 TMF, 8 volumes x 2 paths, 8 lines, 48 processes, 4 user counters),
then the shift/month/year tiers by _measure.condense_upper, as the collector would leave them
after a year. Raw interval records are kept 35 days in production; here there are none, so the
panels that read them (process and file reports, transaction resource) run on empty input and
are marked "raw" (their cost is that of window_sums over 30 days of records, not measured here).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import warnings
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
# BENCH_REUSE=1: keep the database of the previous run (same data) and only re-apply the
# schema; for iterating on SQL. Reported figures come from a fresh run (the default).
REUSE = os.environ.get("BENCH_REUSE") == "1"
RAW = ("report_busy_process", "report_process_activity", "report_process_summary", "report_file_summary",
       "report_discopen_summary", "report_transaction_resource")
LOAD = ("least(1.0, greatest(0.05, 0.45 + 0.35 * sin(2 * pi() * (extract(epoch FROM h) / 3600.0 - 8) / 24)"
        " + 0.1 * extract(epoch FROM h - %(start)s) / (365 * 86400.0)"
        " + 0.1 * (mod(extract(epoch FROM h)::bigint / 3600 * 7919 + e.entity_id * 104729, 1000) / 1000.0 - 0.5)))")


def entities() -> list[tuple[str, int, dict]]:
    out: list[tuple[str, int, dict]] = []
    for cpu in range(16):
        out += [("cpu", cpu, {"cpu": cpu, "cpu_type": "NSR-W"}), ("tmf", cpu, {"cpu": cpu})]
    for v in range(8):
        for path, cpu in (("P", 2 * v), ("B", 2 * v + 1)):
            out.append(("disc", cpu, {"cpu": cpu, "device_name": f"$DATA{v}", "pin": 5, "path": path}))
    for n in range(8):
        out.append(("line", n * 2, {"device_name": f"$LINE{n}", "cpu": n * 2, "pin": 12}))
    for n in range(48):
        out.append(("process", n % 16, {"cpu": n % 16, "pin": 30 + n, "process_name": f"$S{n:03d}",
                                         "program_file_name": "$APPL.ET1.SERVER", "priority": 150}))
    for name in ("TRANS", "RESPTIME"):
        for n in range(2):
            out.append(("userdef", n, {"cpu": n, "pin": 30 + n, "process_name": f"$S{n:03d}",
                                        "program_file_name": "$APPL.ET1.SERVER", "name": name, "index": 0}))
    return out


def populate(url: str) -> None:
    with psycopg.connect(url) as c:
        sys_id = c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                           "VALUES ('\\BIG', 9, 'Europe/Amsterdam') RETURNING system_id").fetchone()[0]
        contab = {"counters": [{"name": "TRANS", "type": "ACCUM"}, {"name": "RESPTIME", "type": "QUEUE"}]}
        meas = c.execute("INSERT INTO _measure.measurement (system_id, name, contab, state) "
                         "VALUES (%s, 'CPLNYEAR', %s, 'running') RETURNING measurement_id",
                         (sys_id, json.dumps(contab))).fetchone()[0]
        codes = dict(c.execute("SELECT entity, type_code FROM _measure.entity_type").fetchall())
        for etype, cpu, ids in entities():
            c.execute("INSERT INTO _measure.entity (system_id, type_code, key, ids, cpu, first_seen_at) "
                      "VALUES (%s, %s, %s, %s, %s, %s)",
                      (sys_id, codes[etype], "|".join(f"{k}={v}" for k, v in ids.items()),
                       json.dumps(ids), cpu, START))
        for etype in ("cpu", "disc", "line", "process", "userdef", "tmf"):
            cols = [r[0] for r in c.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = '_measure' "
                "AND table_name = %s ORDER BY ordinal_position", (etype + "_hour",))]
            fixed = {"system_id": "e.system_id", "entity_id": "e.entity_id", "measurement_id": "%(m)s",
                     "hour_at": "h", "cpu": "e.cpu", "samples": "60", "elapsed_us": "3600000000",
                     "first_from_at": "h", "last_to_at": "h + INTERVAL '1 hour'"}

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
        c.execute("SELECT _measure.condense_upper(%s::smallint, ARRAY(SELECT generate_series(%s::timestamptz, "
                  "%s::timestamptz - INTERVAL '1 hour', INTERVAL '1 hour')))", (sys_id, START, END))
        c.execute("ANALYZE")


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
    server = start_embedded(Path(".data/bench-panels"), dbname="postgres")
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
    ranges = {"30 d": (TimeRange(END - timedelta(days=30), END), 6 * 3600),
              "1 y": (TimeRange(START, END), 86400)}
    lines = ["### bench_panels: dashboard queries, 16-CPU node, a year of tiers (median of 5, ms)", "",
             f"Setup (schema, synthetic year of hour tiers, shift/month/year condensing): {setup_s:.0f} s. "
             "Targets: 30 d ≤ 200 ms, 1 y ≤ 500 ms. `raw` = reads raw interval records (none here).", "",
             "| dashboard | query | 30 d | rows | 1 y | rows | targets met |", "|---|---|---:|---:|---:|---:|---|"]
    worst = {"30 d": 0.0, "1 y": 0.0}
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
                if not raw:
                    worst["30 d"], worst["1 y"] = max(worst["30 d"], a), max(worst["1 y"], b)
                name = where.split("/", 1)[1]
                lines.append(f"| {path.stem} | {name} | {a:.1f} | {ra} | {b:.1f} | {rb} | {ok} |")
    lines += ["", f"Slowest tier-reading query: {worst['30 d']:.0f} ms (30 d), {worst['1 y']:.0f} ms (1 y)."]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
