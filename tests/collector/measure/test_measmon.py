"""MEASMON/MEASCTL: shared counter records, copies, intervals, limits (no database)."""

from __future__ import annotations

import numpy as np
import pytest

from collector.measure.contab import ContabBuilder
from collector.measure.copies import IntervalBuilder
from collector.measure.measmon import (
    COPY_ENTITY_STOP,
    COPY_INITIAL,
    COPY_START,
    COPY_STOP,
    ERROR_NO_CID,
    MAX_MEASUREMENTS,
    Measmon,
    Measurement,
    MeasureStateError,
)
from core.catalog import load_catalog
from tests.collector.measure.fakes import SECOND, FakeNode

CAT = load_catalog()
PROC = CAT.entity("process")
CPU = CAT.entity("cpu")
BUSY = PROC.index("cpu_busy_time")
SENT = PROC.index("messages_sent")
CPU_BUSY = CPU.index("cpu_busy_time")
CPU_Q = CPU.index("cpu_qtime")


def contab(*specs: tuple[str, dict | None]):
    b = ContabBuilder()
    for etype, fields in specs:
        b.add(etype, fields)
    return b.build()


class Recorder:
    def __init__(self) -> None:
        self.copies = []
        self.intervals = []
        self.builder = IntervalBuilder(CAT)

    def __call__(self, copy) -> None:
        self.copies.append(copy)
        batch = self.builder.on_copy(copy)
        if batch is not None:
            self.intervals.append(batch)

    def of(self, mid: int, entity: str, kind: int | None = None):
        return [c for c in self.copies if c.measurement_id == mid and c.entity == entity
                and (kind is None or c.kind == kind)]


def setup(n_cpus: int = 2, **kw):
    node = FakeNode(n_cpus=n_cpus)
    rec = Recorder()
    mon = Measmon(node, rec, **kw)
    return node, mon, rec


def test_cpu_records_exist_from_cpu_load_and_start_copy_is_the_baseline() -> None:
    node, mon, rec = setup()
    node.advance(10 * SECOND)  # CPU counters count before any measurement
    mon.add(Measurement(1, "CPUS", contab(("cpu", None)), start_us=10 * SECOND, interval_us=5 * SECOND))
    mon.run_until(20 * SECOND)
    start = rec.of(1, "cpu", COPY_START)[0]
    assert start.values[:, CPU_BUSY].tolist() == [5 * SECOND, 5 * SECOND]
    assert start.alloc_us.tolist() == [0, 0]
    intervals = [b for b in rec.intervals if b.entity == "cpu"]
    assert [b.to_us for b in intervals] == [15 * SECOND, 20 * SECOND]
    for b in intervals:
        assert b.values[:, CPU_BUSY].tolist() == [2_500_000, 2_500_000]
        assert b.values[:, CPU_Q].tolist() == [10_000_000, 10_000_000]  # AQL 2 × 5 s


def test_copy_mid_busy_period_includes_time_up_to_the_copy() -> None:
    node, mon, rec = setup()
    mon.add(Measurement(1, "P", contab(("process", {"process_name": "$TCP1"})), start_us=0))
    mon.run_until(2_500_000)  # the fake node's last step ended at 2.5 s, busy
    active = mon.read_active("process", [0], at_us=2_700_000)
    assert active.values[0, BUSY] == 2_700_000  # 0.2 s past the last bump still counts
    assert active.values[0, SENT] == round(3 * 2.5)


