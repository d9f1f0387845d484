"""Writing copies and interval records into PostgreSQL: batched binary COPY, durable spool.

* Rows are encoded for ``COPY … (FORMAT BINARY)`` with numpy structured arrays: one
  ``tobytes()`` per batch, no per-row Python (style P12).
* Entity ids are a 63-bit hash of (system, entity type, identifying fields), so copies can be
  encoded, spooled and replayed without asking the database for ids.
* The collector hands over complete time slices: ``Writer.flush(until_us)`` writes every row
  with a time ≤ until_us in one transaction that also advances the collector's watermark
  (``_measure.collector_state.durable_until``). A slice at or below the watermark is skipped,
  so a replay after a crash stores nothing twice; a primary-key clash (a slice written by a
  run that died before recording its watermark) falls back to INSERT … ON CONFLICT DO NOTHING.
* When the database cannot be reached the slice goes to the spool folder (written to a
  temporary file, fsynced, renamed) and slices are replayed in order once it answers again.
  A full spool raises SpoolFull: the collector stops with that message; nothing is dropped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from collector.catalog import Catalog
from collector.measure.copies import IntervalBatch
from collector.measure.measmon import Copy, entity_ids

log = logging.getLogger(__name__)

PG_EPOCH_US = 946_684_800_000_000  # 2000-01-01 UTC, PostgreSQL's binary timestamp origin
INT8_OID = 20
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
COPY_TRAILER = (-1).to_bytes(2, "big", signed=True)

COPY_COLUMNS = ("measurement_id", "entity_id", "record_at", "copy_at", "copy_kind", "system_id",
                "type_code", "cpu", "error", "counters")
INTERVAL_COLUMNS = ("measurement_id", "entity_id", "record_at", "from_at", "to_at", "delta_us",
                    "closing_kind", "system_id", "type_code", "cpu", "error", "counters")
_FIELD_TYPES = {"measurement_id": ">i4", "entity_id": ">i8", "record_at": ">i8", "copy_at": ">i8",
                "from_at": ">i8", "to_at": ">i8", "delta_us": ">i8", "copy_kind": ">i2",
                "closing_kind": ">i2", "system_id": ">i2", "type_code": ">i2", "cpu": ">i2",
                "error": ">i2"}


class SpoolFull(RuntimeError):
    """The database is unreachable and the spool folder has reached its limit."""


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
    """The binary COPY tuples (no header/trailer) of len(counters) rows; times in Unix µs."""
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


def entity_key(id_fields: tuple[str, ...], ids: dict[str, Any]) -> str:
    return "|".join(f"{f}={ids.get(f, '')}" for f in id_fields)


def entity_id_for(system_id: int, type_code: int, key: str) -> int:
    digest = hashlib.blake2b(f"{system_id}/{type_code}/{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF_FFFF_FFFF


@dataclass
class Slice:
    """Everything to write for times ≤ until_us (one transaction)."""

    until_us: int
    entities: list[tuple[int, int, str, str, int, int]] = field(default_factory=list)
    copies: list[bytes] = field(default_factory=list)
    intervals: list[bytes] = field(default_factory=list)
    n_copies: int = 0
    n_intervals: int = 0
    from_min_us: int | None = None   # earliest and latest FROM-TIMESTAMP of its intervals
    from_max_us: int | None = None
    # (event, measurement id, at_us, usage per entity type at stop or None)
    control: list[tuple[str, int, int, dict | None]] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.entities or self.copies or self.intervals or self.control)


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
                eid = entity_id_for(self.system_id, code, key)
                known[slot] = eid
                out[i] = eid
                cpu = int(table.cpu[slot])
                new_rows.append((eid, code, key, json.dumps(ids, default=str), cpu, at_us))
        return out


class Pipeline:
    """Copies in, encoded slices out: the collector's side of the writer."""

    def __init__(self, catalog: Catalog, tables: dict[str, Any], system_id: int) -> None:
        from collector.measure.copies import IntervalBuilder

        self.catalog = catalog
        self.system_id = system_id
        self.registry = EntityRegistry(catalog, tables, system_id)
        self.builder = IntervalBuilder(catalog)
        self.slice = Slice(until_us=0)
        self.skip_until_us = -1  # copies at or before this time are already in the database

    def on_copy(self, copy: Copy) -> None:
        batch = self.builder.on_copy(copy)
        if copy.at_us <= self.skip_until_us:
            return
        code = self.catalog.entity(copy.entity).code
        ids = self.registry.ids(copy.entity, copy.slots, copy.at_us, self.slice.entities)
        n = len(copy)
        self.slice.copies.append(encode_rows(COPY_COLUMNS, {
            "measurement_id": copy.measurement_id, "entity_id": ids, "record_at": copy.alloc_us,
            "copy_at": copy.at_us, "copy_kind": copy.kind, "system_id": self.system_id,
            "type_code": code, "cpu": copy.cpu, "error": copy.error}, copy.values))
        self.slice.n_copies += n
        if batch is not None and len(batch):
            self._interval(batch, code, ids if batch.slots.size == n else
                           self.registry.ids(copy.entity, batch.slots, copy.at_us, self.slice.entities))

    def _interval(self, b: IntervalBatch, code: int, ids: np.ndarray) -> None:
        self.slice.intervals.append(encode_rows(INTERVAL_COLUMNS, {
            "measurement_id": b.measurement_id, "entity_id": ids, "record_at": b.alloc_us,
            "from_at": b.from_us, "to_at": b.to_us, "delta_us": b.to_us - b.from_us,
            "closing_kind": b.closing_kind, "system_id": self.system_id, "type_code": code,
            "cpu": b.cpu, "error": 0}, b.values))
        self.slice.n_intervals += len(b)
        lo, hi = int(b.from_us.min()), int(b.from_us.max())
        sl = self.slice
        sl.from_min_us = lo if sl.from_min_us is None else min(sl.from_min_us, lo)
        sl.from_max_us = hi if sl.from_max_us is None else max(sl.from_max_us, hi)

    def control(self, event: str, measurement_id: int, at_us: int, usage: dict | None = None) -> None:
        self.slice.control.append((event, measurement_id, at_us, usage))

    def take(self, until_us: int) -> Slice:
        out, self.slice = self.slice, Slice(until_us=0)
        out.until_us = until_us
        return out


