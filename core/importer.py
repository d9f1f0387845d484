"""Importing interval records from files: ``measuredb import`` and ``POST /import``.

A file holds the interval records of one entity type, one row each, under MEASURE's own field
names (the DDL record names of measure-reference §3-4 as the catalogue spells them)::

    SYSTEM,CPU,FROM-TIMESTAMP,TO-TIMESTAMP,DELTA-TIME,CPU-BUSY-TIME,CPU-QTIME,SWAPS
    \\DEMO,0,2026-03-02T09:00:00-05:00,2026-03-02T09:01:00-05:00,60000000,30000000,1500000,4

Columns (:func:`interval_header` lists them in the order ``measuredb export`` writes them):

* ``SYSTEM`` (or ``SYSTEM-NAME``): the node, e.g. ``\\DEMO``; it must exist (``--create-system``
  creates it from the CLI).
* the identifying fields of the entity type (``schema/catalog/entities.csv`` ``id_fields``,
  upper case with hyphens: ``CPU``, ``PIN``, ``PROCESS-NAME``, ``DEVICE-NAME``, ``PATH`` …),
  all required; ``CPU`` (or ``CPU-NUM``, MEASURE's header field) is optional for the types
  whose identity does not hold it.
* ``FROM-TIMESTAMP`` and ``TO-TIMESTAMP``: ISO 8601 with a UTC offset
  (``2026-03-02T09:00:00-05:00``, ``…Z``) or MEASURE Julian timestamps (microseconds since
  noon 1 January 4713 BC, local civil time of the system). A Julian time in the hour a DST
  change repeats is read as the instant DELTA-TIME agrees with, else the one that continues the
  counter record's previous interval in the file, else the first.
* ``DELTA-TIME`` (µs, optional): must be TO - FROM.
* ``ERROR`` (optional, default 0), ``MEASUREMENT`` (optional: the measurement, i.e. data
  file, the rows belong to; default ``IMPORT`` or ``--measurement``), ``TYPE`` (USERDEF only:
  ACCUM, FACCUM, BUSY, QUEUE, QBUSY or their codes 1-5).
* the counters, by MEASURE name (``CPU-BUSY-TIME`` …): interval values (deltas; the level at
  TO for snapshot and max counters), integers. A counter without a column is stored as 0.
* MEASURE header fields that are not stored (``LOADID``, ``OS-VERSION`` …) are ignored.

Names are matched without regard to case, ``_`` for ``-`` is accepted; any other column is an
error naming it. Without ``--entity`` the entity type is the one the header fits.

How it runs (:func:`import_rows`): rows are parsed and checked in Python a batch at a time
(never the whole file in memory) and staged in the temporary table of one transaction
(``COPY`` from the CLI, ``measure.import_stage`` arrays from the API), then checked against
each other and against the stored data and stored as runs by
``_measure.import_store`` (schema/idempotent/055-import.sql, which documents the rules:
re-importing changes nothing, a different stored value is a bad row and never overwritten),
and the hours written are condensed (hour tiers, shifts, months, years) before the
transaction commits: the tiers are current when the import returns, also for data older
than the raw retention horizon. Any bad row means nothing is stored; every bad row (up to
``max_problems`` lines) is reported as ``FILE:LINE: FIELD: problem``.
"""

from __future__ import annotations

import contextlib
import csv
import difflib
import gc
import io
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, BinaryIO, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import psycopg

try:  # (columns of integers parsed by Arrow when it is installed: 10× NumPy's parsing of text)
    import pyarrow as _pa
    import pyarrow.compute as _pc
except ImportError:  # pragma: no cover - pyarrow is in requirements.lock
    _pa = _pc = None

from core.catalog import (
    KIND_ACCUMULATING,
    KIND_BUSY,
    KIND_ELAPSED,
    KIND_INCREMENTING,
    KIND_QBUSY,
    KIND_QUEUE,
    KIND_RESPONSE,
    KINDS,
    Catalog,
    EntityDef,
    load_catalog,
)
from core.database import scalar
from core.entities import ID_FIELD_RANGES, USER_COUNTER_TYPES, entity_id, entity_key
from core.pgbinary import COPY_HEADER, COPY_TRAILER, PG_EPOCH_US, array_fields, fill_array

__all__ = ["DEFAULT_MEASUREMENT", "ImportFailed", "ImportResult", "Problem", "csv_rows",
           "import_rows", "interval_header", "parquet_rows"]

JULIAN_UNIX_US = 210_866_760_000_000_000  # Julian µs of 1970-01-01 00:00 (measure-reference §3.4)
# MEASURE's times: from its epoch (the 48-bit timestamps count from 1974-12-31; JTS_1975,
# measure-reference §3.4) to 2200; an interval at most MAX_DELTA_US long.
UNIX_MIN_US = 157_766_400_000_000  # 1975-01-01 00:00 UTC
UNIX_MAX_US = 7_258_118_400_000_000  # 2200-01-01 00:00 UTC
JULIAN_MIN = JULIAN_UNIX_US + UNIX_MIN_US
JULIAN_MAX = JULIAN_UNIX_US + UNIX_MAX_US
MAX_DELTA_US = 366 * 86_400_000_000
# What an interval value of a counter may be, by its kind, per µs of the interval: a busy time
# is at most the interval (the entity busy all of it), a queue, response or elapsed time at
# most 65,536 in the queue (statements running) all of it, a count at most 131,072 events per
# µs. Far past anything measured, and it keeps every sum the tiers keep in 64 bits (a month,
# or a whole interval of up to MAX_DELTA_US, times the largest rate, is under 2^62). Levels (snapshot, maximum)
# are at most 2^53, exact as the doubles of JSON and the dashboards.
PER_US_BOUND = {KIND_BUSY: 1, KIND_QBUSY: 1, KIND_QUEUE: 1 << 16, KIND_RESPONSE: 1 << 16,
                KIND_ELAPSED: 1 << 16, KIND_INCREMENTING: 1 << 17, KIND_ACCUMULATING: 1 << 17}
LEVEL_BOUND = 1 << 53
DEFAULT_MEASUREMENT = "IMPORT"
MAX_PROBLEMS = 50
BATCH_ROWS = 5_000
CONDENSE_HOURS = 48  # hours condensed per call (a progress step)

SYSTEM, MEASUREMENT, CPU = "SYSTEM", "MEASUREMENT", "CPU"
FROM, TO, DELTA, ERROR, TYPE = "FROM-TIMESTAMP", "TO-TIMESTAMP", "DELTA-TIME", "ERROR", "TYPE"
ALIASES = {"SYSTEM-NAME": SYSTEM, "CPU-NUM": CPU}
# MEASURE header fields that carry nothing measuredb stores
IGNORED = frozenset({"LOADID", "PREFIX-ID", "INTERVAL-ID", "OS-VERSION", "TEMPLATE-VERSION",
                     "FORMAT-VERSION", "DATA-VERSION", "SUBSYSTEM-VERSION", "OBJECT-UID", "RESERVED"})
USER_TYPE_CODES = {"1": "ACCUM", "2": "BUSY", "3": "QUEUE", "4": "FACCUM", "5": "QBUSY"}
_SYSTEM_RE = re.compile(r"\\[A-Z][A-Z0-9]{0,6}")
_MEASUREMENT_RE = re.compile(r"[A-Z][A-Z0-9]{0,7}")
_UTC = UTC
_EPOCH = datetime(1970, 1, 1, tzinfo=_UTC)
_EPOCH_NAIVE = datetime(1970, 1, 1)
_US = timedelta(microseconds=1)