def test_two_overlapping_measurements_share_one_record() -> None:
    node, mon, rec = setup()
    spec = contab(("process", {"process_name": "$APP1"}))
    mon.add(Measurement(1, "A", spec, start_us=0, interval_us=10 * SECOND))
    mon.run_until(15 * SECOND)
    mon.add(Measurement(2, "B", spec, start_us=15 * SECOND, interval_us=4 * SECOND))
    slot = 1
    xptr = int(node.tables["process"].xptr[slot])
    assert xptr >= 0
    # B shares A's record: initial-value copy of the nonzero record, no new allocation
    init = rec.of(2, "process", COPY_INITIAL)
    assert len(init) == 1 and init[0].recs.tolist() == [xptr]
    assert init[0].values[0, BUSY] == 15 * SECOND
    space = mon.spaces["process"]
    assert int(space.sharemask[xptr]) == 0b11
    mon.run_until(23 * SECOND)
    b_int = [b for b in rec.intervals if b.measurement_id == 2 and b.entity == "process"]
    assert [(int(b.from_us[0]), b.to_us) for b in b_int] == [(15 * SECOND, 19 * SECOND), (19 * SECOND, 23 * SECOND)]
    assert [int(b.values[0, BUSY]) for b in b_int] == [4 * SECOND, 4 * SECOND]
    # stopping A leaves B intact
    mon.stop(1, 23 * SECOND)
    assert int(space.sharemask[xptr]) == 0b10
    assert int(node.tables["process"].xptr[slot]) == xptr
    mon.run_until(27 * SECOND)
    assert int(rec.intervals[-1].values[0, BUSY]) == 4 * SECOND
    # the record is freed when the last measurement stops
    mon.stop(2, 27 * SECOND)
    assert int(node.tables["process"].xptr[slot]) == -1
    assert not space.in_use[xptr]


