"""Writing interval runs into PostgreSQL: batched binary COPY, durable spool.

* Interval records are stored once, packed into runs (schema/100-interval-runs.sql): per
  counter record and measurement, its consecutive intervals of one UTC hour with equal
  DELTA-TIME, CPU and ERROR, counters as a two-dimensional array [interval][counter]. Copies
  are derived from the runs (measure.counter_copy); the copies that close no interval (start,
  initial-value, error and unpaired copies) are written as they are (_measure.extra_copy).
* :class:`RunBuilder` turns a slice's interval batches into runs with numpy (one sort per
  measurement and entity type, no per-row Python, style P12) and encodes them for
  ``COPY … (FORMAT BINARY)``: rows of equal shape are one structured array and one
  ``tobytes()``.
* Entity ids are a 63-bit hash of (system, entity type, identifying fields), so slices can be
  encoded, spooled and replayed without asking the database for ids.
* The collector hands over complete time slices: ``Writer.flush(slice)`` writes every row
  with a time ≤ until_us in one transaction that also advances the collector's watermark
  (``_measure.collector_state.durable_until``) and condenses the hours it touched, so the
  tiers are current when it returns. A slice at or below the watermark is skipped, so a
  replay after a crash stores nothing twice; a primary-key clash (a slice written by a run
  that died before recording its watermark) falls back to INSERT … ON CONFLICT DO NOTHING.
* When the database cannot be reached the slice goes to the spool folder (written to a
  temporary file, fsynced, renamed) and slices are replayed in order once it answers again
  (tried with exponential backoff). At the spool's limit the policy decides: pause (wait
  for the database, lose nothing) or drop-oldest (loudly); see :class:`Writer`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from collector.measure.copies import IntervalBatch, IntervalBuilder
from collector.measure.measmon import COPY_INITIAL, COPY_INTERVAL, COPY_START, Copy, entity_ids
from collector.phases import Phases
from collector.slice import Slice, SpoolFileError, decode, encode
from core.catalog import Catalog
from core.entities import entity_id, entity_key
from core.pgbinary import COPY_HEADER, COPY_TRAILER, INT8_OID, PG_EPOCH_US
from core.pgbinary import array_fields as _array_fields
from core.pgbinary import fill_array as _fill_array

log = logging.getLogger(__name__)

HOUR_US = 3_600_000_000

COPY_COLUMNS = ("measurement_id", "entity_id", "record_at", "copy_at", "copy_kind", "system_id",
                "type_code", "cpu", "error", "counters")
RUN_COLUMNS = ("system_id", "type_code", "measurement_id", "entity_id", "record_at", "from_at",
               "delta_us", "n", "closing_kind", "cpu", "error", "counters", "base", "tail", "nonzero")
_FIELD_TYPES = {"measurement_id": ">i4", "entity_id": ">i8", "record_at": ">i8", "copy_at": ">i8",
                "from_at": ">i8", "to_at": ">i8", "delta_us": ">i8", "copy_kind": ">i2",
                "closing_kind": ">i2", "system_id": ">i2", "type_code": ">i2", "cpu": ">i2",
                "error": ">i2", "n": ">i2", "nonzero": ">i8"}


def private_folder(folder: Path, setting: str) -> None:
    """Make `folder` (mode 0700) or check it: a folder of the collector's own that no one else
    can write (what it holds is read back by the collector). Raises PermissionError saying
    how to fix it."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = folder.stat()
    if st.st_uid != os.geteuid():
        raise PermissionError(f"{folder} belongs to another user (uid {st.st_uid}): the collector keeps only "
                              f"files of its own there; use a folder of its own ({setting})")
    if st.st_mode & 0o022:
        raise PermissionError(f"{folder} may be written by others (mode {st.st_mode & 0o777:o}): make it "
                              f"private (chmod 700 {folder}) or choose another folder ({setting})")


