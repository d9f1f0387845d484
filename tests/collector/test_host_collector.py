"""The collector on the host node, end to end: this machine measured live at 1-s intervals
into a real database; the tiers, views and reports read it as they read a simulated node; a
restart starts a fresh epoch without rewriting what is stored."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from collector.service import Collector, CollectorConfigError
from collector.settings import CollectorSettings
from core import schema
from tests.dashboards.grafana import TimeRange, expand
from tests.dashboards.panels import DASHBOARDS, queries_of
from tests.engine import MODE

pytestmark = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="no /proc on this system")


def settings(tmp: Path) -> CollectorSettings:
    return CollectorSettings(node="host", interval_seconds=1, step_seconds=1, heartbeat_seconds=1,
                             backfill_days=7, data_dir=tmp, spool_dir=tmp / "spool")


def run(url: str, tmp: Path, seconds: float) -> Collector:
    c = Collector(settings(tmp), url)
    c.register()
    c.build()
    # `seconds` of node time (the host's clock), however long a loaded machine takes to get there
    c.live(stop_at_us=c.node.now_us + int(seconds * 1e6), stop_after_s=20 * seconds)
    c.close()
    return c


def test_host_collector_end_to_end(fresh_database, tmp_path: Path) -> None:
    url = fresh_database("_host")
    schema.apply(url, mode=MODE)
    began = time.time()
    c = run(url, tmp_path, 4.5)
    t = c.topology
    assert c.state.epoch_us >= int(began * 1e6)            # no backfill: the epoch is now
    with psycopg.connect(url) as conn:
        system = conn.execute("SELECT system_name, time_zone, os_version FROM _measure.system").fetchall()
        assert system == [(t.system_name, t.time_zone, t.os_version)]
        cpus = conn.execute(
            "SELECT cpu, min(cpu_type), max(busy_avg), sum(samples) FROM measure.cpu_hour"
            " WHERE system_name = %s GROUP BY cpu ORDER BY cpu", (t.system_name,)).fetchall()
        assert [r[0] for r in cpus] == list(range(t.n_cpus))  # rows of every CPU
        assert {r[1] for r in cpus} == {t.cpu_type}
        assert all(0 <= r[2] <= 100 and r[3] >= 2 for r in cpus), cpus
        for view in ("disc_hour", "line_hour", "process_hour"):
            assert conn.execute(f"SELECT count(*) FROM measure.{view} WHERE system_name = %s",
                                (t.system_name,)).fetchone()[0] > 0, view
        # the reports read a host as they read a simulated node
        busy = conn.execute(
            "SELECT program_file_name, cpu_seconds FROM measure.report_busy_process(%s,"
            " date_trunc('hour', now()) - interval '1 hour', date_trunc('hour', now()) + interval '1 hour', 0)",
            (t.system_name,)).fetchall()
        assert busy and all(s >= 0 for _, s in busy)
        dashboards_read(conn)
        state = conn.execute("SELECT state, started_at FROM _measure.measurement WHERE name = 'DEFAULT'").fetchone()
        assert state[0] == "running"
        first_durable = conn.execute("SELECT durable_until FROM _measure.collector_state").fetchone()[0]
        first_intervals = conn.execute("SELECT count(*) FROM _measure.interval_record").fetchone()[0]
        # a measurement whose stop time passes while the collector is away
        conn.execute(
            "INSERT INTO _measure.measurement (system_id, name, contab, source, start_at, stop_at, interval_us, state)"
            " SELECT system_id, 'SHORT', contab, 'test', now() - interval '1 hour', now() + interval '1 second',"
            " 1000000, 'scheduled' FROM _measure.measurement WHERE name = 'DEFAULT'")
        conn.commit()
    time.sleep(2.5)
    again = run(url, tmp_path, 3.5)                          # a restart: a fresh epoch
    assert again.state.epoch_us > c.node.now_us
    assert again.checkpoint() is False                       # a host never resumes a checkpoint
    with psycopg.connect(url) as conn:
        after = conn.execute("SELECT state, started_at FROM _measure.measurement WHERE name = 'DEFAULT'").fetchone()
        assert after == state                                # still running, same start time
        assert conn.execute("SELECT state FROM _measure.measurement WHERE name = 'SHORT'").fetchone()[0] == "stopped"
        assert conn.execute("SELECT durable_until FROM _measure.collector_state").fetchone()[0] > first_durable
        assert conn.execute("SELECT count(*) FROM _measure.interval_record").fetchone()[0] > first_intervals
        gaps = conn.execute(
            "SELECT count(*) FROM _measure.interval_record r JOIN _measure.entity e USING (entity_id)"
            " WHERE e.type_code = 1 AND r.delta_us > 1000000").fetchone()[0]
        assert gaps == 0                                     # the time away is missing, not invented


def test_a_host_has_no_history_to_backfill(fresh_database, tmp_path: Path) -> None:
    url = fresh_database("_host_bf")
    schema.apply(url, mode=MODE)
    c = Collector(settings(tmp_path), url)
    with pytest.raises(CollectorConfigError, match="no history"):
        c.register(epoch_us=int((time.time() - 86_400) * 1e6))
    c.close()


def dashboards_read(conn: psycopg.Connection) -> None:
    """The CPU, disc, line and process dashboards, run as Grafana runs them over the last hour
    (read-only reader role): every query runs, and each dashboard shows data."""
    conn.execute("SET ROLE measure_reader")
    now = datetime.now(UTC)
    tr = TimeRange(now - timedelta(hours=1), now + timedelta(minutes=5))
    for stem in ("cpu", "disc", "lines", "processes"):
        path = DASHBOARDS / f"{stem}.json"
        values: dict[str, object] = {}
        multi: list[str] = []
        for v in json.loads(path.read_text())["templating"]["list"]:
            if v["type"] == "query":
                cur = conn.execute(expand(v["query"], tr, variables=values, multi=multi))
                cols = [d.name for d in cur.description]
                vals = [str(r[cols.index("__value") if "__value" in cols else 0]) for r in cur.fetchall()]
                assert vals, f"{stem}: variable {v['name']} has no values on a host node"
                if v.get("multi") or v.get("includeAll"):
                    values[v["name"]], multi = vals, [*multi, v["name"]]
                else:
                    values[v["name"]] = vals[0]
            elif v["type"] in ("custom", "textbox"):
                values[v["name"]] = v["current"]["value"]
        rows = 0
        for q in queries_of(path):
            rows += len(conn.execute(expand(q.sql, tr, variables=values, multi=multi,
                                            interval_ns=60 * 10**9)).fetchall())
        assert rows, f"{stem}: no data on a host node"
    conn.execute("RESET ROLE")
