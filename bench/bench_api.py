"""REST API read benchmark (issue 6): counter reads and report endpoints at 50 concurrent
clients on loopback. Target: p99 ≤ 50 ms, no errors.

Data: a week of the reference node \\REF16 (collector/node/nodes/ref16.yaml), generated in SQL
(simulating a ref16 week would take hours): the node's own entities as the collector names
them (entity keys and ids from the node's tables, entity ids by collector.sink.entity_id)
of every type except DISCOPEN and PROCESSH (10,244 and 1,635 more entities that no read
below touches): 16 CPUs, 46 disc paths, 16 lines, 1,600 terminals, 327 processes, 644 file
opens, 320 user-counter elements, TMF, Expand and tape entities = 2,993 entities, in one
stopped measurement with a 10-minute interval (1,008 intervals per entity). Counter values
follow each counter's kind (busy ≤ DELTA-TIME, queues, snapshots …) with a daily load curve
in the node's time zone and deterministic noise, a type and a day at a time staged in
``pg_temp._interval_in`` and stored as interval runs (``_measure.interval_run``, one row per
counter record and UTC hour) by ``_measure.store_intervals``. The hours are condensed into the
tiers the way the writer does it (``_measure.note_intervals`` + ``_measure.condense``).

The API runs under uvicorn in a subprocess (MEASUREDB_BENCH_API_WORKERS, default 2 workers)
twice: with the read cache (api/cache.py, the default) and with MEASUREDB_API_CACHE_ENABLED=
false. Each scenario walks a list of distinct request URLs (several CPUs, entity types,
target times, windows; reports threshold / cpu-trend / process-summary) with 50 concurrent
keep-alive clients for a fixed time, three ways: the cache emptied at the start (as right
after a data change: every URL is computed once per worker while the clients wait), the
cache warm (the steady state), and uncached (every request reads the database; also with one
client, the per-request cost). Load generator: wrk when it is installed
(`apt-get install wrk`; C, light on the CPU) with a Lua script that cycles through the
scenario's URLs and counts X-Cache hits; otherwise a Python generator (threads, httpx), which
competes with the server for the CPU. The server, PostgreSQL and the load generator share the
machine's cores.

Settings: MEASUREDB_BENCH_DATA_DIR (default .data/bench) holds the embedded server when
DATABASE_URL is not set; MEASUREDB_BENCH_SECONDS (default 10) per scenario;
MEASUREDB_BENCH_REUSE=1 keeps the loaded database of the previous run (for iterating; the
figures in RESULTS.md come from a fresh load).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote
from zoneinfo import ZoneInfo

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core import schema  # noqa: E402
from core.catalog import load_catalog  # noqa: E402
from core.database import drop_database, ensure_database, start_embedded, with_dbname  # noqa: E402

warnings.filterwarnings("ignore")
DBNAME = "measuredb_bench_api"
CLIENTS = 50
SECONDS = float(os.environ.get("MEASUREDB_BENCH_SECONDS", "10"))
WORKERS = int(os.environ.get("MEASUREDB_BENCH_API_WORKERS", "2"))
NODE = "ref16"
SKIPPED_TYPES = ("discopen", "processh")
DAYS = 7
INTERVAL_S = 600
T0 = datetime(2026, 11, 9, 5, 0, tzinfo=UTC)  # Monday 00:00 in America/New_York (EST)
T1 = T0 + timedelta(days=DAYS)

# ---------------------------------------------------------------- the week of data

# Load of an entity in an interval starting at t: a daily curve in the node's local time
# (peak mid-afternoon), scaled per entity (0.8 to 1.1 by its ordinal), plus deterministic
# noise from the interval and the entity's ordinal.
LOAD = ("least(1.0, greatest(0.02, (0.42 + 0.33 * sin(2 * pi() * (extract(hour FROM t AT TIME ZONE %(zone)s)"
        " + extract(minute FROM t) / 60.0 - 9) / 24)) * (0.8 + 0.05 * mod(e.n, 7))"
        " + 0.1 * (mod((extract(epoch FROM t)::bigint / 60) * 7919 + e.n * 104729, 1000) / 1000.0 - 0.5)))")

D = f"{INTERVAL_S * 1_000_000}"
S = f"{INTERVAL_S}"
# CPU counters by 1-based position (cpu_busy_time, cpu_qtime, cpu_qlen_max, mem_qtime,
# mem_qlen_max, dispatches, swaps, intr_busy_time, process_ovhd, send_busy_time, disc_ios,
# cache_hits, transactions, response_time): shaped so the threshold report finds some
# afternoon hours and not every hour.
CPU = {1: f"f * 0.97 * {D}", 2: f"f * f * 2.2 * {D}", 3: "ceil(f * 5)", 4: f"f * 0.05 * {D}", 5: "1",
       6: f"f * 1500 * {S}", 7: f"f * f * f * 4 * {S}", 8: f"f * 0.3 * {D}", 9: f"f * 0.02 * {D}",
       10: f"f * 0.1 * {D}", 11: f"f * 200 * {S}", 12: f"f * 150 * {S}", 13: f"f * 30 * {S}",
       14: f"f * 30 * {S} * 400000"}
BUSY_SCALE = {"cpu": 0.97, "process": 0.03, "disc": 0.6, "line": 0.5, "file": 0.05}
KIND = {"busy": "f * {b} * " + D, "qbusy": "f * {b} * " + D, "queue": "f * f * 0.5 * " + D,
        "maxq": "ceil(f * 5)", "snapshot": "f * 1000", "maxvalue": "f * 500",
        "response": f"f * 5 * {S} * 150000", "incrementing": f"f * 20 * {S}",
        "accumulating": f"f * 4000 * {S}"}


def counters_sql(entity: str) -> str:
    """ARRAY[...] of one interval's counters of an entity type, in catalogue order."""
    out = []
    for c in load_catalog().entity(entity).counters:
        expr = CPU.get(c.position + 1) if entity == "cpu" else None
        if expr is None:
            expr = KIND[c.kind].format(b=BUSY_SCALE.get(entity, 0.3))
        out.append(f"({expr})::bigint")
    return "ARRAY[" + ", ".join(out) + "]"


