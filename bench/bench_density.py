"""Density (issue 31, item 3): bytes per counter value as stored, per entity type, beside the
entropy of the same values (the floor), and where the bytes of "everything" go.

    .venv/bin/python bench/bench_density.py [--hours 2] [--seed 7] [--url URL]

One run, on the embedded PostgreSQL (its own data in .data/bench-density) unless --url names
another server: ref16 simulated for --hours hours by the collector's in-memory path (as
bench_scale.py does), written by the collector's writer (binary COPY of runs, entities, extra
copies) into a fresh database and condensed into every tier, then VACUUM ANALYZE and:

1. per entity type: the runs as stored (the counters array as PostgreSQL keeps it, compressed
   or not: pg_column_size; the rest: heap rows, TOAST rows, page slack and indexes of the
   runs, shared out by rows) in bytes per counter value, beside
   - H: the empirical (order-0) entropy of the values, per counter, of the better of the value
     itself and its difference from the previous interval of its run (a MEASURE interval
     record is already the delta of a cumulative counter: a second difference helps levels and
     steady rates): the information in the values if each were coded alone (the floor);
   - PostgreSQL(run), zstd(run), lz4(run): each run's counters laid out [counter][interval] as
     zigzag differences from the previous interval in LEB128 varints, compressed alone: by the
     server itself (a bytea kept in its row, compressed over 128 bytes as the counters are),
     and by PyArrow's zstd and lz4 (a practical per-row payload);
   - zstd(hour): the same layout of all the runs of the type and hour compressed together
     (what a column store reaches by compressing many rows at once);
2. everything, by part (runs, extra copies, entities, hour/shift/month/year tiers, record
   tiers, DISCOPEN and terminal rollups, the rest): heap, TOAST and indexes, in bytes per
   counter value. The catalogue and an empty schema (the size of the database before the
   first row) are left out: they do not grow with the data;
3. three reads of the runs (best of three): every interval as condensing reads it, the
   DISCOPEN driver calls with idle runs skipped by `nonzero`, MEASREAD of 50 processes.
The same runs are measured as release 130's writer stored them, after schema/220-runs-inline.sql rewrote them
in place, and as today's writer stores them.

:func:`density_table` is the part a caller with a database of its own uses (bench_scale.py):
bytes per value of everything and of the runs, and the entropy floor, of what is stored.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pyarrow as pa
from psycopg.adapt import Loader
from psycopg.pq import Format

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore")

from collector.sink import RUN_COLUMNS  # noqa: E402
from core import schema  # noqa: E402
from core.database import drop_database, ensure_database, start_embedded, with_dbname  # noqa: E402

SECOND = 1_000_000
HOUR = 3600 * SECOND
INT8_ARRAY_OID = 1016
ELEM = np.dtype([("len", ">i4"), ("val", ">i8")])

# the parts of "everything", by the name of the table (a partition or chunk counts as its parent)
PARTS = (
    ("runs", r"^interval_run$"),
    ("extra copies", r"^extra_copy$"),
    ("entities", r"^entity$"),
    ("hour tiers", r"^[a-z]+_hour$"),
    ("shift tiers", r"_shift$"),
    ("month/year tiers", r"_(month|year)$"),
    ("record tiers", r"^record_"),
    ("DISCOPEN rollups", r"discopen"),
    ("terminal rollups", r"terminal"),
    ("response/threshold", r"response|threshold|histogram"),
)


class _RawArray(Loader):
    """A bigint[] column as its binary bytes (parsed by numpy, not into Python lists)."""

    format = Format.BINARY

    def load(self, data: Any) -> bytes:
        return bytes(data)


def _matrix(raw: bytes) -> np.ndarray:
    """A two-dimensional bigint[] in binary form as an [interval][counter] int64 matrix."""
    ndim = int.from_bytes(raw[0:4], "big")
    if int.from_bytes(raw[4:8], "big"):
        raise ValueError("a counters array with NULLs")
    dims = [int.from_bytes(raw[12 + 8 * d:16 + 8 * d], "big") for d in range(ndim)]
    el = np.frombuffer(raw, ELEM, offset=12 + 8 * ndim)
    return el["val"].astype(np.int64).reshape(dims)


def _varints(x: np.ndarray) -> bytes:
    """Zigzag LEB128 varints of an int64 vector."""
    z = ((x << 1) ^ (x >> 63)).astype(np.uint64)
    out = np.zeros((z.size, 10), np.uint8)
    more = np.ones(z.size, bool)
    nbytes = np.zeros(z.size, np.int64)
    for b in range(10):
        out[:, b] = (z & np.uint64(0x7F)).astype(np.uint8)
        z = z >> np.uint64(7)
        cont = z != 0
        out[cont, b] |= 0x80
        nbytes[more] += 1
        more &= cont
        if not more.any():
            break
    mask = np.arange(10)[None, :] < nbytes[:, None]
    return out[mask].tobytes()


def _layout(m: np.ndarray) -> bytes:
    """A run's counters [counter][interval], each the difference from the previous interval."""
    d = np.diff(m, axis=0, prepend=np.zeros((1, m.shape[1]), np.int64))
    return _varints(np.ascontiguousarray(d.T).ravel())