def field_name(snake_name: str) -> str:
    """A catalogue field's MEASURE name: ``process_name`` → ``PROCESS-NAME``."""
    return snake_name.upper().replace("_", "-")


def interval_header(ent: EntityDef) -> list[str]:
    """The columns of an interval record file of an entity type, in the order export writes."""
    cols = [SYSTEM, MEASUREMENT, *(field_name(f) for f in ent.id_fields)]
    if "cpu" not in ent.id_fields:
        cols.append(CPU)
    cols += [FROM, TO, DELTA, ERROR]
    if ent.name == "userdef":
        cols.append(TYPE)
    return cols + list(ent.measure_names)


def _column(name: Any) -> str:
    n = str(name if name is not None else "").strip().lstrip("\ufeff").strip().upper().replace("_", "-")
    return ALIASES.get(n, n)


# ---------------------------------------------------------------- problems


@dataclass(frozen=True, order=True)
class Problem:
    """One bad field of one row: ``FILE:LINE: FIELD: problem`` (the header is line 1)."""

    line: int
    field: str
    message: str
    where: str = ""

    def __str__(self) -> str:
        return f"{self.where}:{self.line}: {self.field}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "field": self.field, "problem": self.message}


class ImportFailed(Exception):
    """The file has bad rows (or a bad header): nothing was stored."""

    def __init__(self, where: str, problems: list[Problem], total_rows: int, *, cap: int | None = None) -> None:
        self.where = where
        everything = sorted(problems)
        self.total_problems = len(everything)
        self.problems = everything if cap is None else everything[:cap]
        self.total_rows = total_rows  # bad rows in all (more than listed past the cap); 0: the header or file
        super().__init__(self.summary())

    def summary(self) -> str:
        n = self.total_rows
        if n == 0:
            k, shown = self.total_problems, len(self.problems)
            more = f", the first {shown} listed" if shown < k else ""
            return f"{self.where}: cannot be imported ({k} problem{'s' if k != 1 else ''}{more}); nothing was stored"
        shown = len({p.line for p in self.problems})
        more = f" (the first {shown} listed)" if shown < n else ""
        return f"{self.where}: {n} bad row{'s' if n != 1 else ''}{more}; nothing was stored"


@dataclass
class ImportResult:
    where: str
    entity: str  # MEASURE name of the entity type
    rows: int = 0  # data rows read
    stored: int = 0  # interval records stored
    unchanged: int = 0  # already stored, equal
    duplicates: int = 0  # repeated in the file, equal
    hours: int = 0  # UTC hours written (condensed with what else was marked)
    condensed: int = 0  # hours condensed
    deferred: bool = False  # condensed by the caller, with other files (core.transfer)
    system_ids: list[int] = field(default_factory=list)
    systems: list[str] = field(default_factory=list)
    measurements: list[str] = field(default_factory=list)  # NAME (new) …
    missing_counters: list[str] = field(default_factory=list)
    ignored_columns: list[str] = field(default_factory=list)

    def describe(self) -> str:
        parts = [f"{self.where}: {self.rows:,} {self.entity} interval record{'s' if self.rows != 1 else ''}: "
                 f"{self.stored:,} stored, {self.unchanged:,} already stored"]
        if self.duplicates:
            parts.append(f", {self.duplicates:,} repeated in the file")
        if self.systems:
            parts.append(f"; {', '.join(self.systems)}, measurement {', '.join(self.measurements)}")
        if self.stored:
            parts.append(f"; {self.hours:,} hour{'s' if self.hours != 1 else ''} written"
                         + ("" if self.deferred else ", tiers condensed"))
        return "".join(parts)


# ---------------------------------------------------------------- the header


@dataclass
class Layout:
    """Where each field of an entity type's interval record is in the rows of a file."""

    entity: EntityDef
    width: int
    system: int
    measurement: int | None
    ids: list[tuple[str, int, tuple[int, int] | None]]  # (field, column, integer range)
    cpu: int | None  # CPU column when CPU is not an identifying field
    from_: int
    to: int
    delta: int | None
    error: int | None
    user_type: int | None
    counter_pos: list[int]  # catalogue positions (0-based) of the counter columns …
    counter_col: list[int]  # … and their columns
    ignored: list[str]
    missing_counters: list[str]


def _fit(ent: EntityDef, cols: list[str]) -> tuple[list[tuple[int, str, str]], Layout | None]:
    """Problems (column index, column, message) of a header for an entity type, and its layout."""
    ids = {field_name(f): f for f in ent.id_fields}
    counters = {c.measure_name: c.position for c in ent.counters}
    base = {SYSTEM, MEASUREMENT, FROM, TO, DELTA, ERROR}
    if "cpu" not in ent.id_fields:
        base.add(CPU)
    if ent.name == "userdef":
        base.add(TYPE)
    known = base | set(ids) | set(counters) | IGNORED
    problems: list[tuple[int, str, str]] = []
    seen: dict[str, int] = {}
    for i, c in enumerate(cols):
        if not c:
            problems.append((i, f"column {i + 1}", "has no name"))
        elif c in seen:
            problems.append((i, c, f"appears twice (columns {seen[c] + 1} and {i + 1})"))
        elif c not in known:
            close = difflib.get_close_matches(c, sorted(known - IGNORED), n=3, cutoff=0.7)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            problems.append((i, c, f"not a field of {ent.measure_name} interval records{hint}"))
        seen.setdefault(c, i)
    for need in [SYSTEM, *ids, FROM, TO]:
        if need not in seen:
            problems.append((len(cols), need, f"missing: {ent.measure_name} interval records need it"))
    if problems:
        return problems, None
    present = [(counters[c], i) for i, c in enumerate(cols) if c in counters]
    return [], Layout(
        entity=ent, width=len(cols), system=seen[SYSTEM], measurement=seen.get(MEASUREMENT),
        ids=[(f, seen[n], ID_FIELD_RANGES.get(f)) for n, f in ids.items()],
        cpu=seen.get(CPU) if "cpu" not in ent.id_fields else None,
        from_=seen[FROM], to=seen[TO], delta=seen.get(DELTA), error=seen.get(ERROR),
        user_type=seen.get(TYPE), counter_pos=[p for p, _ in present], counter_col=[i for _, i in present],
        ignored=[c for c in cols if c in IGNORED],
        missing_counters=[c.measure_name for c in ent.counters if c.measure_name not in seen])


def layout_for(header: list[Any], entity: str | None, where: str, catalog: Catalog | None = None,
               max_problems: int = MAX_PROBLEMS) -> Layout:
    """The layout of a header, for the given entity type or the one it fits (ImportFailed
    naming the bad columns otherwise, the first `max_problems` of them)."""
    cat = catalog or load_catalog()
    cols = [_column(c) for c in header]
    if not any(cols):
        raise ImportFailed(where, [Problem(1, "header", "the file has no header row (or it is empty)", where)], 0)
    if entity is not None:
        try:
            ent = cat.entity(entity)
        except KeyError as exc:
            raise ImportFailed(where, [Problem(1, "entity", str(exc), where)], 0) from None
        problems, layout = _fit(ent, cols)
        if layout is None:
            raise ImportFailed(where, [Problem(1, c, m, where) for _, c, m in problems], 0, cap=max_problems)
        return layout
    fits = [(e, *_fit(e, cols)) for e in cat]
    ok = [(e, lay) for e, probs, lay in fits if lay is not None]
    if len(ok) == 1:
        return ok[0][1]
    if ok:
        names = ", ".join(e.measure_name for e, _ in ok)
        raise ImportFailed(where, [Problem(1, "header", f"fits the interval records of {names}: "
                                                        "say which (--entity, or entity=)", where)], 0)
    best, probs, _ = min(fits, key=lambda x: (len(x[1]), x[0].code))
    return_probs = [Problem(1, "header", f"fits no entity type's interval records; the closest is "
                                         f"{best.measure_name} (or say which: --entity)", where)]
    return_probs += [Problem(1, c, m, where) for _, c, m in probs]
    raise ImportFailed(where, return_probs, 0, cap=max_problems)


