"""The demo shows the product (README "The demo"; issue 18): on the `demo` node's own load the
threshold report, the threshold dashboard and the alert rules are not empty, the process
reports show the statement report $REPT running at the wrong priority, and the trend and
capacity forecast see the growth.

The data are what `measuredb backfill --node demo --seed 1986` stores (the collector's default
measurement of every entity at 1-minute intervals, collector/service.py), for Tuesday 06:00 to
Thursday 18:00 local time: three weekday peaks, Wednesday's report job, ~40 s to simulate and
store. Expected values come from the node and workload files (collector/node/nodes/demo.yaml,
workloads/demo.yaml), never from a run.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal
from zoneinfo import ZoneInfo

import psycopg
import pytest

from collector.node import load_node, load_workload
from collector.node import workload as wl
from collector.service import Collector
from collector.settings import CollectorSettings
from core import schema
from core.reports import run_report
from core.times import to_us
from tests.dashboards.grafana import TimeRange, expand, expand_macros
from tests.dashboards.panels import DASHBOARDS, alert_queries, queries_of
from tests.engine import MODE

SYSTEM = "\\DEMO"
SEED = 1986
TOPO = load_node("demo")
WORKLOAD = load_workload("demo")
TZ = ZoneInfo(TOPO.time_zone)
START = dt.datetime(2026, 11, 17, 6, 0, tzinfo=TZ)  # a Tuesday
END = dt.datetime(2026, 11, 19, 18, 0, tzinfo=TZ)   # Thursday
DAYS = [START.date() + dt.timedelta(days=k) for k in range(3)]
REPT = next(b for b in WORKLOAD.batch if b.process == "$REPT")
REPT_PROC = next(p for p in TOPO.processes if p.name == "$REPT")
WEDNESDAY = next(d for d in DAYS if wl.WEEKDAYS[d.weekday()] in REPT.days)
HOT = WORKLOAD.problems.hot_disc.volume
LINE_CPUS = {ln["cpu"] for ln in TOPO.lines}  # X.25 line handlers and their TCPs


def local(day: dt.date, hour: int) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(hour), tzinfo=TZ)


@pytest.fixture(scope="module")
def demo_db(fresh_database, tmp_path_factory) -> str:
    url = fresh_database("_demo")
    schema.apply(url, mode=MODE)
    tmp = tmp_path_factory.mktemp("demo")
    c = Collector(CollectorSettings(node="demo", seed=SEED, interval_seconds=60, step_seconds=60,
                                    backfill_days=0, data_dir=tmp, spool_dir=tmp / "spool"), url)
    try:
        c.register(epoch_us=to_us(START))
        c.build()
        c.backfill(to_us(END))
        c.condense_months()
    finally:
        c.close()
    assert c.writer.durable_until_us == to_us(END), "the window was not stored"
    return url


@pytest.fixture
def reader(demo_db: str) -> Iterator[psycopg.Connection]:
    """As Grafana and the report command read: role measure_reader, read-only."""
    with psycopg.connect(demo_db) as conn:
        conn.execute("SET ROLE measure_reader")
        conn.execute("SET default_transaction_read_only = on")
        conn.commit()
        yield conn
        conn.rollback()


def limits(conn: psycopg.Connection, entity: str) -> dict[str, tuple[str, Decimal]]:
    rows = conn.execute("SELECT item, operator, limit_value FROM measure.threshold "
                        "WHERE system_name = %s AND entity = %s", (SYSTEM, entity)).fetchall()
    return {item: (op, lim) for item, op, lim in rows}


def breaks(value: Decimal, op: str, lim: Decimal) -> bool:
    return {">": value > lim, ">=": value >= lim, "<": value < lim, "<=": value <= lim}[op]


# ------------------------------------------------------------------ the daily peak

def test_threshold_report_shows_the_daily_peak_of_every_weekday(reader) -> None:
    cpu_limits = limits(reader, "cpu")
    for day in DAYS:
        rows = run_report(reader, "threshold", system=SYSTEM, day=day)
        online = [r for r in rows if r["cpu"] in LINE_CPUS]
        assert online, f"{day}: no CPU of the X.25 lines breaks a threshold"
        for r in rows:
            # the lines are the day's peak and Wednesday's report job; the night stays quiet
            assert "07:00" <= r["time_of_day"] <= "17:00", r
            want = sorted(f"{item} {op} {lim}" for item, (op, lim) in cpu_limits.items()
                          if r[item] is not None and breaks(r[item], op, lim))
            assert r["broken"] == want, r
        assert any({"busy_max", "qlen_max"} & {b.split()[0] for b in r["broken"]} for r in online), day
        disc = reader.execute("SELECT subject, item, value, operator, limit_value "
                              "FROM measure.report_threshold_items(%s, %s, NULL, 'disc')",
                              (SYSTEM, day)).fetchall()
        assert disc, f"{day}: no disc breaks a threshold"
        assert {s for s, *_ in disc} == {HOT}, disc
        assert all(breaks(v, op, lim) for _, _, v, op, lim in disc)


# ------------------------------------------------------------------ batch at the wrong priority

def test_statement_report_runs_above_the_online_processes(reader) -> None:
    a, b = REPT.hours
    rows = run_report(reader, "busy-process", system=SYSTEM, from_at=local(WEDNESDAY, a),
                      to_at=local(WEDNESDAY, b))
    top = rows[0]
    assert (top["process_name"], top["priority"], top["cpu"]) == ("$REPT", REPT_PROC.priority, REPT_PROC.cpu)
    online = [r for r in rows if r["process_name"] != "$REPT" and not r["process_name"].startswith("$DATA")]
    assert online and all(r["priority"] < top["priority"] for r in online), rows
    # its CPU demand: blocks per second x the batch kind's own CPU ms on this processor
    own_ms = sum(s.ms for s in wl.batch_types(REPT).stages if s.kind == "cpu" and s.role == "self")
    assert float(top["cpu_utilization_ratio"]) == pytest.approx(
        REPT.blocks_per_s * own_ms * TOPO.cpu_factor / 1000, rel=0.02)
    # the threshold report shows its CPU in exactly the job's hours, and only on its day
    for day in DAYS:
        hours = [int(r["time_of_day"][:2]) for r in run_report(reader, "threshold", system=SYSTEM, day=day)
                 if r["cpu"] == REPT_PROC.cpu]
        assert hours == (list(range(a, b)) if day == WEDNESDAY else []), day
    procs = reader.execute("SELECT DISTINCT subject FROM measure.report_threshold_items(%s, %s, NULL, 'process') "
                           "WHERE item = 'busy_max'", (SYSTEM, WEDNESDAY)).fetchall()
    assert [s for s, in procs if s.endswith(" $REPT")], procs


# ------------------------------------------------------------------ dashboard and alerts

def dashboard_variables(conn: psycopg.Connection, path, tr: TimeRange) -> tuple[dict, list[str]]:
    """The values Grafana gives the dashboard's variables: the first system, All otherwise."""
    import json

    values: dict[str, object] = {}
    multi: list[str] = []
    for v in json.loads(path.read_text(encoding="utf-8"))["templating"]["list"]:
        if v["type"] != "query":
            continue
        cur = conn.execute(expand(v["query"], tr, variables=values, multi=multi))
        names = [d.name for d in cur.description]
        vals = [str(r[names.index("__value") if "__value" in names else 0]) for r in cur.fetchall()]
        if v.get("multi") or v.get("includeAll"):
            values[v["name"]], multi = vals, [*multi, v["name"]]
        else:
            values[v["name"]] = vals[0]
    return values, multi


