"""Storage layouts tried for the interval records (issue 14), on the same hours of the 16-CPU
reference node `ref16` (every entity, 1-minute intervals, the afternoon peak).

    .venv/bin/python bench/bench_layout.py [--hours 3] [--url ADMIN_URL]

Each layout gets the same interval records by binary COPY into a table of its own (no schema
runner: only the tables), then VACUUM ANALYZE; bytes per counter value = the table's total
size (heap, TOAST, indexes) / counter values; COPY time as measured here:
  A  one row per entity and interval, counters bigint[] (release 90's interval_record), its
     primary key and its three other indexes as release 90 had them;
  B  one row per counter record and UTC hour ("runs"), counters bigint[n][k] row-major
     (interval i = counters[i]), primary key + BRIN on from_at (the layout chosen);
  C  as B, column-major (counter p = counters[p]);
each TOAST-compressed with pglz (the embedded wheel has no lz4) and, where the server has it,
lz4 (--url or $BENCH_LZ4_URL names such a server, e.g. Debian's PostgreSQL). TimescaleDB's native compression
is measured on a whole day by bench_scale.py: on a few hours, each entity's batch holds a
run or two and the batches' own overhead dominates.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import psycopg

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore")

from collector.measure.measmon import Measmon, Measurement  # noqa: E402
from collector.node.engine import Node  # noqa: E402
from collector.node.topology import load_node  # noqa: E402
from collector.service import default_contab  # noqa: E402
from collector.sink import COPY_HEADER, COPY_TRAILER, PG_EPOCH_US, Pipeline, encode_rows  # noqa: E402
from core.catalog import load_catalog  # noqa: E402
from core.database import drop_database, ensure_database, start_embedded, with_dbname  # noqa: E402

SECOND = 1_000_000
HOUR = 3600 * SECOND
START = 1780416000 * SECOND  # 2026-06-02 16:00 UTC = 12:00 in New York: the peak
INTERVAL_COLUMNS = ("measurement_id", "entity_id", "record_at", "from_at", "to_at", "delta_us",
                    "closing_kind", "system_id", "type_code", "cpu", "error", "counters")

TABLE_A = """CREATE TABLE {t} (measurement_id integer NOT NULL, entity_id bigint NOT NULL, record_at timestamptz NOT NULL,
    from_at timestamptz NOT NULL, to_at timestamptz NOT NULL, delta_us bigint NOT NULL, closing_kind smallint NOT NULL,
    system_id smallint NOT NULL, type_code smallint NOT NULL, cpu smallint NOT NULL, error smallint NOT NULL DEFAULT 0,
    counters bigint[] {comp} NOT NULL, PRIMARY KEY (measurement_id, entity_id, record_at, from_at));
CREATE INDEX ON {t} (system_id, type_code, from_at);
CREATE INDEX ON {t} (measurement_id, entity_id, to_at);
CREATE INDEX ON {t} (measurement_id, type_code, from_at, entity_id, record_at)"""
TABLE_B = """CREATE TABLE {t} (system_id smallint NOT NULL, type_code smallint NOT NULL, measurement_id integer NOT NULL,
    entity_id bigint NOT NULL, record_at timestamptz NOT NULL, from_at timestamptz NOT NULL, delta_us bigint NOT NULL,
    n smallint NOT NULL, closing_kind smallint NOT NULL, cpu smallint NOT NULL, error smallint NOT NULL DEFAULT 0,
    counters bigint[] {comp} NOT NULL, base bigint[], tail bigint[], nonzero bigint,
    PRIMARY KEY (measurement_id, entity_id, record_at, from_at)) WITH (toast_tuple_target = 128);
