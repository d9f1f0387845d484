"""Calibration end to end (issue 3's and issue 5's checks; calibration.md, ATM article Tables 4/5).

The published service demands are inputs of the simulated node; the check is that the whole
pipeline gives them back: node -> MEASURE counters -> the collector's default measurement ->
interval records in PostgreSQL -> measure.report_transaction_resource (queries/
transaction-resource.sql), read as the read-only role, the way an analyst reads it.

One simulated hour at the benchmark rate after a 10-minute warm-up (queues filled), 60 s step
and interval, fixed seed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.rows import dict_row

from collector.service import Collector
from collector.settings import CollectorSettings
from core import schema
from core.times import SECOND
from tests.engine import MODE

T0 = datetime(2024, 3, 4, 8, 0, tzinfo=UTC)  # a Monday; the RDS and ET1 workloads are flat
WARM = timedelta(minutes=10)
HOUR = timedelta(hours=1)

# ATM article, Table 4 (TXP column, CPU ms per transaction); the report's components are
# _measure.component_map's ("line_handler" = the SNAX line handlers).
TABLE4_TXP = {"system_overhead": 74, "tmf_disc": 104, "line_handler": 49, "tcp": 154, "hls": 49,
              "server": 54, "other": 7}
TABLE4_VLX = {"system_overhead": 39, "tmf_disc": 66, "line_handler": 35, "tcp": 115, "hls": 32,
              "server": 37, "other": 4}


def _report(fresh_database, tmp_path, node: str, workload: str, suffix: str) -> dict[str, dict]:
    url = fresh_database(suffix)
    schema.apply(url, mode=MODE)
    settings = CollectorSettings(node=node, workload=workload, seed=2026, step_seconds=60,
                                 interval_seconds=60, spool_dir=tmp_path / "spool")
    c = Collector(settings, url)
    c.register(epoch_us=int(T0.timestamp()) * SECOND)
    c.build()
    c.backfill(int((T0 + WARM + HOUR).timestamp()) * SECOND)
    c.close()
    with psycopg.connect(url) as conn:
        conn.execute("SET ROLE measure_reader")
        rows = conn.cursor(row_factory=dict_row).execute(
            "SELECT * FROM measure.report_transaction_resource(%s, %s, %s)",
            (c.topology.system_name, T0 + WARM, T0 + WARM + HOUR),
        ).fetchall()
    return {r["component"]: {k: (float(v) if v is not None and not isinstance(v, str) else v)
                             for k, v in r.items() if k != "component"}
            for r in rows}


@pytest.mark.parametrize(("node", "table", "cpus", "utilisation"), [
    ("rds-txp", TABLE4_TXP, 6, 96.0),
    ("rds-vlx", TABLE4_VLX, 4, 97.0),
])
def test_rds_reaches_table4_through_the_report(fresh_database, tmp_path, node, table, cpus, utilisation):
    rep = _report(fresh_database, tmp_path, node, "rds", "_cal_" + node.replace("-", "_"))
    total = rep["total"]
    assert total["transactions"] == pytest.approx(12.0 * 3600, rel=0.03)
    assert total["transactions_per_second_per_cpu"] == pytest.approx(12.0 / cpus, rel=0.03)
    # every component within 5 % of Table 4, the total within 5 %, utilisation within 2 points
    for component, ms in table.items():
        assert rep[component]["cpu_ms_per_transaction"] == pytest.approx(ms, rel=0.05), (
            component, {k: round(v["cpu_ms_per_transaction"], 1) for k, v in rep.items()})
    assert total["cpu_ms_per_transaction"] == pytest.approx(sum(table.values()), rel=0.05)
    assert total["cpu_utilization_percent"] == pytest.approx(utilisation, abs=2.0)
    assert set(rep) == set(table) | {"total"}


def test_et1_reaches_table5_through_the_report(fresh_database, tmp_path):
    rep = _report(fresh_database, tmp_path, "et1-txp", "et1", "_cal_et1")
    total = rep["total"]
    # Table 5: 4 TXP CPUs, 160 CPU ms per transaction, 22.7 tps (5.7 per CPU), 91 % CPU
    assert total["transactions"] / 3600 == pytest.approx(22.7, rel=0.05)
    assert total["transactions_per_second_per_cpu"] == pytest.approx(5.7, rel=0.05)
    assert total["cpu_ms_per_transaction"] == pytest.approx(160, rel=0.05)
    assert total["cpu_utilization_percent"] == pytest.approx(91, rel=0.05)
    # response (the node's output, not an input): Table 5 has 1.5 s average, 97 % under 4.1 s
    assert total["response_seconds_avg"] == pytest.approx(1.5, rel=0.10)
    assert total["response_seconds_p95"] < 4.1


def test_the_collector_maps_its_server_programs_once(fresh_database, tmp_path):
    url = fresh_database("_cal_map")
    schema.apply(url, mode=MODE)
    settings = CollectorSettings(node="rds-txp", workload="rds", spool_dir=tmp_path / "spool")
    for _ in range(2):  # a restart registers again and adds nothing
        Collector(settings, url).register(epoch_us=int(T0.timestamp()) * SECOND)
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT s.system_name, m.pattern, m.component FROM _measure.component_map m"
            " JOIN _measure.system s USING (system_id)").fetchall()
    assert rows == [("\\RDS1", "$RDS.APPL.ATMSRV", "server")]
