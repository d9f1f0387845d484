"""Copies of the real simulated node: every busy and queue delta of every interval record
equals what the node accumulated into that counter record during the interval, and the
interval deltas of a measurement add up to its stop copy minus its start copy."""

from __future__ import annotations

from collections import defaultdict
from functools import partial

import numpy as np

from collector.measure.contab import ContabBuilder
from collector.measure.copies import IntervalBuilder
from collector.measure.measmon import COPY_START, COPY_STOP, Measmon, Measurement
from collector.node.engine import Node
from core.catalog import KIND_BUSY, KIND_QBUSY, KIND_QUEUE, load_catalog

SECOND = 1_000_000
T0 = 1_767_254_400_000_000 + 10 * 3600 * SECOND  # 2026-01-01 18:00 UTC = 10:00 at \DEMO
CAT = load_catalog()


class Shadow(Measmon):
    """MEASMON that also books every XCTR bump by (entity, record, time) for the test."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.booked: list[tuple[str, np.ndarray, np.ndarray, int]] = []

    def xctr(self, entity, slots, xptr, acc, level, peak, at_us) -> None:
        super().xctr(entity, slots, xptr, acc, level, peak, at_us)
        self.booked.append((entity, xptr.copy(), acc.copy(), at_us))


def test_busy_and_queue_deltas_equal_what_the_node_accumulated() -> None:
    node = Node("demo", "demo", seed=5, start_us=T0, step_us=10 * SECOND)
    copies, intervals = [], []
    builder = IntervalBuilder(CAT)

    def sink(copy) -> None:
        copies.append(copy)
        b = builder.on_copy(copy)
        if b is not None:
            intervals.append(b)

    mon = Shadow(node, sink, catalog=CAT)
    b = ContabBuilder()
    for entity in ("cpu", "disc", "process", "line", "tmf"):
        b.add(entity, None)
    mon.add(Measurement(1, "CHECK", b.build(), start_us=T0, stop_us=T0 + 600 * SECOND,
                        interval_us=60 * SECOND))
    mon.run_until(T0 + 600 * SECOND)

    rec_of = {(c.entity, int(s), int(a)): int(r) for c in copies
              for s, a, r in zip(c.slots, c.alloc_us, c.recs, strict=True)}
    checked = 0
    for entity in ("cpu", "disc", "process", "line", "tmf"):
        kinds = np.asarray(CAT.entity(entity).kinds)
        timed = np.isin(kinds, (KIND_BUSY, KIND_QUEUE, KIND_QBUSY))
        booked = defaultdict(partial(np.zeros, len(kinds)))       # (record, interval end) → Σ acc
        ends = sorted({bt.to_us for bt in intervals if bt.entity == entity})
        for e, xptr, acc, at in mon.booked:
            if e != entity:
                continue
            end = next(t for t in ends if t >= at)
            for r, row in zip(xptr.tolist(), acc, strict=True):
                booked[(r, end)] += row
        for bt in (x for x in intervals if x.entity == entity):
            for i, slot in enumerate(bt.slots.tolist()):
                rec = rec_of[(entity, slot, int(bt.alloc_us[i]))]
                expect = booked[(rec, bt.to_us)][timed]
                got = bt.values[i, timed]
                assert np.all(np.abs(got - expect) <= 1.0), (entity, slot, bt.to_us)
                checked += int(timed.sum())
    assert checked > 1000

    # Σ interval deltas = stop copy − start copy, for every counter that is a delta
    for entity in ("cpu", "disc", "process"):
        start = next(c for c in copies if c.entity == entity and c.kind == COPY_START)
        stop = next(c for c in copies if c.entity == entity and c.kind == COPY_STOP)
        kinds = [c.kind for c in CAT.entity(entity).counters]
        deltas = np.array([k not in ("snapshot", "maxq", "maxvalue") for k in kinds])
        total = {}
        for bt in (x for x in intervals if x.entity == entity):
            for i, slot in enumerate(bt.slots.tolist()):
                total[slot] = total.get(slot, 0) + bt.values[i]
        for i, slot in enumerate(stop.slots.tolist()):
            if slot in start.slots.tolist():
                j = start.slots.tolist().index(slot)
                assert (total[slot][deltas] == (stop.values[i] - start.values[j])[deltas]).all()