def node_entities() -> tuple[object, list[tuple[str, int, str, dict, int | None]]]:
    """The ref16 node's entities as the collector names them: (type, entity id, key, ids, cpu)."""
    from collector.measure.measmon import entity_ids
    from collector.node import load_node, load_workload
    from collector.node.engine import Node
    from collector.service import DEFAULT_WORKLOADS
    from core.entities import entity_id, entity_key

    topo = load_node(NODE)
    node = Node(topo, load_workload(DEFAULT_WORKLOADS[NODE]), seed=1, start_us=int(T0.timestamp()) * 10**6,
                catalog=load_catalog(), step_us=INTERVAL_S * 10**6)
    node.measure_all()
    out = []
    for name, table in node.tables.items():
        if name in SKIPPED_TYPES:
            continue
        code = load_catalog().entity(name).code
        for slot in table.measured_slots().tolist():
            ids = entity_ids(table, slot)
            key = entity_key(table.entity.id_fields, ids)
            cpu = int(table.cpu[slot])
            out.append((name, entity_id(1, code, key), key, ids, cpu if cpu >= 0 else None))
    return topo, out


def load_week(url: str) -> dict:
    """The ref16 week: system, measurement, entities, interval records, tiers. Returns ids and
    counts for the report."""
    from collector.measure.contab import ContabBuilder
    from collector.node.extras import user_counter_specs

    topo, ents = node_entities()
    types = sorted({e[0] for e in ents}, key=lambda t: load_catalog().entity(t).code)
    b = ContabBuilder()
    for t in types:
        b.add(t, None)
    for name, program, ctr_type in user_counter_specs(topo):
        b.add_counter(name, program, ctr_type)
    info: dict = {"entities": len(ents), "types": {t: sum(1 for e in ents if e[0] == t) for t in types},
                  "zone": topo.time_zone, "system": topo.system_name}
    t_start = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as c:
        sid = c.execute("INSERT INTO _measure.system (system_id, system_name, system_number, time_zone) "
                        "VALUES (1, %s, %s, %s) RETURNING system_id",
                        (topo.system_name, topo.system_number, topo.time_zone)).fetchone()[0]
        mid = c.execute(
            "INSERT INTO _measure.measurement (system_id, name, contab, source, start_at, stop_at, interval_us,"
            " state, started_at, stopped_at) VALUES (%s, 'REFWEEK', %s, 'bench_api: a generated week', %s, %s,"
            " %s, 'stopped', %s, %s) RETURNING measurement_id",
            (sid, b.build().model_dump_json(), T0, T1, INTERVAL_S * 10**6, T0, T1)).fetchone()[0]
        codes = {t: load_catalog().entity(t).code for t in types}
        with c.cursor() as cur:
            cur.executemany(
                "INSERT INTO _measure.entity (entity_id, system_id, type_code, key, ids, cpu, first_seen_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [(eid, sid, codes[t], key, json.dumps(ids), cpu, T0) for t, eid, key, ids, cpu in ents])
        c.execute("CREATE UNLOGGED TABLE bench_entity AS SELECT entity_id, type_code, coalesce(cpu, 0) AS cpu,"
                  " row_number() OVER (ORDER BY type_code, key)::int AS n FROM _measure.entity")

    def gen(entity: str) -> None:
        """The week's interval records of one entity type, a day at a time: generated into
        pg_temp._interval_in, stored as runs (one per counter record and UTC hour) by
        _measure.store_intervals."""
        with psycopg.connect(url, autocommit=True) as g:
            g.execute("CREATE TEMP TABLE IF NOT EXISTS _interval_in (LIKE _measure.interval_record)")
            for day in range(DAYS):
                lo, hi = T0 + timedelta(days=day), T0 + timedelta(days=day + 1)
                g.execute(
                    "INSERT INTO pg_temp._interval_in (measurement_id, entity_id, record_at, from_at, to_at,"
                    " delta_us, closing_kind, system_id, type_code, cpu, error, counters)"
                    f" SELECT %(m)s, e.entity_id, %(t0)s, t, t + %(iv)s, {D}, 3, %(s)s, e.type_code, e.cpu, 0,"
                    f" {counters_sql(entity)}"
                    " FROM bench_entity e CROSS JOIN generate_series(%(lo)s, %(hi)s - %(iv)s, %(iv)s) t"
                    f" CROSS JOIN LATERAL (SELECT {LOAD} AS f) x WHERE e.type_code = %(code)s",
                    {"m": mid, "s": sid, "t0": T0, "lo": lo, "hi": hi, "iv": timedelta(seconds=INTERVAL_S),
                     "code": codes[entity], "zone": topo.time_zone})
                g.execute("SELECT _measure.store_intervals()")

    with psycopg.connect(url, autocommit=True) as c:
        # the daily partitions of the runs, made before the two writers start: two
        # store_intervals making partitions at once can deadlock each other
        c.execute("SELECT _measure.run_partitions_for(%s, %s)", (T0, T1))
    big_first = sorted(types, key=lambda t: -info["types"][t] * len(load_catalog().entity(t).counters))
    with ThreadPoolExecutor(2) as pool:  # two connections: generating is CPU-bound SQL
        list(pool.map(gen, big_first))
    info["gen_s"] = time.perf_counter() - t_start
    t = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("DROP TABLE bench_entity")
        c.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)", (sid, T0, T1 - timedelta(seconds=1)))
        while c.execute("SELECT _measure.condense(%s::smallint, 24)", (sid,)).fetchone()[0]:
            pass
        info["condense_s"] = time.perf_counter() - t
        c.execute("VACUUM ANALYZE")
        info["records"] = c.execute("SELECT coalesce(sum(n), 0) FROM _measure.interval_run").fetchone()[0]
        info["hour_rows"] = {tier: c.execute(f"SELECT count(*) FROM _measure.{tier}").fetchone()[0]
                             for tier in ("cpu_hour", "disc_hour", "line_hour", "process_hour",
                                          "userdef_hour", "tmf_hour")}
        info["upper_rows"] = {tier: c.execute(f"SELECT count(*) FROM _measure.{tier}").fetchone()[0]
                              for tier in ("tier_shift", "tier_month", "tier_year")}
    info["load_s"] = time.perf_counter() - t_start
    info["measurement_id"] = mid
    info["system_id"] = sid
    return info


