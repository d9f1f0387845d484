"""Workload shapes the demo relies on (collector/node/workload.py): growth counted from the
first day of the node's history and bounded, and batch jobs that run on some weekdays only."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
import yaml

from collector.node import load_workload
from collector.node.engine import Node
from collector.node.topology import NodeFileError
from collector.node.workload import WORKLOADS_DIR, ShapeSpec, rate_multiplier

from .node_helpers import RecordingHooks

AMS = zoneinfo.ZoneInfo("Europe/Amsterdam")  # \DEMO's time zone


def us(t: dt.datetime) -> int:
    return int(t.timestamp() * 1_000_000)


def test_growth_counts_from_the_first_day_and_stops_at_its_max() -> None:
    shape = ShapeSpec(growth_per_month=0.3, growth_epoch="start", growth_max=1.3)
    first = dt.date(2026, 11, 17)
    anchored = shape.anchored(first)
    assert anchored.growth_epoch == first and shape.anchored(first) == anchored
    day0 = dt.datetime(2026, 11, 17, 12, 0)
    for weeks in (1, 2, 4):
        later = day0 + dt.timedelta(days=7 * weeks)  # same weekday and hour
        assert rate_multiplier(anchored, later) / rate_multiplier(anchored, day0) == pytest.approx(
            1.3 ** (7 * weeks / 30.4375))
    late = day0 + dt.timedelta(days=7 * 10)  # 70 days: 1.3 ** 2.3 would be 1.83
    assert rate_multiplier(anchored, late) / rate_multiplier(anchored, day0) == pytest.approx(1.3)
    # a fixed epoch is unchanged by anchoring
    fixed = ShapeSpec(growth_per_month=0.3)
    assert fixed.anchored(first) is fixed


def test_a_node_anchors_growth_at_its_own_start() -> None:
    for start in (dt.datetime(2026, 11, 17, 6, 0, tzinfo=AMS), dt.datetime(2027, 3, 2, 23, 30, tzinfo=AMS)):
        node = Node("demo", "demo", seed=1, start_us=us(start))
        assert node.shapes["demo"].growth_epoch == start.date()


def run_rept(start: dt.datetime, workload="demo", minutes: int = 5) -> float:
    """CPU seconds of the statement report $REPT in `minutes` from `start`."""
    node = Node("demo", workload, seed=4, start_us=us(start), step_us=60_000_000)
    h = RecordingHooks()
    h.attach(node)
    node.advance(us(start) + minutes * 60_000_000)
    P = node.tables["process"]
    slot = [s for s in range(P.n) if P.ids["process_name"][s] == "$REPT"][0]
    return h.total("process", "CPU-BUSY-TIME")[slot] / 1e6


def test_batch_runs_only_on_its_weekdays() -> None:
    spec = load_workload("demo")
    rept = next(b for b in spec.batch if b.process == "$REPT")
    assert rept.days == ["wed"] and rept.hours == (10, 14)
    assert run_rept(dt.datetime(2026, 11, 18, 10, 0, tzinfo=AMS)) > 60  # Wednesday: most of its CPU
    assert run_rept(dt.datetime(2026, 11, 17, 10, 0, tzinfo=AMS)) == 0  # Tuesday
    assert run_rept(dt.datetime(2026, 11, 18, 14, 0, tzinfo=AMS)) == 0  # Wednesday, after its hours


def test_a_run_over_midnight_belongs_to_the_day_it_began() -> None:
    raw = yaml.safe_load((WORKLOADS_DIR / "demo.yaml").read_text())
    for b in raw["batch"]:
        if b["process"] == "$REPT":
            b.update(hours=[22, 6], days=["fri"])
    friday_night = dt.datetime(2026, 11, 21, 2, 0, tzinfo=AMS)   # Saturday 02:00
    thursday_night = dt.datetime(2026, 11, 20, 2, 0, tzinfo=AMS)  # Friday 02:00
    assert run_rept(friday_night, load_workload(raw)) > 0
    assert run_rept(thursday_night, load_workload(raw)) == 0


def test_unknown_weekday_is_refused() -> None:
    raw = yaml.safe_load((WORKLOADS_DIR / "demo.yaml").read_text())
    raw["batch"][0]["days"] = ["friday"]
    with pytest.raises(NodeFileError, match=r"batch\[0\]\.days\[0\]: Input should be 'mon'"):
        load_workload(raw)
