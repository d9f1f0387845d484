"""MEASMON and the MEASCTLs: measurements, shared counter records, copies.

As in "MEASURE, Tandem's New Performance Measurement Tool" (1986) and the Measure Reference
Manual (measure-reference.md §1, §6):

* MEASMON runs up to 64 concurrent measurements. Each measurement owns one bit of the 64-bit
  sharemask kept in the CID entry of every counter record; a second measurement of an entity
  that is already measured shares its record (it sets its bit) and, when the record is already
  nonzero, writes an *initial-value copy* that later reads subtract.
* One MEASCTL per CPU allocates counter records for the entities of its CPU, accounts CIDs and
  counter space against their limits (running out gives MEASURE's ERROR values 1 and 2: the
  entity is reported, not measured), and copies records: at measurement start (start copy), at
  each interval ("interval copy", ordered by next copy time across measurements), when a
  transient entity stops (entity-stop copy) and at measurement stop (stop copy). At stop it
  reports counter-space usage per entity type.
* CPU counter records are allocated when the CPU is loaded, so CPU counters count from CPU
  load and the start copy is their baseline. A CPU failure loses that CPU's MEASCTL and its
  records; the reload allocates a new CPU record (counters restart).
* The node bumps records through the entity control blocks' XPTR (``EntityTable.xptr``);
  MEASMON sets the pointer when a record is allocated and clears it when the record is freed.

Copies leave through ``sink(copy)``, in time order; ``collector.measure.copies`` turns them into
interval records and ``collector.sink`` into database rows.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from collector.measure.contab import Contab
from collector.measure.space import CounterSpace
from core.catalog import Catalog, load_catalog

COPY_START, COPY_INITIAL, COPY_INTERVAL, COPY_ENTITY_STOP, COPY_STOP = 1, 2, 3, 4, 5
COPY_KIND_NAMES = {COPY_START: "start", COPY_INITIAL: "initial-value", COPY_INTERVAL: "interval",
                   COPY_ENTITY_STOP: "entity-stop", COPY_STOP: "stop"}

# MEASURE's ERROR field values for records that could not be allocated (§3.3).
ERROR_NO_CID = 1          # max concurrent entries (CIDs) exceeded
ERROR_NO_SPACE = 2        # max counter space exceeded

MAX_MEASUREMENTS = 64
DEFAULT_CIDS_PER_CPU = 32_000 - 24     # 24 CIDs are reserved for list headers
DEFAULT_SPACE_WORDS_PER_CPU = 4_000_000


def entity_ids(table: Any, slot: int) -> dict[str, Any]:
    """The identifying fields of one entity; the CPU comes from the control block when the
    catalogue names `cpu` as an identifying field."""
    ids = table.id_of(slot)
    if "cpu" in table.entity.id_fields and "cpu" not in ids:
        ids["cpu"] = int(table.cpu[slot])
    return ids


class MeasureStateError(RuntimeError):
    """A control request MEASMON cannot carry out (message says why)."""


@dataclass
class Copy:
    """Copies of several counter records of one entity type, taken at one time for one
    measurement. Rows of `values` are cumulative int64 counters in catalogue order."""

    measurement_id: int
    entity: str
    kind: int
    at_us: int
    recs: np.ndarray
    slots: np.ndarray
    cpu: np.ndarray
    alloc_us: np.ndarray
    values: np.ndarray
    error: int = 0

    def __len__(self) -> int:
        return int(self.recs.size)


@dataclass
class Measurement:
    """One measurement as MEASMON runs it (the database row is the control plane)."""

    measurement_id: int
    name: str
    contab: Contab
    start_us: int
    stop_us: int | None = None
    interval_us: int | None = None
    bit: int = -1
    state: str = "scheduled"          # scheduled → running → stopped
    next_copy_us: int | None = None
    copies_written: int = 0
    unallocated: Counter = field(default_factory=Counter)   # (entity, error) → count
    usage: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def flag(self) -> np.uint64:
        return np.uint64(1) << np.uint64(self.bit)


@dataclass
class Measctl:
    """The MEASCTL of one CPU: CID and counter-space accounting for that CPU's records."""

    cpu: int
    cid_limit: int
    words_limit: int
    cids: int = 0
    words: int = 0
    loaded_us: int = 0