# ---------------------------------------------------------------- what the clients ask


def scenarios(info: dict) -> list[tuple[str, list[str]]]:
    """(name, distinct request URLs) per scenario: what dashboards and MEASREAD users ask of a
    week of ref16 data."""
    m = info["measurement_id"]
    c = f"/measurements/{m}/counters"
    system = quote(info["system"])
    day0 = T0.astimezone(ZoneInfo(info["zone"])).date()
    iso = lambda t: quote(t.isoformat().replace("+00:00", "Z"))  # noqa: E731
    procs = ["$S0000", "$S0013", "$S0042", "$S0077", "$S0101", "$S0150", "$TCP1", "$TCP32", "$COPY",
             "$SORT", "$PM", "$TMF3"]
    latest = [f"{c}/cpu", f"{c}/cpu?counters=cpu_busy_time&counters=dispatches&by=cpu_busy_time",
              f"{c}/tmf", f"{c}/line", f"{c}/disc?counters=reads&counters=writes&by=reads"]
    latest += [f"{c}/cpu?ids=cpu:{n}" for n in range(16)]
    latest += [f"{c}/disc?ids=device_name:{quote(v)}" for v in
               ["$SYSTEM", "$AUDIT1", "$AUDIT3"] + [f"$DATA{i}" for i in range(1, 17, 3)]]
    latest += [f"{c}/process?ids=process_name:{quote(p)}" for p in procs]
    latest += [f"{c}/terminal?ids=line_name:{quote(f'$X25{ln}')}&ids=subdev_name:{quote(f'#T{t}')}"
               for ln in (1, 5, 9) for t in (1, 17, 50, 99)]
    latest += [f"{c}/file?ids=opener_cpu:{n}&counters=reads&counters=writes&by=reads&limit=20"
               for n in range(0, 16, 2)]
    nearest = [f"{c}/cpu?at={iso(T0 + timedelta(hours=h, minutes=7))}&tolerance_seconds=600"
               f"&counters=cpu_busy_time&counters=cpu_qtime" for h in range(3, 168, 7)]
    nearest += [f"{c}/cpu?ids=cpu:{n}&at={iso(T0 + timedelta(hours=20 + 11 * n))}&tolerance_seconds=300"
                for n in range(16)]
    windows = [f"{c}/cpu?from_at={iso(T0 + timedelta(days=2, hours=h))}"
               f"&to_at={iso(T0 + timedelta(days=2, hours=h + 1))}"
               f"&counters=cpu_busy_time&counters=cpu_qtime&counters=cpu_qlen_max" for h in range(24)]
    windows += [f"{c}/cpu?from_at={iso(T0 + timedelta(days=d))}&to_at={iso(T0 + timedelta(days=d + 1))}"
                f"&counters=cpu_busy_time&counters=cpu_qtime&counters=cpu_qlen_max" for d in range(7)]
    windows += [f"{c}/disc?from_at={iso(T0 + timedelta(days=d, hours=14))}"
                f"&to_at={iso(T0 + timedelta(days=d, hours=15))}&counters=reads&counters=writes"
                for d in range(7)]
    windows += [f"{c}/process?ids=program_file_name:{quote('$APPL.ET1.SERVER')}"
                f"&from_at={iso(T0 + timedelta(days=3, hours=h))}&to_at={iso(T0 + timedelta(days=3, hours=h + 1))}"
                f"&counters=cpu_busy_time&counters=messages_sent&by=cpu_busy_time&limit=20" for h in range(8, 20)]
    listall = [f"{c}/cpu?all_records=true&ids=cpu:{n}&from_at={iso(T0 + timedelta(days=1 + n % 6, hours=h))}"
               f"&to_at={iso(T0 + timedelta(days=1 + n % 6, hours=h + 8))}&counters=cpu_busy_time"
               for n in range(16) for h in (0, 8, 16)]
    reports = [f"/reports/threshold?system={system}&date={day0 + timedelta(days=d)}" for d in range(7)]
    reports += [f"/reports/threshold?system={system}&date={day0 + timedelta(days=d)}&shift={s}&format=text"
                for d in range(7) for s in (1, 2, 3)]
    reports += [f"/reports/cpu-trend?system={system}&from={day0}&to={day0 + timedelta(days=d)}" for d in range(7)]
    reports += [f"/reports/cpu-trend?system={system}&from={day0}&to={day0 + timedelta(days=6)}&format={f}"
                for f in ("text", "csv")]
    reports += [f"/reports/process-summary?system={system}&from={iso(T0 + timedelta(days=4, hours=h))}"
                f"&to={iso(T0 + timedelta(days=4, hours=h + 1))}" for h in range(24)]
    reports += [f"/reports/process-summary?system={system}&date={day0 + timedelta(days=d)}" for d in range(7)]
    mixed = [u for group in (latest, nearest, windows, listall, reports) for u in group]
    return [(f"latest record (MEASREAD default), {len(latest)} URLs: CPUs, discs, processes, terminals, "
             "file opens", latest),
            (f"nearest to a time ±5/10 min, {len(nearest)} URLs", nearest),
            (f"window summaries (MEASREAD_DIFF_) of 1 hour and 1 day, {len(windows)} URLs", windows),
            (f"LISTALL pages (8 hours of one CPU), {len(listall)} URLs", listall),
            (f"reports: threshold, cpu-trend, process-summary, {len(reports)} URLs", reports),
            (f"all of the above mixed, {len(mixed)} URLs", mixed)]