# ---------------------------------------------------------------- values


def _text(v: Any) -> str:
    if v.__class__ is str:  # (CSV fields: the common case first)
        return v.strip()
    return "" if v is None else (v.strip() if isinstance(v, str) else str(v))


def _integer(v: Any, what: str) -> int:
    if v.__class__ is str:  # a CSV field: int() strips blanks as _text does; errors explained below
        try:
            return int(v)
        except ValueError:
            pass
    if isinstance(v, bool):
        raise ValueError(f"{what} must be an integer, not {v!r}")
    if isinstance(v, (int, np.integer)):
        return int(v)
    s = _text(v)
    if not s:
        raise ValueError(f"empty: {what} must be an integer")
    try:
        return int(s)
    except ValueError:
        raise ValueError(f"not an integer: {s!r}") from None


def _strict_ints(vals: list[str] | tuple[str, ...]) -> np.ndarray | None:
    """Fields that are all plain integers (optional sign, digits) as int64, else None."""
    if _pa is not None:
        try:
            return np.asarray(_pc.cast(_pa.array(vals, _pa.string()), _pa.int64()).to_numpy(zero_copy_only=False),
                              dtype=np.int64)
        except (_pa.ArrowInvalid, _pa.ArrowTypeError):
            return None
    try:
        return np.array(list(map(int, vals)), dtype=np.int64)
    except (ValueError, TypeError, OverflowError):
        return None


def _int_column(values: Iterable[str], empty: int | None = None) -> np.ndarray | None:
    """A column of CSV fields as integers (`empty` for blank fields, when given); None when
    a field is not an integer of 64 bits."""
    vals = values if isinstance(values, (list, tuple)) else list(values)
    out = _strict_ints(vals)
    if out is not None or empty is None:
        return out
    blank = [not v.strip() for v in vals]
    try:
        out = np.array(["0" if b else v for v, b in zip(vals, blank, strict=True)], dtype=np.str_).astype(np.int64)
    except (ValueError, OverflowError):
        return None
    out[np.asarray(blank, dtype=bool)] = empty
    return out


def _to_us(at: datetime) -> int:
    return (at - _EPOCH) // _US


@lru_cache(maxsize=1 << 16)
def _iso_us(text: str) -> int:
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not an ISO 8601 time nor a Julian timestamp: {text!r}") from None
    if at.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset: write e.g. {text}+00:00 or {text}Z, "
                         "or a Julian timestamp (local civil time of the system)")
    return _in_range(_to_us(at), text)


def _in_range(us: int, text: str) -> int:
    if not UNIX_MIN_US <= us < UNIX_MAX_US:
        raise ValueError(f"{text} is outside MEASURE's times (1975-01-01 to 2199-12-31)")
    return us


@lru_cache(maxsize=1 << 16)
def _julian_us(jts: int, zone: str) -> tuple[int, ...]:
    """The instants (Unix µs) a Julian local-civil-time stamp can mean in a zone: one, two in
    the repeated hour of a DST change (earlier first), none in the skipped hour."""
    if not JULIAN_MIN <= jts < JULIAN_MAX:
        raise ValueError(f"{jts} is not a Julian timestamp of 1975-2199 (microseconds since noon, "
                         "1 January 4713 BC) nor an ISO 8601 time")
    tz = ZoneInfo(zone)
    naive = _EPOCH_NAIVE + timedelta(microseconds=jts - JULIAN_UNIX_US)
    out: list[int] = []
    for fold in (0, 1):
        at = naive.replace(tzinfo=tz, fold=fold)
        if at.astimezone(_UTC).astimezone(tz).replace(tzinfo=None) != naive:
            continue  # a wall time the zone skips
        us = _to_us(at)
        if us not in out:
            out.append(us)
    return tuple(sorted(out))


def _instants(v: Any, zone: str | None) -> tuple[int, ...]:
    if isinstance(v, datetime):
        if v.tzinfo is None:
            raise ValueError(f"{v.isoformat()} has no time zone")
        return (_in_range(_to_us(v), v.isoformat()),)
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        jts = int(v)
    else:
        s = _text(v)
        if not s:
            raise ValueError("empty: an ISO 8601 time with UTC offset or a Julian timestamp is needed")
        if not s.isdigit():
            return (_iso_us(s),)
        jts = int(s)
    if zone is None:
        raise ValueError("a Julian timestamp is local civil time of its system, which is unknown here")
    found = _julian_us(jts, zone)
    if not found:
        raise ValueError(f"Julian timestamp {jts} is a local time that does not exist in {zone} "
                         "(skipped by a DST change)")
    return found


# ---------------------------------------------------------------- systems


class Systems:
    """System name → (system_id, time zone), from measure.system; created on demand when
    create_time_zone is given (the CLI's --create-system)."""

    def __init__(self, conn: psycopg.Connection, create_time_zone: str | None = None) -> None:
        self.conn = conn
        self.create_time_zone = create_time_zone
        self.known: dict[str, tuple[int, str]] = {}
        self.unknown: dict[str, str] = {}  # name → why it cannot be used
        self.created: list[str] = []

    def get(self, raw: Any) -> tuple[str, int, str]:
        name = _text(raw).upper()
        if not name:
            raise ValueError("empty: the system (node) name is needed, e.g. \\DEMO")
        if not name.startswith("\\"):
            name = "\\" + name
        hit = self.known.get(name)
        if hit is None:
            if name in self.unknown:
                raise ValueError(self.unknown[name])
            row = self.conn.execute("SELECT system_id, time_zone FROM measure.system WHERE system_name = %s",
                                    (name,)).fetchone()
            if row is None:
                try:
                    row = self._create(name)
                except ValueError as exc:
                    self.unknown[name] = str(exc)
                    raise
            hit = self.known[name] = (int(row[0]), row[1])
        return name, hit[0], hit[1]

    def _create(self, name: str) -> tuple[int, str]:
        if self.create_time_zone is None:
            names = [r[0] for r in self.conn.execute("SELECT system_name FROM measure.system ORDER BY 1")]
            known = ", ".join(names) if names else "none yet"
            raise ValueError(f"unknown system {name} (known: {known}); create it first "
                             "(measuredb import --create-system --time-zone ZONE, or measuredb system add)")
        if not _SYSTEM_RE.fullmatch(name):
            raise ValueError(f"{name!r} is not a system name: a backslash, a letter and up to 6 "
                             "letters or digits (\\DEMO)")
        number = scalar(self.conn.execute(
            "SELECT min(n) FROM generate_series(0, 254) n"
            " WHERE n NOT IN (SELECT system_number FROM _measure.system)"))
        if number is None:
            raise ValueError("no free system number (0-254) for a new system")
        sid = scalar(self.conn.execute("INSERT INTO _measure.system (system_name, system_number, time_zone)"
                                       " VALUES (%s, %s, %s) RETURNING system_id",
                                       (name, number, self.create_time_zone)))
        self.created.append(name)
        return sid, self.create_time_zone


def check_time_zone(zone: str) -> str:
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {zone!r}: an IANA name such as America/New_York or UTC") from None
    return zone


# ---------------------------------------------------------------- reading files