class Measmon:
    """The MEASURE subsystem attached to one node (it implements the node's hooks)."""

    def __init__(
        self,
        node: Any,
        sink: Callable[[Copy], None],
        *,
        catalog: Catalog | None = None,
        cids_per_cpu: int = DEFAULT_CIDS_PER_CPU,
        space_words_per_cpu: int = DEFAULT_SPACE_WORDS_PER_CPU,
        on_state: Callable[[Measurement, str, int], None] | None = None,
    ) -> None:
        self.node = node
        self.sink = sink
        self.on_state = on_state
        self.catalog = catalog or load_catalog()
        self.tables = node.tables
        self.spaces: dict[str, CounterSpace] = {
            name: CounterSpace(table.entity) for name, table in self.tables.items()
        }
        self.measurements: dict[int, Measurement] = {}
        self._bits: list[Measurement | None] = [None] * MAX_MEASUREMENTS
        self._copy_heap: list[tuple[int, int]] = []   # (next copy time, measurement id)
        self.cids_per_cpu = cids_per_cpu
        self.space_words_per_cpu = space_words_per_cpu
        self.measctl: dict[int, Measctl] = {}
        self._words_per_record = {n: 4 * s.n_counters + 8 for n, s in self.spaces.items()}
        cpu_table = self.tables.get("cpu")
        if cpu_table is not None:
            for slot in range(cpu_table.n):
                if cpu_table.alive[slot]:
                    self._load_cpu(int(cpu_table.cpu[slot]), slot, node.now_us)
        node.hooks = self

    # ================================================================== control

    def add(self, m: Measurement) -> None:
        """Configure a measurement; it starts at m.start_us (now or later)."""
        if m.measurement_id in self.measurements:
            raise MeasureStateError(f"measurement {m.measurement_id} ({m.name}) is already known")
        if m.stop_us is not None and m.stop_us <= m.start_us:
            raise MeasureStateError(f"measurement {m.name}: stop time is not after its start time")
        if m.interval_us is not None and m.interval_us < 1_000_000:
            raise MeasureStateError(f"measurement {m.name}: INTERVAL must be at least 1 second")
        self.measurements[m.measurement_id] = m
        if m.start_us <= self.node.now_us:
            self.start(m.measurement_id, self.node.now_us)

    def start(self, measurement_id: int, at_us: int) -> None:
        m = self._get(measurement_id)
        if m.state != "scheduled":
            raise MeasureStateError(f"measurement {m.name} is {m.state}, it cannot start")
        free = [b for b, owner in enumerate(self._bits) if owner is None]
        if not free:
            raise MeasureStateError(
                f"cannot start {m.name}: {MAX_MEASUREMENTS} measurements are already running"
            )
        m.bit = free[0]
        self._bits[m.bit] = m
        m.state = "running"
        m.start_us = at_us
        for entity, table in self.tables.items():
            if not m.contab.descriptors_of(entity) and not (entity == "userdef" and m.contab.counters):
                continue
            slots = [s for s in range(table.n) if table.alive[s] and self._matches(m, entity, s)]
            self._attach(m, entity, np.asarray(slots, dtype=np.int64), at_us, at_start=True)
        if m.interval_us:
            m.next_copy_us = at_us + m.interval_us
            heapq.heappush(self._copy_heap, (m.next_copy_us, m.measurement_id))
        if self.on_state:
            self.on_state(m, "started", at_us)

    def stop(self, measurement_id: int, at_us: int) -> None:
        m = self._get(measurement_id)
        if m.state == "scheduled":
            m.state = "stopped"
            if self.on_state:
                self.on_state(m, "stopped", at_us)
            return
        if m.state != "running":
            return
        for entity, space in self.spaces.items():
            recs = space.records_of(m.bit)
            if recs.size:
                self._emit(m, entity, recs, COPY_STOP, at_us)
            m.usage[entity] = {"records": int(recs.size),
                               "words": int(recs.size) * self._words_per_record[entity]}
            for rec in recs:
                self._detach(m, entity, int(rec))
        self._bits[m.bit] = None
        m.state = "stopped"
        m.stop_us = at_us
        m.next_copy_us = None
        if self.on_state:
            self.on_state(m, "stopped", at_us)

    def set_stop(self, measurement_id: int, stop_us: int | None) -> None:
        """STOP MEASUREMENT (or a new TO/FOR): stop at stop_us, or now if that has passed."""
        m = self._get(measurement_id)
        if m.state in ("scheduled", "running"):
            m.stop_us = None if stop_us is None else max(stop_us, self.node.now_us)

    def next_event_us(self) -> int | None:
        """The earliest time MEASMON has something to do: a start, a copy or a stop."""
        times = []
        m: Measurement | None
        for m in self.measurements.values():
            if m.state == "scheduled":
                times.append(m.start_us)
            elif m.state == "running" and m.stop_us is not None:
                times.append(m.stop_us)
        while self._copy_heap:
            t, mid = self._copy_heap[0]
            m = self.measurements.get(mid)
            if m is None or m.state != "running" or m.next_copy_us != t:
                heapq.heappop(self._copy_heap)   # stale entry
                continue
            times.append(t)
            break
        return min(times) if times else None

    def run_until(self, until_us: int) -> None:
        """Advance the node to until_us, carrying out every start, copy and stop on the way."""
        while True:
            t = self.next_event_us()
            t = until_us if t is None else min(t, until_us)
            if t > self.node.now_us:
                self.node.advance(t)
            self._due(t)
            if t >= until_us:
                return

    def _due(self, t: int) -> None:
        m: Measurement | None
        for m in sorted(self.measurements.values(), key=lambda m: m.measurement_id):
            if m.state == "running" and m.stop_us is not None and m.stop_us <= t:
                self.stop(m.measurement_id, m.stop_us)
        while self._copy_heap and self._copy_heap[0][0] <= t:
            due, mid = heapq.heappop(self._copy_heap)
            m = self.measurements.get(mid)
            if m is None or m.state != "running" or m.next_copy_us != due:
                continue
            self._interval_copy(m, due)
            assert m.interval_us  # only a measurement with an interval has copies due (start())
            m.next_copy_us = due + m.interval_us
            if m.stop_us is None or m.next_copy_us < m.stop_us:
                heapq.heappush(self._copy_heap, (m.next_copy_us, mid))
        for m in sorted(self.measurements.values(), key=lambda m: m.measurement_id):
            if m.state == "scheduled" and m.start_us <= t:
                self.start(m.measurement_id, m.start_us)

    def _interval_copy(self, m: Measurement, at_us: int) -> None:
        for entity, space in self.spaces.items():
            recs = space.records_of(m.bit)
            if recs.size:
                self._emit(m, entity, recs, COPY_INTERVAL, at_us)

    # ================================================================== records

    def _matches(self, m: Measurement, entity: str, slot: int) -> bool:
        ids = entity_ids(self.tables[entity], slot)
        if entity == "userdef":
            return self._userdef_matches(m, ids)
        return m.contab.matches(entity, ids)

    def _userdef_matches(self, m: Measurement, ids: dict[str, Any]) -> bool:
        """A user counter element is measured when its process is in a USERDEF descriptor
        and an ADD COUNTER of that name (with enough ARRAY elements) applies to it."""
        if not m.contab.matches("userdef", ids):
            return False
        name = str(ids.get("name", "")).upper()
        index = int(ids.get("index", 0))
        return any(c.name == name and index < c.elements for c in m.contab.counters_for(ids))

    def _attach(self, m: Measurement, entity: str, slots: np.ndarray, at_us: int,
                *, at_start: bool) -> None:
        """Give measurement m the records of `slots` (allocate or share); write baselines."""
        if slots.size == 0:
            return
        table, space = self.tables[entity], self.spaces[entity]
        new_recs: list[int] = []
        shared_recs: list[int] = []
        for slot in slots.tolist():
            rec = int(table.xptr[slot])
            if rec < 0:
                rec = self._allocate(m, entity, slot, at_us)
                if rec < 0:
                    continue
                new_recs.append(rec)
            else:
                shared_recs.append(rec)
            space.sharemask[rec] |= m.flag
        if new_recs:
            self._emit(m, entity, np.asarray(new_recs, dtype=np.int64), COPY_START, at_us)
        if shared_recs:
            recs = np.asarray(shared_recs, dtype=np.int64)
            if entity == "cpu":
                # CPU counters count from CPU load: the start copy is the baseline.
                self._emit(m, entity, recs, COPY_START, at_us)
            else:
                nz = space.nonzero(recs, at_us)
                if (~nz).any():
                    self._emit(m, entity, recs[~nz], COPY_START, at_us)
                if nz.any():
                    self._emit(m, entity, recs[nz], COPY_INITIAL, at_us)

    def _allocate(self, m: Measurement | None, entity: str, slot: int, at_us: int) -> int:
        table, space = self.tables[entity], self.spaces[entity]
        cpu = int(table.cpu[slot])
        ctl = self.measctl.get(cpu) if cpu >= 0 else None
        words = self._words_per_record[entity]
        if ctl is not None:
            error = 0
            if ctl.cids >= ctl.cid_limit:
                error = ERROR_NO_CID
            elif ctl.words + words > ctl.words_limit:
                error = ERROR_NO_SPACE
            if error:
                if m is not None:
                    m.unallocated[(entity, error)] += 1
                    self._emit_error(m, entity, slot, error, at_us)
                return -1
            ctl.cids += 1
            ctl.words += words
        rec = space.allocate(slot, cpu, at_us)
        table.xptr[slot] = rec
        return rec

    def _detach(self, m: Measurement, entity: str, rec: int) -> None:
        space = self.spaces[entity]
        space.sharemask[rec] &= ~m.flag
        if space.sharemask[rec] == 0 and entity != "cpu":
            self._free(entity, rec)

    def _free(self, entity: str, rec: int) -> None:
        space, table = self.spaces[entity], self.tables[entity]
        slot = int(space.slot[rec])
        cpu = int(space.cpu[rec])
        ctl = self.measctl.get(cpu)
        if ctl is not None:
            ctl.cids -= 1
            ctl.words -= self._words_per_record[entity]
        if slot >= 0 and table.xptr[slot] == rec:
            table.xptr[slot] = -1
        space.release(rec)

    def _emit(self, m: Measurement, entity: str, recs: np.ndarray, kind: int, at_us: int) -> None:
        space = self.spaces[entity]
        copy = Copy(
            measurement_id=m.measurement_id, entity=entity, kind=kind, at_us=at_us,
            recs=recs, slots=space.slot[recs].copy(), cpu=space.cpu[recs].copy(),
            alloc_us=space.alloc_us[recs].copy(), values=space.read(recs, at_us),
        )
        m.copies_written += len(copy)
        self.sink(copy)

    def _emit_error(self, m: Measurement, entity: str, slot: int, error: int, at_us: int) -> None:
        table = self.tables[entity]
        n = len(table.entity.counters)
        self.sink(Copy(
            measurement_id=m.measurement_id, entity=entity, kind=COPY_START, at_us=at_us,
            recs=np.array([-1]), slots=np.array([slot]), cpu=np.array([int(table.cpu[slot])]),
            alloc_us=np.array([at_us]), values=np.zeros((1, n), dtype=np.int64), error=error,
        ))

    def _load_cpu(self, cpu: int, slot: int, at_us: int) -> None:
        """A CPU is loaded: its MEASCTL starts and allocates the CPU's counter record."""
        self.measctl[cpu] = Measctl(cpu, self.cids_per_cpu, self.space_words_per_cpu,
                                    loaded_us=at_us)
        self._allocate(None, "cpu", slot, at_us)

    # ================================================================== node hooks

    def xctr(self, entity: str, slots: np.ndarray, xptr: np.ndarray, acc: np.ndarray,
             level: np.ndarray, peak: np.ndarray, at_us: int) -> None:
        self.spaces[entity].bump(xptr, acc, level, peak, at_us)

    def entity_started(self, entity: str, slot: int, at_us: int) -> None:
        for m in self._running():
            if self._matches(m, entity, slot):
                self._attach(m, entity, np.array([slot], dtype=np.int64), at_us, at_start=False)

    def entity_stopped(self, entity: str, slot: int, at_us: int) -> None:
        table, space = self.tables[entity], self.spaces[entity]
        rec = int(table.xptr[slot])
        if rec < 0:
            return
        recs = np.array([rec], dtype=np.int64)
        for m in self._running():
            if space.sharemask[rec] & m.flag:
                self._emit(m, entity, recs, COPY_ENTITY_STOP, at_us)
        self._free(entity, rec)

    def cpu_failed(self, cpu: int, at_us: int) -> None:
        """The CPU's MEASCTL is lost with its counter records: nothing more is copied from
        them (their data since the last copy is lost, as on a real system)."""
        for entity, space in self.spaces.items():
            for rec in np.flatnonzero(space.in_use & (space.cpu == cpu)).tolist():
                self._free(entity, rec)
        self.measctl.pop(cpu, None)

    def cpu_reloaded(self, cpu: int, at_us: int) -> None:
        table = self.tables["cpu"]
        slots = np.flatnonzero((table.cpu[: table.n] == cpu) & table.alive[: table.n])
        for slot in slots.tolist():
            self._load_cpu(cpu, slot, at_us)
            for m in self._running():
                if self._matches(m, "cpu", slot):
                    self._attach(m, "cpu", np.array([slot], dtype=np.int64), at_us, at_start=False)

    # ================================================================== user counters

    BUMP_OPS = ("INC", "ADD", "SETBUSY", "RESETBUSY", "INCQUEUE", "DEQUEUE")

    def counter_bump_init(self, userdef_slot: int) -> int:
        """MEASCOUNTERBUMPINIT: the counter's offset (its counter record), or -1 when no
        active measurement has the counter (MEASURE's ERR^UDCNOTPRESENT)."""
        table = self.tables["userdef"]
        if not 0 <= userdef_slot < table.n or not table.alive[userdef_slot]:
            return -1
        return int(table.xptr[userdef_slot])

    def counter_bump(self, userdef_slot: int, op: str, value: float, at_us: int) -> bool:
        """MEASCOUNTERBUMP on one user counter element. INC adds 1, ADD adds value (ACCUM,
        FACCUM); SETBUSY/RESETBUSY start and end a busy period (BUSY, QBUSY); INCQUEUE/DEQUEUE
        add and remove a queue element (QUEUE). A bump of an unmeasured counter costs nothing
        and returns False, like XCTR with a zero pointer."""
        op = op.upper()
        if op not in self.BUMP_OPS:
            raise ValueError(f"bump type {op!r} is not one of {', '.join(self.BUMP_OPS)}")
        table, space = self.tables["userdef"], self.spaces["userdef"]
        rec = int(table.xptr[userdef_slot])
        if rec < 0:
            return False
        col = table.entity.index("time_value")
        space.close(rec, at_us)
        if op == "INC":
            space.acc[rec, col] += 1
        elif op == "ADD":
            space.acc[rec, col] += value
        elif op == "SETBUSY":
            space.level[rec, col] = 1.0
        elif op == "RESETBUSY":
            space.level[rec, col] = 0.0
        elif op == "INCQUEUE":
            space.level[rec, col] += 1.0
            space.peak[rec, col] = max(space.peak[rec, col], space.level[rec, col])
        else:  # DEQUEUE
            space.level[rec, col] = max(0.0, space.level[rec, col] - 1.0)
        return True

    # ================================================================== reads

    def read_active(self, entity: str, slots: Iterable[int], at_us: int | None = None) -> Copy:
        """MEASREADACTIVE: time-stamped copies of live counter records (not written anywhere)."""
        at_us = self.node.now_us if at_us is None else at_us
        table, space = self.tables[entity], self.spaces[entity]
        slots_arr = np.asarray(list(slots), dtype=np.int64)
        recs = table.xptr[slots_arr]
        if (recs < 0).any():
            missing = slots_arr[recs < 0].tolist()
            raise MeasureStateError(f"{entity} slots {missing} are not measured by any active measurement")
        return Copy(measurement_id=0, entity=entity, kind=0, at_us=at_us, recs=recs,
                    slots=slots_arr, cpu=space.cpu[recs].copy(), alloc_us=space.alloc_us[recs].copy(),
                    values=space.read(recs, at_us))

    def status(self, measurement_id: int) -> dict[str, Any]:
        """MEASSTATUS: entities measured per type, counter space and CIDs in use, copies."""
        m = self._get(measurement_id)
        per_type: dict[str, int] = {}
        words = 0
        if m.state == "running":
            for entity, space in self.spaces.items():
                n = int(space.records_of(m.bit).size)
                if n:
                    per_type[entity] = n
                    words += n * self._words_per_record[entity]
        else:
            per_type = {e: u["records"] for e, u in m.usage.items() if u["records"]}
            words = sum(u["words"] for u in m.usage.values())
        return {
            "measurement_id": m.measurement_id, "name": m.name, "state": m.state,
            "entities": per_type, "counter_space_words": words,
            "cids": sum(per_type.values()), "copies_written": m.copies_written,
            "not_allocated": {f"{e}:{err}": n for (e, err), n in m.unallocated.items()},
        }

    def cpu_status(self) -> dict[int, dict[str, int]]:
        return {cpu: {"cids": c.cids, "cid_limit": c.cid_limit, "words": c.words,
                      "words_limit": c.words_limit} for cpu, c in sorted(self.measctl.items())}

    # ================================================================== helpers

    def _running(self) -> list[Measurement]:
        return [m for m in self._bits if m is not None]

    def _get(self, measurement_id: int) -> Measurement:
        try:
            return self.measurements[measurement_id]
        except KeyError:
            raise MeasureStateError(f"no measurement {measurement_id}") from None

