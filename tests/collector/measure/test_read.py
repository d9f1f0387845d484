"""MEASREAD semantics over a small hand-built set of interval records, exact values.

Two CPUs of system \\TEST, one measurement with a 60 s interval from T0:
  CPU 0: three intervals [T0, +60 s], [+60, +120], [+120, +180]
  CPU 1: two intervals   [T0, +60 s], [+60, +120]
  one USERDEF element (a BUSY user counter): one interval [T0, +60 s]
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import psycopg
import pytest

from collector.measure.read import (
    Condition,
    GivenRecord,
    ReadError,
    ReadQuery,
    difference,
    read,
    read_given,
    select_entities,
)
from core.catalog import load_catalog

T0 = datetime(2024, 5, 1, tzinfo=UTC)
S = timedelta(seconds=1)
CPU = load_catalog().entity("cpu")
USERDEF = load_catalog().entity("userdef")
CPU0, CPU1, UD = 1001, 1002, 2001


def _cpu_counters(**values: int) -> list[int]:
    arr = [0] * len(CPU.counters)
    for name, v in values.items():
        arr[CPU.index(name)] = v
    return arr


CPU0_INTERVALS = [
    {"cpu_busy_time": 30_000_000, "cpu_qtime": 60_000_000, "cpu_qlen_max": 3, "dispatches": 600,
         "transactions": 10, "response_time": 5_000_000, "unsp_pages_start": 100, "unsp_pages_end": 110},
    {"cpu_busy_time": 45_000_000, "cpu_qtime": 120_000_000, "cpu_qlen_max": 5, "dispatches": 1200,
         "transactions": 20, "response_time": 4_000_000, "unsp_pages_start": 110, "unsp_pages_end": 120},
    {"cpu_busy_time": 15_000_000, "cpu_qtime": 0, "cpu_qlen_max": 4, "dispatches": 1800,
         "transactions": 0, "response_time": 0, "unsp_pages_start": 120, "unsp_pages_end": 130},
]
CPU1_INTERVALS = [
    {"cpu_busy_time": 6_000_000, "dispatches": 60},
    {"cpu_busy_time": 12_000_000, "dispatches": 120},
]


@pytest.fixture
def mid(conn: psycopg.Connection) -> int:
    system_id = conn.execute(
        "INSERT INTO _measure.system (system_name, system_number, time_zone) "
        "VALUES ('\\TEST', 9, 'UTC') RETURNING system_id").fetchone()[0]
    contab = {"descriptors": [{"type": "CPU"}, {"type": "USERDEF"}],
              "counters": [{"name": "BUSYCTR", "type": "BUSY"}]}
    m = conn.execute(
        "INSERT INTO _measure.measurement (system_id, name, contab, start_at, interval_us, state) "
        "VALUES (%s, 'TESTREAD', %s, %s, 60000000, 'running') RETURNING measurement_id",
        (system_id, json.dumps(contab), T0)).fetchone()[0]
    ud_ids = {"cpu": 2, "pin": 5, "process_name": "$APP", "program_file_name": "$SYSTEM.APP.SRV",
              "priority": 150, "name": "BUSYCTR", "index": 0}
    for eid, code, key, ids, cpu in [(CPU0, 1, "cpu=0", {"cpu": 0}, 0), (CPU1, 1, "cpu=1", {"cpu": 1}, 1),
                                     (UD, 4, "ud", ud_ids, 2)]:
        conn.execute("INSERT INTO _measure.entity (entity_id, system_id, type_code, key, ids, cpu, first_seen_at)"
                     " VALUES (%s, %s, %s, %s, %s, %s, %s)", (eid, system_id, code, key, json.dumps(ids), cpu, T0))
    rows = []
    for eid, intervals in ((CPU0, CPU0_INTERVALS), (CPU1, CPU1_INTERVALS)):
        for k, values in enumerate(intervals):
            rows.append((eid, 1, k, _cpu_counters(**values), eid - CPU0))
    ud = [0] * len(USERDEF.counters)
    ud[USERDEF.index("time_value")] = 30_000_000
    rows.append((UD, 4, 0, ud, 2))
    for eid, code, k, counters, cpu in rows:
        conn.execute(
            "INSERT INTO _measure.interval_record (measurement_id, entity_id, record_at, from_at, to_at,"
            " delta_us, closing_kind, system_id, type_code, cpu, counters)"
            " VALUES (%s, %s, %s, %s, %s, 60000000, 3, %s, %s, %s, %s)",
            (m, eid, T0 - 3600 * S, T0 + 60 * k * S, T0 + 60 * (k + 1) * S, system_id, code, cpu, counters))
    return m


def values(result, name):
    return [r.values[name] for r in result.records]


# ------------------------------------------------------------------ which records


def test_default_is_most_recent_record_per_entity(conn, mid):
    r = read(conn, mid, ReadQuery("CPU", counters=["CPU-BUSY-TIME", "dispatches"]))
    assert r.mode == "latest"
    assert [x.ids["cpu"] for x in r.records] == [0, 1]
    assert [(x.from_at, x.to_at) for x in r.records] == [(T0 + 120 * S, T0 + 180 * S), (T0 + 60 * S, T0 + 120 * S)]
    assert values(r, "cpu_busy_time") == [25.0, 20.0]
    assert values(r, "dispatches") == [30.0, 2.0]
    assert list(r.records[0].values) == ["cpu_busy_time", "dispatches"]


def test_rate_off_gives_raw_deltas(conn, mid):
    r = read(conn, mid, ReadQuery("cpu", counters=["cpu_busy_time", "DISPATCHES"], rate=False))
    assert values(r, "cpu_busy_time") == [15_000_000, 12_000_000]
    assert values(r, "dispatches") == [1800, 120]


def test_summary_of_whole_measurement(conn, mid):
    r = read(conn, mid, ReadQuery("cpu", from_at=T0 - 3600 * S, counters=[
        "cpu_busy_time", "cpu_qtime", "cpu_qlen_max", "dispatches", "response_time",
        "unsp_pages_start", "unsp_pages_end"]))
    assert r.mode == "summary"
    c0, c1 = r.records
    assert (c0.from_at, c0.to_at, c0.delta_us, c0.intervals) == (T0, T0 + 180 * S, 180_000_000, 3)
    assert c0.values == {"cpu_busy_time": 50.0, "cpu_qtime": 1.0, "cpu_qlen_max": 4,
                         "dispatches": 20.0, "response_time": 300_000.0,
                         "unsp_pages_start": 100, "unsp_pages_end": 130}
    assert (c1.delta_us, c1.values["cpu_busy_time"], c1.values["response_time"]) == (120_000_000, 15.0, None)


def test_summary_raw_sums_and_last_values(conn, mid):
    r = read(conn, mid, ReadQuery("cpu", to_at=T0 + 180 * S, rate=False,
                                  counters=["cpu_busy_time", "cpu_qlen_max", "transactions"]))
    assert r.records[0].values == {"cpu_busy_time": 90_000_000, "cpu_qlen_max": 4, "transactions": 30}


def test_summary_window_takes_intervals_wholly_inside(conn, mid):
    r = read(conn, mid, ReadQuery("cpu", from_at=T0 + 60 * S, to_at=T0 + 180 * S, counters=["cpu_busy_time"]))
    assert values(r, "cpu_busy_time") == [50.0, 20.0]
    r = read(conn, mid, ReadQuery("cpu", from_at=T0 + 30 * S, to_at=T0 + 150 * S, counters=["cpu_busy_time"]))
    assert values(r, "cpu_busy_time") == [75.0, 20.0]
    assert [x.intervals for x in r.records] == [1, 1]


def test_window_snap_nearest_moves_each_end_to_the_nearest_copy(conn, mid):
    # 20 s is nearest the copy at 0, 130 s the one at 120 (inside would keep only 60-120)
    r = read(conn, mid, ReadQuery("cpu", from_at=T0 + 20 * S, to_at=T0 + 130 * S, snap="nearest",
                                  counters=["cpu_busy_time"]))
    assert [(x.from_at, x.to_at, x.intervals) for x in r.records] == [
        (T0, T0 + 120 * S, 2), (T0, T0 + 120 * S, 2)]
    assert values(r, "cpu_busy_time") == [62.5, 15.0]
    # equally near: each end widens the window (CPU 1 has no copy at 180 s)
    r = read(conn, mid, ReadQuery("cpu", from_at=T0 + 30 * S, to_at=T0 + 150 * S, snap="nearest",
                                  counters=["cpu_busy_time"]))
    assert [(x.from_at, x.to_at) for x in r.records] == [(T0, T0 + 180 * S), (T0, T0 + 120 * S)]
    assert values(r, "cpu_busy_time") == [50.0, 15.0]
    # narrower than an interval (both ends snap to 120 s): the interval overlapping it most
    r = read(conn, mid, ReadQuery("cpu", from_at=T0 + 100 * S, to_at=T0 + 130 * S, snap="nearest",
                                  counters=["cpu_busy_time"]))
    assert [(x.from_at, x.to_at) for x in r.records] == [(T0 + 60 * S, T0 + 120 * S)] * 2
    assert values(r, "cpu_busy_time") == [75.0, 20.0]
    # LISTALL over the same snapped window
    r = read(conn, mid, ReadQuery("cpu", all_records=True, from_at=T0 + 20 * S, to_at=T0 + 130 * S,
                                  snap="nearest", counters=["dispatches"], rate=False))
    assert [(x.from_at, x.ids["cpu"], x.values["dispatches"]) for x in r.records] == [
        (T0, 0, 600), (T0, 1, 60), (T0 + 60 * S, 0, 1200), (T0 + 60 * S, 1, 120)]


def test_window_snap_enclose_and_tolerance(conn, mid):
    # MEASREAD_DIFF_ timetol -1: FROM widens to the copy at or before it, TO at or after it
    r = read(conn, mid, ReadQuery("cpu", from_at=T0 + 30 * S, to_at=T0 + 90 * S, snap="enclose",
                                  counters=["cpu_busy_time"]))
    assert [(x.from_at, x.to_at) for x in r.records] == [(T0, T0 + 120 * S)] * 2
    assert values(r, "cpu_busy_time") == [62.5, 15.0]
    # timetol >= 0: both ends widen by the tolerance, whole intervals inside count
    r = read(conn, mid, ReadQuery("cpu", from_at=T0 + 30 * S, to_at=T0 + 150 * S,
                                  tolerance=30 * S, counters=["cpu_busy_time"]))
    assert values(r, "cpu_busy_time") == [50.0, 15.0]
    # no window ends at all: the whole measurement
    r = read(conn, mid, ReadQuery("cpu", summary=True, counters=["cpu_busy_time"]))
    assert r.mode == "summary" and values(r, "cpu_busy_time") == [50.0, 15.0]


def test_totals_include_and_only(conn, mid):
    q = {"summary": True, "counters": ["cpu_busy_time", "dispatches", "cpu_qlen_max"]}
    r = read(conn, mid, ReadQuery("cpu", totals="include", **q))
    assert len(r.records) == 2
    t = r.total
    assert (t.entity_id, t.from_at, t.to_at, t.delta_us, t.intervals) == (
        None, T0, T0 + 180 * S, 180_000_000, 5)
    # 108 s busy over the longest member's 180 s; 3,780 dispatches; the largest max queue
    assert t.values == {"cpu_busy_time": 60.0, "dispatches": 21.0, "cpu_qlen_max": 4}
    assert t.raw == {"cpu_busy_time": 108_000_000, "dispatches": 3780, "cpu_qlen_max": 4}
    r = read(conn, mid, ReadQuery("cpu", totals="only", rate=False, **q))
    assert r.records == [] and r.total.values["dispatches"] == 3780
    r = read(conn, mid, ReadQuery("cpu", totals="include", all_records=True, limit=None, rate=False,
                                  counters=["dispatches"]))
    assert (len(r.records), r.total.values["dispatches"], r.total.delta_us) == (5, 3780, 60_000_000)


def test_several_descriptors_id_fields_exact_values_and_unpaged_listall_by(conn, mid):
    r = read(conn, mid, ReadQuery("cpu", descriptors=[{"cpu": 1}, {"cpu": 0}]))
    assert [x.ids["cpu"] for x in r.records] == [0, 1]
    assert [x.ids["cpu"] for x in read(conn, mid, ReadQuery("cpu", descriptors=[{"cpu": 1}])).records] == [1]
    assert [x.ids["cpu"] for x in read(conn, mid, ReadQuery("cpu", by="CPU")).records] == [0, 1]
    r = read(conn, mid, ReadQuery("cpu", if_=Condition("cpu", ">", 0)))
    assert [x.ids["cpu"] for x in r.records] == [1]
    r = read(conn, mid, ReadQuery("cpu", counters=["cpu_busy_time", "cpu_qtime"], exact=True))
    assert [x.values["cpu_busy_time"] for x in r.records] == [Decimal(25), Decimal(20)]
    assert all(isinstance(x.values["cpu_qtime"], Decimal) for x in r.records)
    r = read(conn, mid, ReadQuery("cpu", all_records=True, limit=None, by="dispatches", rate=False,
                                  counters=["dispatches"]))
    assert [x.values["dispatches"] for x in r.records] == [1800, 1200, 600, 120, 60]
    assert r.next_cursor is None


def test_given_records_are_reduced_like_stored_ones(conn, mid):
    later = _cpu_counters(cpu_busy_time=9_000_000, dispatches=100, unsp_pages_start=5, unsp_pages_end=7)
    earlier = _cpu_counters(cpu_busy_time=4_000_000, dispatches=40, unsp_pages_start=3, unsp_pages_end=4)
    diff = difference(CPU, later, earlier)
    assert [diff[CPU.index(n)] for n in ("cpu_busy_time", "dispatches", "unsp_pages_start",
                                          "unsp_pages_end")] == [5_000_000, 60, 3, 7]
    assert difference(CPU, later, None) == later
    g = [GivenRecord({"cpu": 2}, T0, T0 + 10 * S, 10_000_000, diff, entity_id=7),
         GivenRecord({"cpu": 3}, T0, T0 + 10 * S, 10_000_000, _cpu_counters(dispatches=10), entity_id=8)]
    r = read_given(conn, g, ReadQuery("cpu", counters=["cpu_busy_time", "dispatches"], totals="include"))
    assert r.mode == "active"
    assert [x.values for x in r.records] == [{"cpu_busy_time": 50.0, "dispatches": 6.0},
                                             {"cpu_busy_time": 0.0, "dispatches": 1.0}]
    assert r.total.values == {"cpu_busy_time": 50.0, "dispatches": 7.0}
    r = read_given(conn, g, ReadQuery("cpu", zero_reports=False, counters=["cpu_busy_time"]))
    assert [x.ids["cpu"] for x in r.records] == [2]


def test_nearest_record_to_a_target_time(conn, mid):
    r = read(conn, mid, ReadQuery("cpu", at=T0 + 100 * S, tolerance=30 * S, counters=["cpu_busy_time"]))
    assert r.mode == "nearest"
    assert [x.to_at for x in r.records] == [T0 + 120 * S, T0 + 120 * S]
    assert values(r, "cpu_busy_time") == [75.0, 20.0]
    # equally close (to 120 s and 180 s): the earlier record
    r = read(conn, mid, ReadQuery("cpu", at=T0 + 150 * S, counters=["cpu_busy_time"]))
    assert [x.to_at for x in r.records] == [T0 + 120 * S, T0 + 120 * S]
    # the record closest to 175 s is CPU 0's last one; CPU 1 has none within 10 s
    r = read(conn, mid, ReadQuery("cpu", at=T0 + 175 * S, tolerance=10 * S))
    assert [x.ids["cpu"] for x in r.records] == [0]
    assert read(conn, mid, ReadQuery("cpu", at=T0 + 150 * S, tolerance=5 * S)).records == []


def test_listall_pages_through_every_interval_in_time_order(conn, mid):
    seen, cursor = [], None
    for _ in range(5):
        r = read(conn, mid, ReadQuery("cpu", all_records=True, limit=2, cursor=cursor,
                                      counters=["dispatches"], rate=False))
        seen += [(x.from_at, x.ids["cpu"], x.values["dispatches"]) for x in r.records]
        cursor = r.next_cursor
        if cursor is None:
            break
    assert seen == [(T0, 0, 600), (T0, 1, 60), (T0 + 60 * S, 0, 1200), (T0 + 60 * S, 1, 120),
                    (T0 + 120 * S, 0, 1800)]


def test_listall_with_if_and_window(conn, mid):
    r = read(conn, mid, ReadQuery("cpu", all_records=True, if_=Condition("DISPATCHES", ">", 15),
                                  counters=["dispatches"]))
    assert [(x.from_at, x.values["dispatches"]) for x in r.records] == [(T0 + 60 * S, 20.0), (T0 + 120 * S, 30.0)]
    r = read(conn, mid, ReadQuery("cpu", all_records=True, from_at=T0 + 60 * S, to_at=T0 + 120 * S))
    assert [(x.from_at, x.ids["cpu"]) for x in r.records] == [(T0 + 60 * S, 0), (T0 + 60 * S, 1)]
    # the page fills, the next one holds the rest
    r = read(conn, mid, ReadQuery("cpu", all_records=True, limit=1, if_=Condition("dispatches", ">", 15)))
    assert len(r.records) == 1 and r.next_cursor
    r2 = read(conn, mid, ReadQuery("cpu", all_records=True, limit=1, cursor=r.next_cursor,
                                   if_=Condition("dispatches", ">", 15)))
    assert [x.from_at for x in r2.records] == [T0 + 120 * S] and r2.next_cursor is None


def test_by_orders_and_if_filters(conn, mid):
    q = {"counters": ["cpu_busy_time"], "by": "CPU-BUSY-TIME"}
    assert [x.ids["cpu"] for x in read(conn, mid, ReadQuery("cpu", **q)).records] == [0, 1]
    assert [x.ids["cpu"] for x in read(conn, mid, ReadQuery("cpu", descending=False, **q)).records] == [1, 0]
    r = read(conn, mid, ReadQuery("cpu", counters=["dispatches"], if_=Condition("cpu_busy_time", ">", 22)))
    assert [x.ids["cpu"] for x in r.records] == [0]
    assert list(r.records[0].values) == ["dispatches"]  # IF counter not shown unless asked
    r = read(conn, mid, ReadQuery("cpu", rate=False, if_=Condition("cpu_busy_time", "<=", 12_000_000)))
    assert [x.ids["cpu"] for x in r.records] == [1]


def test_keyset_paging_with_by(conn, mid):
    r = read(conn, mid, ReadQuery("cpu", by="cpu_busy_time", descending=False, limit=1))
    assert [x.ids["cpu"] for x in r.records] == [1] and r.next_cursor
    r = read(conn, mid, ReadQuery("cpu", by="cpu_busy_time", descending=False, limit=1, cursor=r.next_cursor))
    assert [x.ids["cpu"] for x in r.records] == [0] and r.next_cursor is None


def test_descriptor_selects_entities(conn, mid):
    r = read(conn, mid, ReadQuery("cpu", descriptor={"cpu": 1}))
    assert [x.ids["cpu"] for x in r.records] == [1]
    r = read(conn, mid, ReadQuery("cpu", descriptor={"cpu": "*"}))
    assert len(r.records) == 2
    system_id = conn.execute("SELECT system_id FROM _measure.system WHERE system_name = '\\TEST'").fetchone()[0]
    assert [e.entity_id for e in select_entities(conn, system_id, "PROCESS", {})] == []


def test_zero_reports_exclude(conn, mid):
    assert len(read(conn, mid, ReadQuery("cpu", counters=["swaps"])).records) == 2
    assert read(conn, mid, ReadQuery("cpu", counters=["swaps"], zero_reports=False)).records == []


def test_userdef_time_value_is_rated_by_its_counter_type(conn, mid):
    r = read(conn, mid, ReadQuery("userdef", counters=["TIME-VALUE"]))
    assert values(r, "time_value") == [50.0]  # BUSY: % of the interval
    assert r.records[0].kinds == {"time_value": "busy"}
    r = read(conn, mid, ReadQuery("userdef", counters=["TIME-VALUE"], summary=True, totals="only"))
    assert (r.records, r.total.values, r.total.kinds) == ([], {"time_value": 50.0}, {"time_value": "busy"})


@pytest.mark.parametrize(
    ("query", "field", "status", "message"),
    [
        (ReadQuery("cpu", counters=["CPU-BUSY"]), "counters", 404, "unknown counter 'CPU-BUSY' for entity CPU"),
        (ReadQuery("cpu", descriptor={"cpu": 99}), "descriptor.cpu", 422, "field 'cpu' must be an integer 0-15"),
        (ReadQuery("cpu", descriptor={"pin": 3}), "descriptor.pin", 422, "not an identifier of CPU"),
        (ReadQuery("cpu", from_at=T0 + 60 * S, to_at=T0), "from_at", 422, "swap from_at and to_at"),
        (ReadQuery("cpu", at=T0, from_at=T0), "at", 422, "not both"),
        (ReadQuery("cpu", tolerance=S), "tolerance", 422, "needs a target time"),
        (ReadQuery("cpu", by="nope"), "by", 404, "unknown counter"),
        (ReadQuery("cpu", by="swaps", all_records=True), "by", 422, "LISTALL"),
        (ReadQuery("cpu", from_at=T0, snap="closest"), "snap", 422, "snap must be one of"),
        (ReadQuery("cpu", from_at=T0, snap="nearest", tolerance=S), "tolerance", 422, "inside"),
        (ReadQuery("cpu", all_records=True, totals="include"), "totals", 422, "unpaged"),
        (ReadQuery("cpu", summary=True, totals="some"), "totals", 422, "totals must be one of"),
        (ReadQuery("cpu", if_=Condition("swaps", "!", 1)), "if_op", 422, "must be one of"),
        (ReadQuery("cpu", cursor="%%%"), "cursor", 422, "cursor"),
        (ReadQuery("cpu", limit=0), "limit", 422, "limit must be"),
        (ReadQuery("nosuch"), "entity", 422, "unknown entity type"),
    ],
)
def test_errors_name_the_field(conn, mid, query, field, status, message):
    with pytest.raises(ReadError) as exc:
        read(conn, mid, query)
    assert (exc.value.field, exc.value.status) == (field, status)
    assert message in exc.value.message


def test_unknown_measurement(conn, mid):
    with pytest.raises(ReadError) as exc:
        read(conn, mid + 1000, ReadQuery("cpu"))
    assert (exc.value.field, exc.value.status) == ("measurement_id", 404)