# ---------------------------------------------------------------- load generators

WRK_SCRIPT = r"""
-- bench_api.py: cycle through the URLs of a file; count X-Cache answers per thread.
local threads = {}
function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end
function init(args)
  reqs = {}
  for line in io.lines(args[1]) do
    reqs[#reqs + 1] = wrk.format("GET", line)
  end
  math.randomseed(os.time() * 2 + id)
  n = math.random(0, #reqs - 1) + id * math.floor(#reqs / 2)  -- each run starts somewhere else
  hit, shared, miss, none = 0, 0, 0, 0
end
function request()
  n = n + 1
  return reqs[(n % #reqs) + 1]
end
function response(status, headers, body)
  local x = headers["x-cache"]
  if x == "hit" then hit = hit + 1
  elseif x == "shared" then shared = shared + 1
  elseif x == "miss" then miss = miss + 1
  else none = none + 1 end
end
function done(summary, latency, requests)
  local h, s, m, o = 0, 0, 0, 0
  for _, t in ipairs(threads) do
    h = h + t:get("hit"); s = s + t:get("shared"); m = m + t:get("miss"); o = o + t:get("none")
  end
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d\n",
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max,
    h, s, m, o, e.timeout, e.connect, e.read))
end
"""


def run_wrk(base: str, urls: list[str], clients: int, seconds: float, workdir: Path) -> dict:
    url_file = workdir / "urls.txt"
    url_file.write_text("\n".join(urls) + "\n")
    script = workdir / "bench.lua"
    script.write_text(WRK_SCRIPT)
    out = subprocess.run(["wrk", f"-t{min(2, clients)}", f"-c{clients}", f"-d{seconds:g}s", "--timeout", "10s",
                          "-s", str(script), base, "--", str(url_file)],
                         capture_output=True, text=True, timeout=seconds + 60)
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"wrk gave no result: {out.stdout[-500:]} {out.stderr[-500:]}")
    v = [int(x) for x in line.split()[1:]]
    n = v[0]
    return {"n": n, "errors": v[2], "non2xx": v[3], "rps": n / (v[1] / 1e6), "p50": v[4] / 1e3,
            "p95": v[5] / 1e3, "p99": v[6] / 1e3, "max": v[7] / 1e3, "hit": v[8], "shared": v[9],
            "miss": v[10]}