def _entropy(values: np.ndarray) -> float:
    """Order-0 empirical entropy in bits of the whole vector (not per value)."""
    if values.size == 0:
        return 0.0
    _, counts = np.unique(values, return_counts=True)
    p = counts / values.size
    return float(-(counts * np.log2(p)).sum())


def _codecs(conn: psycopg.Connection, code: int) -> dict[str, float]:
    """The values of one entity type's runs, their entropy floor and what zstd and lz4 make of
    them (in bytes): independent of how PostgreSQL stores the runs."""
    cur = conn.cursor(binary=True)
    cur.adapters.register_loader(INT8_ARRAY_OID, _RawArray)
    cols: dict[int, list[np.ndarray]] = defaultdict(list)
    hourly: dict[int, list[bytes]] = defaultdict(list)
    runs_zstd = runs_lz4 = values = 0
    cur.execute("SELECT from_at, counters FROM _measure.interval_run WHERE type_code = %s"
                " ORDER BY from_at, entity_id", (code,))
    for from_at, raw in cur:
        m = _matrix(raw)
        values += m.size
        lay = _layout(m)
        runs_zstd += len(pa.compress(lay, "zstd", asbytes=True))
        runs_lz4 += len(pa.compress(lay, "lz4", asbytes=True))
        hourly[int(from_at.timestamp()) // 3600].append(lay)
        cols[m.shape[1]].append(m)
    bits = 0.0
    for k, ms in cols.items():
        for p in range(k):
            v = np.concatenate([m[:, p] for m in ms])
            d = np.concatenate([np.diff(m[:, p], prepend=0) for m in ms])
            bits += min(_entropy(v), _entropy(d))
    hour_zstd = sum(len(pa.compress(b"".join(v), "zstd", asbytes=True)) for v in hourly.values())
    # PostgreSQL's own codec on the same layout: each run's bytes as a bytea kept in its row and
    # compressed by the server (pglz or lz4, as the counters are) once over 128 bytes
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS _layout (b bytea) WITH (toast_tuple_target = 128)")
    conn.execute("ALTER TABLE _layout ALTER COLUMN b SET STORAGE MAIN")
    conn.execute("TRUNCATE _layout")
    with conn.cursor().copy("COPY _layout (b) FROM STDIN") as cp:
        for lays in hourly.values():
            for lay in lays:
                cp.write_row((lay,))
    runs_pg = int(conn.execute("SELECT coalesce(sum(pg_column_size(b)), 0) FROM _layout").fetchone()[0])
    conn.execute("DROP TABLE _layout")
    return {"values": values, "floor": bits / 8, "zstd_run": runs_zstd, "lz4_run": runs_lz4, "zstd_hour": hour_zstd,
            "pg_run": runs_pg}


def per_type(conn: psycopg.Connection, codecs: dict[int, dict[str, float]] | None = None) -> list[dict[str, Any]]:
    """Per entity type: values, the runs' stored bytes, the entropy floor and codecs (the
    latter computed once into `codecs`, when given, and taken from it after)."""
    codecs = {} if codecs is None else codecs
    names = dict(conn.execute("SELECT type_code, entity FROM _measure.entity_type").fetchall())
    stored = {r[0]: r[1:] for r in conn.execute(
        "SELECT type_code, count(*), sum(pg_column_size(counters)) FROM _measure.interval_run GROUP BY 1").fetchall()}
    rows = sum(v[0] for v in stored.values()) or 1
    total = sum(parts(conn)["runs"].values())
    rest = total - sum(v[1] for v in stored.values())  # heap rows, TOAST rows, page slack, indexes
    out = []
    for code in sorted(stored):
        n_rows, arr_bytes = stored[code]
        if code not in codecs:
            codecs[code] = _codecs(conn, code)
        out.append({"type": names.get(code, str(code)), "runs": n_rows, "array": arr_bytes,
                    "rest": rest * n_rows / rows, **codecs[code]})
    return out


def parts(conn: psycopg.Connection) -> dict[str, dict[str, int]]:
    """Heap, TOAST and index bytes of every table of the data schemas, by part."""
    sizes: dict[str, dict[str, int]] = defaultdict(lambda: {"heap": 0, "toast": 0, "index": 0})
    for name, heap, toast, index in conn.execute("""
        SELECT coalesce(root.relname, c.relname), pg_relation_size(c.oid),
               coalesce(pg_total_relation_size(c.reltoastrelid), 0), pg_indexes_size(c.oid)
          FROM pg_class c
          JOIN pg_namespace n ON n.oid = c.relnamespace
          LEFT JOIN LATERAL (SELECT a.relid FROM pg_partition_ancestors(c.oid) a
                              WHERE a.relid <> c.oid AND c.relispartition
                              ORDER BY a.relid LIMIT 1) pa ON true
          LEFT JOIN pg_class root ON root.oid = pa.relid
         WHERE c.relkind IN ('r', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
           AND n.nspname NOT LIKE '\\_timescaledb%' AND n.nspname NOT LIKE 'timescaledb%'
           AND n.nspname NOT LIKE 'pg\\_temp%' AND n.nspname NOT LIKE 'pg\\_toast\\_temp%'""").fetchall():
        part = next((p for p, rx in PARTS if re.search(rx, name)), "the rest")
        s = sizes[part]
        s["heap"] += heap
        s["toast"] += toast
        s["index"] += index
    hyper = conn.execute("SELECT to_regclass('_timescaledb_catalog.hypertable') IS NOT NULL").fetchone()[0]
    if hyper:  # chunks (and their compressed forms) live in TimescaleDB's schemas
        heap, toast, index = conn.execute(
            "SELECT table_bytes, toast_bytes, index_bytes FROM hypertable_detailed_size('_measure.interval_run')"
        ).fetchone()
        s = sizes["runs"]
        s["heap"] += heap or 0
        s["toast"] += toast or 0
        s["index"] += index or 0
    return dict(sizes)


def counter_values(conn: psycopg.Connection) -> int:
    return int(conn.execute(
        "SELECT coalesce(sum(r.n::bigint * array_length(r.counters, 2)), 0) FROM _measure.interval_run r"
    ).fetchone()[0])


def density_table(conn: psycopg.Connection, *, empty_bytes: int = 0) -> dict[str, float]:
    """Bytes per counter value of what conn's database stores (everything but the empty
    schema, empty_bytes; and of the runs with their indexes) and the entropy floor of the same
    values in bytes per value, for a caller that prints bytes per value ÷ floor."""
    values = counter_values(conn) or 1
    size = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0] - empty_bytes
    types = per_type(conn)
    runs = sum(t["array"] + t["rest"] for t in types)
    floor = sum(t["floor"] for t in types)
    return {"values": values, "everything": size / values, "runs": runs / values, "floor": floor / values,
            "zstd_run": sum(t["zstd_run"] for t in types) / values}