def test_interval_deltas_sum_to_stop_minus_start() -> None:
    node, mon, rec = setup()
    mon.add(Measurement(1, "ALL", contab(("cpu", None), ("process", None)), start_us=3 * SECOND,
                        stop_us=60 * SECOND, interval_us=7 * SECOND))
    mon.run_until(100 * SECOND)
    for entity in ("cpu", "process"):
        start = rec.of(1, entity, COPY_START)[0]
        stop = rec.of(1, entity, COPY_STOP)[0]
        total = sum(b.values for b in rec.intervals if b.entity == entity)
        kinds = [c.kind for c in CAT.entity(entity).counters]
        deltas = np.array([k not in ("snapshot", "maxq", "maxvalue") for k in kinds])
        assert (total[:, deltas] == (stop.values - start.values)[:, deltas]).all()
        assert (total[:, deltas] != 0).any()
    # a stop at a non-multiple of the interval: intervals 3-10-…-59 then 59-60
    tos = [b.to_us // SECOND for b in rec.intervals if b.entity == "cpu"]
    assert tos == [10, 17, 24, 31, 38, 45, 52, 59, 60]
    assert mon.measurements[1].state == "stopped"


def test_transient_entity_start_and_stop_copies() -> None:
    node, mon, rec = setup()
    mon.add(Measurement(1, "P", contab(("process", None)), start_us=0, interval_us=10 * SECOND))
    mon.run_until(12 * SECOND)
    slot = node.start_process("$JOB1")
    mon.run_until(16 * SECOND)
    node.stop_process(slot)
    mon.run_until(20 * SECOND)
    stops = rec.of(1, "process", COPY_ENTITY_STOP)
    assert len(stops) == 1 and stops[0].slots.tolist() == [slot]
    job = [b for b in rec.intervals if b.entity == "process" and slot in b.slots.tolist()]
    assert [(int(b.from_us[0]), b.to_us, b.closing_kind) for b in job] == [
        (12 * SECOND, 16 * SECOND, COPY_ENTITY_STOP)]
    assert node.tables["process"].xptr[slot] == -1
    last = [b for b in rec.intervals if b.to_us == 20 * SECOND]
    assert slot not in last[0].slots.tolist()


def test_cpu_failure_loses_records_and_reload_restarts_counters() -> None:
    node, mon, rec = setup()
    mon.add(Measurement(1, "C", contab(("cpu", None)), start_us=0, interval_us=10 * SECOND))
    mon.run_until(12 * SECOND)
    mon.cpu_failed(1, 12 * SECOND)
    node.tables["cpu"].alive[1] = False
    mon.run_until(20 * SECOND)
    assert rec.intervals[-1].slots.tolist() == [0]
    node.tables["cpu"].alive[1] = True
    mon.cpu_reloaded(1, 20 * SECOND)
    mon.run_until(30 * SECOND)
    last = rec.intervals[-1]
    assert sorted(last.slots.tolist()) == [0, 1]
    cpu1 = last.slots.tolist().index(1)
    assert last.from_us[cpu1] == 20 * SECOND and last.alloc_us[cpu1] == 20 * SECOND
    assert last.values[cpu1, CPU_BUSY] == 5 * SECOND


def test_cid_limit_gives_error_1_and_the_rest_is_measured() -> None:
    node, mon, rec = setup(cids_per_cpu=1)  # CPU 0 holds its CPU record already
    mon.add(Measurement(1, "P", contab(("process", None)), start_us=0))
    errors = [c for c in rec.copies if c.error]
    assert [(c.entity, c.error, c.slots.tolist()) for c in errors] == [("process", ERROR_NO_CID, [0]),
                                                                       ("process", ERROR_NO_CID, [1])]
    assert mon.status(1)["not_allocated"] == {"process:1": 2}


def test_at_most_64_measurements() -> None:
    node, mon, rec = setup()
    for i in range(MAX_MEASUREMENTS):
        mon.add(Measurement(i + 1, f"M{i}", contab(("cpu", {"cpu": 0})), start_us=0))
    with pytest.raises(MeasureStateError, match="64 measurements are already running"):
        mon.add(Measurement(99, "ONE-TOO-MANY", contab(("cpu", None)), start_us=0))


def test_status_counts_entities_space_and_copies() -> None:
    node, mon, rec = setup()
    mon.add(Measurement(1, "S", contab(("cpu", None), ("process", None)), start_us=0, interval_us=5 * SECOND))
    mon.run_until(10 * SECOND)
    st = mon.status(1)
    assert st["entities"] == {"cpu": 2, "process": 2}
    assert st["cids"] == 4
    assert st["copies_written"] == 4 * 3  # start + two intervals
    words = 2 * (4 * len(CPU.counters) + 8) + 2 * (4 * len(PROC.counters) + 8)
    assert st["counter_space_words"] == words
    mon.stop(1, 10 * SECOND)
    assert mon.status(1)["counter_space_words"] == words  # usage record at stop


def test_user_counter_bumps() -> None:
    node, mon, rec = setup()
    ud = node.tables["userdef"]
    slot = ud.add(cpu=1, pin=11, process_name="$APP1", program_file_name="$PROGS.SERVER1.APP",
                  name="RESP-TIME", index=0)
    b = ContabBuilder()
    b.add("userdef", {"program_file_name": "$PROGS.SERVER1.*"})
    b.add_counter("RESP-TIME", "$PROGS.SERVER1.*", "QUEUE")
    mon.add(Measurement(1, "U", b.build(), start_us=0))
    assert mon.counter_bump_init(slot) >= 0
    assert mon.counter_bump(slot, "INCQUEUE", 0, 1 * SECOND)
    assert mon.counter_bump(slot, "INCQUEUE", 0, 2 * SECOND)
    assert mon.counter_bump(slot, "DEQUEUE", 0, 4 * SECOND)
    value = mon.read_active("userdef", [slot], at_us=5 * SECOND).values[0]
    e = CAT.entity("userdef")
    assert value[e.index("time_value")] == 1 * SECOND + 2 * 2 * SECOND + 1 * SECOND  # ∫ queue length
    assert value[e.index("max_value")] == 2
    with pytest.raises(ValueError, match="bump type 'PUSH'"):
        mon.counter_bump(slot, "push", 0, 5 * SECOND)
    mon.stop(1, 6 * SECOND)
    assert mon.counter_bump_init(slot) == -1
    assert mon.counter_bump(slot, "INC", 0, 7 * SECOND) is False