CREATE INDEX ON {t} USING brin (from_at)"""


def simulate(hours: int) -> tuple[list[bytes], list[bytes], list[bytes], int]:
    """(A rows, B rows, C rows, counter values) of `hours` of ref16."""
    cat = load_catalog()
    topo = load_node("ref16")
    node = Node(topo, "ref16-day", seed=7, start_us=START - HOUR, catalog=cat, step_us=60 * SECOND)
    pipe = Pipeline(cat, node.tables, 1)
    a_rows: list[bytes] = []
    per_type: dict[int, list] = defaultdict(list)
    mon = Measmon(node, pipe.on_copy, catalog=cat, on_state=lambda *x: None)
    mon.add(Measurement(1, "DEFAULT", default_contab(topo), start_us=START - HOUR, interval_us=60 * SECOND))
    mon.run_until(START)
    pipe.take(START)  # the first hour warms the node up; its rows are not kept
    b_rows: list[bytes] = []
    values = 0
    for h in range(1, hours + 1):
        mon.run_until(START + h * HOUR)
        for (_mid, code), batches in pipe._pending.items():
            for b, ids in batches:
                a_rows.append(encode_rows(INTERVAL_COLUMNS, {
                    "measurement_id": 1, "entity_id": ids, "record_at": b.alloc_us, "from_at": b.from_us,
                    "to_at": b.to_us, "delta_us": b.to_us - b.from_us, "closing_kind": b.closing_kind,
                    "system_id": 1, "type_code": code, "cpu": b.cpu, "error": 0}, b.values))
                per_type[code].append((ids, b.alloc_us, b.from_us, b.values))
                values += b.values.size
        sl = pipe.take(START + h * HOUR)
        b_rows += sl.runs
    c_rows = [column_major(code, parts) for code, parts in per_type.items()]
    return a_rows, b_rows, c_rows, values


def column_major(code: int, parts: list) -> bytes:
    """Layout C: one row per entity and hour, counters[p][i] (every run here is a whole hour)."""
    eid = np.concatenate([p[0] for p in parts])
    rec = np.concatenate([p[1] for p in parts])
    frm = np.concatenate([p[2] for p in parts])
    vals = np.concatenate([p[3] for p in parts])
    hour = frm // HOUR
    order = np.lexsort((frm, hour, eid))
    eid, rec, frm, hour, vals = eid[order], rec[order], frm[order], hour[order], vals[order]
    brk = np.ones(eid.size, bool)
    brk[1:] = (eid[1:] != eid[:-1]) | (hour[1:] != hour[:-1])
    starts = np.flatnonzero(brk)
    lens = np.diff(np.append(starts, eid.size))
    k = vals.shape[1]
    out = []
    for n in np.unique(lens).tolist():
        sel = starts[lens == n]
        block = vals[sel[:, None] + np.arange(n)[None, :]].transpose(0, 2, 1)  # runs x k x n
        dt = np.dtype([("nf", ">i2"), ("l1", ">i4"), ("sys", ">i2"), ("l2", ">i4"), ("typ", ">i2"),
                       ("l3", ">i4"), ("mid", ">i4"), ("l4", ">i4"), ("eid", ">i8"), ("l5", ">i4"), ("rec", ">i8"),
                       ("l6", ">i4"), ("frm", ">i8"), ("l7", ">i4"), ("dlt", ">i8"), ("l8", ">i4"), ("n", ">i2"),
                       ("l9", ">i4"), ("kind", ">i2"), ("l10", ">i4"), ("cpu", ">i2"), ("l11", ">i4"), ("err", ">i2"),
                       ("la", ">i4"), ("nd", ">i4"), ("hn", ">i4"), ("oid", ">i4"), ("d1", ">i4"), ("b1", ">i4"),
                       ("d2", ">i4"), ("b2", ">i4"), ("el", [("len", ">i4"), ("v", ">i8")], (k * n,)),
                       ("lb", ">i4"), ("lt", ">i4"), ("lz", ">i4")])
        r = np.zeros(sel.size, dt)
        r["nf"] = 15
        for f, size in (("l1", 2), ("l2", 2), ("l3", 4), ("l4", 8), ("l5", 8), ("l6", 8), ("l7", 8), ("l8", 2),
                        ("l9", 2), ("l10", 2), ("l11", 2)):
            r[f] = size
        r["sys"], r["typ"], r["mid"], r["eid"] = 1, code, 1, eid[sel]
        r["rec"], r["frm"] = rec[sel] - PG_EPOCH_US, frm[sel] - PG_EPOCH_US
        r["dlt"], r["n"], r["kind"], r["cpu"] = 60 * SECOND, n, 3, 0
        r["la"] = 28 + 12 * k * n
        r["nd"], r["oid"], r["d1"], r["b1"], r["d2"], r["b2"] = 2, 20, k, 1, n, 1
        r["el"]["len"] = 8
        r["el"]["v"] = block.reshape(sel.size, -1)
        r["lb"], r["lt"], r["lz"] = -1, -1, -1
        out.append(r.tobytes())
    return b"".join(out)


def load(url: str, table: str, ddl: str, comp: str, rows: list[bytes], values: int) -> tuple[float, float]:
    """(COPY s, bytes per value)."""
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {table}")
        c.execute(ddl.format(t=table, comp=comp))
        t0 = time.perf_counter()
        with c.cursor().copy(f"COPY {table} FROM STDIN (FORMAT BINARY)") as cp:
            cp.write(COPY_HEADER)
            for r in rows:
                cp.write(r)
            cp.write(COPY_TRAILER)
        copy_s = time.perf_counter() - t0
        c.execute(f"VACUUM ANALYZE {table}")
        size = c.execute(f"SELECT pg_total_relation_size('{table}')").fetchone()[0]
        c.execute(f"DROP TABLE {table}")
    return copy_s, size / values


def run_on(url: str, label: str, a: list[bytes], b: list[bytes], cc: list[bytes], values: int) -> list[str]:
    with psycopg.connect(url) as c:
        has_lz4 = True
        try:
            c.execute("CREATE TEMP TABLE _lz4_probe (x bigint[] COMPRESSION lz4)")
        except psycopg.errors.FeatureNotSupported:
            has_lz4 = False
    lines = []
    for comp in ("pglz", "lz4") if has_lz4 else ("pglz",):
        for name, ddl, rows in (("A  a row per entity and interval", TABLE_A, a),
                                ("B  runs, [interval][counter] (chosen)", TABLE_B, b),
                                ("C  runs, [counter][interval]", TABLE_B, cc)):
            s, bpv = load(url, "bench_layout_t", ddl, f"COMPRESSION {comp}", rows, values)
            lines.append(f"| {label} | {name} | {comp} | {s:.1f} | {bpv:.2f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=int, default=3)
    ap.add_argument("--url", default=os.environ.get("BENCH_LZ4_URL"),
                    help="an admin URL of another server to measure as well (lz4); "
                         "default $BENCH_LZ4_URL (`make bench` runs it without arguments)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    a, b, cc, values = simulate(args.hours)
    sim_s = time.perf_counter() - t0
    lines = ["| server | layout | TOAST | COPY s | bytes / value |", "|---|---|---|---:|---:|"]
    server = start_embedded(REPO / ".data" / "bench-layout", dbname="bench_layout")
    with psycopg.connect(server.admin_url()) as c:
        version = c.execute("SHOW server_version").fetchone()[0]
    lines += run_on(server.url("bench_layout"), f"embedded {version}", a, b, cc, values)
    server.stop()
    if args.url:
        ensure_database(args.url, "bench_layout")
        url = with_dbname(args.url, "bench_layout")
        with psycopg.connect(url) as c:
            version = c.execute("SHOW server_version").fetchone()[0]
        lines += run_on(url, f"given {version.split()[0]}", a, b, cc, values)
        drop_database(args.url, "bench_layout")
    print(f"### Storage layouts (bench_layout.py): \\REF16, {args.hours} peak hours, {values:,} counter values\n")
    print(f"The same interval records (simulated in {sim_s:.0f} s) copied into each layout; size = heap + TOAST + "
          "indexes after VACUUM ANALYZE.\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