def test_threshold_dashboard_panels_are_not_empty(reader) -> None:
    path = DASHBOARDS / "threshold.json"
    tr = TimeRange(START, END)
    values, multi = dashboard_variables(reader, path, tr)
    assert values["system"] == SYSTEM
    for q in queries_of(path):
        cur = reader.execute(expand(q.sql, tr, variables=values, multi=multi, interval_ns=3600 * 10**9))
        rows = cur.fetchall()
        assert rows, q.where
        names = [d.name for d in cur.description]
        if q.kind == "table" and "/Threshold report" in q.where:
            assert {r[names.index("CPU #")] for r in rows} >= LINE_CPUS | {REPT_PROC.cpu}
        if q.kind == "table" and "/Health verdict" in q.where:  # Thursday, the last day: $DATA2, no $REPT
            assert {r[names.index("indicator")] for r in rows if r[names.index("problem")] == "YES"} == {
                "cpu_load_balance", "disc_over_utilised", "disc_queuing"}
        if q.kind == "annotation":
            assert {r[names.index("tags")] for r in rows} >= {"cpu,threshold", "disc,threshold",
                                                               "process,threshold"}


def fired_at(conn: psycopg.Connection, end: dt.datetime) -> dict[str, dict[str, int]]:
    """Each alert rule's query A evaluated at `end`: broken thresholds per entity and subject."""
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for q in alert_queries():
        if "measuredb-threshold-" not in q.where:
            continue  # the exception rule: no earlier week to learn from here
        tr = TimeRange(end - dt.timedelta(seconds=q.extra["range_s"]), end)
        entity = q.where.split("measuredb-threshold-")[1].split("/")[0]
        for _t, _system, subject, breaches in conn.execute(expand_macros(q.sql, tr)).fetchall():
            out[entity][subject] = breaches
    return out


