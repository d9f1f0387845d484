"""Calibration smoke tests at the counter level (calibration.md; ATM article Tables 4 and 5).

The published per-transaction CPU demands are inputs of the model; these tests check that the
MEASURE counters the node bumps give them back: CPU ms per transaction from CPU-BUSY-TIME and
TERMINAL TRANSACTIONS, per component from PROCESS CPU-BUSY-TIME grouped by program, "system
overhead" = CPU busy minus all processes (as the article defines it).
"""

from __future__ import annotations

import pytest

from collector.node.engine import Node

from .node_helpers import START_US, RecordingHooks

HOUR = 3_600_000_000

TABLE4_TXP = {
    "system": 74,
    "tmf_disc": 104,
    "snax": 49,
    "tcp": 154,
    "hls": 49,
    "server": 54,
    "other": 7,
}

COMPONENT_OF_PROGRAM = {
    "$SYSTEM.SYSTEM.DP2": "tmf_disc",
    "$SYSTEM.SYSTEM.TMFMON": "tmf_disc",
    "$SYSTEM.SYSTEM.TMP": "tmf_disc",
    "$SYSTEM.SYSTEM.SNAXLH": "snax",
    "$SYSTEM.SYSTEM.X25AM": "linehandler",
    "$SYSTEM.SYSTEM.PATHTCP2": "tcp",
    "$SYSTEM.SYSTEM.HLS": "hls",
    "$SYSTEM.SYSTEM.MEASCTL": "other",
    "$SYSTEM.SYSTEM.CMON": "other",
    "$SYSTEM.SYSTEM.PATHMON": "other",
    "$SYSTEM.SYSTEM.OLLH": "other",
}


def measured_hour(node_name, workload):
    node = Node(node_name, workload, seed=2026, start_us=START_US, step_us=60_000_000)
    h = RecordingHooks()
    h.attach(node)
    node.advance(START_US + HOUR)
    P = node.tables["process"]
    txns = h.total("terminal", "TRANSACTIONS").sum()
    cpu_busy = h.total("cpu", "CPU-BUSY-TIME")
    busy = h.total("process", "CPU-BUSY-TIME")
    comp: dict[str, float] = {}
    for s in range(P.n):
        c = COMPONENT_OF_PROGRAM.get(P.ids["program_file_name"][s], "server")
        comp[c] = comp.get(c, 0.0) + busy[s]
    comp["system"] = cpu_busy.sum() - busy.sum()
    return node, txns, cpu_busy, {k: v / txns / 1000 for k, v in comp.items()}


def test_rds_txp_table4():
    _node, txns, cpu_busy, ms = measured_hour("rds-txp", "rds")
    assert txns == pytest.approx(12.0 * 3600, rel=0.03)
    total = cpu_busy.sum() / txns / 1000
    assert total == pytest.approx(491, rel=0.05)
    for comp, want in TABLE4_TXP.items():
        assert ms[comp] == pytest.approx(want, rel=0.05), (comp, ms)


def test_et1_txp_table5():
    node, txns, cpu_busy, ms = measured_hour("et1-txp", "et1")
    assert txns == pytest.approx(22.7 * 3600, rel=0.02)
    assert cpu_busy.sum() / txns / 1000 == pytest.approx(160, rel=0.03)
    util = cpu_busy.sum() / (node.topo.n_cpus * HOUR)
    assert util == pytest.approx(0.91, abs=0.02)
    # X.25: 100 bytes in and 200 bytes out per transaction, plus protocol overhead (340 in all)
    lines = node.tables["line"].entity
    assert lines.index("OUTPUT-DATA-BYTES") >= 0
    h_out = ms  # components exist for every process group
    assert set(h_out) >= {"tcp", "server", "tmf_disc", "linehandler", "system"}