def build(admin: str, hours: int, seed: int, tmp: Path) -> tuple[str, int]:
    """A fresh database with `hours` hours of ref16 written by the collector's writer and
    condensed into every tier; returns its URL and the size of the empty schema."""
    from collector.measure.measmon import Measmon, Measurement
    from collector.node.engine import Node
    from collector.node.topology import load_node
    from collector.service import DEFAULT_MEASUREMENT, default_contab
    from collector.sink import Pipeline, Writer
    from core.catalog import load_catalog

    drop_database(admin, "bench_density")
    ensure_database(admin, "bench_density")
    url = with_dbname(admin, "bench_density")
    schema.apply(url, mode="auto")
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("VACUUM")
        empty = c.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        sid = c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                        "VALUES ('\\REF16', 16, 'America/New_York') RETURNING system_id").fetchone()[0]
        c.execute("INSERT INTO _measure.collector_state (collector_id, system_id, node, seed, step_us, epoch_at)"
                  " VALUES ('bench', %s, 'ref16', 1, 60000000, now())", (sid,))
    epoch = 1_790_000_000 * SECOND // HOUR * HOUR
    cat = load_catalog()
    topo = load_node("ref16")
    node = Node(topo, "ref16-day", seed=seed, start_us=epoch, catalog=cat, step_us=60 * SECOND)
    pipe = Pipeline(cat, node.tables, sid)
    mon = Measmon(node, pipe.on_copy, catalog=cat, on_state=lambda *a: None)
    mon.add(Measurement(1, DEFAULT_MEASUREMENT, default_contab(topo), start_us=epoch, interval_us=60 * SECOND))
    w = Writer(url, "bench", tmp / "spool", 1 << 34, condense=False)
    for h in range(1, hours + 1):
        mon.run_until(epoch + h * HOUR)
        sl = pipe.take(epoch + h * HOUR)
        sl.control.clear()
        assert w.flush(sl)
    w.close()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SELECT _measure.condense(NULL, 100000)")
        c.execute("SELECT _measure.condense_pending_months()")
        c.execute("VACUUM ANALYZE")
    return url, empty


