"""The copy cost (issue 4): MEASCTL taking the interval copy of 2,000 PROCESS counter records
(read, interval records, runs bookkeeping) — median of 50. Target: ≤ 20 ms.

Ingest against a raw COPY of the same rows is measured at scale by bench_scale.py (a ref16 day).
"""

from __future__ import annotations

import statistics
import time
import warnings

import numpy as np

from collector.measure.contab import ContabBuilder
from collector.measure.measmon import Measmon, Measurement
from collector.sink import Pipeline
from core.catalog import load_catalog

warnings.filterwarnings("ignore")
SECOND = 1_000_000
CAT = load_catalog()


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
    cost = copy_cost()
    print("### Copy cost (bench_ingest.py)\n")
    print("| measure | value | target |\n|---|---|---|")
    print(f"| interval copy of 2,000 PROCESS records (median of 50), ms | {cost:.2f} | ≤ 20 |")


if __name__ == "__main__":
    main()