class _Counting(io.RawIOBase):
    """A readable binary stream over another (or over an iterator of bytes chunks) that counts
    the bytes read."""

    def __init__(self, source: BinaryIO | Iterable[bytes]) -> None:
        # a stream (it has read), or chunks
        self.stream: BinaryIO | None = cast(BinaryIO, source) if hasattr(source, "read") else None
        self.chunks: Iterator[bytes] | None = None if self.stream is not None else iter(source)
        self.pending = b""
        self.bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.stream is not None:
            data = self.stream.read(len(b))
        else:
            data = self.pending
            while not data and self.chunks is not None:  # (chunks when there is no stream)
                try:
                    data = next(self.chunks)
                except StopIteration:
                    break
            data, self.pending = data[: len(b)], data[len(b):]
        n = len(data or b"")
        b[:n] = data or b""
        self.bytes += n
        return n


MAX_LINE_BYTES = 1 << 20


def csv_rows(source: BinaryIO | Iterable[bytes], counter: list[int] | None = None) -> Iterator[tuple[int, list[Any]]]:
    """(line, fields) of a CSV stream (UTF-8, a BOM allowed), the header first; `counter[0]`
    follows the bytes read. Where the file cannot be read on, _Unreadable names the line."""
    raw = _Counting(source)
    buffered = io.BufferedReader(raw, 1 << 16)
    physical = 0

    def lines() -> Iterator[str]:
        nonlocal physical
        while True:
            data = buffered.readline(MAX_LINE_BYTES)
            if not data:
                return
            physical += 1
            if len(data) == MAX_LINE_BYTES and not data.endswith(b"\n"):
                raise _Unreadable(physical, f"a line longer than {MAX_LINE_BYTES} bytes")
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _Unreadable(physical, f"not UTF-8 text (byte {exc.start + 1} of the line)") from None
            if "\x00" in text:  # PostgreSQL text cannot hold it
                raise _Unreadable(physical, "holds a NUL character")
            yield text.removeprefix("\ufeff") if physical == 1 else text

    reader = csv.reader(lines())
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise _Unreadable(max(physical, 1), f"not readable as CSV: {exc}") from None
        if counter is not None:
            counter[0] = raw.bytes
        yield reader.line_num, row


def parquet_rows(path: Any, counter: list[int] | None = None) -> Iterator[tuple[int, list[Any]]]:
    """(line, values) of a Parquet file: its column names first (line 1), then data row n as
    line n + 1; `counter` = [rows read, rows in all]."""
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is in requirements.lock
        raise _Unreadable(1, "reading Parquet needs pyarrow (pip install 'measuredb[parquet]')") from None
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - any unreadable file
        raise _Unreadable(1, f"not a Parquet file: {exc}") from None
    if counter is not None:
        counter[1] = pf.metadata.num_rows
    yield 1, list(pf.schema_arrow.names)
    line = 1
    for batch in pf.iter_batches(batch_size=BATCH_ROWS):
        cols = [c.to_pylist() for c in batch.columns]
        for row in zip(*cols, strict=True):
            line += 1
            yield line, list(row)
        if counter is not None:
            counter[0] = line - 1


class _Unreadable(Exception):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


# ---------------------------------------------------------------- staging


def _copy_text(v: Any) -> str:
    """A value in COPY's text format."""
    if v is None:
        return "\\N"
    if isinstance(v, str):
        return v.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return str(v)


class _CopyStager:
    """Rows into pg_temp._import_in by COPY (a role that may write it: the CLI), a batch as one
    block of COPY text."""

    COLUMNS = ("line", "system_id", "measurement", "type_code", "entity_id", "key", "ids", "cpu",
               "from_us", "to_us", "delta_us", "error", "user_type", "counters")

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        self.entities: dict[int, str] = {}  # entity id → its columns as COPY text (once per entity)

    def stage(self, rows: list[tuple], counters: np.ndarray, type_code: int) -> None:
        code = str(type_code)
        out = []
        ents = self.entities
        for r, c in zip(rows, counters.tolist(), strict=True):
            ent = ents.get(r[3])
            if ent is None:
                ent = ents[r[3]] = "\t".join((code, str(r[3]), _copy_text(r[4]), _copy_text(r[5])))
            out.append("\t".join((str(r[0]), str(r[1]), _copy_text(r[2]), ent, str(r[6]), str(r[7]), str(r[8]),
                                  str(r[9]), str(r[10]), _copy_text(r[11]), "{" + ",".join(map(str, c)) + "}")))
        out.append("")
        with self.conn.cursor() as cur, cur.copy(
                f"COPY pg_temp._import_in ({', '.join(self.COLUMNS)}) FROM STDIN") as cp:
            cp.write("\n".join(out).encode())


HOUR_US = 3_600_000_000
MAX_RUN = 32_767  # intervals in a run (_measure.interval_run.n is a smallint)
RUN_BUFFER_BYTES = 32 << 20  # rows held for runs before they are sent, whatever the file's length
RUN_FLUSH_ROWS = 20_000  # rows of hours before the latest seen are sent once this many are held