def test_alert_rules_fire_in_the_peak_and_on_the_report_job(reader, demo_db) -> None:
    with psycopg.connect(demo_db) as c:
        hour = c.execute("SELECT hour_at FROM _measure.hour_breach WHERE hour_at < %s GROUP BY hour_at "
                         "HAVING count(DISTINCT entity) FILTER (WHERE entity IN ('cpu', 'disc')) = 2 "
                         "ORDER BY hour_at LIMIT 1", (local(WEDNESDAY, 0),)).fetchone()
    assert hour, "no hour of Tuesday breaks a CPU and a disc threshold"
    fired = fired_at(reader, hour[0] + dt.timedelta(hours=1))
    assert max(fired["cpu"].values()) > 0 and fired["disc"][HOT] > 0
    # at the end of the report job: its CPU and the process itself
    fired = fired_at(reader, local(WEDNESDAY, REPT.hours[1]))
    assert fired["cpu"][str(REPT_PROC.cpu)] > 0
    assert [n for s, n in fired["process"].items() if s.endswith(" $REPT") and n > 0], fired["process"]


# ------------------------------------------------------------------ growth

def test_transactions_grow_day_over_day_as_the_workload_says(reader) -> None:
    shape = WORKLOAD.shape.anchored(START.date())
    begun = {}
    for day in DAYS:  # the same hours of every day of the window: 06:00 to 18:00
        (n,) = reader.execute("SELECT sum(home_trans) FROM measure.tmf_hour WHERE system_name = %s "
                              "AND hour_at >= %s AND hour_at < %s",
                              (SYSTEM, local(day, START.hour), local(day, END.hour))).fetchone()
        begun[day] = float(n)
    for day in DAYS[1:]:
        want = wl.rate_multiplier(shape, local(day, 12)) / wl.rate_multiplier(shape, local(DAYS[0], 12))
        assert want > 1
        sigma = want * math.sqrt(1 / begun[day] + 1 / begun[DAYS[0]])  # Poisson arrivals
        assert begun[day] / begun[DAYS[0]] == pytest.approx(want, abs=4 * sigma), day


def test_capacity_forecast_and_trend_see_the_growth(reader) -> None:
    lo, hi = DAYS[0], DAYS[-1]
    rows = {(r["entity"], r["subject"]): r for r in run_report(
        reader, "capacity-forecast", system=SYSTEM, date_from=lo, date_to=hi)}
    capacity = 70
    for cpu in sorted(LINE_CPUS):
        peaks = dict(reader.execute("SELECT shift_day, max(busy_max) FROM measure.cpu_shift WHERE system_name = %s "
                                    "AND cpu = %s AND shift_day BETWEEN %s AND %s GROUP BY 1",
                                    (SYSTEM, cpu, lo, hi)).fetchall())
        check_fit(rows["cpu", str(cpu)], peaks, lo, hi, capacity)
    peaks = dict(reader.execute("SELECT shift_day, max(busy_max) FROM measure.disc_shift WHERE system_name = %s "
                                "AND volume = %s AND shift_day BETWEEN %s AND %s GROUP BY 1",
                                (SYSTEM, HOT, lo, hi)).fetchall())
    check_fit(rows["disc", HOT], peaks, lo, hi, capacity)
    # the CPU trend report: a line a day; on the report job's day its CPU has the longest queue
    trend = run_report(reader, "cpu-trend", system=SYSTEM, date_from=lo, date_to=hi)
    assert [t["day"] for t in trend] == DAYS
    for t in trend:
        assert t["cpu"] == REPT_PROC.cpu if t["day"] == WEDNESDAY else t["cpu"] in LINE_CPUS, t
        assert t["cpu_type"] == TOPO.cpu_type


def check_fit(row: dict, peaks: dict[dt.date, Decimal], lo: dt.date, hi: dt.date, capacity: float) -> None:
    """The forecast's least-squares line through the daily peaks rises and crosses the
    capacity after the window, on the date its own arithmetic gives."""
    xs = [(d - lo).days for d in sorted(peaks)]
    ys = [float(peaks[d]) for d in sorted(peaks)]
    assert len(xs) == row["days"] == (hi - lo).days + 1
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    icpt = my - slope * mx
    assert float(row["slope_per_day"]) == pytest.approx(slope, abs=1e-6)
    assert slope > 0, (row, peaks)
    assert row["crossing_date"] == lo + dt.timedelta(days=math.ceil((capacity - icpt) / slope))
    assert hi < row["crossing_date"], row
    assert row["crossing_early"] <= row["crossing_date"] <= row["crossing_late"]