class SpoolFull(RuntimeError):
    """The database is unreachable and the spool folder has reached its limit."""


SPOOL_FULL_POLICIES = ("pause", "drop-oldest")
# what a database that went away raises (a closed connection is an InterfaceError)
DATABASE_AWAY = (psycopg.OperationalError, psycopg.InterfaceError)
CONFLICT_RETRIES = 5  # a slice rolled back by a deadlock or serialization failure: written again


def rolled_back_by_conflict(exc: Exception) -> bool:
    """A deadlock, serialization failure or other "transaction rollback" (SQLSTATE class 40)
    of a database that answers: a conflict with another writer, not an outage."""
    return isinstance(exc, psycopg.Error) and (exc.sqlstate or "").startswith("40")


def _row_dtype(columns: tuple[str, ...], n_counters: int) -> np.dtype:
    fields: list[tuple[Any, ...]] = [("nfields", ">i2")]
    for col in columns:
        if col == "counters":
            fields += [("arr_len", ">i4"), ("ndim", ">i4"), ("hasnull", ">i4"), ("oid", ">i4"),
                       ("dim", ">i4"), ("lbound", ">i4"),
                       ("elems", [("len", ">i4"), ("val", ">i8")], (n_counters,))]
        else:
            fields += [(col + "_len", ">i4"), (col, _FIELD_TYPES[col])]
    return np.dtype(fields)


def encode_rows(columns: tuple[str, ...], data: dict[str, Any], counters: np.ndarray) -> bytes:
    """The binary COPY tuples (no header/trailer) of len(counters) rows with a one-dimensional
    counters array; times in Unix µs."""
    n, c = counters.shape
    rows = np.zeros(n, dtype=_row_dtype(columns, c))
    rows["nfields"] = len(columns)
    for col in columns:
        if col == "counters":
            continue
        size = np.dtype(_FIELD_TYPES[col]).itemsize
        rows[col + "_len"] = size
        value = data[col]
        if col.endswith("_at"):
            value = np.asarray(value, dtype=np.int64) - PG_EPOCH_US
        rows[col] = value
    rows["arr_len"] = 20 + 12 * c
    rows["ndim"] = 1
    rows["oid"] = INT8_OID
    rows["dim"] = c
    rows["lbound"] = 1
    rows["elems"]["len"] = 8
    rows["elems"]["val"] = counters
    return rows.tobytes()


@dataclass
class RunStats:
    runs: int = 0
    intervals: int = 0
    from_min_us: int | None = None
    from_max_us: int | None = None

    def add(self, runs: int, intervals: int, lo: int, hi: int) -> None:
        self.runs += runs
        self.intervals += intervals
        self.from_min_us = lo if self.from_min_us is None else min(self.from_min_us, lo)
        self.from_max_us = hi if self.from_max_us is None else max(self.from_max_us, hi)


