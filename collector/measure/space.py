"""Counter records: MEASCTL's counter space for one entity type.

A counter record holds, per counter, an accumulated value and the internal state MEASURE keeps
for busy and queue counters: the current level (busy flag, queue length) and the time up to
which the accumulated value is closed. A copy converts the state to 64-bit values at the copy
time: ``value = acc + level × (t − since)`` for busy, queue and queue-busy counters, so a copy
taken mid-busy-period or mid-queue includes the time up to the copy. Max-queue counters hold
the largest queue length of their queue counter since the record was allocated (they cannot be
reset, as in MEASURE); snapshot counters hold their current level.

One record may be shared by up to 64 measurements; its CID entry carries a 64-bit sharemask
(bit m = measurement slot m). Records are rows of numpy arrays; the node's XCTR bump is
three vectorised array updates.
"""

from __future__ import annotations

import numpy as np

from core.catalog import (
    KIND_BUSY,
    KIND_ELAPSED,
    KIND_MAXQ,
    KIND_MAXVALUE,
    KIND_QBUSY,
    KIND_QUEUE,
    KIND_SNAPSHOT,
    EntityDef,
)

TIMED_KINDS = (KIND_BUSY, KIND_QUEUE, KIND_QBUSY, KIND_ELAPSED)


class CounterSpace:
    """All counter records of one entity type (records of every CPU; MEASCTL accounts per CPU)."""

    def __init__(self, entity: EntityDef, capacity: int = 64) -> None:
        self.entity = entity
        self.n_counters = len(entity.counters)
        kinds = np.asarray(entity.kinds)
        self.timed = np.isin(kinds, TIMED_KINDS)
        if entity.name == "userdef":
            # A user counter's kind is its TYPE, chosen at ADD COUNTER time. Treating the value
            # as timed is right for every TYPE: ACCUM and FACCUM counters never set a level.
            self.timed[entity.index("time_value")] = True
        self.snapshot = kinds == KIND_SNAPSHOT
        self.maxq_cols = np.flatnonzero((kinds == KIND_MAXQ) | (kinds == KIND_MAXVALUE))
        # the queue counter each max-queue counter tracks (itself for max-value counters)
        # (a user counter's MAX-VALUE tracks its TIME-VALUE, whatever the counter TYPE)
        own = entity.index("time_value") if entity.name == "userdef" else None
        self.maxq_src = np.array(
            [entity.index(c.max_of) if c.max_of else (own if own is not None else c.position)
             for c in entity.counters if c.position in set(self.maxq_cols.tolist())],
            dtype=np.int64,
        )
        self.cap = 0
        self.acc = np.zeros((0, self.n_counters))
        self.level = np.zeros((0, self.n_counters))
        self.peak = np.zeros((0, self.n_counters))
        self.since = np.zeros(0, dtype=np.int64)
        self.alloc_us = np.zeros(0, dtype=np.int64)
        self.sharemask = np.zeros(0, dtype=np.uint64)
        self.slot = np.zeros(0, dtype=np.int64)  # the entity's slot in the node's table
        self.cpu = np.zeros(0, dtype=np.int64)
        self.in_use = np.zeros(0, dtype=bool)
        self._free: list[int] = []
        self._grow(capacity)

    # ------------------------------------------------------------------ allocation

    def _grow(self, need: int) -> None:
        if need <= self.cap:
            return
        cap = max(need, 2 * self.cap, 16)
        c = self.n_counters

        def widen(a: np.ndarray, shape: tuple[int, ...], fill: float = 0) -> np.ndarray:
            new = np.full(shape, fill, dtype=a.dtype)
            new[: a.shape[0]] = a
            return new

        self.acc = widen(self.acc, (cap, c))
        self.level = widen(self.level, (cap, c))
        self.peak = widen(self.peak, (cap, c))
        self.since = widen(self.since, (cap,))
        self.alloc_us = widen(self.alloc_us, (cap,))
        self.sharemask = widen(self.sharemask, (cap,))
        self.slot = widen(self.slot, (cap,), -1)
        self.cpu = widen(self.cpu, (cap,), -1)
        self.in_use = widen(self.in_use, (cap,))
        self._free.extend(range(cap - 1, self.cap - 1, -1))  # pop() hands out low numbers first
        self.cap = cap

    def allocate(self, slot: int, cpu: int, at_us: int) -> int:
        """A zeroed record for the entity in `slot`, allocated at at_us."""
        if not self._free:
            self._grow(self.cap + 1)
        rec = self._free.pop()
        self.acc[rec] = 0.0
        self.level[rec] = 0.0
        self.peak[rec] = 0.0
        self.since[rec] = at_us
        self.alloc_us[rec] = at_us
        self.sharemask[rec] = 0
        self.slot[rec] = slot
        self.cpu[rec] = cpu
        self.in_use[rec] = True
        return rec

    def release(self, rec: int) -> None:
        self.in_use[rec] = False
        self.sharemask[rec] = 0
        self.slot[rec] = -1
        self._free.append(rec)

    def records_of(self, bit: int) -> np.ndarray:
        """Records whose sharemask has measurement slot `bit`."""
        flag = np.uint64(1) << np.uint64(bit)
        return np.flatnonzero(self.in_use & ((self.sharemask & flag) != 0))

    # ------------------------------------------------------------------ XCTR

    def bump(self, recs: np.ndarray, acc: np.ndarray, level: np.ndarray, peak: np.ndarray,
             at_us: int) -> None:
        """The node's bump: contributions closed up to at_us, levels at at_us."""
        self.acc[recs] += acc
        self.level[recs] = level
        self.peak[recs] = np.maximum(self.peak[recs], np.maximum(peak, level))
        self.since[recs] = at_us

    def close(self, rec: int, at_us: int) -> None:
        """Bring one record's busy/queue accumulators up to at_us (before a level change)."""
        dt = max(0, at_us - int(self.since[rec]))
        self.acc[rec, self.timed] += self.level[rec, self.timed] * dt
        self.since[rec] = max(int(self.since[rec]), at_us)

    # ------------------------------------------------------------------ copy

    def read(self, recs: np.ndarray, at_us: int) -> np.ndarray:
        """The records' counters as MEASURE copies them at at_us: int64, one row per record."""
        dt = np.maximum(at_us - self.since[recs], 0).astype(np.float64)
        values = self.acc[recs] + self.level[recs] * self.timed * dt[:, None]
        if self.snapshot.any():
            values[:, self.snapshot] = self.level[np.ix_(recs, np.flatnonzero(self.snapshot))]
        if self.maxq_cols.size:
            values[:, self.maxq_cols] = self.peak[np.ix_(recs, self.maxq_src)]
        return np.rint(values).astype(np.int64)

    def nonzero(self, recs: np.ndarray, at_us: int) -> np.ndarray:
        """Which records already hold nonzero counters (a sharing measurement then writes an
        initial-value copy)."""
        return (self.read(recs, at_us) != 0).any(axis=1)

    def words_in_use(self, cpu: int | None = None) -> int:
        """Counter space in use, in 16-bit words (4 words per 64-bit counter, plus a header)."""
        sel = self.in_use if cpu is None else (self.in_use & (self.cpu == cpu))
        return int(sel.sum()) * (4 * self.n_counters + 8)
