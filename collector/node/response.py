"""Response time of a simulated node as MEASURE reports it, and sweeps of offered load.

The node runs in memory (no database) with hooks that keep what a MEASURE measurement of
every entity would record: per interval, each TERMINAL's TRANSACTIONS and RESPONSE-TIME
(end of the read to the start of the write) and each CPU's CPU-BUSY-TIME. From them:

* average response = Σ RESPONSE-TIME / Σ TRANSACTIONS (what the transaction-resource
  report prints, exact);
* a percentile = the transaction-weighted percentile of the interval records' mean
  responses, as ``measure.report_transaction_resource`` computes its 95th percentile (MEASURE
  keeps sums, not single responses: exact when a record holds one transaction);
* CPU utilisation = Σ CPU-BUSY-TIME / (CPUs x time).

:func:`sweep` runs one node per offered load (the workload's rate replaced) and gives the
throughput-versus-response curve of the VLX article's Figure 6; :func:`plot_sweep` draws it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from collector.node.engine import Node
from collector.node.topology import load_node
from collector.node.workload import WorkloadSpec, load_workload

__all__ = ["ResponsePoint", "measure_response", "plot_sweep", "sweep", "weighted_percentile"]

SECOND = 1_000_000
# A Monday 08:00 UTC: the calibration workloads are flat, so the day does not matter.
START_US = int(dt.datetime(2024, 3, 4, 8, 0, tzinfo=dt.UTC).timestamp()) * SECOND


@dataclass(frozen=True, slots=True)
class ResponsePoint:
    """One measured run: the offered load and what the counters say."""

    offered_tps: float
    tps: float  # completed terminal transactions per second
    cpu_percent: float
    response_avg_s: float
    response_p95_s: float
    response_p97_s: float
    transactions: int

    @property
    def saturated(self) -> bool:
        """The node completed less than 95 % of the offered load: past the knee, an open
        arrival stream only grows the backlog (response then depends on the run length)."""
        return self.tps < 0.95 * self.offered_tps


class _TerminalHooks:
    """What a measurement of TERMINAL and CPU * records, kept per interval (= node step)."""

    def __init__(self, node: Node) -> None:
        self.node = node
        T, C = node.tables["terminal"].entity, node.tables["cpu"].entity
        self.c_txn, self.c_resp = T.index("TRANSACTIONS"), T.index("RESPONSE-TIME")
        self.c_busy = C.index("CPU-BUSY-TIME")
        self.recording = False
        self.n: list[np.ndarray] = []  # per interval record with transactions: count, Σ µs
        self.r: list[np.ndarray] = []
        self.busy_us = 0.0

    def xctr(self, entity, slots, xptr, acc, level, peak, at_us) -> None:
        if not self.recording:
            return
        if entity == "terminal":
            n = acc[:, self.c_txn]
            has = n > 0
            self.n.append(n[has].copy())
            self.r.append(acc[has, self.c_resp].copy())
        elif entity == "cpu":
            self.busy_us += float(acc[:, self.c_busy].sum())

    def entity_started(self, entity, slot, at_us) -> None:
        self.node.tables[entity].xptr[slot] = slot

    def entity_stopped(self, entity, slot, at_us) -> None:
        self.node.tables[entity].xptr[slot] = -1

    def cpu_failed(self, cpu, at_us) -> None:
        pass

    def cpu_reloaded(self, cpu, at_us) -> None:
        pass


def weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The smallest value whose records, with all smaller ones, hold at least ``q`` (0-1) of
    the weight (the transaction-weighted percentile of record means)."""
    if values.size == 0:
        return float("nan")
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    k = int(np.searchsorted(cum, q * cum[-1], side="left"))
    return float(values[order][min(k, values.size - 1)])


def measure_response(
    node: str,
    workload: str | WorkloadSpec,
    *,
    tps: float | None = None,
    seed: int = 2026,
    warm_s: float = 600.0,
    run_s: float = 3600.0,
    interval_s: float = 60.0,
) -> ResponsePoint:
    """Run ``node`` with ``workload`` (its rate replaced by ``tps`` when given) for
    ``warm_s`` unmeasured and ``run_s`` measured seconds, intervals of ``interval_s``."""
    spec = workload if isinstance(workload, WorkloadSpec) else load_workload(workload)
    if tps is not None:
        spec = spec.model_copy(update={"tps": float(tps)})
    topo = load_node(node)
    n = Node(topo, spec, seed=seed, start_us=START_US, step_us=int(interval_s * SECOND))
    hooks = _TerminalHooks(n)
    n.hooks = hooks
    n.measure_all()
    n.advance(START_US + int(warm_s * SECOND))
    hooks.recording = True
    n.advance(START_US + int((warm_s + run_s) * SECOND))
    cnt = np.concatenate(hooks.n) if hooks.n else np.zeros(0)
    resp = np.concatenate(hooks.r) if hooks.r else np.zeros(0)
    total = float(cnt.sum())
    means = resp / np.maximum(cnt, 1) / SECOND
    return ResponsePoint(
        offered_tps=float(spec.tps),
        tps=total / run_s,
        cpu_percent=100.0 * hooks.busy_us / (topo.n_cpus * run_s * SECOND),
        response_avg_s=float(resp.sum()) / total / SECOND if total else float("nan"),
        response_p95_s=weighted_percentile(means, cnt, 0.95),
        response_p97_s=weighted_percentile(means, cnt, 0.97),
        transactions=int(total),
    )


def sweep(
    node: str,
    workload: str | WorkloadSpec,
    offered_tps: list[float],
    **kwargs,
) -> list[ResponsePoint]:
    """:func:`measure_response` at each offered load (same seed each time)."""
    return [measure_response(node, workload, tps=x, **kwargs) for x in offered_tps]


def plot_sweep(
    curves: dict[str, list[ResponsePoint]],
    path: Path,
    *,
    target_s: float | None = 1.0,
) -> Path:
    """Response time (average and 95th percentile) against throughput, one line pair per
    node, as the VLX article's Figure 6 draws it (saturated points left out); ``target_s``: a
    dashed response goal."""
    # imported here: matplotlib is heavy (about half a second) and only this plot needs it;
    # the Agg backend must be chosen before pyplot is imported
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=110)
    for name, pts in curves.items():
        pts = [p for p in pts if not p.saturated]
        if not pts:
            continue
        x = [p.tps for p in pts]
        (line,) = ax.plot(x, [p.response_p95_s for p in pts], marker="o", label=f"{name} 95 %")
        ax.plot(
            x,
            [p.response_avg_s for p in pts],
            marker=".",
            linestyle=":",
            color=line.get_color(),
            label=f"{name} average",
        )
    if target_s is not None:
        ax.axhline(target_s, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xlabel("throughput (transactions per second)")
    ax.set_ylabel("response time (s), TERMINAL RESPONSE-TIME")
    ax.set_title("Response time versus throughput (offered-load sweep)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