def build_runs(batches: list[tuple[IntervalBatch, np.ndarray]], *, system_id: int, type_code: int,
               stats: RunStats) -> list[bytes]:
    """The binary COPY rows (RUN_COLUMNS) of the runs of one measurement and entity type, from
    its interval batches in time order, each with the entity ids of its rows."""
    batches = [(b, ids) for b, ids in batches if len(b)]
    if not batches:
        return []
    eid = np.concatenate([ids for _, ids in batches])
    rec = np.concatenate([b.alloc_us for b, _ in batches]).astype(np.int64)
    frm = np.concatenate([b.from_us for b, _ in batches]).astype(np.int64)
    to = np.concatenate([np.full(len(b), b.to_us, np.int64) for b, _ in batches])
    kind = np.concatenate([np.full(len(b), b.closing_kind, np.int16) for b, _ in batches])
    cpu = np.concatenate([b.cpu for b, _ in batches]).astype(np.int16)
    vals = np.concatenate([b.values for b, _ in batches]).astype(np.int64, copy=False)
    nb = np.concatenate([b.needs_base if b.needs_base is not None else np.ones(len(b), bool)
                         for b, _ in batches])
    base_rows = np.concatenate([b.base if b.base is not None else b.values[:0] for b, _ in batches])
    base_of = np.full(nb.size, -1, np.int64)
    base_of[nb] = np.arange(int(nb.sum()))
    has_tail = batches[0][0].tail is not None
    tail = np.concatenate([b.tail for b, _ in batches]) if has_tail else None

    # one stable sort by entity: each counter record's intervals in time order (a record's
    # successor incarnation with the same entity id follows it in time)
    order = np.argsort(eid, kind="stable")
    eid, rec, frm, to, kind, cpu, nb, base_of = (
        eid[order], rec[order], frm[order], to[order], kind[order], cpu[order], nb[order], base_of[order])
    vals = vals[order]
    if tail is not None:
        tail = tail[order]
    delta = to - frm
    hour = frm // HOUR_US
    brk = np.ones(eid.size, dtype=bool)
    brk[1:] = ((eid[1:] != eid[:-1]) | (rec[1:] != rec[:-1]) | (frm[1:] != to[:-1])
               | (delta[1:] != delta[:-1]) | (kind[:-1] != COPY_INTERVAL) | (cpu[1:] != cpu[:-1])
               | (hour[1:] != hour[:-1]) | nb[1:])
    starts = np.flatnonzero(brk)
    lengths = np.diff(np.append(starts, eid.size))
    stats.add(int(starts.size), int(eid.size), int(frm.min()), int(frm.max()))
    k = vals.shape[1]
    t = tail.shape[1] if tail is not None else 0
    out = []
    for n in np.unique(lengths).tolist():
        at_n = starts[lengths == n]
        for with_base in (False, True):
            sel = at_n[nb[at_n] == with_base]
            if not sel.size:
                continue
            ends = sel + n - 1
            fields: list[tuple[Any, ...]] = [("nfields", ">i2")]
            for col in RUN_COLUMNS[:11]:
                fields += [(col + "_len", ">i4"), (col, _FIELD_TYPES.get(col, ">i8"))]
            fields += _array_fields("counters", (n, k))
            fields += _array_fields("base", (k,)) if with_base else [("base_len", ">i4")]
            fields += _array_fields("tail", (t,)) if t else [("tail_len", ">i4")]
            fields += [("nonzero_len", ">i4"), ("nonzero", ">i8")]
            rows = np.zeros(sel.size, dtype=np.dtype(fields))
            rows["nfields"] = len(RUN_COLUMNS)
            for col, value in (("system_id", system_id), ("type_code", type_code),
                               ("measurement_id", batches[0][0].measurement_id), ("entity_id", eid[sel]),
                               ("record_at", rec[sel] - PG_EPOCH_US), ("from_at", frm[sel] - PG_EPOCH_US),
                               ("delta_us", delta[sel]), ("n", n), ("closing_kind", kind[ends]),
                               ("cpu", cpu[sel]), ("error", 0)):
                rows[col + "_len"] = np.dtype(_FIELD_TYPES.get(col, ">i8")).itemsize
                rows[col] = value
            block = vals[sel[:, None] + np.arange(n)[None, :]]
            _fill_array(rows, "counters", (n, k), block)
            if with_base:
                _fill_array(rows, "base", (k,), base_rows[base_of[sel]])
            else:
                rows["base_len"] = -1
            if t and tail is not None:  # (t > 0: there is a tail)
                _fill_array(rows, "tail", (t,), tail[ends])
            else:
                rows["tail_len"] = -1
            if k <= 63:  # which counters are nonzero in some interval: bit p-1 of counter p
                rows["nonzero_len"] = 8
                rows["nonzero"] = (block != 0).any(axis=1) @ (np.int64(1) << np.arange(k, dtype=np.int64))
            else:
                rows["nonzero_len"] = -1
            out.append(rows.tobytes())
    return out