class Writer:
    """Writes slices in order; spools them while the database is away."""

    def __init__(self, url: str, collector_id: str, spool_dir: Path, spool_max_bytes: int) -> None:
        self.url = url
        self.collector_id = collector_id
        self.spool_dir = spool_dir
        self.spool_max_bytes = spool_max_bytes
        self.spool_dir.mkdir(parents=True, exist_ok=True)
        self._conn: psycopg.Connection | None = None
        self.durable_until_us = -1
        self.down_since: float | None = None

    # ---------------------------------------------------------------- public

    def flush(self, sl: Slice) -> bool:
        """Write (or spool) one slice. True when it reached the database."""
        if sl.empty():
            return True
        if self._replay_spool():
            try:
                self._write(sl)
                return True
            except psycopg.OperationalError as exc:
                self._went_down(exc)
        self._spool(sl)
        return False

    def spooled(self) -> list[Path]:
        return sorted(self.spool_dir.glob("*.slice"))

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
            log.warning("database unreachable, spooling copies to %s: %s", self.spool_dir, exc)
        self.close()

    def _replay_spool(self) -> bool:
        for path in self.spooled():
            try:
                with path.open("rb") as f:
                    sl = pickle.load(f)
                self._write(sl)
            except psycopg.OperationalError as exc:
                self._went_down(exc)
                return False
            path.unlink()
        if self.down_since is not None:
            log.warning("database reachable again; spool replayed")
            self.down_since = None
        return True

    def _spool(self, sl: Slice) -> None:
        data = pickle.dumps(sl, protocol=pickle.HIGHEST_PROTOCOL)
        used = sum(p.stat().st_size for p in self.spooled())
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
        final = self.spool_dir / f"{seq:012d}-{sl.until_us}.slice"
        tmp = final.with_suffix(".tmp")
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        tmp.rename(final)
        dir_fd = os.open(self.spool_dir, os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _write(self, sl: Slice) -> None:
        if sl.until_us <= self.durable_until_us and not sl.control:
            return
        conn = self._connection()
        try:
            with conn.transaction():
                self._write_tx(conn, sl, on_conflict=False)
        except psycopg.errors.UniqueViolation:
            with conn.transaction():
                self._write_tx(conn, sl, on_conflict=True)
        self.durable_until_us = max(self.durable_until_us, sl.until_us)

    def _write_tx(self, conn: psycopg.Connection, sl: Slice, *, on_conflict: bool) -> None:
        with conn.cursor() as cur:
            if sl.entities:
                cur.executemany(
                    "INSERT INTO _measure.entity (entity_id, system_id, type_code, key, ids, cpu, first_seen_at)"
                    " VALUES (%s, (SELECT system_id FROM _measure.collector_state WHERE collector_id = %s),"
                    " %s, %s, %s::jsonb, %s, _measure.us_to_timestamptz(%s)) ON CONFLICT DO NOTHING",
                    [(eid, self.collector_id, code, key, ids, cpu if cpu >= 0 else None, at)
                     for eid, code, key, ids, cpu, at in sl.entities],
                )
            for table, columns, payload in (
                ("counter_copy", COPY_COLUMNS, sl.copies),
                ("interval_record", INTERVAL_COLUMNS, sl.intervals),
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
                    cur.execute(f"INSERT INTO _measure.{table} SELECT * FROM {target} ON CONFLICT DO NOTHING")
            if sl.from_min_us is not None:
                # Mark the hours these intervals fall in (late data and replays included) and
                # condense exactly those into the tiers (plain PostgreSQL; with TimescaleDB
                # condense() returns at once and the tiers job refreshes them).
                cur.execute(
                    "SELECT _measure.note_intervals(system_id, _measure.us_to_timestamptz(%s),"
                    " _measure.us_to_timestamptz(%s)), _measure.condense(system_id)"
                    " FROM _measure.collector_state WHERE collector_id = %s",
                    (sl.from_min_us, sl.from_max_us, self.collector_id),
                )
            for event, mid, at, usage in sl.control:
                column = {"started": "started_at", "stopped": "stopped_at"}[event]
                state = {"started": "running", "stopped": "stopped"}[event]
                cur.execute(
                    f"UPDATE _measure.measurement SET state = %s, {column} = _measure.us_to_timestamptz(%s),"
                    " usage = coalesce(%s, usage), updated_at = clock_timestamp()"
                    " WHERE measurement_id = %s AND state <> 'stopped'",
                    (state, at, None if usage is None else json.dumps(usage), mid),
                )
            cur.execute(
                "UPDATE _measure.collector_state SET durable_until = _measure.us_to_timestamptz(%s),"
                " updated_at = now() WHERE collector_id = %s",
                (sl.until_us, self.collector_id),
            )
