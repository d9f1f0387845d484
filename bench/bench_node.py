"""Benchmark: one simulated day of \\REF16 with every entity measured, 1-minute copy points,
and live mode (1 s steps at real-time pacing) at the peak hour.

    .venv/bin/python bench/bench_node.py [--days 1] [--step-s 60] [--seed 1] [--live-s 120]

Targets (this 2-core machine): backfill <= 45 s wall (>= 1,900x real time) and <= 2 GB peak
RSS; live mode <= 2 % of one core. The hooks are the cheapest useful MEASURE stand-in: they
accumulate every bump into per-entity arrays (the counter records), and transient entities get
a counter record when they start. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collector.node import load_node, load_workload
from collector.node.engine import Node


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
        if slots[-1] - slots[0] == slots.size - 1:  # a run of slots (measure_all): no gather
            rec[slots[0] : slots[-1] + 1] += acc
        else:
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
    ap.add_argument("--live-s", type=int, default=120, help="live mode: simulated seconds")
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
    node.advance(start + 60_000_000)  # loads the compiled kernels (numba cache) once
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    c0 = time.process_time()
    node.advance(start + int(sim_s * 1e6))
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    load1 = os.getloadavg()[0]
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    C = node.tables["cpu"].entity
    busy = hooks.records["cpu"][:, C.index("CPU-BUSY-TIME")].sum() / (16 * sim_s * 1e6)
    txns = hooks.records["terminal"][:, node.tables["terminal"].entity.index("TRANSACTIONS")].sum()
    # live mode: the node as the collector runs it live, 1 s steps, one advance per second
    peak = int(dt.datetime(2026, 6, 2, 15, 0, tzinfo=tz).timestamp() * 1e6)  # 11:00 New York
    lh = AccumulatingHooks()
    live = Node(topo, wl, seed=args.seed, start_us=peak, hooks=lh, step_us=1_000_000)
    lh.node = live
    live.measure_all()
    live.advance(peak + 30_000_000)  # fill the node
    c1 = time.process_time()
    for _ in range(args.live_s):
        live.advance(live.now_us + 1_000_000)
    live_cpu = (time.process_time() - c1) / args.live_s
    print(f"node \\REF16: 16 VLX CPUs, {n_ent} measured entities at start, step {args.step_s:g} s;")
    print(
        f"{txns:,.0f} transactions (peak {wl.tps:g} tps x profile), mean CPU busy {busy:.1%}, "
        f"{hooks.bumps:,} xctr calls, {hooks.rows:,} record bumps; machine load during the "
        f"backfill (1-minute load average, {os.cpu_count()} cores): {load0:.1f} -> {load1:.1f}"
    )
    print()
    print("| measure | value | target |")
    print("|---|---|---|")
    print(
        f"| backfill: {sim_s / 3600:g} simulated h, wall | {wall:.1f} s (CPU {cpu:.1f} s) | <= 45 s |"
    )
    print(f"| backfill: ratio to real time | {sim_s / wall:,.0f}x | >= 1,900x |")
    print(f"| peak RSS | {rss_mb:,.0f} MB | <= 2,048 MB |")
    print(
        f"| live (1 s steps, peak hour, {args.live_s} s): CPU per simulated s | "
        f"{live_cpu * 1000:.1f} ms = {live_cpu:.1%} of one core | <= 2 % |"
    )


if __name__ == "__main__":
    main()