READS = (
    ("every interval of every run, all counters (condensing's read)",
     "SELECT count(*), sum(i.c[i.i][1]) FROM _measure.system s, _measure.entity_type t,"
     " LATERAL _measure.intervals(s.system_id, t.type_code, '-infinity', 'infinity') i"),
    ("DISCOPEN driver calls, idle runs skipped by `nonzero`",
     "SELECT count(*), sum(i.c[i.i][2] + i.c[i.i][3]) FROM _measure.system s, _measure.entity_type t,"
     " LATERAL _measure.intervals(s.system_id, t.type_code, '-infinity', 'infinity',"
     "   _measure.counter_mask(t.type_code, ARRAY['driver_input_calls', 'driver_output_calls'])) i"
     " WHERE t.entity = 'discopen'"),
    ("MEASREAD of 50 processes' interval records",
     "SELECT count(*), sum(r.counters[1]) FROM measure.interval_record r"
     " WHERE (r.measurement_id, r.entity_id) IN (SELECT 1, e.entity_id FROM _measure.entity e"
     "  JOIN _measure.entity_type t USING (type_code) WHERE t.entity = 'process' ORDER BY 2 LIMIT 50)"),
)


def reads(conn: psycopg.Connection) -> list[tuple[str, float, Any]]:
    """The best of three timings of each read of READS (seconds) and its answer."""
    out = []
    for name, sql in READS:
        best, answer = float("inf"), None
        for _ in range(3):
            t0 = time.perf_counter()
            answer = conn.execute(sql).fetchone()
            best = min(best, time.perf_counter() - t0)
        out.append((name, best, answer))
    return out


