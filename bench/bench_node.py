"""Benchmark: one simulated day of \\REF16 with every entity measured, 1-minute copy points.

    .venv/bin/python bench/bench_node.py [--days 1] [--step-s 60] [--seed 1]

Target (this 2-core machine): <= 45 s wall and <= 2 GB peak RSS. The hooks are the cheapest
useful MEASURE stand-in: they accumulate every bump into per-entity arrays (the counter
records), and transient entities get a counter record when they start.
"""

from __future__ import annotations

import argparse
import datetime as dt
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collector.node import Node, load_node, load_workload


class AccumulatingHooks:
    def __init__(self) -> None:
        self.records: dict[str, np.ndarray] = {}
        self.bumps = 0
        self.rows = 0
        self.node: Node | None = None

    def xctr(self, entity, slots, xptr, acc, level, peak, at_us) -> None:
        rec = self.records.get(entity)
        need = int(slots.max()) + 1
        if rec is None or rec.shape[0] < need:
            new = np.zeros((max(need, 2 * (0 if rec is None else rec.shape[0])), acc.shape[1]))
            if rec is not None:
                new[: rec.shape[0]] = rec
            rec = self.records[entity] = new
        rec[slots] += acc
        self.bumps += 1
        self.rows += slots.size

    def entity_started(self, entity, slot, at_us) -> None:
        self.node.tables[entity].xptr[slot] = 1 << 40 | slot

    def entity_stopped(self, entity, slot, at_us) -> None:
        self.node.tables[entity].xptr[slot] = -1

    def cpu_failed(self, cpu, at_us) -> None:
        pass

    def cpu_reloaded(self, cpu, at_us) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=float, default=1.0)
    ap.add_argument("--step-s", type=float, default=60.0, help="step = copy interval (s)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    topo = load_node("ref16")
    wl = load_workload("ref16-day")
    tz = dt.UTC
    start = int(dt.datetime(2026, 6, 2, 4, 0, tzinfo=tz).timestamp() * 1e6)  # 00:00 New York
    hooks = AccumulatingHooks()
    node = Node(
        topo, wl, seed=args.seed, start_us=start, hooks=hooks, step_us=int(args.step_s * 1e6)
    )
    hooks.node = node
    node.measure_all()
    n_ent = sum(int(t.measured_slots().size) for t in node.tables.values())
    sim_s = args.days * 86400
    t0 = time.perf_counter()
    node.advance(start + int(sim_s * 1e6))
    wall = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    C = node.tables["cpu"].entity
    busy = hooks.records["cpu"][:, C.index("CPU-BUSY-TIME")].sum() / (16 * sim_s * 1e6)
    txns = hooks.records["terminal"][:, node.tables["terminal"].entity.index("TRANSACTIONS")].sum()
    print(f"node \\REF16: 16 VLX CPUs, {n_ent} measured entities at start, step {args.step_s:g} s")
    print(
        f"simulated {sim_s / 3600:.1f} h in {wall:.1f} s wall  (ratio {sim_s / wall:,.0f}x real time)"
    )
    print(f"peak RSS {rss_mb:,.0f} MB; {hooks.bumps:,} xctr calls, {hooks.rows:,} record bumps")
    print(
        f"transactions {txns:,.0f} (peak-hour rate {wl.tps:g} tps x profile), "
        f"mean CPU busy {busy:.1%}, completed {node.stats.completed:,}"
    )


if __name__ == "__main__":
    main()