class EntityRegistry:
    """(entity type, node slot) → entity id, plus the rows of entities not yet written."""

    def __init__(self, catalog: Catalog, tables: dict[str, Any], system_id: int) -> None:
        self.catalog = catalog
        self.tables = tables
        self.system_id = system_id
        self._ids: dict[str, np.ndarray] = {}
        self._type_code = {name: catalog.entity(name).code for name in tables}

    def ids(self, entity: str, slots: np.ndarray, at_us: int, new_rows: list) -> np.ndarray:
        known = self._ids.get(entity)
        need = int(slots.max()) + 1 if slots.size else 0
        if known is None or known.size < need:
            grown = np.zeros(max(need, 2 * (0 if known is None else known.size), 64), dtype=np.int64)
            if known is not None:
                grown[: known.size] = known
            self._ids[entity] = known = grown
        out = known[slots]
        missing = np.flatnonzero(out == 0)
        if missing.size:
            table = self.tables[entity]
            id_fields = table.entity.id_fields
            code = self._type_code[entity]
            for i in missing.tolist():
                slot = int(slots[i])
                ids = entity_ids(table, slot)
                key = entity_key(id_fields, ids)
                eid = entity_id(self.system_id, code, key)
                known[slot] = eid
                out[i] = eid
                cpu = int(table.cpu[slot])
                new_rows.append((eid, code, key, json.dumps(ids, default=str), cpu, at_us))
        return out