class _RunStager:
    """Rows into pg_temp._import_run as the runs they make (the CLI): the collector's rule
    (collector/sink.py build_runs: per counter record, consecutive intervals of one UTC hour
    with equal DELTA-TIME, CPU and ERROR), encoded with NumPy for ``COPY … (FORMAT BINARY)``,
    each run with the file lines of its intervals. Rows are held until the hours before the
    latest one seen are complete (a file in time order: every run of an hour whole), at most
    RUN_BUFFER_BYTES (an hour in pieces, joined by the database); the entities and measurements go to pg_temp._import_entity and
    pg_temp._import_names at the end (:meth:`finish`). _measure.import_store checks the runs as
    sets and expands them into rows where it must look closer."""

    COLUMNS = ("system_id", "type_code", "meas", "entity_id", "from_at", "delta_us", "n", "cpu", "error",
               "counters", "nonzero", "lines")
    _SCALARS = (("system_id", ">i2"), ("type_code", ">i2"), ("meas", ">i2"), ("entity_id", ">i8"),
                ("from_at", ">i8"), ("delta_us", ">i8"), ("n", ">i2"), ("cpu", ">i2"), ("error", ">i2"))

    def __init__(self, conn: psycopg.Connection, k: int) -> None:
        self.conn = conn
        self.k = k
        self.held: list[tuple[np.ndarray, np.ndarray]] = []  # (row columns, counters) batches
        self.held_rows = 0
        self.latest_hour = -1
        self.entities: dict[int, tuple[int, str, str]] = {}  # entity id → (system, key, ids)
        self.names: dict[tuple[int, str], list[int]] = {}  # (system, measurement) → [number, first line]
        self.type_code = 0

    _ROW = np.dtype([("line", np.int64), ("sid", np.int16), ("meas", np.int16), ("eid", np.int64),
                     ("cpu", np.int16), ("from", np.int64), ("to", np.int64), ("error", np.int16)])

    def stage(self, rows: list[tuple], counters: np.ndarray, type_code: int) -> None:
        self.type_code = type_code
        cols = np.empty(len(rows), dtype=self._ROW)
        c = list(zip(*rows, strict=True))
        # (an entity's system, key and ids follow from its id: the latest of each is as good)
        self.entities.update(zip(c[3], zip(c[1], c[4], c[5], strict=True), strict=True))
        names = self.names
        keys = set(zip(c[1], c[2], strict=True))
        if len(keys) == 1 and (only := keys.pop()) in names:  # (the common case: one known measurement)
            meas_no: Any = names[only][0]
        else:
            for line, sid, meas in zip(c[0], c[1], c[2], strict=True):  # (lines grow: the first is the first)
                if (sid, meas) not in names:
                    names[(sid, meas)] = [len(names), line]
            meas_no = [names[k][0] for k in zip(c[1], c[2], strict=True)]
        if len(names) > 32_767:
            raise ValueError("more than 32,767 measurements in one file")
        cols["line"], cols["sid"], cols["meas"], cols["eid"] = c[0], c[1], meas_no, c[3]
        cols["cpu"], cols["from"], cols["to"], cols["error"] = c[6], c[7], c[8], c[10]
        self.held.append((cols, counters))
        self.held_rows += len(rows)
        self.latest_hour = max(self.latest_hour, int(cols["from"].max()) // HOUR_US)
        if self.held_rows * (self.k * 8 + self._ROW.itemsize) >= RUN_BUFFER_BYTES:
            self.flush(None)
        elif self.held_rows >= RUN_FLUSH_ROWS:
            self.flush(self.latest_hour)

    def flush(self, before_hour: int | None) -> None:
        """Send the held rows of the hours before `before_hour` (all of them: None) as runs."""
        if not self.held:
            return
        cols = np.concatenate([c for c, _ in self.held])
        vals = np.concatenate([v for _, v in self.held])
        if before_hour is not None:
            early = cols["from"] // HOUR_US < before_hour
            if not early.any():
                return
            self.held = [(cols[~early], vals[~early])]
            self.held_rows = int((~early).sum())
            cols, vals = cols[early], vals[early]
        else:
            self.held, self.held_rows = [], 0
        with self.conn.cursor() as cur, cur.copy(
                f"COPY pg_temp._import_run ({', '.join(self.COLUMNS)}) FROM STDIN (FORMAT BINARY)") as cp:
            cp.write(COPY_HEADER)
            for block in self._runs(cols, vals):
                cp.write(block)
            cp.write(COPY_TRAILER)

    def _runs(self, cols: np.ndarray, vals: np.ndarray) -> Iterator[bytes]:
        order = np.lexsort((cols["line"], cols["from"], cols["eid"], cols["meas"], cols["sid"]))
        cols, vals = cols[order], vals[order]
        sid, meas, eid, cpu, err = cols["sid"], cols["meas"], cols["eid"], cols["cpu"], cols["error"]
        frm, to = cols["from"], cols["to"]
        delta = to - frm
        hour = frm // HOUR_US
        brk = np.ones(len(cols), dtype=bool)
        brk[1:] = ((sid[1:] != sid[:-1]) | (meas[1:] != meas[:-1]) | (eid[1:] != eid[:-1]) | (frm[1:] != to[:-1])
                   | (delta[1:] != delta[:-1]) | (cpu[1:] != cpu[:-1]) | (err[1:] != err[:-1])
                   | (hour[1:] != hour[:-1]))
        starts = np.flatnonzero(brk)
        lengths = np.diff(np.append(starts, len(cols)))
        while (lengths > MAX_RUN).any():  # (1-µs intervals: a run of an hour would not fit)
            brk[starts[lengths > MAX_RUN] + MAX_RUN] = True
            starts = np.flatnonzero(brk)
            lengths = np.diff(np.append(starts, len(cols)))
        k = self.k
        for n in np.unique(lengths).tolist():
            sel = starts[lengths == n]
            fields: list[tuple[Any, ...]] = [("nfields", ">i2")]
            for col, typ in self._SCALARS:
                fields += [(col + "_len", ">i4"), (col, typ)]
            fields += array_fields("counters", (n, k))
            fields += [("nonzero_len", ">i4"), ("nonzero", ">i8")]
            fields += array_fields("lines", (n,))
            rows = np.zeros(sel.size, dtype=np.dtype(fields))
            rows["nfields"] = len(self.COLUMNS)
            for col, value in (("system_id", sid[sel]), ("type_code", self.type_code), ("meas", meas[sel]),
                               ("entity_id", eid[sel]), ("from_at", frm[sel] - PG_EPOCH_US),
                               ("delta_us", delta[sel]), ("n", n), ("cpu", cpu[sel]), ("error", err[sel])):
                rows[col + "_len"] = np.dtype(dict(self._SCALARS)[col]).itemsize
                rows[col] = value
            at = sel[:, None] + np.arange(n)[None, :]
            block = vals[at]
            fill_array(rows, "counters", (n, k), block)
            if k <= 63:  # which counters are nonzero in some interval (as _measure.nonzero_mask)
                rows["nonzero_len"] = 8
                rows["nonzero"] = (block != 0).any(axis=1) @ (np.int64(1) << np.arange(k, dtype=np.int64))
            else:
                rows["nonzero_len"] = -1
            fill_array(rows, "lines", (n,), cols["line"][at])
            yield rows.tobytes()

    def finish(self) -> None:
        """The held rows, then the entities and measurements of the runs."""
        self.flush(None)
        with self.conn.cursor() as cur:
            with cur.copy("COPY pg_temp._import_entity (entity_id, system_id, type_code, key, ids) FROM STDIN") as cp:
                for eid, (sid, key, ids) in self.entities.items():
                    cp.write_row((eid, sid, self.type_code, key, ids))
            with cur.copy("COPY pg_temp._import_names (meas, system_id, name, first_line) FROM STDIN") as cp:
                for (sid, name), (no, first_line) in self.names.items():
                    cp.write_row((no, sid, name, first_line))


class _FunctionStager:
    """Rows into pg_temp._import_in through measure.import_stage (the API's role)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def stage(self, rows: list[tuple], counters: np.ndarray, type_code: int) -> None:
        cols = list(zip(*rows, strict=True))
        self.conn.execute(
            "SELECT measure.import_stage(%s::bigint[], %s::smallint[], %s::text[], %s::smallint, %s::bigint[],"
            " %s::text[], %s::jsonb[], %s::smallint[], %s::bigint[], %s::bigint[], %s::bigint[],"
            " %s::smallint[], %s::text[], %s::bigint[], %s::integer)",
            (list(cols[0]), list(cols[1]), list(cols[2]), type_code, list(cols[3]), list(cols[4]),
             list(cols[5]), list(cols[6]), list(cols[7]), list(cols[8]), list(cols[9]), list(cols[10]),
             list(cols[11]), counters.ravel().tolist(), counters.shape[1]))


# ---------------------------------------------------------------- the import


class _Rows:
    """Parses and checks rows against a layout; batches the good ones."""

    def __init__(self, layout: Layout, systems: Systems, measurement: str, where: str) -> None:
        self.lay = layout
        self.systems = systems
        self.measurement = measurement
        self.where = where
        self.ent = layout.entity
        self.eids: dict[tuple[int, tuple[Any, ...]], tuple[int, str, str]] = {}  # → (entity id, key, ids as JSON)
        self.rows: list[tuple] = []
        self.raw_counters: list[list[Any]] = []
        self.raw_columns: list[tuple[Any, ...]] | None = None  # the counters of a batch added by columns
        self.by_line: dict[int, list[Problem]] = {}
        self.worst = 0  # the highest line in by_line
        self.bad_lines: set[int] = set()
        self.bad_total = 0
        self.system_names: set[str] = set()
        self.read = 0  # data rows read
        self.last_to: dict[tuple, int] = {}  # (measurement, (system, ids)) → TO of the record's latest row

    def bad(self, line: int, fld: str, message: str, cap: int) -> None:
        """Note a bad field; the problems of the first `cap` bad lines are kept (counter
        problems are found a batch later, so a line may come after higher ones)."""
        if line not in self.bad_lines:
            self.bad_lines.add(line)
            self.bad_total += 1
        kept = self.by_line
        if line not in kept:
            if len(kept) >= cap:
                if line > self.worst:
                    return
                del kept[self.worst]
            kept[line] = []
            self.worst = max(kept)
        kept[line].append(Problem(line, fld, message, self.where))

    @property
    def problems(self) -> list[Problem]:
        return [p for line in sorted(self.by_line) for p in self.by_line[line]]

    def add(self, line: int, row: list[Any], cap: int) -> None:  # noqa: C901 - a row's checks, every bad field told
        lay = self.lay
        if len(row) != lay.width:
            self.bad(line, "row", f"has {len(row)} fields; the header has {lay.width}", cap)
            return
        errors: list[tuple[str, str]] = []
        zone = sid = None
        try:
            name, sid, zone = self.systems.get(row[lay.system])
            self.system_names.add(name)
        except ValueError as exc:
            errors.append((SYSTEM, str(exc)))
        meas = self.measurement
        if lay.measurement is not None:
            m = _text(row[lay.measurement]).upper()
            if m:
                if _MEASUREMENT_RE.fullmatch(m):
                    meas = m
                else:
                    errors.append((MEASUREMENT, f"{m!r} is not a measurement (data file) name: a letter, "
                                                "then up to 7 letters or digits"))
        ids: dict[str, Any] = {}
        for fld, col, rng in lay.ids:
            v = row[col]
            if rng is not None:
                try:
                    n = _integer(v, field_name(fld))
                except ValueError as exc:
                    errors.append((field_name(fld), str(exc)))
                    continue
                if not rng[0] <= n <= rng[1]:
                    errors.append((field_name(fld), f"{n} is outside {rng[0]}-{rng[1]}"))
                    continue
                ids[fld] = n
            else:
                s = _text(v)
                if not s and fld != "process_name":  # unnamed processes have no name
                    errors.append((field_name(fld), "empty"))
                    continue
                ids[fld] = s
        cpu = ids.get("cpu", -1)
        if lay.cpu is not None and _text(row[lay.cpu]):
            try:
                cpu = _integer(row[lay.cpu], CPU)
                if not 0 <= cpu <= 15:
                    errors.append((CPU, f"{cpu} is outside 0-15"))
            except ValueError as exc:
                errors.append((CPU, str(exc)))
        error = 0
        if lay.error is not None and _text(row[lay.error]):
            try:
                error = _integer(row[lay.error], ERROR)
                if not -32768 <= error <= 32767:
                    errors.append((ERROR, f"{error} is outside -32768-32767"))
            except ValueError as exc:
                errors.append((ERROR, str(exc)))
        user_type = None
        if lay.user_type is not None and _text(row[lay.user_type]):
            t = _text(row[lay.user_type]).upper()
            user_type = USER_TYPE_CODES.get(t, t)
            if user_type not in USER_COUNTER_TYPES:
                errors.append((TYPE, f"{t!r} is not a user counter type ({', '.join(USER_COUNTER_TYPES)}, "
                                     "or 1-5)"))
        delta = None
        if lay.delta is not None and _text(row[lay.delta]):
            try:
                delta = _integer(row[lay.delta], DELTA)
                if delta <= 0:
                    errors.append((DELTA, f"{delta} µs: must be positive"))
            except ValueError as exc:
                errors.append((DELTA, str(exc)))
        frm = to = None
        try:
            frm = _instants(row[lay.from_], zone)
        except ValueError as exc:
            if sid is not None or not _text(row[lay.from_]).isdigit():
                errors.append((FROM, str(exc)))
        try:
            to = _instants(row[lay.to], zone)
        except ValueError as exc:
            if sid is not None or not _text(row[lay.to]).isdigit():
                errors.append((TO, str(exc)))
        f_us = t_us = None
        if frm and to:
            pairs = [(f, t) for f in frm for t in to if t > f]
            if pairs and pairs[0][1] - pairs[0][0] > MAX_DELTA_US:
                errors.append((TO, f"{(pairs[0][1] - pairs[0][0]) / 86_400_000_000:.1f} days after "
                                   "FROM-TIMESTAMP: an interval is at most 366 days"))
                pairs = []
            elif delta is not None and delta > 0 and pairs:
                fit = [p for p in pairs if p[1] - p[0] == delta]
                if not fit:
                    errors.append((DELTA, f"{delta} µs, but TO-TIMESTAMP - FROM-TIMESTAMP is "
                                          f"{pairs[0][1] - pairs[0][0]} µs"))
                pairs = fit
            elif not pairs:
                errors.append((TO, "not after FROM-TIMESTAMP"))
            if len(pairs) > 1 and sid is not None:
                # a Julian time in the repeated hour of a DST change: the interval that
                # continues the counter record's previous one, else the first
                last = self.last_to.get((meas, (sid, tuple(ids.values()))))
                pairs = ([p for p in pairs if p[0] == last] or [p for p in pairs if last is not None and p[0] > last]
                         or pairs)
            if pairs:
                f_us, t_us = pairs[0]
        if errors:
            for pos, col in zip(lay.counter_pos, lay.counter_col, strict=True):
                try:
                    _integer(row[col], "a counter")
                except ValueError as exc:
                    errors.append((self.ent.counters[pos].measure_name, str(exc)))
            for fld, msg in errors:
                self.bad(line, fld, msg, cap)
            return
        assert sid is not None and f_us is not None and t_us is not None
        self.last_to[(meas, (sid, tuple(ids.values())))] = t_us
        ident = (sid, tuple(ids.values()))  # (the fields in the layout's order: the key's, once per entity)
        known = self.eids.get(ident)
        if known is None:
            key = entity_key(self.ent.id_fields, ids)
            known = self.eids[ident] = (entity_id(sid, self.ent.code, key), key, json.dumps(ids))
        self.rows.append((line, sid, meas, known[0], known[1], known[2], cpu, f_us, t_us, t_us - f_us, error,
                          user_type))
        self.raw_counters.append([row[c] for c in lay.counter_col])

    def add_batch(self, batch: list[tuple[int, list[Any]]], cap: int) -> None:
        """Rows of a file, a batch at once: column by column (NumPy) when every field is as
        ``measuredb export`` writes it (text, ISO 8601 times, known systems, every value in
        range), else row by row (:meth:`add`, which names each bad field). The same rows
        either way."""
        if not batch:
            return
        try:
            done = self._add_columns(batch)
        except (ValueError, TypeError, OverflowError, AttributeError):  # (a field that is not text)
            done = False
        if not done:
            for line, row in batch:
                self.add(line, row, cap)

    def _add_columns(self, batch: list[tuple[int, list[Any]]]) -> bool:  # noqa: C901 - every field, as add
        """:meth:`add` for a batch whose every row is good (False, nothing kept: it is not)."""
        lay = self.lay
        if lay.user_type is not None or any(len(r) != lay.width for _, r in batch):
            return False
        n = len(batch)
        lines = [line for line, _ in batch]
        cols = list(zip(*(r for _, r in batch), strict=True))
        systems = {}
        for raw in dict.fromkeys(cols[lay.system]):  # (first seen first, as row by row)
            systems[raw] = self.systems.get(raw)
        sids = [systems[v][1] for v in cols[lay.system]]
        if lay.measurement is None:
            meas: list[str] = [self.measurement] * n
        else:
            names = {}
            for raw in dict.fromkeys(cols[lay.measurement]):
                m = _text(raw).upper()
                if m and not _MEASUREMENT_RE.fullmatch(m):
                    return False
                names[raw] = m or self.measurement
            meas = [names[v] for v in cols[lay.measurement]]
        values: list[list[Any]] = []
        cpu: Any = None
        for fld, col, rng in lay.ids:
            if rng is not None:
                a = _int_column(cols[col])
                if a is None or ((a < rng[0]) | (a > rng[1])).any():
                    return False
                values.append(a.tolist())
                if fld == "cpu":
                    cpu = a
            else:
                v = [x.strip() for x in cols[col]]
                if fld != "process_name" and not all(v):
                    return False
                values.append(v)
        if lay.cpu is not None:
            cpu = _int_column(cols[lay.cpu], 0)
            if cpu is None or ((cpu < 0) | (cpu > 15)).any():
                return False
            blank = [not v.strip() for v in cols[lay.cpu]] if (cpu == 0).any() else []
            if any(blank):  # (no CPU: -1)
                cpu[np.asarray(blank, dtype=bool)] = -1
        elif cpu is None:
            cpu = np.full(n, -1, np.int64)
        error: np.ndarray | None = np.zeros(n, np.int64)
        if lay.error is not None:
            error = _int_column(cols[lay.error], 0)
        if error is None or ((error < -32768) | (error > 32767)).any():
            return False
        frm = np.array([_iso_us(v) for v in cols[lay.from_]], dtype=np.int64)
        to = np.array([_iso_us(v) for v in cols[lay.to]], dtype=np.int64)
        delta = to - frm
        if not ((delta > 0) & (delta <= MAX_DELTA_US)).all():
            return False
        if lay.delta is not None:
            given = _int_column(cols[lay.delta], 0)
            if given is None or ((given != 0) & (given != delta)).any() or (given < 0).any():
                return False
            if (given == 0).any() and any(_text(cols[lay.delta][i]) for i in np.flatnonzero(given == 0).tolist()):
                return False  # a DELTA-TIME of 0 (not an empty one): add says why
        # every field is good: the rows as add keeps them
        idents = list(zip(sids, zip(*values, strict=True), strict=True)) if values else [(sid, ()) for sid in sids]
        eids = self.eids
        found = [eids.get(i) for i in idents]
        fields = [f for f, _, _ in lay.ids]
        for k, hit in enumerate(found):
            if hit is None:
                ident = idents[k]
                hit = eids.get(ident)
                if hit is None:
                    ids = dict(zip(fields, ident[1], strict=True))
                    key = entity_key(self.ent.id_fields, ids)
                    hit = eids[ident] = (entity_id(ident[0], self.ent.code, key), key, json.dumps(ids))
                found[k] = hit
        known = cast(list[tuple[int, str, str]], found)
        f_list, t_list = frm.tolist(), to.tolist()
        self.last_to.update(zip(zip(meas, idents, strict=True), t_list, strict=True))
        self.system_names.update(name for name, _, _ in systems.values())
        self.rows.extend(zip(lines, sids, meas, [h[0] for h in known], [h[1] for h in known], [h[2] for h in known],
                             cpu.tolist(), f_list, t_list, delta.tolist(), error.tolist(), [None] * n, strict=True))
        self.raw_columns = [cols[c] for c in lay.counter_col]
        return True

    def take(self, cap: int) -> tuple[list[tuple], np.ndarray]:
        """The batched rows whose counters are MEASURE values, with their counters (every
        counter of the entity type, catalogue order); rows with bad counters are reported."""
        rows, raw, columns = self.rows, self.raw_counters, self.raw_columns
        self.rows, self.raw_counters, self.raw_columns = [], [], None
        k = len(self.ent.counters)
        out = np.zeros((len(rows), k), dtype=np.int64)
        if not rows or not self.lay.counter_col:
            return rows, out
        bad: dict[int, list[tuple[str, str]]] = {}
        parsed: list[np.ndarray] | None = None
        if columns is not None:  # (a batch added by columns: each column parsed at once)
            each = [_strict_ints(c) for c in columns]
            if all(c is not None for c in each):
                parsed = cast(list[np.ndarray], each)
            else:
                raw = [list(r) for r in zip(*columns, strict=True)]
        try:
            if parsed is not None:
                out[:, self.lay.counter_pos] = np.column_stack(parsed)
            else:
                vals = np.array(raw, dtype=np.str_ if isinstance(raw[0][0], str) else object)
                out[:, self.lay.counter_pos] = vals.astype(np.int64)
        except (ValueError, OverflowError, TypeError):
            for i, raw_row in enumerate(raw):
                for pos, v in zip(self.lay.counter_pos, raw_row, strict=True):
                    name = self.ent.counters[pos].measure_name
                    try:
                        n = _integer(v, name)
                        if not -(1 << 63) <= n < (1 << 63):
                            raise ValueError(f"{n} does not fit in 64 bits")
                        out[i, pos] = n
                    except ValueError as exc:
                        bad.setdefault(i, []).append((name, str(exc)))
        self._check_values(rows, out, bad)
        for i in sorted(bad):
            for name, message in bad[i]:
                self.bad(rows[i][0], name, message, cap)
        keep = [i for i in range(len(rows)) if i not in bad]
        return [rows[i] for i in keep], out[keep]

    def _check_values(self, rows: list[tuple], out: np.ndarray, bad: dict[int, list[tuple[str, str]]]) -> None:
        """MEASURE's range of each value (PER_US_BOUND, LEVEL_BOUND): never negative, a busy
        time not longer than its interval, nothing a tier's 64-bit sum could overflow."""
        pos = np.asarray(self.lay.counter_pos)
        vals = out[:, pos]
        delta = np.array([r[9] for r in rows], dtype=np.float64)
        kinds = self.ent.kinds[pos]
        per_us = np.array([PER_US_BOUND.get(int(k), 0) for k in kinds], dtype=np.float64)
        bound = np.where(per_us > 0, delta[:, None] * per_us[None, :], float(LEVEL_BOUND))
        rows_bad, cols_bad = np.nonzero((vals < 0) | (vals > bound))
        for i, j in zip(rows_bad.tolist(), cols_bad.tolist(), strict=True):
            c = self.ent.counters[int(pos[j])]
            v, d = int(vals[i, j]), int(delta[i])
            if v < 0:
                msg = f"{v} is negative: an interval's counter value is never below 0"
            elif kinds[j] in (KIND_BUSY, KIND_QBUSY):
                msg = f"{v} µs is longer than the interval ({d} µs): a {KINDS[kinds[j]]} time is at most DELTA-TIME"
            elif per_us[j] > 0:
                msg = (f"{v} is more than {int(per_us[j]):,} per µs of the interval ({d} µs): not a measured "
                       "value (a tier's 64-bit sum could not hold it)")
            else:
                msg = f"{v} is more than 2^53: not a measured level"
            if any(name == c.measure_name for name, _ in bad.get(i, [])):
                continue
            bad.setdefault(i, []).append((c.measure_name, msg))

def _db_problems(detail: str | None, ent: EntityDef, where: str) -> tuple[list[Problem], int]:
    """The bad rows _measure.import_store found (its exception's DETAIL) as problems."""
    try:
        data = json.loads(detail or "")
    except ValueError:
        return [Problem(0, "file", detail or "the database refused the rows", where)], 1
    out = []
    for p in data.get("problems", []):
        line, kind, stored = p["line"], p["kind"], p.get("stored") or {}
        if kind == "file_conflict":
            out.append(Problem(line, FROM, f"the same interval (counter record and FROM-TIMESTAMP) as line "
                                           f"{p['other_line']} with other values", where))
        elif kind == "file_overlap":
            out.append(Problem(line, FROM, f"overlaps the interval of line {p['other_line']} "
                                           "(same counter record)", where))
        elif kind == "stored_conflict":
            fld, msg = _difference(stored, ent)
            out.append(Problem(line, fld, f"already stored with another value ({msg}); stored data is "
                                          "never overwritten", where))
        elif kind == "stored_overlap":
            f = datetime.fromtimestamp(stored["from_us"] / 1e6, _UTC).isoformat()
            out.append(Problem(line, FROM, f"overlaps the stored interval from {f} (DELTA-TIME "
                                           f"{stored['delta_us']} µs) of the same counter record; stored "
                                           "data is never overwritten", where))
        elif kind == "type_conflict":
            out.append(Problem(line, TYPE, f"line {stored.get('line')} gives this counter TYPE "
                                           f"{stored.get('type')}", where))
        elif kind == "type_contab":
            out.append(Problem(line, TYPE, f"the measurement's CONTAB has this counter as "
                                           f"{stored.get('type')}", where))
        else:  # pragma: no cover - a kind added to the SQL and not here
            out.append(Problem(line, p.get("field") or "row", kind, where))
    return out, int(data.get("total", len(out)))


def _difference(stored: dict[str, Any], ent: EntityDef) -> tuple[str, str]:
    fv = stored.get("file") or {}
    if stored.get("delta_us") != fv.get("delta_us"):
        return DELTA, f"stored {stored.get('delta_us')}, file {fv.get('delta_us')}"
    if stored.get("cpu") != fv.get("cpu"):
        return CPU, f"stored {stored.get('cpu')}, file {fv.get('cpu')}"
    if stored.get("error") != fv.get("error"):
        return ERROR, f"stored {stored.get('error')}, file {fv.get('error')}"
    for c, a, b in zip(ent.counters, stored.get("counters") or [], fv.get("counters") or [], strict=False):
        if a != b:
            return c.measure_name, f"stored {a}, file {b}"
    return FROM, "stored differently"


def import_rows(conn: psycopg.Connection, rows: Iterator[tuple[int, list[Any]]], *, where: str,
                entity: str | None = None, measurement: str | None = None,
                create_time_zone: str | None = None, stage: str = "copy",
                max_problems: int = MAX_PROBLEMS, condense: bool = True,
                progress: Callable[[str, int], None] | None = None) -> ImportResult:
    """Import the rows of one file (header first; see :func:`csv_rows`, :func:`parquet_rows`)
    in the connection's transaction, and condense the hours written (with `condense` false the
    caller does, once for several files: :func:`condense_imported`). Raises ImportFailed
    (nothing stored: the caller rolls back) with every bad row up to `max_problems` lines.
    `progress(phase, n)` is called with ('rows', rows read) and ('condense', hours done)."""
    meas = (measurement or DEFAULT_MEASUREMENT).strip().upper()
    if not _MEASUREMENT_RE.fullmatch(meas):
        raise ImportFailed(where, [Problem(1, MEASUREMENT, f"{meas!r} is not a measurement (data file) name: "
                                                           "a letter, then up to 7 letters or digits", where)], 0)
    try:
        first = next(rows, None)
    except _Unreadable as exc:
        raise ImportFailed(where, [Problem(exc.line, "file", exc.message, where)], 0) from None
    if first is None:
        raise ImportFailed(where, [Problem(1, "header", "the file is empty", where)], 0)
    layout = layout_for(first[1], entity, where, max_problems=max_problems)
    ent = layout.entity
    conn.execute("SELECT measure.import_begin()")
    stager: _RunStager | _CopyStager | _FunctionStager
    if stage != "copy":
        stager = _FunctionStager(conn)
    elif layout.user_type is None:
        stager = _RunStager(conn, len(ent.counters))
    else:  # (USERDEF with TYPE: the counter types are checked row by row)
        stager = _CopyStager(conn)
    parser = _Rows(layout, Systems(conn, create_time_zone), meas, where)

    def flush() -> None:
        good, counters = parser.take(max_problems)
        if good:
            stager.stage(good, counters, ent.code)

    with _fewer_collections():
        _read(rows, parser, flush, max_problems, progress)
    if isinstance(stager, _RunStager):
        stager.finish()
    if progress:
        progress("rows", parser.read)
    n = parser.read
    check_only = parser.bad_total > 0
    try:
        summary = scalar(conn.execute("SELECT measure.import_store(%s, %s)", (max_problems, check_only)))
    except psycopg.errors.NumericValueOutOfRange:
        raise _overflow(where) from None
    except psycopg.errors.InvalidParameterValue as exc:
        if not (exc.diag.message_primary or "").startswith("import:"):
            raise
        more, total = _db_problems(exc.diag.message_detail, ent, where)
        problems = parser.problems + more
        lines = sorted({p.line for p in problems})[:max_problems]
        raise ImportFailed(where, [p for p in problems if p.line in lines],
                           parser.bad_total + total) from None
    if check_only:
        raise ImportFailed(where, parser.problems, parser.bad_total)
    result = ImportResult(where=where, entity=ent.measure_name, rows=n, stored=int(summary["stored"]),
                          unchanged=int(summary["unchanged"]), duplicates=int(summary["duplicates"]),
                          hours=int(summary["hours"]), systems=sorted(parser.system_names),
                          measurements=[m["name"] + (" (new)" if m["created"] else "")
                                        for m in summary["measurements"]],
                          missing_counters=layout.missing_counters, ignored_columns=layout.ignored)
    result.system_ids = list(summary["systems"] or [])
    result.deferred = not condense
    if result.stored and condense:
        result.condensed = condense_imported(conn, result.system_ids, where=where, progress=progress)
    return result



def _read(rows: Iterator[tuple[int, list[Any]]], parser: _Rows, flush: Callable[[], None], max_problems: int,
          progress: Callable[[str, int], None] | None) -> None:
    """The data rows into the parser a batch at a time (parser.read counts them), each batch
    flushed to the stager."""
    batch: list[tuple[int, list[Any]]] = []
    n = 0
    try:
        for line, row in rows:
            if not row or (len(row) == 1 and not _text(row[0])):
                continue  # a blank line
            n += 1
            batch.append((line, row))
            if len(batch) >= BATCH_ROWS:
                parser.add_batch(batch, max_problems)
                parser.read = n
                batch = []
                flush()
                if progress:
                    progress("rows", n)
    except _Unreadable as exc:
        parser.add_batch(batch, max_problems)
        batch = []
        parser.bad(exc.line, "file", exc.message, max_problems)
    parser.add_batch(batch, max_problems)
    parser.read = n
    flush()


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """Python's cyclic garbage collector run 10× less often (a batch makes tens of thousands of
    short-lived tuples, none of them cyclic: collecting after every 700 cost 17 % of a parse)."""
    before = gc.get_threshold()
    gc.set_threshold(before[0] * 10, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)

def condense_imported(conn: psycopg.Connection, system_ids: Iterable[int], *, where: str,
                      progress: Callable[[str, int], None] | None = None) -> int:
    """Condense the hours the files imported in this transaction wrote (hours, then shifts,
    months and years), a batch at a time; the hours done."""
    condensed = 0
    try:
        conn.execute("SELECT measure.import_analyze()")  # (the planner sees the rows just stored)
        for sid in sorted(set(system_ids)):
            while True:
                done = scalar(conn.execute("SELECT measure.import_condense(%s::smallint, %s, false)",
                                           (sid, CONDENSE_HOURS)))
                if not done:
                    break
                condensed += done
                if progress:
                    progress("condense", condensed)
            conn.execute("SELECT measure.import_condense(%s::smallint, 0, true)", (sid,))
    except psycopg.errors.NumericValueOutOfRange:
        raise _overflow(where) from None
    return condensed


def _overflow(where: str) -> ImportFailed:
    """A sum of the tiers past 64 bits: each value was within its bound, but together (many
    entities summed into one file's or system's row) they are not measured values."""
    return ImportFailed(where, [Problem(0, "file", "its counter values add up past what a tier's 64-bit sums "
                                                   "hold: they are not measured values (check the counters' "
                                                   "units and the intervals)", where)], 0)
