"""REST API read benchmark (issue 6): counter reads at 50 concurrent clients on loopback.

Stored data: one week of 60 s interval records of a 16-CPU node (16 × 10,080 = 161,280 rows),
generated with SQL straight into _measure.interval_record (no simulator). The API runs under
uvicorn in a subprocess (MEASUREDB_BENCH_API_WORKERS, default 2 workers). Each scenario runs
first with one client (sequential requests: the per-request cost, no queueing), then with
50 client threads (httpx, keep-alive) sending a bounded number of requests (at most 20 s
each). Target: p99 ≤ 50 ms at 50 clients, no errors. The server, PostgreSQL and the load
generator share the machine's cores: on a small machine the 50-client figures mostly
measure queueing for the CPUs (compare with the single-client column).
Report endpoints are not measured yet (not wired in the API).

MEASUREDB_BENCH_DATA_DIR (default .data/bench) holds the embedded server when DATABASE_URL
is not set.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psycopg

from collector import schema
from collector.catalog import load_catalog
from collector.database import drop_database, ensure_database, start_embedded, with_dbname

warnings.filterwarnings("ignore")
CLIENTS = 50
REQUESTS = 1500  # per scenario
SINGLE_REQUESTS = 200  # per scenario, one client
WORKERS = int(os.environ.get("MEASUREDB_BENCH_API_WORKERS", "2"))
MAX_SECONDS = 20.0
DAYS = 7
T0 = datetime(2024, 4, 1, tzinfo=UTC)
CPU = load_catalog().entity("cpu")


def load_week(url: str) -> int:
    n = len(CPU.counters)
    with psycopg.connect(url) as c:
        sid = c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                        "VALUES ('\\BENCH', 1, 'UTC') RETURNING system_id").fetchone()[0]
        mid = c.execute("INSERT INTO _measure.measurement (system_id, name, contab, start_at, stop_at, interval_us, "
                        "state) VALUES (%s, 'WEEK', '{\"descriptors\": [{\"type\": \"CPU\"}]}', %s, %s, 60000000, "
                        "'stopped') RETURNING measurement_id", (sid, T0, T0 + timedelta(days=DAYS))).fetchone()[0]
        c.execute("INSERT INTO _measure.entity (entity_id, system_id, type_code, key, ids, cpu, first_seen_at) "
                  "SELECT 100 + cpu, %s, 1, 'cpu=' || cpu, jsonb_build_object('cpu', cpu), cpu, %s "
                  "FROM generate_series(0, 15) cpu", (sid, T0))
        c.execute(
            "INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, to_at, delta_us,"
            " closing_kind, system_id, type_code, cpu, counters) "
            "SELECT %(m)s, 100 + cpu, %(t0)s, %(t0)s + k * interval '1 minute', %(t0)s + (k + 1) * interval '1 minute',"
            " 60000000, 3, %(s)s, 1, cpu,"
            " ARRAY(SELECT ((k * 7919 + cpu * 104729 + i * 1299709) %% 60000000)::bigint"
            "       FROM generate_series(1, %(n)s) i) "
            "FROM generate_series(0, %(k)s) k, generate_series(0, 15) cpu",
            {"m": mid, "t0": T0, "s": sid, "n": n, "k": DAYS * 1440 - 1})
        c.execute("ANALYZE _measure.interval_record")
    return mid


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_scenario(base: str, path: str, params: dict, *, clients: int = CLIENTS,
                 requests: int = REQUESTS) -> dict:
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    counter = iter(range(requests))
    deadline = time.monotonic() + MAX_SECONDS

    def client() -> None:
        nonlocal errors
        with httpx.Client(base_url=base, timeout=10) as http:
            while time.monotonic() < deadline:
                with lock:
                    if next(counter, None) is None:
                        return
                t = time.perf_counter()
                try:
                    ok = http.get(path, params=params).status_code == 200
                except httpx.HTTPError:
                    ok = False
                dt = time.perf_counter() - t
                with lock:
                    latencies.append(dt)
                    errors += not ok

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - started
    lat = sorted(latencies)
    q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [lat[0]] * 99
    return {"n": len(lat), "errors": errors, "rps": len(lat) / wall, "p50": q[49] * 1e3,
            "p95": q[94] * 1e3, "p99": q[98] * 1e3, "max": lat[-1] * 1e3}


def main() -> None:
    url_env = os.environ.get("DATABASE_URL")
    server = None
    if url_env:
        admin = with_dbname(url_env, "postgres")
    else:
        server = start_embedded(Path(os.environ.get("MEASUREDB_BENCH_DATA_DIR", ".data/bench")),
                                dbname="postgres")
        admin = server.admin_url()
    drop_database(admin, "measuredb_bench_api")
    ensure_database(admin, "measuredb_bench_api")
    url = with_dbname(admin, "measuredb_bench_api")
    proc = None
    try:
        schema.apply(url, mode="off")
        t = time.perf_counter()
        mid = load_week(url)
        load_s = time.perf_counter() - t
        port = free_port()
        env = dict(os.environ, DATABASE_URL=url)
        proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "api.main:create_app", "--factory",
                                 "--host", "127.0.0.1", "--port", str(port), "--workers", str(WORKERS),
                                 "--http", "api.serve:NoDelayHTTPProtocol",
                                 "--log-level", "warning"], env=env)
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                if httpx.get(base + "/health", timeout=1).status_code in (200, 503):
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        mid_week = T0 + timedelta(days=3, hours=12)
        p = f"/measurements/{mid}/counters/cpu"
        scenarios = [
            ("latest record, 16 CPUs, all 33 counters", p, {}),
            ("latest record, 16 CPUs, 2 counters, BY", p, {"counters": ["cpu_busy_time", "dispatches"],
                                                           "by": "cpu_busy_time"}),
            ("nearest to a time ±60 s", p, {"at": mid_week.isoformat(), "tolerance_seconds": 60,
                                             "counters": ["cpu_busy_time", "cpu_qtime"]}),
            ("summary of 1 hour", p, {"from_at": mid_week.isoformat(),
                                      "to_at": (mid_week + timedelta(hours=1)).isoformat(),
                                      "counters": ["cpu_busy_time", "cpu_qtime", "cpu_qlen_max"]}),
            ("summary of 1 day", p, {"from_at": mid_week.isoformat(),
                                     "to_at": (mid_week + timedelta(days=1)).isoformat(),
                                     "counters": ["cpu_busy_time", "cpu_qtime", "cpu_qlen_max"]}),
            ("LISTALL page of 100, 1 hour, CPU 3", p, {"all_records": "true", "ids": "cpu:3",
                                                       "from_at": mid_week.isoformat(),
                                                       "to_at": (mid_week + timedelta(hours=2)).isoformat(),
                                                       "counters": ["cpu_busy_time"]}),
        ]
        for _, path, params in scenarios:  # warm-up
            httpx.get(base + path, params=params, timeout=30)
        print(f"### API counter reads ({CLIENTS} concurrent clients, ≤{REQUESTS} requests or "
              f"{MAX_SECONDS:g} s per scenario; uvicorn {WORKERS} workers; server, database and load "
              f"generator on the same {os.cpu_count()} cores; 16 CPUs × {DAYS} days of 60 s intervals "
              f"= {16 * DAYS * 1440:,} rows loaded in {load_s:.1f} s)\n")
        print("| scenario | 1 client p50 ms | 1 client p99 ms | requests | errors | req/s | p50 ms "
              "| p95 ms | p99 ms | max ms | p99 ≤ 50 ms |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|")
        for name, path, params in scenarios:
            one = run_scenario(base, path, params, clients=1, requests=SINGLE_REQUESTS)
            r = run_scenario(base, path, params)
            ok = "yes" if r["p99"] <= 50 and r["errors"] == 0 and one["errors"] == 0 else "no"
            print(f"| {name} | {one['p50']:.1f} | {one['p99']:.1f} | {r['n']} | {r['errors'] + one['errors']} "
                  f"| {r['rps']:.0f} | {r['p50']:.1f} | {r['p95']:.1f} | {r['p99']:.1f} | {r['max']:.1f} "
                  f"| {ok} |", flush=True)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        drop_database(admin, "measuredb_bench_api")
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
