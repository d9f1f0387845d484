"""Queueing checks at the counter level: M/M/1 on one CPU, and Little's law."""

from __future__ import annotations

import numpy as np
import pytest

from collector.node import load_node, load_workload
from collector.node.engine import Node

from .node_helpers import RecordingHooks

NODE = """
system: {name: '\\MM1', number: 5, time_zone: UTC}
processor: {type: TXP, cpus: 2}
discs: [{volume: $SYSTEM, primary_cpu: 0, backup_cpu: 1}]
processes: [{name: $APP, program: $APPL.MM1.SERVER, cpu: 0, priority: 150}]
"""


def mm1(tmp_path, rho: float, seed: int, hours: float, step_us: int = 60_000_000):
    f = tmp_path / "mm1.yaml"
    f.write_text(NODE)
    wl = load_workload(
        {
            "name": "mm1",
            "kind": "custom",
            "tps": rho / 0.010,
            "process": "$APP",
            "shape": {"profile": [1] * 24, "weekday": [1] * 7},
            "stages": [{"kind": "cpu", "role": "self", "ms": 10.0, "dist": "exp"}],
        }
    )
    node = Node(load_node(f), wl, seed=seed, start_us=0, step_us=step_us)
    hooks = RecordingHooks()
    hooks.attach(node)
    T = int(hours * 3600e6)
    node.advance(T)
    return node, hooks, T


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_mm1_busy_and_queue_length(tmp_path, rho):
    node, h, T = mm1(tmp_path, rho, seed=11, hours=4)
    busy = h.total("cpu", "CPU-BUSY-TIME")[0] / T
    aql = h.total("cpu", "CPU-QTIME")[0] / T
    assert busy == pytest.approx(rho, rel=0.02)
    assert aql == pytest.approx(rho / (1 - rho), rel=0.05)
    # the process sees the same busy time and time on the ready list as its CPU
    P = node.tables["process"]
    app = int(np.flatnonzero(P.ids["process_name"][: P.n] == "$APP")[0])
    assert h.total("process", "CPU-BUSY-TIME")[app] == h.total("cpu", "CPU-BUSY-TIME")[0]
    # ... the time on the ready list, as a busy counter, at most the time measured: what the
    # CPU's queue held beyond it is still carried into the next steps, nothing lost
    ready = h.total("process", "READY-TIME")[app]
    busy_cols = node._emit_cols["process"][0]
    carried = node._busy_carry["process"][app, int(np.flatnonzero(busy_cols == P.entity.index("READY-TIME"))[0])]
    assert ready <= T
    assert ready + carried == h.total("cpu", "CPU-QTIME")[0]
    assert h.total("cpu", "CPU-BUSY-TIME")[1] == 0


@pytest.mark.parametrize("step_us", [1_000_000, 7_300_000])
def test_littles_law_is_exact(tmp_path, step_us):
    # a queue integral copied at any step boundary equals the time in system of the
    # completed jobs plus the age of the ones still waiting or in service
    node, h, T = mm1(tmp_path, 0.9, seed=3, hours=0.05, step_us=step_us)
    q = h.total("cpu", "CPU-QTIME")[0]
    assert node.tx["type"].size > 0  # the run ends with jobs in the system
    assert q == node.stats.sys_time_us + node.inflight_age_us()
    # busy time can never exceed the elapsed time
    assert h.total("cpu", "CPU-BUSY-TIME")[0] <= T


def test_partial_step_and_levels(tmp_path):
    node, h, _T = mm1(tmp_path, 0.8, seed=5, hours=0)
    h.keep_calls = True
    node.advance(2_500_000)  # 1 s steps would end on 2.5 s with a partial step
    assert node.now_us == 2_500_000
    cpu_calls = [c for c in h.calls if c[0] == "cpu"]
    assert len(cpu_calls) == 1  # the step is 60 s, so one partial step of 2.5 s
    _, _slots, acc, level, peak = cpu_calls[0]
    C = node.tables["cpu"].entity
    b, q = C.index("CPU-BUSY-TIME"), C.index("CPU-QTIME")
    assert acc[0, b] <= 2_500_000
    assert level[0, b] in (0.0, 1.0)  # busy flag at the copy point
    assert peak[0, q] >= level[0, q]  # queue peak within the step >= final length
