"""Response time as MEASURE reports it, against the published references (issue 18, part 1).

In memory (collector/node/response.py): TERMINAL TRANSACTIONS and RESPONSE-TIME and CPU
CPU-BUSY-TIME per 60 s interval, one hour after a 10-minute warm-up, seed 2026; the average
is Σ RESPONSE-TIME / Σ TRANSACTIONS and the percentiles are transaction-weighted percentiles
of the interval records' means, as measure.report_transaction_resource computes them.
bench/bench_response.py prints the same cases beside their references.
"""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from cli.main import app
from collector.node.response import measure_response, weighted_percentile
from collector.node.topology import load_node

HOUR_S = 3600.0
ET1_TXP_MS = 160.0  # Table 5 (workloads/et1.yaml): CPU ms per transaction on a TXP


def et1_tps_at(node: str, utilisation: float) -> float:
    """The offered load that gives ``utilisation`` at the node's CPU demand (not fitted)."""
    topo = load_node(node)
    return utilisation * topo.n_cpus / (ET1_TXP_MS * topo.cpu_factor / 1000.0)


def test_et1_txp_table5_response():
    # ATM article, Table 5: 22.7 tps on 4 TXP CPUs, 91 % CPU, 1.5 s average, 97 % < 4.1 s
    p = measure_response("et1-txp", "et1", seed=2026, run_s=HOUR_S)
    assert p.tps == pytest.approx(22.7, rel=0.03)
    assert p.cpu_percent == pytest.approx(91, abs=2)
    assert p.response_avg_s == pytest.approx(1.5, rel=0.10)
    assert p.response_p97_s < 4.1


@pytest.mark.parametrize(("node", "utilisation", "p95"), [
    ("et1-txp", 0.697, 1.00),  # "NonStop VLX Performance", Table 4: TXP/B20
    ("et1-vlx", 0.830, 1.01),  # VLX/B30
])
def test_et1_95_percent_within_one_second(node, utilisation, p95):
    p = measure_response(node, "et1", tps=et1_tps_at(node, utilisation), seed=2026, run_s=HOUR_S)
    assert p.cpu_percent == pytest.approx(100 * utilisation, abs=1.5)
    assert p.response_p95_s == pytest.approx(p95, rel=0.10)


def test_et1_double_multiplier():
    # 83.0 / 69.7 x 1.64 = 1.95: the VLX's throughput at 95 % within 1 s over the TXP's
    txp = measure_response("et1-txp", "et1", tps=et1_tps_at("et1-txp", 0.697), run_s=HOUR_S)
    vlx = measure_response("et1-vlx", "et1", tps=et1_tps_at("et1-vlx", 0.830), run_s=HOUR_S)
    assert vlx.tps / txp.tps == pytest.approx(1.95, rel=0.10)


@pytest.mark.xfail(strict=True, reason=(
    "Table 4's RDS response (1.3 s / 0.9 s at 96-97 % CPU) needs a mechanism the article does not "
    "describe: at that load the TCP and server CPU visits wait ~1.4 s each in the ready queue; the "
    "model matches the prototype at 78 % and 88 % (Figure 7, tests below) and the article itself "
    "gives this same run 1.8 s at 95 % in Table 1. Only ~20 points of busy made lowest-priority "
    "(a fitted share, which breaks Figure 7) reach Table 4. See collector/node/README.md, Calibration."))
@pytest.mark.parametrize(("node", "avg", "p95"), [("rds-txp", 1.3, 2.8), ("rds-vlx", 0.9, 2.1)])
def test_rds_table4_response(node, avg, p95):
    p = measure_response(node, "rds", seed=2026, run_s=HOUR_S)
    assert p.response_avg_s == pytest.approx(avg, rel=0.10)
    assert p.response_p95_s < p95


def test_rds_below_the_knee_matches_the_prototype():
    # Figure 7 (prototype, TXP, B30): 1.2 s average at 78 % CPU, 95 % < 3.0 s. The offered
    # load is the one that gives 78 % at the node's demand (480 ms x 12 tps = 96 % on 6 CPUs).
    p = measure_response("rds-txp", "rds", tps=12.0 * 78 / 96, seed=2026, run_s=HOUR_S)
    assert p.cpu_percent == pytest.approx(78, abs=2)
    assert p.response_avg_s == pytest.approx(1.2, rel=0.10)
    assert p.response_p95_s < 3.0


def test_weighted_percentile_counts_transactions():
    means = np.array([3.0, 1.0, 2.0])
    weights = np.array([1.0, 5.0, 4.0])
    assert weighted_percentile(means, weights, 0.5) == 1.0
    assert weighted_percentile(means, weights, 0.6) == 2.0
    assert weighted_percentile(means, weights, 0.95) == 3.0
    assert np.isnan(weighted_percentile(np.zeros(0), np.zeros(0), 0.95))


def test_node_sweep_prints_the_table_and_saves_the_plot(tmp_path):
    png = tmp_path / "sweep.png"
    res = CliRunner().invoke(app, ["node", "sweep", "--node", "et1-txp", "--tps", "8,20,40",
                                   "--minutes", "5", "--warm-minutes", "2", "--out", str(png)])
    assert res.exit_code == 0, res.output
    assert "et1-txp (et1)" in res.output and f"plot: {png}" in res.output
    rows = [ln for ln in res.output.splitlines() if ln.startswith("│")]
    assert len(rows) == 3
    assert "40 *" in rows[2]  # past the knee: 40 tps is more than 4 TXP CPUs complete
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_node_sweep_rejects_bad_loads(tmp_path):
    res = CliRunner().invoke(app, ["node", "sweep", "--node", "et1-txp", "--tps", "x,2",
                                   "--out", str(tmp_path / "s.png")])
    assert res.exit_code == 2
    assert not (tmp_path / "s.png").exists()


def test_rds_at_the_knee_matches_the_prototype():
    # Figure 7, Test 4 (prototype, TXP): 2.3 s average at 88 % CPU, 95 % < 5.5 s ("queuing
    # started to become a negative factor"); the same offered-load rule as above.
    p = measure_response("rds-txp", "rds", tps=12.0 * 88 / 96, seed=2026, run_s=HOUR_S)
    assert p.cpu_percent == pytest.approx(88, abs=2)
    assert p.response_avg_s == pytest.approx(2.3, rel=0.10)
    assert p.response_p95_s < 5.5