class Pipeline:
    """Copies in, encoded slices out: the collector's side of the writer."""

    def __init__(self, catalog: Catalog, tables: dict[str, Any], system_id: int) -> None:
        self.catalog = catalog
        self.system_id = system_id
        self.registry = EntityRegistry(catalog, tables, system_id)
        self.builder = IntervalBuilder(catalog)
        self.slice = Slice(until_us=0)
        self.skip_until_us = -1  # copies at or before this time are already in the database
        self.last_until_us = -1  # where the previous slice ended
        self._pending: dict[tuple[int, int], list[tuple[IntervalBatch, np.ndarray]]] = defaultdict(list)

    def on_copy(self, copy: Copy) -> None:
        batch = self.builder.on_copy(copy)
        if copy.at_us <= self.skip_until_us:
            return
        code = self.catalog.entity(copy.entity).code
        ids = self.registry.ids(copy.entity, copy.slots, copy.at_us, self.slice.entities)
        # the copies that close no interval are stored as they are
        if copy.kind in (COPY_START, COPY_INITIAL) or copy.error or batch is None:
            extra = np.ones(len(copy), dtype=bool)
        elif len(batch) == len(copy):
            extra = None
        else:
            extra = ~np.isin(copy.slots, batch.slots)
        if extra is not None and extra.any():
            self.slice.extras.append(encode_rows(COPY_COLUMNS, {
                "measurement_id": copy.measurement_id, "entity_id": ids[extra],
                "record_at": copy.alloc_us[extra], "copy_at": copy.at_us, "copy_kind": copy.kind,
                "system_id": self.system_id, "type_code": code, "cpu": copy.cpu[extra],
                "error": copy.error}, copy.values[extra]))
            self.slice.n_extras += int(extra.sum())
        if batch is not None and len(batch):
            bids = ids if batch.slots.size == len(copy) else \
                self.registry.ids(copy.entity, batch.slots, copy.at_us, self.slice.entities)
            self._pending[(copy.measurement_id, code)].append((batch, bids))

    def control(self, event: str, measurement_id: int, at_us: int, usage: dict | None = None) -> None:
        self.slice.control.append((event, measurement_id, at_us, usage))

    def take(self, until_us: int) -> Slice:
        """The slice of everything up to until_us: its interval batches become runs."""
        out, self.slice = self.slice, Slice(until_us=0)
        out.until_us = until_us
        stats = RunStats()
        for (_mid, code), batches in sorted(self._pending.items()):
            out.runs.extend(build_runs(batches, system_id=self.system_id, type_code=code, stats=stats))
        self._pending.clear()
        out.n_runs, out.n_intervals = stats.runs, stats.intervals
        out.from_min_us, out.from_max_us = stats.from_min_us, stats.from_max_us
        # an hour this slice shares with the slice before or after it gets runs from both:
        # _measure.pack_runs merges them once the hour is over
        if out.from_min_us is not None:
            if self.last_until_us % HOUR_US and self.last_until_us >= 0:
                out.pack_hours.append(self.last_until_us // HOUR_US * HOUR_US)
            if until_us % HOUR_US:
                out.pack_hours.append(until_us // HOUR_US * HOUR_US)
        self.last_until_us = until_us
        return out


class Writer:
    """Writes slices in order; spools them while the database is away.

    While the database is away, reconnecting is tried with exponential backoff (1 s doubling
    to ``backoff_max_s``), not at every slice. What happens when the spool reaches its limit
    is the ``spool_full`` policy: ``pause`` (the default) holds the collector in
    :meth:`flush` until the database answers again (a simulated node loses nothing: it
    resumes and catches up), ``drop-oldest`` drops the intervals of the oldest spooled slices
    with a loud warning (their entities and measurement events are kept, so what follows
    stays consistent). A spool file that cannot be read is moved to ``spool/quarantine``
    with an error line, and the rest replays.
    """

    def __init__(self, url: str, collector_id: str, spool_dir: Path, spool_max_bytes: int, *,
                 condense: bool = True, spool_full: str = "pause", backoff_max_s: float = 60.0) -> None:
        if spool_full not in SPOOL_FULL_POLICIES:
            raise ValueError(f"spool_full must be one of {', '.join(SPOOL_FULL_POLICIES)}, not {spool_full!r}")
        self.url = url
        self.condense = condense  # False: the hours written are only marked (bulk loads condense once)
        self.collector_id = collector_id
        self.spool_dir = spool_dir
        self.spool_max_bytes = spool_max_bytes
        self.spool_full = spool_full
        self.backoff_max_s = backoff_max_s
        private_folder(self.spool_dir, "MEASUREDB_COLLECTOR_SPOOL_DIR")
        self._conn: psycopg.Connection | None = None
        self.durable_until_us = -1
        self.down_since: float | None = None
        self._backoff_s = 0.0
        self._next_try = 0.0  # time.monotonic() before which the database is not tried again
        self.dropped_slices = 0  # drop-oldest: slices whose intervals were dropped
        self.phases = Phases()  # where the writer's time goes (collector/phases.py)

    # ---------------------------------------------------------------- public

    def flush(self, sl: Slice, *, wait: bool = True) -> bool:
        """Write (or spool) one slice. True when it reached the database. With the pause
        policy and a full spool this waits for the database (``wait=False``: raises
        SpoolFull instead, e.g. while stopping)."""
        if sl.empty():
            return True
        if self._replay_spool():
            try:
                self._write(sl)
                return True
            except DATABASE_AWAY as exc:
                self._went_down(exc)
        try:
            self._spool(sl)
        except SpoolFull as exc:
            if self.spool_full != "pause" or not wait:
                raise
            log.error("%s. Collection is paused until the database answers (policy "
                      "MEASUREDB_COLLECTOR_SPOOL_FULL=pause)", str(exc).split(". Nothing")[0])
            while True:
                self.wait_for_database()
                try:
                    self._write(sl)
                    log.warning("collection resumed")
                    return True
                except DATABASE_AWAY as again:
                    self._went_down(again)
        return False

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def drain(self, timeout_s: float) -> bool:
        """Replay the spool, waiting up to timeout_s for the database (with backoff).
        True when nothing is left spooled."""
        deadline = time.monotonic() + timeout_s
        while True:
            self._next_try = 0.0
            if self._replay_spool():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, self._backoff_s))

    def wait_for_database(self) -> None:
        """Block until the database answers and the spool is replayed (backoff between tries)."""
        while True:
            self._next_try = 0.0
            if self._replay_spool():
                return
            time.sleep(self._backoff_s)

    def spooled(self) -> list[Path]:
        return sorted(self.spool_dir.glob("*.slice"))

    def spooled_bytes(self) -> int:
        total = 0
        for p in self.spooled():
            try:
                total += p.stat().st_size
            except FileNotFoundError:
                pass
        return total

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # ---------------------------------------------------------------- internals

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.url, connect_timeout=3)
        return self._conn

    def _went_down(self, exc: Exception) -> None:
        if self.down_since is None:
            self.down_since = time.time()
            if rolled_back_by_conflict(exc):
                log.warning("slice not written after %d conflicts with other writers (%s): the database "
                            "answers; spooling copies to %s and writing them again after a pause",
                            CONFLICT_RETRIES, str(exc).strip().splitlines()[0], self.spool_dir)
            else:
                log.warning("database unreachable, spooling copies to %s: %s", self.spool_dir,
                            str(exc).strip())
        self._backoff_s = min(self.backoff_max_s, max(1.0, 2 * self._backoff_s))
        self._next_try = time.monotonic() + self._backoff_s
        self.close()

    def _replay_spool(self) -> bool:
        """Write the spooled slices in order; False while the database is away (not retried
        before the backoff has passed)."""
        if self.down_since is not None and time.monotonic() < self._next_try:
            return False
        spooled = self.spooled()
        if self.down_since is not None and not spooled:
            try:  # nothing to replay: is it back?
                self._connection()
            except DATABASE_AWAY as exc:
                self._went_down(exc)
                return False
        for path in spooled:
            try:
                sl = self._read(path)
            except FileNotFoundError:
                continue
            except (SpoolFileError, OSError) as exc:  # unreadable: quarantined unread, the rest goes on
                self._quarantine(path, exc)
                continue
            try:
                self._write(sl)
            except DATABASE_AWAY as exc:
                self._went_down(exc)
                return False
            path.unlink()
        if self.down_since is not None:
            log.warning("database reachable again after %.0f s; spool replayed",
                        time.time() - self.down_since)
            self.down_since = None
        self._backoff_s = 0.0
        return True

    def _read(self, path: Path) -> Slice:
        """A spooled slice: its bytes only if the file is no larger than the spool may hold,
        decoded as data (collector/slice.py), never executed."""
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > self.spool_max_bytes:
                raise SpoolFileError(f"{size} bytes, more than the spool may hold ({self.spool_max_bytes})")
            data = f.read(size + 1)
        if len(data) > size:
            raise SpoolFileError("it grew while it was read")
        return decode(data)

    def _quarantine(self, path: Path, exc: Exception) -> None:
        qdir = self.spool_dir / "quarantine"
        qdir.mkdir(mode=0o700, exist_ok=True)
        target = qdir / path.name
        os.replace(path, target)
        log.error("spool file %s is unreadable (%s: %s); moved to %s, the rest of the spool "
                  "replays. The intervals it held are missing from the database; keep the file "
                  "to see what it was", path.name, type(exc).__name__, str(exc)[:200], target)

    def _spool(self, sl: Slice) -> None:
        data = encode(sl)
        used = self.spooled_bytes()
        if used + len(data) > self.spool_max_bytes and self.spool_full == "drop-oldest":
            used = self._drop_oldest(used + len(data) - self.spool_max_bytes)
        if used + len(data) > self.spool_max_bytes:
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.down_since or time.time()))
            raise SpoolFull(
                f"the spool folder {self.spool_dir} is full ({used} bytes, limit "
                f"{self.spool_max_bytes}); the database has been unreachable since {since}. "
                "Nothing was dropped: bring the database back or raise "
                "MEASUREDB_COLLECTOR_SPOOL_MAX_BYTES, then restart the collector"
            )
        spooled = self.spooled()
        seq = int(spooled[-1].stem.split("-")[0]) + 1 if spooled else 0
        self._write_file(self.spool_dir / f"{seq:012d}-{sl.until_us}.slice", data)

    def _write_file(self, final: Path, data: bytes) -> None:
        tmp = final.with_suffix(".tmp")
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        tmp.rename(final)
        dir_fd = os.open(self.spool_dir, os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _drop_oldest(self, need: int) -> int:
        """drop-oldest: strip the intervals and copies from the oldest spooled slices until
        `need` bytes are free (entities, measurement events and the watermark stay, so the
        slices after them replay consistently). Returns the bytes the spool now holds."""
        freed = 0
        for path in self.spooled():
            if freed >= need:
                break
            try:
                sl = self._read(path)
            except (SpoolFileError, OSError) as exc:
                self._quarantine(path, exc)
                continue
            if not (sl.runs or sl.extras):
                continue
            before = path.stat().st_size
            n = sl.n_intervals + sl.n_extras
            sl.runs, sl.extras, sl.n_runs, sl.n_intervals, sl.n_extras = [], [], 0, 0, 0
            sl.from_min_us = sl.from_max_us = None
            self._write_file(path, encode(sl))
            freed += before - path.stat().st_size
            self.dropped_slices += 1
            log.error("SPOOL FULL (limit %d bytes, MEASUREDB_COLLECTOR_SPOOL_FULL=drop-oldest): "
                      "DROPPED %d interval records and copies of spooled slice %s (up to %s); "
                      "they will never reach the database", self.spool_max_bytes, n, path.name,
                      time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(sl.until_us / 1e6)))
        return self.spooled_bytes()

    def _write(self, sl: Slice) -> None:
        if sl.until_us <= self.durable_until_us and not sl.control:
            return
        for attempt in range(1, CONFLICT_RETRIES + 1):
            conn = self._connection()
            try:
                try:
                    with conn.transaction():
                        self._write_tx(conn, sl, on_conflict=False)
                        lap = self.phases.laps()
                except psycopg.errors.UniqueViolation:
                    with conn.transaction():
                        self._write_tx(conn, sl, on_conflict=True)
                        lap = self.phases.laps()
                lap("write: commit")
                break
            except psycopg.OperationalError as exc:
                # a deadlock or serialization failure with another writer (two collectors'
                # first slices registering entities at once, say): rolled back whole, so
                # written again at once; after CONFLICT_RETRIES it goes to the spool
                if not rolled_back_by_conflict(exc) or attempt == CONFLICT_RETRIES:
                    raise
                log.warning("slice up to %s not written (%s, a conflict with another writer); writing it "
                            "again (%d of %d)", time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(sl.until_us / 1e6)),
                            str(exc).strip().splitlines()[0], attempt + 1, CONFLICT_RETRIES)
                time.sleep(0.2 * attempt)
        self.durable_until_us = max(self.durable_until_us, sl.until_us)

    def _write_tx(self, conn: psycopg.Connection, sl: Slice, *, on_conflict: bool) -> None:
        lap = self.phases.laps()
        with conn.cursor() as cur:
            if sl.entities:
                # one statement for all of them (INSERT … SELECT, not a subquery in VALUES:
                # Citus refuses those): on Citus a statement is one write of the reference
                # table on every node, and a ref16 first slice has 14,948 entities
                eid, code, key, ids, cpu, seen_at = zip(*sl.entities, strict=True)
                cur.execute(
                    "INSERT INTO _measure.entity (entity_id, system_id, type_code, key, ids, cpu, first_seen_at)"
                    " SELECT e.entity_id, s.system_id, e.type_code, e.key, e.ids::jsonb, e.cpu,"
                    "        _measure.us_to_timestamptz(e.at)"
                    "   FROM unnest(%s::bigint[], %s::smallint[], %s::text[], %s::text[], %s::smallint[],"
                    "               %s::bigint[]) e (entity_id, type_code, key, ids, cpu, at)"
                    "  CROSS JOIN _measure.collector_state s WHERE s.collector_id = %s"
                    "  ORDER BY e.entity_id ON CONFLICT DO NOTHING",
                    (list(eid), list(code), list(key), list(ids), [c if c >= 0 else None for c in cpu],
                     list(seen_at), self.collector_id),
                )
            lap("write: entities")
            if sl.runs:
                cur.execute("SELECT _measure.run_partitions_for(_measure.us_to_timestamptz(%s),"
                            " _measure.us_to_timestamptz(%s))", (sl.from_min_us, sl.from_max_us))
            for table, columns, payload in (
                ("interval_run", RUN_COLUMNS, sl.runs),
                ("extra_copy", COPY_COLUMNS, sl.extras),
            ):
                if not payload:
                    continue
                target = f"_measure.{table}"
                if on_conflict:
                    cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS _stage_{table} "
                                f"(LIKE _measure.{table}) ON COMMIT DELETE ROWS")
                    target = f"_stage_{table}"
                with cur.copy(f"COPY {target} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as cp:
                    cp.write(COPY_HEADER)
                    for chunk in payload:
                        cp.write(chunk)
                    cp.write(COPY_TRAILER)
                if on_conflict:
                    cur.execute(f"INSERT INTO _measure.{table} ({', '.join(columns)}) "
                                f"SELECT {', '.join(columns)} FROM {target} ON CONFLICT DO NOTHING")
            lap("write: COPY")
            if sl.pack_hours:
                cur.execute("INSERT INTO _measure.pack_todo (hour_at) SELECT _measure.us_to_timestamptz(h)"
                            " FROM (SELECT DISTINCT h FROM unnest(%s::bigint[]) h) x (h)"
                            " ON CONFLICT (hour_at) DO UPDATE SET noted_at = now()",
                            (sl.pack_hours,))
            if sl.from_min_us is not None:
                # Mark the hours these intervals fall in (late data and replays included) and
                # condense exactly those into the tiers, before the slice commits: reads never
                # wait for a scheduler (both engines). Month-level rows, whose cost grows with
                # the month so far, follow at the end of a backfill and in the upkeep.
                cur.execute(
                    "SELECT _measure.note_intervals(system_id, _measure.us_to_timestamptz(%s),"
                    " _measure.us_to_timestamptz(%s))"
                    + (", _measure.condense(system_id, 2000, false)" if self.condense else "")
                    + " FROM _measure.collector_state WHERE collector_id = %s",
                    (sl.from_min_us, sl.from_max_us, self.collector_id),
                )
            lap("write: condense hours" if self.condense else "write: note hours")
            for event, mid, at, usage in sl.control:
                column = {"started": "started_at", "stopped": "stopped_at"}[event]
                state = {"started": "running", "stopped": "stopped"}[event]
                cur.execute(
                    f"UPDATE _measure.measurement SET state = %s, {column} = _measure.us_to_timestamptz(%s),"
                    # statement_timestamp(), not clock_timestamp(): Citus refuses a VOLATILE
                    # function in an UPDATE of a distributed or reference table
                    " usage = coalesce(%s, usage), updated_at = statement_timestamp()"
                    " WHERE measurement_id = %s AND state <> 'stopped'",
                    (state, at, None if usage is None else json.dumps(usage), mid),
                )
            cur.execute(
                # never backwards: a replayed slice (e.g. a measurement's "started" event
                # spooled before an outage) may end before what is already stored
                "UPDATE _measure.collector_state SET durable_until ="
                " greatest(durable_until, _measure.us_to_timestamptz(%s)),"
                " updated_at = now() WHERE collector_id = %s",
                (sl.until_us, self.collector_id),
            )
            lap("write: control, watermark")
