"""Interval (structured) records, computed from consecutive copies at ingest.

For each counter record of each measurement, consecutive copies c(k-1), c(k) give one interval
record: FROM-TIMESTAMP = copy time of c(k-1), TO-TIMESTAMP = copy time of c(k), DELTA-TIME
their difference in µs, and counter deltas c(k) − c(k-1) (enform-reports.md §1). The first
interval starts at the measurement's start copy, or at its initial-value copy when the record
was shared and already nonzero (so that copy is subtracted), or at the entity's start copy for
a transient entity. Snapshot, max-queue and max-value counters are not deltas: an interval
carries their value at TO-TIMESTAMP, and ``STARTING-…`` snapshots their value at FROM.
Computing this here, once, is what lets every reduction be a plain sum (peers-lessons.md).

Each batch also says which of its intervals open a stored run with a base (``needs_base``:
the first interval of a chain, or the record's first of its UTC day; ``base`` holds the
cumulative copy that opened them) and, for entity types with ``STARTING-…`` snapshots, their
values at the closing copy (``tail``), so that the copies can be derived from the stored
runs alone (collector/sink.py, schema/100-interval-runs.sql).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from collector.measure.measmon import COPY_ENTITY_STOP, COPY_INITIAL, COPY_START, COPY_STOP, Copy
from core.catalog import KIND_MAXQ, KIND_MAXVALUE, KIND_SNAPSHOT, Catalog, EntityDef

DAY_US = 86_400_000_000


@dataclass
class IntervalBatch:
    measurement_id: int
    entity: str
    to_us: int
    closing_kind: int
    from_us: np.ndarray
    slots: np.ndarray
    cpu: np.ndarray
    alloc_us: np.ndarray
    values: np.ndarray
    needs_base: np.ndarray | None = None   # bool per interval
    base: np.ndarray | None = None         # (needs_base.sum(), k): the copy at FROM of those
    tail: np.ndarray | None = None         # (len, starts): STARTING-… values at TO, or None

    def __len__(self) -> int:
        return int(self.slots.size)


class _Baselines:
    """The previous copy of every record of one (measurement, entity type)."""

    def __init__(self, n_counters: int) -> None:
        self.values = np.zeros((0, n_counters), dtype=np.int64)
        self.at = np.zeros(0, dtype=np.int64)
        self.alloc = np.zeros(0, dtype=np.int64)
        self.valid = np.zeros(0, dtype=bool)
        self.kind = np.zeros(0, dtype=np.int16)       # copy kind of the baseline copy
        self.before = np.full(0, -1, dtype=np.int64)  # time of the copy before it (-1: none)

    def ensure(self, size: int) -> None:
        if size <= self.at.size:
            return
        cap = max(size, 2 * self.at.size, 64)
        grow = cap - self.at.size
        self.values = np.vstack([self.values, np.zeros((grow, self.values.shape[1]), np.int64)])
        self.at = np.concatenate([self.at, np.zeros(grow, np.int64)])
        self.alloc = np.concatenate([self.alloc, np.zeros(grow, np.int64)])
        self.valid = np.concatenate([self.valid, np.zeros(grow, bool)])
        self.kind = np.concatenate([self.kind, np.zeros(grow, np.int16)])
        self.before = np.concatenate([self.before, np.full(grow, -1, np.int64)])

    def __setstate__(self, state: dict) -> None:  # checkpoints pickled before these fields
        self.__dict__.update(state)
        if "kind" not in state:
            self.kind = np.full(self.at.size, 3, np.int16)
            self.before = np.full(self.at.size, -1, np.int64)


class IntervalBuilder:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._state: dict[tuple[int, str], _Baselines] = {}
        self._level_cols: dict[str, np.ndarray] = {}
        self._start_cols: dict[str, np.ndarray] = {}

    def _columns(self, entity: EntityDef) -> tuple[np.ndarray, np.ndarray]:
        if entity.name not in self._level_cols:
            kinds = np.asarray(entity.kinds)
            level = np.isin(kinds, (KIND_SNAPSHOT, KIND_MAXQ, KIND_MAXVALUE))
            start = np.array(
                [c.kind == "snapshot" and (c.measure_name.startswith("STARTING-")
                                          or c.measure_name.endswith("-START"))
                 for c in entity.counters], dtype=bool)
            self._level_cols[entity.name] = level
            self._start_cols[entity.name] = start
        return self._level_cols[entity.name], self._start_cols[entity.name]

    def baselines(self, measurement_id: int, entity: str, recs: list[int],
                  alloc_us: list[int]) -> list[tuple[list[int], int] | None] | None:
        """The latest copy of each of these counter records of a measurement, (values, copy
        time), when it is of the record's current allocation (``alloc_us`` per record);
        None for a record without one, and None when the measurement has no copy of this
        entity type yet. MEASREADACTIVE's baseline: the change since measurement start."""
        st = self._state.get((measurement_id, entity))
        if st is None:
            return None
        return [(st.values[r].tolist(), int(st.at[r]))
                if r < st.at.size and st.valid[r] and st.alloc[r] == alloc else None
                for r, alloc in zip(recs, alloc_us, strict=True)]

    def on_copy(self, copy: Copy) -> IntervalBatch | None:
        if copy.error or len(copy) == 0:
            return None
        entity = self.catalog.entity(copy.entity)
        key = (copy.measurement_id, copy.entity)
        st = self._state.get(key)
        if st is None:
            st = self._state[key] = _Baselines(len(entity.counters))
        recs = copy.recs
        st.ensure(int(recs.max()) + 1)
        if copy.kind in (COPY_START, COPY_INITIAL):
            st.values[recs] = copy.values
            st.at[recs] = copy.at_us
            st.alloc[recs] = copy.alloc_us
            st.valid[recs] = True
            st.kind[recs] = copy.kind
            st.before[recs] = -1
            return None
        ok = st.valid[recs] & (st.alloc[recs] == copy.alloc_us) & (st.at[recs] < copy.at_us)
        sel = np.flatnonzero(ok)
        batch = None
        if sel.size:
            r = recs[sel]
            prev = st.values[r]
            cur = copy.values[sel]
            level, start = self._columns(entity)
            delta = cur - prev
            delta[:, level] = cur[:, level]
            delta[:, start] = prev[:, start]
            from_us = st.at[r]
            before = st.before[r]
            needs_base = ((st.kind[r] == COPY_START) | (st.kind[r] == COPY_INITIAL) | (before < 0)
                          | (before // DAY_US != from_us // DAY_US))
            batch = IntervalBatch(
                measurement_id=copy.measurement_id, entity=copy.entity, to_us=copy.at_us,
                closing_kind=copy.kind, from_us=from_us.copy(), slots=copy.slots[sel],
                cpu=copy.cpu[sel], alloc_us=copy.alloc_us[sel], values=delta,
                needs_base=needs_base, base=prev[needs_base],
                tail=cur[:, start] if start.any() else None,
            )
        chained = np.zeros(recs.size, dtype=bool)
        chained[sel] = True
        st.before[recs] = np.where(chained, st.at[recs], -1)
        st.kind[recs] = copy.kind
        st.values[recs] = copy.values
        st.at[recs] = copy.at_us
        if copy.kind in (COPY_ENTITY_STOP, COPY_STOP):
            st.valid[recs] = False
        return batch