def run_python(base: str, urls: list[str], clients: int, seconds: float, workdir: Path) -> dict:
    """Threads with httpx keep-alive clients: the fallback when wrk is not installed."""
    latencies: list[float] = []
    counts = {"errors": 0, "non2xx": 0, "hit": 0, "shared": 0, "miss": 0}
    lock = threading.Lock()
    first = random.randrange(len(urls))  # each run starts somewhere else
    nxt = iter(range(first, first + 10**9))
    deadline = time.monotonic() + seconds

    def client() -> None:
        with httpx.Client(base_url=base, timeout=10) as http:
            while time.monotonic() < deadline:
                with lock:
                    i = next(nxt)
                t = time.perf_counter()
                try:
                    r = http.get(urls[i % len(urls)])
                    status, how = r.status_code, r.headers.get("x-cache")
                except httpx.HTTPError:
                    status, how = 0, None
                dt = time.perf_counter() - t
                with lock:
                    latencies.append(dt)
                    if status == 0:
                        counts["errors"] += 1
                    elif not 200 <= status < 300:
                        counts["non2xx"] += 1
                    if how in ("hit", "shared", "miss"):
                        counts[how] += 1

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - started
    lat = sorted(latencies)
    q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [lat[0]] * 99
    return {"n": len(lat), "rps": len(lat) / wall, "p50": q[49] * 1e3, "p95": q[94] * 1e3,
            "p99": q[98] * 1e3, "max": lat[-1] * 1e3, **counts}