def report(conn: psycopg.Connection, empty: int, title: str, codecs: dict[int, dict[str, float]]) -> None:
    values = counter_values(conn)
    types = per_type(conn, codecs)
    # (less this session's temporary tables: the copy of the runs main() rewrites from)
    size = conn.execute("SELECT (pg_database_size(current_database())"
                        " - (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                        "     WHERE c.relpersistence = 't' AND c.relkind = 'r'))::bigint").fetchone()[0]
    print(f"#### {title}: {values:,} counter values\n")
    print("| entity type | runs | values | stored B/value (array + rest) | floor H B/value | "
          "stored ÷ floor | PostgreSQL(run) | zstd(run) | lz4(run) | zstd(hour) |\n|---|---|---|---|---|---|---|---|---|---|")
    tot = defaultdict(float)
    for t in sorted(types, key=lambda t: -t["values"]):
        v = t["values"] or 1
        s = t["array"] + t["rest"]
        for key in ("runs", "values", "array", "rest", "floor", "pg_run", "zstd_run", "lz4_run", "zstd_hour"):
            tot[key] += t[key]
        print(f"| {t['type']} | {t['runs']:,} | {t['values']:,} | {s / v:.3f} ({t['array'] / v:.3f} + "
              f"{t['rest'] / v:.3f}) | {t['floor'] / v:.3f} | "
              f"{s / max(t['floor'], 1):.1f} | {t['pg_run'] / v:.3f} | {t['zstd_run'] / v:.3f} | {t['lz4_run'] / v:.3f} | "
              f"{t['zstd_hour'] / v:.3f} |")
    v = tot["values"] or 1
    s = tot["array"] + tot["rest"]
    print(f"| **all** | {int(tot['runs']):,} | {int(v):,} | **{s / v:.3f}** ({tot['array'] / v:.3f} + "
          f"{tot['rest'] / v:.3f}) | **{tot['floor'] / v:.3f}** | "
          f"{s / max(tot['floor'], 1):.1f} | {tot['pg_run'] / v:.3f} | {tot['zstd_run'] / v:.3f} | {tot['lz4_run'] / v:.3f} | "
          f"{tot['zstd_hour'] / v:.3f} |\n")
    print("| part of everything | heap | TOAST | indexes | total B/value |\n|---|---|---|---|---|")
    total = 0
    for part, s in sorted(parts(conn).items(), key=lambda kv: -sum(kv[1].values())):
        b = sum(s.values())
        total += b
        print(f"| {part} | {s['heap'] / v:.3f} | {s['toast'] / v:.3f} | {s['index'] / v:.3f} | {b / v:.3f} |")
    print(f"| **all tables** | | | | **{total / v:.3f}** |")
    print(f"| database size less the empty schema ({empty / 2**20:.1f} MiB) | | | | {(size - empty) / v:.3f} |\n")
    print("| read of the runs | best of 3 | answer |\n|---|---|---|")
    for name, seconds, answer in reads(conn):
        print(f"| {name} | {seconds * 1000:,.0f} ms | {answer} |")
    print()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--url", help="an admin URL of another server (default: the embedded one)")
    ap.add_argument("--keep", action="store_true", help="keep the database bench_density")
    args = ap.parse_args()
    server = None
    if args.url:
        admin = args.url
    else:
        server = start_embedded(REPO / ".data" / "bench-density", dbname="postgres")
        admin = server.admin_url()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=REPO / ".data") as tmpd:
        t0 = time.perf_counter()
        url, empty = build(admin, args.hours, args.seed, Path(tmpd))
        build_s = time.perf_counter() - t0
    with psycopg.connect(url) as c:
        version = c.execute("SHOW server_version").fetchone()[0]
        compression = c.execute("SELECT CASE attcompression WHEN 'l' THEN 'lz4' WHEN 'p' THEN 'pglz'"
                                " ELSE 'default (' || current_setting('default_toast_compression') || ')' END"
                                "  FROM pg_attribute WHERE attrelid = '_measure.interval_run'::regclass"
                                "   AND attname = 'counters'").fetchone()[0]
        print(f"### Density (bench_density.py): \\REF16, {args.hours} hour(s), seed {args.seed}\n")
        print(f"PostgreSQL {version}, runs' counters compressed with {compression}; built in {build_s:.0f} s. "
              f"Load average (1 min) {load0:.1f} on {os.cpu_count()} cores. One run. Floor H: order-0 entropy "
              f"per counter of the better of value and difference from the previous interval; zstd/lz4(run): "
              f"each run [counter][interval] as zigzag-delta varints compressed alone; zstd(hour): all runs of "
              f"the type and hour together. Month/year tiers and the catalogue do not grow with hours: a few "
              f"hours overstate them against a day.\n")
    # The same runs stored three ways, in one run: as release 130's writer stored them (the
    # default storage: each run's compressed counters moved out of line into TOAST), after
    # schema/220-runs-inline.sql rewrote them in place, and as today's writer stores them (220
    # applied): each time the runs are written again as the collector's COPY writes them
    # (uncompressed arrays, in time order).
    codecs: dict[int, dict[str, float]] = {}
    columns = ", ".join(RUN_COLUMNS)
    rewrite = ", ".join(f"_measure.detoasted({col})" if col in ("counters", "base", "tail") else col
                        for col in RUN_COLUMNS)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"CREATE TEMP TABLE _runs AS SELECT {columns} FROM _measure.interval_run")

        def write(storage: str, last: bool = False) -> None:
            c.execute(f"ALTER TABLE _measure.interval_run ALTER COLUMN counters SET STORAGE {storage},"
                      f" ALTER COLUMN base SET STORAGE {storage}, ALTER COLUMN tail SET STORAGE {storage}")
            c.execute("TRUNCATE _measure.interval_run")
            c.execute(f"INSERT INTO _measure.interval_run ({columns}) SELECT {rewrite} FROM _runs"
                      f" ORDER BY from_at, type_code, entity_id")
            if last:
                c.execute("DROP TABLE _runs")
            c.execute("VACUUM ANALYZE")

        write("EXTENDED")
        report(c, empty, "before: as release 130 stores them (counters EXTENDED, out of line)", codecs)
        c.execute((REPO / "schema" / "220-runs-inline.sql").read_text())
        c.execute("VACUUM ANALYZE")
        report(c, empty, "after schema/220-runs-inline.sql rewrote them in place", codecs)
        write("MAIN", last=True)
        report(c, empty, "after: as today's writer stores them (counters MAIN, in the row)", codecs)
    if not args.keep:
        drop_database(admin, "bench_density")
    if server:
        server.stop()


if __name__ == "__main__":
    main()
