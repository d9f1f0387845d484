"""Read paths at MEASURE scale (issue 14): with 7 days of the 16-CPU reference node `ref16`
loaded (150 M interval records, 2 G counter values, 1-minute intervals, every entity), every
Grafana panel, the reports and the API's counter reads.

    .venv/bin/python bench/bench_reads.py [--days 7] [--seed 7]

The data is a real `measuredb backfill --node ref16 --days D` into the embedded PostgreSQL under
.data/bench-reads (kept between runs: BENCH_REUSE=1 reuses it with this checkout's schema).
1. panels: every query of every dashboard (dashboards/*.json), expanded as Grafana expands it
   (tests/dashboards/grafana.py: template variables, macros), over the last 24 hours and the
   last 7 days, as measure_reader (Grafana's role); median of 5. Target ≤ 200 ms each.
2. reports: every ENFORM report function over a day and over the week; median of 5. Target
   ≤ 50 ms each.
3. API: MEASREAD reads (latest, nearest, window summaries of an hour and a day, LISTALL pages)
   through the real application (FastAPI, role measure_api) with the read cache OFF, one
   client, 60 requests per scenario over distinct URLs; p50 / p99. Target p99 ≤ 100 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import psycopg

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore")

from core import schema  # noqa: E402
from core.database import drop_database, ensure_database, start_embedded, with_dbname  # noqa: E402
from tests.dashboards.grafana import TimeRange, expand  # noqa: E402
from tests.dashboards.panels import dashboard_files, queries_of  # noqa: E402

DATA_DIR = REPO / ".data" / "bench-reads"
REUSE = os.environ.get("BENCH_REUSE") == "1"


def load(admin: str, days: int, seed: int) -> str:
    url = with_dbname(admin, "bench_reads")
    with psycopg.connect(admin, autocommit=True) as c:
        exists = c.execute("SELECT 1 FROM pg_database WHERE datname = 'bench_reads'").fetchone()
    if REUSE and exists:
        schema.apply(url, mode="off")
        return url
    drop_database(admin, "bench_reads")
    ensure_database(admin, "bench_reads")
    schema.apply(url, mode="off")
    env = dict(os.environ, DATABASE_URL=url, MEASUREDB_DATA_DIR=str(DATA_DIR / "collector"))
    subprocess.run([str(REPO / ".venv/bin/measuredb"), "backfill", "--node", "ref16", "--days", str(days),
                    "--seed", str(seed)], env=env, check=True, capture_output=True)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("VACUUM ANALYZE")
    return url


def median_ms(conn: psycopg.Connection, sql: str, params: dict | None = None, n: int = 5) -> tuple[float, int]:
    times, rows = [], 0
    conn.execute(sql, params or {}).fetchall()  # plans and caches warm, as a dashboard's refresh finds them
    for _ in range(n):
        t = time.perf_counter()
        rows = len(conn.execute(sql, params or {}).fetchall())
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), rows


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
                values[v["name"]] = vals
                multi.append(v["name"])
            else:
                values[v["name"]] = vals[0]
        elif v["type"] in ("custom", "textbox"):
            values[v["name"]] = v["current"]["value"]
    return values, multi


def panels(url: str, end: datetime) -> tuple[list[str], float, int]:
    ranges = {"24 h": (TimeRange(end - timedelta(days=1), end), 900),
              "7 d": (TimeRange(end - timedelta(days=7), end), 3600)}
    lines = ["| dashboard | query | 24 h ms | rows | 7 d ms | rows |", "|---|---|---:|---:|---:|---:|"]
    worst, missed = 0.0, 0
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
                (a, ra), (b, rb) = r["24 h"], r["7 d"]
                worst = max(worst, a, b)
                missed += max(a, b) > 200
                flag = "" if max(a, b) <= 200 else " **over**"
                lines.append(f"| {path.stem} | {where.split('/', 1)[1]} | {a:.1f} | {ra} | {b:.1f}{flag} | {rb} |")
    return lines, worst, missed


REPORTS = [
    ("threshold, a day", "SELECT * FROM measure.report_threshold(%(s)s, %(d)s)"),
    ("threshold items, a day", "SELECT * FROM measure.report_threshold_items(%(s)s, %(d)s)"),
    ("CPU trend, the week", "SELECT * FROM measure.report_cpu_trend(%(s)s, %(d0)s, %(d)s)"),
    ("shift summary, the week", "SELECT * FROM measure.report_shift_summary(%(s)s, %(d0)s, %(d)s)"),
    ("capacity forecast, the week", "SELECT * FROM measure.report_capacity_forecast(%(s)s, %(d0)s, %(d)s)"),
    ("condensation check, a day", "SELECT * FROM measure.report_condensation_check(%(s)s, %(d)s)"),
    ("process summary, a day", "SELECT * FROM measure.report_process_summary(%(s)s, %(f1)s, %(t)s)"),
    ("process summary, the week", "SELECT * FROM measure.report_process_summary(%(s)s, %(f7)s, %(t)s)"),
    ("busy process, the week", "SELECT * FROM measure.report_busy_process(%(s)s, %(f7)s, %(t)s)"),
    ("process activity, a day", "SELECT * FROM measure.report_process_activity(%(s)s, %(f1)s, %(t)s)"),
    ("file summary, a day", "SELECT * FROM measure.report_file_summary(%(s)s, %(f1)s, %(t)s)"),
    ("file summary, the week", "SELECT * FROM measure.report_file_summary(%(s)s, %(f7)s, %(t)s)"),
    ("DISCOPEN summary, a day", "SELECT * FROM measure.report_discopen_summary(%(s)s, %(f1)s, %(t)s)"),
    ("DISCOPEN summary, the week", "SELECT * FROM measure.report_discopen_summary(%(s)s, %(f7)s, %(t)s)"),
    ("transaction resource, a day", "SELECT * FROM measure.report_transaction_resource(%(s)s, %(f1)s, %(t)s)"),
    ("transaction resource, the week", "SELECT * FROM measure.report_transaction_resource(%(s)s, %(f7)s, %(t)s)"),
]


def reports(url: str, system: str, end: datetime, zone: str) -> tuple[list[str], float]:
    from zoneinfo import ZoneInfo

    day = (end - timedelta(days=1)).astimezone(ZoneInfo(zone)).date()
    hour = end.replace(minute=0, second=0, microsecond=0)
    p = {"s": system, "d": day, "d0": day - timedelta(days=6), "t": hour,
         "f1": hour - timedelta(days=1), "f7": hour - timedelta(days=7)}
    lines = ["| report | ms | rows |", "|---|---:|---:|"]
    worst = 0.0
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET ROLE measure_reader")
        for name, sql in REPORTS:
            ms, n = median_ms(conn, sql, p)
            worst = max(worst, ms)
            lines.append(f"| {name} | {ms:.1f}{' **over**' if ms > 50 else ''} | {n} |")
    return lines, worst


def api(url: str, m: int, end: datetime) -> tuple[list[str], float]:
    from fastapi.testclient import TestClient

    from api.main import create_app
    from api.settings import ApiSettings

    iso = lambda t: quote(t.isoformat().replace("+00:00", "Z"))  # noqa: E731
    c = f"/measurements/{m}/counters"
    t0 = end - timedelta(days=7)
    scen = {
        "latest: 16 CPUs (all counters), discs, processes, terminals, file opens": (
            [f"{c}/cpu", f"{c}/disc?counters=reads&counters=writes&by=reads", f"{c}/tmf", f"{c}/line"]
            + [f"{c}/cpu?ids=cpu:{n}" for n in range(16)]
            + [f"{c}/process?ids=cpu:{n}&counters=cpu_busy_time&by=cpu_busy_time&limit=20" for n in range(16)]
            + [f"{c}/terminal?ids=line_name:{quote(f'$X25{ln}')}&counters=transactions&limit=20" for ln in range(1, 17)]
            + [f"{c}/file?ids=opener_cpu:{n}&counters=reads&counters=writes&by=reads&limit=20" for n in range(8)]),
        "nearest to a time, ±10 min": [
            f"{c}/cpu?at={iso(t0 + timedelta(hours=h, minutes=7))}&tolerance_seconds=600"
            f"&counters=cpu_busy_time&counters=cpu_qtime" for h in range(3, 168, 3)],
        "summary of an hour, 16 CPUs": [
            f"{c}/cpu?from_at={iso(t0 + timedelta(hours=h))}&to_at={iso(t0 + timedelta(hours=h + 1))}"
            f"&counters=cpu_busy_time&counters=cpu_qtime" for h in range(2, 164, 3)],
        "summary of a day, 16 CPUs": [
            f"{c}/cpu?from_at={iso(t0 + timedelta(days=d, hours=h))}&to_at={iso(t0 + timedelta(days=d + 1, hours=h))}"
            f"&counters=cpu_busy_time&counters=cpu_qtime" for d in range(6) for h in range(0, 24, 3)],
        "summary of an hour, 46 disc paths": [
            f"{c}/disc?from_at={iso(t0 + timedelta(hours=h))}&to_at={iso(t0 + timedelta(hours=h + 1))}"
            f"&counters=reads&counters=writes" for h in range(2, 164, 3)],
        "LISTALL page of 100, 8 hours of one CPU": [
            f"{c}/cpu?all_records=true&ids=cpu:{n}&from_at={iso(t0 + timedelta(days=1 + n % 5, hours=h))}"
            f"&to_at={iso(t0 + timedelta(days=1 + n % 5, hours=h + 8))}&counters=cpu_busy_time"
            for n in range(16) for h in (0, 8, 16)],
    }
    lines = ["| scenario | requests | p50 ms | p99 ms | max ms |", "|---|---:|---:|---:|---:|"]
    worst = 0.0
    settings = ApiSettings(cache_enabled=False, anonymous_rate_per_second=0)  # one client, no limit
    with TestClient(create_app(settings, database_url=url)) as client:
        for name, urls in scen.items():
            urls = (urls * 3)[:60]
            client.get(urls[0])
            times = []
            for u in urls:
                t = time.perf_counter()
                r = client.get(u)
                times.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, (u, r.text[:300])
            times.sort()
            p99 = times[min(len(times) - 1, int(round(0.99 * len(times))) - 1)]
            worst = max(worst, p99)
            lines.append(f"| {name} | {len(times)} | {statistics.median(times):.1f} | "
                         f"{p99:.1f}{' **over**' if p99 > 100 else ''} | {times[-1]:.1f} |")
    return lines, worst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    server = start_embedded(DATA_DIR, dbname="postgres")
    admin = server.admin_url()
    t = time.perf_counter()
    url = load(admin, args.days, args.seed)
    setup = time.perf_counter() - t
    with psycopg.connect(url) as c:
        system, zone, m = c.execute("SELECT s.system_name, s.time_zone, m.measurement_id FROM _measure.system s "
                                    "JOIN _measure.measurement m USING (system_id)").fetchone()
        end = c.execute("SELECT max(durable_until) FROM _measure.collector_state").fetchone()[0]
        intervals, runs = c.execute("SELECT sum(n), count(*) FROM _measure.interval_run").fetchone()
        size = c.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    load0 = os.getloadavg()[0]
    p_lines, p_worst, p_missed = panels(url, end.astimezone(UTC))
    r_lines, r_worst = reports(url, system, end.astimezone(UTC), zone)
    a_lines, a_worst = api(url, m, end.astimezone(UTC))
    load1 = os.getloadavg()[0]
    server.stop()
    print(f"### Read paths at scale (bench_reads.py): \\REF16, {args.days} days\n")
    print(f"{intervals:,} interval records in {runs:,} runs, database {size / 2**30:.1f} GiB "
          f"({'reused' if REUSE else f'backfilled and analysed in {setup:.0f} s'}); data up to "
          f"{end.astimezone(UTC):%Y-%m-%d %H:%M} UTC. Load average (1 min) before / after the timings: "
          f"{load0:.1f} / {load1:.1f} on {os.cpu_count()} cores.\n")
    print(f"Panels: slowest {p_worst:.0f} ms, {p_missed} over 200 ms. Reports: slowest {r_worst:.0f} ms "
          f"(target 50). API reads uncached: worst p99 {a_worst:.0f} ms (target 100).\n")
    print("\n".join(a_lines) + "\n")
    print("\n".join(r_lines) + "\n")
    print("\n".join(p_lines))


if __name__ == "__main__":
    main()