# ---------------------------------------------------------------- the run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_api(url: str, *, cache: bool) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = dict(os.environ, DATABASE_URL=url, MEASUREDB_API_CACHE_ENABLED="true" if cache else "false",
               MEASUREDB_API_ANONYMOUS_RATE_PER_SECOND="0")  # load from one address, no limit
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "api.main:create_app", "--factory",
                             "--host", "127.0.0.1", "--port", str(port), "--workers", str(WORKERS),
                             "--http", "api.serve:NoDelayHTTPProtocol", "--log-level", "warning"],
                            env=env, cwd=Path(__file__).resolve().parents[1])
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            health = httpx.get(base + "/health", timeout=1)
            if health.status_code in (200, 503) and (not cache or health.json()["cache"]["listening"]):
                break
        except (httpx.HTTPError, TypeError, KeyError):
            pass
        time.sleep(0.1)
    return proc, base


def stop_api(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def empty_caches(url: str) -> None:
    """A statement on a notified table empties every worker's cache (no row changes)."""
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("UPDATE _measure.system SET time_zone = time_zone WHERE false")
    time.sleep(0.2)


def check_urls(base: str, urls: list[str]) -> None:
    bad = []
    for u in sorted(set(urls)):
        r = httpx.get(base + u, timeout=60)
        if r.status_code != 200:
            bad.append(f"{r.status_code} {u}: {r.text[:200]}")
    if bad:
        raise SystemExit("bench_api: some scenario URLs fail:\n" + "\n".join(bad))


def loaded(url: str) -> dict | None:
    """MEASUREDB_BENCH_REUSE=1: the week loaded by an earlier run, if there is one."""
    try:
        with psycopg.connect(url, autocommit=True) as c:
            row = c.execute("SELECT measurement_id, system_id FROM _measure.measurement "
                            "WHERE name = 'REFWEEK'").fetchone()
            if row is None:
                return None
            schema.apply(url, mode="off")
            info = {"measurement_id": row[0], "system_id": row[1], "reused": True,
                    "records": c.execute("SELECT coalesce(sum(n), 0) FROM _measure.interval_run").fetchone()[0],
                    "entities": c.execute("SELECT count(*) FROM _measure.entity").fetchone()[0]}
    except psycopg.OperationalError:
        return None
    from collector.node.topology import load_node

    topo = load_node(NODE)
    info.update(zone=topo.time_zone, system=topo.system_name)
    return info


def main() -> None:
    url_env = os.environ.get("DATABASE_URL")
    server = None
    if url_env:
        admin = with_dbname(url_env, "postgres")
    else:
        server = start_embedded(Path(os.environ.get("MEASUREDB_BENCH_DATA_DIR", ".data/bench")),
                                dbname="postgres")
        admin = server.admin_url()
    url = with_dbname(admin, DBNAME)
    reuse = os.environ.get("MEASUREDB_BENCH_REUSE") == "1"
    info = loaded(url) if reuse else None
    if info is None:
        drop_database(admin, DBNAME)
        ensure_database(admin, DBNAME)
        schema.apply(url, mode="off")
        info = load_week(url)
    load_before = os.getloadavg()[0]
    generator = "wrk" if shutil.which("wrk") else "python"
    run = run_wrk if generator == "wrk" else run_python
    rows: dict[str, list] = {"warm": [], "cold": [], "uncached": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            for cached in (True, False):
                proc, base = start_api(url, cache=cached)
                try:
                    all_urls = scenarios(info)
                    check_urls(base, all_urls[-1][1])
                    for name, urls in all_urls:
                        if cached:
                            empty_caches(url)
                            rows["cold"].append((name, None, run(base, urls, CLIENTS, SECONDS, work)))
                            warm_up(run, base, urls, work)
                            rows["warm"].append((name, None, run(base, urls, CLIENTS, SECONDS, work)))
                        else:
                            one = run(base, urls, 1, min(3.0, SECONDS), work)
                            rows["uncached"].append((name, one, run(base, urls, CLIENTS, SECONDS, work)))
                        print(f"  {name}: {rows['uncached' if not cached else 'warm'][-1][2]}",
                              file=sys.stderr, flush=True)
                finally:
                    stop_api(proc)
    finally:
        if not reuse:
            drop_database(admin, DBNAME)
        if server is not None:
            server.stop()
    report(info, generator, rows, (load_before, os.getloadavg()[0]))


def warm_up(run, base: str, urls: list[str], work: Path) -> None:
    """Short passes of the clients, each starting at another URL, until three in a row have
    no miss: every worker has every answer (the kernel spreads each pass's new connections
    over the workers, not always evenly)."""
    clean = 0
    for _ in range(30):
        r = run(base, urls, CLIENTS, 2.0, work)
        clean = clean + 1 if r["miss"] == 0 and r["shared"] == 0 else 0
        if clean == 3:
            return


def report(info: dict, generator: str, rows: dict, load: tuple[float, float]) -> None:
    if info.get("reused"):
        data = (f"{info['entities']:,} entities, {info['records']:,} interval records "
                "(loaded by an earlier run: MEASUREDB_BENCH_REUSE=1)")
    else:
        types = ", ".join(f"{n:,} {t}" for t, n in info["types"].items())
        hours = sum(info["hour_rows"].values())
        upper = sum(info["upper_rows"].values())
        data = (f"{info['entities']:,} entities of \\REF16 ({types}), {DAYS} days of {INTERVAL_S // 60}-minute "
                f"intervals = {info['records']:,} interval records, generated in {info['gen_s']:.0f} s; "
                f"condensed by note_intervals + condense into {hours:,} hour rows and {upper:,} shift/month/year "
                f"rows in {info['condense_s']:.0f} s; load step {info['load_s']:.0f} s in all")
    gen = ("wrk (C; 2 threads, a Lua script cycling through each scenario's URLs and counting X-Cache)"
           if generator == "wrk" else "Python threads with httpx (wrk not installed: the generator competes "
           "with the server for the CPU)")
    print(f"### API reads at {CLIENTS} concurrent clients (bench_api.py)\n")
    print(f"Data: {data}. API: uvicorn, {WORKERS} workers (each with its own read cache); server, PostgreSQL "
          f"and load generator on the same {os.cpu_count()} cores. Load generator: {gen}; {CLIENTS} keep-alive "
          f"connections for {SECONDS:g} s per scenario. Load average (1 min) of the machine before the "
          f"runs {load[0]:.1f}, after {load[1]:.1f}. Target: p99 ≤ 50 ms, no errors.\n")
    head = ("| scenario | requests | errors | non-2xx | req/s | p50 ms | p95 ms | p99 ms | max ms "
            "| X-Cache: hits (shared, misses) | p99 ≤ 50 ms |")
    for key, title in (("warm", "Read cache warm (the steady state: every answer computed once per worker "
                                "before the measured run)"),
                       ("cold", "Read cache emptied at the start of each scenario (as after a data change): "
                                "the first request for each URL in each worker computes it")):
        print(f"{title}:\n")
        print(head)
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|:---:|")
        for name, _, r in rows[key]:
            n = max(r["n"], 1)
            print(_row(name, r, f"{100 * r['hit'] / n:.2f} % ({r['shared']:,}, {r['miss']:,})"))
        print()
    print("Uncached path (MEASUREDB_API_CACHE_ENABLED=false): every request reads the database. "
          "1 client: sequential requests for 3 s, the per-request cost without queueing.\n")
    print("| scenario | 1 client p50 ms | 1 client p99 ms | requests | errors | non-2xx | req/s | p50 ms "
          "| p95 ms | p99 ms | max ms | p99 ≤ 50 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|")
    for name, one, r in rows["uncached"]:
        ok = "yes" if r["p99"] <= 50 and not (r["errors"] or r["non2xx"]) else "no"
        print(f"| {name} | {one['p50']:.1f} | {one['p99']:.1f} | {r['n']:,} | {r['errors']} | {r['non2xx']} "
              f"| {r['rps']:,.0f} | {r['p50']:.1f} | {r['p95']:.1f} | {r['p99']:.1f} | {r['max']:.1f} | {ok} |")


def _row(name: str, r: dict, cache: str) -> str:
    ok = "yes" if r["p99"] <= 50 and not (r["errors"] or r["non2xx"]) else "no"
    return (f"| {name} | {r['n']:,} | {r['errors']} | {r['non2xx']} | {r['rps']:,.0f} | {r['p50']:.1f} "
            f"| {r['p95']:.1f} | {r['p99']:.1f} | {r['max']:.1f} | {cache} | {ok} |")


if __name__ == "__main__":
    main()
