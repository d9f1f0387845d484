"""MEASREAD / MEASREAD_DIFF_ over stored data (measure-reference §6), for the API and MEASCOM.

Plain functions over a psycopg connection (any role that can read ``measure.entity``,
``measure.interval_record`` and ``measure.measurement``: the owner, measure_api, measure_reader).
The REST API (api/counters/) and the MEASCOM interpreter's LIST / LISTALL / LISTACTIVE
(collector/meascom/listing.py) both read through here: one selection, one summing rule, one
RATE ON (``measure.rate``).

What a read selects (:class:`ReadQuery`), always within one measurement (a data file):

* **entities**: one entity type and a descriptor with wildcards, exactly as in CONTAB
  (:func:`collector.measure.contab.normalize_fields` validates it,
  :meth:`EntityDescriptor.matches` selects; absent field, ``'*'`` or ``-1`` = wildcard).
  ``descriptors`` (several) selects the entities matching any of them (``LIST DISC $A, $B``).
* **which records** (:attr:`ReadResult.mode`):

  - ``latest`` (nothing given): MEASREAD's default, the most recent interval record of each
    entity (written at the last interval, at entity stop or at measurement stop).
  - ``nearest`` (``at``, optional ``tolerance``): per entity the record whose TO-TIMESTAMP is
    closest to ``at``, within ±tolerance when given; an entity with no record there is
    omitted (MEASREAD's nomtime/timetol, User's Guide behaviour). Ties: the earlier record.
  - ``summary`` (``from_at`` and/or ``to_at``, or ``summary=True`` for the whole
    measurement): MEASREAD_DIFF_ with ``all^recs = 0``: one record per entity for the window
    = the sum of the deltas of its interval records lying wholly inside the window (a
    missing end is the measurement's start / end; see **window ends**). FROM/TO-TIMESTAMP of
    the summary are the first interval's from and the last one's to, DELTA-TIME is the sum
    of the intervals' DELTA-TIMEs (a gap is not counted as measured time). Snapshot, maxq
    and maxvalue counters are not summed: they take the value of the last interval
    (``STARTING-…``/``…-START`` snapshots: of the first interval), as MEASREAD_DIFF_ takes
    them from the record at to^time (from^time). ERROR is the interval's ERROR of largest
    magnitude. An entity without an interval in the window is omitted.
  - ``intervals`` (``all_records=True``, LISTALL / ``all^recs = 1``): every interval record in
    the window, in time order (FROM-TIMESTAMP, then entity).

* **window ends** (``snap``; MEASREAD_DIFF_'s timetol). Copies are taken at interval
  boundaries, so a window end rarely falls on one; ``snap`` says how each end meets the
  entity's copy times (the FROM/TO-TIMESTAMPs of its interval records):

  - ``inside`` (default; timetol ≥ 0): the window is [from_at − tolerance, to_at + tolerance]
    as given (tolerance 0 when not given); only intervals wholly inside it count.
  - ``enclose`` (timetol = −1): FROM widens to the entity's latest copy time at or before it,
    TO to its earliest copy time at or after it.
  - ``nearest`` (MEASCOM LIST / LISTALL): each end moves to the entity's copy time nearest
    to it (equally near: the one that widens the window), so ``FROM 23:00, FOR 1 HOURS`` over
    hourly copies at hh:05 selects 23:05–00:05 (the 1986 article's "hour 23"). A window with
    both ends that then holds no whole interval (narrower than one interval) selects the
    interval overlapping it most.

* **initial values**: nothing to do here. When a measurement shares an already nonzero
  counter record, the collector stores an initial-value copy and the first interval record
  is computed against it (collector/measure/copies.py), so interval records already hold
  only this measurement's activity. Likewise CPU records (cumulative since CPU load) are
  differenced at ingest. Live records (MEASREADACTIVE) are differenced by :func:`difference`.
* **RATE ON** (``rate=True``, MEASURE's default) per counter kind by ``measure.rate`` in SQL
  (schema/idempotent/010-interface.sql, the one place of the reduction, style P3): per second
  (incrementing, accumulating), busy % (busy, qbusy, elapsed), average queue length (queue), average
  response per transaction in µs (response ÷ the entity's TRANSACTIONS delta); snapshot, maxq
  and maxvalue as is. RATE OFF gives raw deltas (µs, counts). USERDEF ``TIME-VALUE`` is rated
  by the TYPE of its counter in the measurement's CONTAB (ACCUM/FACCUM per second, BUSY %,
  QUEUE average length, QBUSY %). Rated values are floats, or exact Decimals with ``exact``.
* **counters**: by MEASURE name (``CPU-BUSY-TIME``) or snake name (``cpu_busy_time``), any
  case, validated against the catalogue and turned into array positions passed as query
  parameters; no SQL text is ever built from request text.
* ``by``: order by a counter's (rated, if RATE ON) value, highest first (``descending=False``:
  lowest first); missing values (÷0) last; ties by entity. ``by`` may also name an
  identifying field (``cpu``, GROUP, MODULE, SLOT …): by it, lowest first. Without ``by``: by
  the entity's identifying fields. With ``all_records`` only on an unpaged read
  (``limit=None``; intervals otherwise come in time order).
* ``if_``: keep records where ``counter relop value`` (relop ``= <> < > <= >=``; the value
  compared is rated when ``rate`` is on, MEASREAD_DIFF_'s rated flag), or where a numeric
  identifying field compares so.
* ``zero_reports=False``: drop records whose selected counters are all zero (raw).
* ``totals`` (MEASREAD_DIFF_ totals 0/1/2): ``exclude`` (default), ``include`` or ``only`` a
  TOTAL record (:attr:`ReadResult.total`) over the records kept (all pages): counters summed,
  snapshots summed, maxq/maxvalue the largest; FROM the earliest, TO the latest, DELTA-TIME the
  longest member's (so a busy total is the sum of the members' percentages), rated by
  ``measure.rate`` like any record. ``only`` returns no individual records.
* **paging**: keyset. ``limit`` records per page, ``next_cursor`` (opaque) continues after the
  last record returned; a page never repeats or skips a record of an unchanged result.
  ``limit=None`` (library callers such as MEASCOM) returns every record at once.

Errors are :class:`ReadError` with ``field`` naming the query field and ``status`` 404 for an
unknown measurement or counter, 422 for any other bad value.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

import psycopg

from collector.measure.contab import Contab, DescriptorError, EntityDescriptor, normalize_fields
from core.catalog import (
    KIND_MAXQ,
    KIND_MAXVALUE,
    KIND_SNAPSHOT,
    CounterDef,
    EntityDef,
    UnknownCounter,
    UnknownEntityType,
    load_catalog,
)
from core.database import scalar

__all__ = [
    "MAX_LIMIT",
    "RELOPS",
    "SNAPS",
    "TOTALS",
    "Condition",
    "EntityRow",
    "GivenRecord",
    "ReadError",
    "ReadQuery",
    "ReadResult",
    "Record",
    "counter_columns",
    "counter_kind",
    "difference",
    "entity_def",
    "measurement_info",
    "rate_unit",
    "rate_values",
    "read",
    "read_given",
    "resolve_counters",
    "select_entities",
]

MAX_LIMIT = 1000
RELOPS: dict[str, Any] = {"=": operator.eq, "<>": operator.ne, "<": operator.lt,
                          ">": operator.gt, "<=": operator.le, ">=": operator.ge}
SNAPS = ("inside", "nearest", "enclose")
TOTALS = ("exclude", "include", "only")
# A response counter is rated per transaction: measure-reference §2 pairs RESPONSE-TIME with
# the entity's TRANSACTIONS counter (CPU, LINE, TERMINAL).
PAIRED_COUNTER = "transactions"
# USERDEF TIME-VALUE takes its kind from the CONTAB counter TYPE (counters.csv help text).
USERDEF_KINDS = {"ACCUM": "accumulating", "FACCUM": "accumulating", "BUSY": "busy",
                 "QUEUE": "queue", "QBUSY": "qbusy"}
LEVEL_KINDS = (KIND_SNAPSHOT, KIND_MAXQ, KIND_MAXVALUE)
_ALL_BATCH = 5000  # rows per statement of an unpaged LISTALL


class ReadError(ValueError):
    """A read cannot be done as asked. ``field`` names the query field; ``status`` is 404 for
    an unknown measurement or counter, otherwise 422."""

    def __init__(self, message: str, *, field: str | None = None, status: int = 422) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status


@dataclass(frozen=True)
class Condition:
    """``IF counter relop value`` (or ``IF id-field relop value``)."""

    counter: str
    op: str
    value: float | Decimal


@dataclass(frozen=True)
class ReadQuery:
    entity: str
    descriptor: Mapping[str, Any] = field(default_factory=dict)
    counters: Sequence[str] = ()  # empty: every counter of the entity type
    from_at: datetime | None = None
    to_at: datetime | None = None
    at: datetime | None = None
    tolerance: timedelta | None = None
    all_records: bool = False
    rate: bool = True
    by: str | None = None
    descending: bool = True
    if_: Condition | None = None
    zero_reports: bool = True
    limit: int | None = 100  # None: every record, no paging (library callers)
    cursor: str | None = None
    descriptors: Sequence[Mapping[str, Any]] = ()  # several: entities matching any of them
    snap: str = "inside"  # window ends: inside | enclose (timetol −1) | nearest (MEASCOM LIST)
    summary: bool = False  # MEASREAD_DIFF_ over the whole measurement without from_at/to_at
    totals: str = "exclude"  # exclude | include | only
    exact: bool = False  # rated values as exact Decimals instead of floats


@dataclass(frozen=True)
class EntityRow:
    entity_id: int | None
    key: str
    ids: dict[str, Any]
    cpu: int | None


@dataclass
class Record:
    entity_id: int | None  # None: a TOTAL record (or a live entity not stored yet)
    key: str
    ids: dict[str, Any]
    cpu: int | None
    from_at: datetime
    to_at: datetime
    delta_us: int
    intervals: int
    values: dict[str, int | float | Decimal | None]  # snake counter name -> value (rated or raw)
    error: int = 0
    raw: dict[str, int | None] = field(default_factory=dict)  # the raw values, same counters
    kinds: dict[str, str] = field(default_factory=dict)  # rated by another kind than the
    # catalogue's (USERDEF TIME-VALUE: its CONTAB counter TYPE)


ReadMode = Literal["latest", "nearest", "summary", "intervals", "active"]


@dataclass
class ReadResult:
    measurement_id: int | None
    entity: EntityDef
    mode: ReadMode
    rate: bool
    counters: list[CounterDef]
    records: list[Record]
    next_cursor: str | None
    total: Record | None = None  # with totals include / only


@dataclass(frozen=True)
class GivenRecord:
    """A record read elsewhere (a live counter record, MEASREADACTIVE): raw values in
    catalogue order, already differenced (:func:`difference`)."""

    ids: dict[str, Any]
    from_at: datetime
    to_at: datetime
    delta_us: int
    counters: Sequence[int | None]
    entity_id: int | None = None
    key: str = ""
    cpu: int | None = None
    error: int = 0


@dataclass(frozen=True)
class MeasurementInfo:
    measurement_id: int
    system_id: int
    name: str
    state: str
    interval_us: int | None
    contab: Contab | None


# ---------------------------------------------------------------- validation helpers


def entity_def(entity: str | int) -> EntityDef:
    try:
        return load_catalog().entity(entity)
    except UnknownEntityType as exc:
        raise ReadError(str(exc), field="entity") from None


def resolve_counters(ent: EntityDef, names: Sequence[str], *, field: str = "counters") -> list[CounterDef]:
    """Catalogue counters for MEASURE or snake names (all of them for an empty list)."""
    if not names:
        return list(ent.counters)
    out: list[CounterDef] = []
    for n in names:
        try:
            c = ent.counter(n)
        except UnknownCounter as exc:
            raise ReadError(str(exc), field=field, status=404) from None
        if c not in out:
            out.append(c)
    return out


def _item(ent: EntityDef, name: str, field: str) -> CounterDef | str:
    """A BY / IF item: an identifying field (its snake name) or a counter."""
    key = str(name).strip().lower().replace("-", "_")
    if key in ent.id_fields:
        return key
    return resolve_counters(ent, [name], field=field)[0]


def rate_unit(c: CounterDef, kind: str | None = None) -> str:
    """The unit of a counter's RATE ON value."""
    kind = kind or c.kind
    return {"incrementing": f"{c.unit}/s", "accumulating": f"{c.unit}/s", "busy": "%",
            "qbusy": "%", "elapsed": "%", "queue": "length", "response": "us/transaction"}.get(kind, c.unit)


def counter_columns(ent: EntityDef, counters: Sequence[CounterDef], rate: bool) -> list[dict[str, Any]]:
    return [{"name": c.name, "measure_name": c.measure_name, "kind": c.kind,
             "unit": rate_unit(c) if rate else c.unit} for c in counters]


def _is_start_snapshot(c: CounterDef) -> bool:
    # Same rule as collector/measure/copies.py: the snapshot holds its value at FROM.
    return c.kind == "snapshot" and (c.measure_name.startswith("STARTING-")
                                     or c.measure_name.endswith("-START"))


def difference(ent: EntityDef, later: Sequence[int], earlier: Sequence[int] | None) -> list[int]:
    """MEASREAD_DIFF_ of two copies of one counter record: ``later − earlier`` for the
    counters that accumulate, the later copy's value for snapshot / maxq / maxvalue counters
    (the earlier one's for ``STARTING-…`` snapshots). ``earlier`` None: the record's
    allocation (all zero), so the values are the later copy's."""
    if earlier is None:
        return [int(v) for v in later]
    out = []
    for c, a, b in zip(ent.counters, later, earlier, strict=True):
        if c.kind_code not in LEVEL_KINDS:
            out.append(int(a) - int(b))
        else:
            out.append(int(b) if _is_start_snapshot(c) else int(a))
    return out


# ---------------------------------------------------------------- database lookups


def measurement_info(conn: psycopg.Connection, measurement_id: int) -> MeasurementInfo:
    row = conn.execute(
        "SELECT m.measurement_id, s.system_id, m.name, m.state, "
        "       (m.interval_seconds * 1000000)::bigint, m.contab "
        "  FROM measure.measurement m JOIN measure.system s USING (system_name) "
        " WHERE m.measurement_id = %s",
        (measurement_id,),
    ).fetchone()
    if row is None:
        raise ReadError(f"no measurement {measurement_id}", field="measurement_id", status=404)
    try:
        contab = Contab.model_validate(row[5]) if row[5] is not None else None
    except ValueError:
        contab = None
    return MeasurementInfo(row[0], row[1], row[2], row[3], row[4], contab)


def select_entities(conn: psycopg.Connection, system_id: int, entity: str | int,
                    descriptor: Mapping[str, Any]) -> list[EntityRow]:
    """Entities of one type of a system matching a descriptor (wildcards as in CONTAB)."""
    ent = entity_def(entity)
    desc = _descriptor(ent, descriptor)
    text = scalar(conn.execute(
        "SELECT json_agg(json_build_array(e.entity_id, e.key, e.ids, e.cpu) ORDER BY e.entity_id)::text"
        "  FROM measure.entity e WHERE e.system_id = %s AND e.type_code = %s",
        (system_id, ent.code),
    ))
    return _matching(ent, [desc], text)


def rate_values(conn: psycopg.Connection, items: Sequence[tuple[str, int | None, int, int | None]],
                *, exact: bool = False) -> list[float | Decimal | None]:
    """measure.rate(kind, delta, delta_us, paired) for many (kind, delta, delta_us, paired)."""
    if not items:
        return []
    kinds, deltas, dus, paired = zip(*items, strict=True)
    rows = conn.execute(
        f"SELECT measure.rate(k, d, u, p){'' if exact else '::float8'} FROM unnest(%s::text[], "
        "%s::numeric[], %s::numeric[], %s::numeric[]) WITH ORDINALITY AS t(k, d, u, p, i) ORDER BY i",
        (list(kinds), list(deltas), list(dus), list(paired)),
    ).fetchall()
    return [r[0] for r in rows]


# ---------------------------------------------------------------- cursors


def _encode_cursor(key: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> Any:
    try:
        pad = "=" * (-len(cursor) % 4)
        return json.loads(base64.urlsafe_b64decode(cursor + pad).decode())
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ReadError("cursor is not one this API returned; start again without it",
                        field="cursor") from None


def _sort_value(v: Any) -> list[Any]:
    if isinstance(v, bool) or v is None:
        return [2, ""]
    if isinstance(v, int | float):
        return [0, v]
    return [1, str(v)]


def _id_sort_key(ent: EntityDef, ids: Mapping[str, Any]) -> list[Any]:
    return [_sort_value(ids.get(f)) for f in ent.id_fields]


def _hour_of(t: datetime | str) -> datetime | str:
    """The UTC hour an instant lies in (runs hold the intervals whose FROM lies in one UTC hour);
    an open end ('-infinity', 'infinity') stays."""
    if isinstance(t, str):
        return t
    return t - timedelta(minutes=t.minute, seconds=t.second, microseconds=t.microsecond) \
        if t.utcoffset() == timedelta(0) else _hour_of(t.astimezone(UTC))


# ---------------------------------------------------------------- the read
#
# A read is two round trips: _INFO (the measurement and the entities of the type, one row)
# and one statement per mode that selects the records and rates them (measure.rate, the one
# place of the reduction) in the same statement; a snapped window (nearest / enclose) adds
# one statement, _ENDS, that moves each entity's window ends to its copy times. The SQL text
# depends only on the mode, the snap and on how many counters are read, never on request
# text: counter positions, kinds, entity ids and times are parameters. Parsed CONTABs and
# descriptor matches are cached by the exact text the database returned, so a changed
# measurement or a new entity is seen at once (nothing to invalidate by hand).

_INFO = """
SELECT m.measurement_id, s.system_id, m.name, m.state,
       (m.interval_seconds * 1000000)::bigint, m.contab::text,
       (SELECT json_agg(json_build_array(e.entity_id, e.key, e.ids, e.cpu) ORDER BY e.entity_id)::text
          FROM measure.entity e WHERE e.system_id = s.system_id AND e.type_code = %(t)s)
  FROM measure.measurement m JOIN measure.system s USING (system_name)
 WHERE m.measurement_id = %(m)s
"""

# Interval records are stored packed into runs (measure.interval_run: consecutive intervals of
# one counter record within one UTC hour, counters[i][p]); each statement below finds runs by
# the primary key (measurement, entity) or by measurement, type and FROM, decompresses a run's
# counters once (the LATERAL … OFFSET 0 `d`) and reads interval i's counter p as d.c[i][p].
# @VALS(i)@ is the array of the selected counters (positions %(c0_pos)s, … in the order of
# `needed`; a position beyond the stored array gives NULL) of interval i.

# Rating wrapper: r.vals rated per counter kind (%(kinds)s, with per-entity overrides for
# USERDEF TIME-VALUE at index %(tvi)s), the paired TRANSACTIONS at index %(pidx)s.
# @CAST@ is ::float8, or nothing for exact (numeric) values.
_RATED = """
SELECT r.*, CASE WHEN %(rate)s THEN ARRAY(
         SELECT measure.rate(coalesce(o.kind, u.kind), u.v, r.delta_us, r.vals[%(pidx)s::int])@CAST@
           FROM unnest(%(kinds)s::text[], r.vals::numeric[]) WITH ORDINALITY AS u(kind, v, i)
           LEFT JOIN unnest(%(oe)s::bigint[], %(ok)s::text[]) AS o(entity_id, kind)
                  ON u.i = %(tvi)s::int AND o.entity_id = r.entity_id
          ORDER BY u.i) END AS rated
  FROM (@INNER@) r
"""

_DETOAST = "CROSS JOIN LATERAL (SELECT x.counters || '{}'::bigint[] AS c OFFSET 0) d"

# The most recent interval record of each entity: the last interval of its latest run.
_LATEST = f"""
SELECT x.entity_id, x.from_at + (x.n - 1) * x.delta_us * INTERVAL '1 microsecond' AS from_at, x.to_at,
       x.delta_us, 1 AS n, @VALS(x.n)@ AS vals, x.error
  FROM unnest(%(ids)s::bigint[]) AS e(entity_id)
 CROSS JOIN LATERAL (
        SELECT * FROM measure.interval_run y
         WHERE y.measurement_id = %(m)s AND y.entity_id = e.entity_id
         ORDER BY y.record_at DESC, y.from_at DESC LIMIT 1) x
 {_DETOAST}
"""

# Per entity, the record whose TO is closest to `at` (within [lo, hi], FROM at or after flo;
# the nearer wins, a tie the earlier): the TOs just before and after `at` lie in the two latest
# runs starting at or before it and the first run starting after it.
_NEAREST = f"""
SELECT x.entity_id, x.from_at, x.to_at, x.delta_us, 1 AS n, @VALS(x.i)@ AS vals, x.error
  FROM unnest(%(ids)s::bigint[]) AS e(entity_id)
 CROSS JOIN LATERAL (
        SELECT r.entity_id, r.error, r.delta_us, r.counters, w.i, w.from_at, w.to_at
          FROM ((SELECT * FROM measure.interval_run y
                  WHERE y.measurement_id = %(m)s AND y.entity_id = e.entity_id AND y.from_at <= %(at)s::timestamptz
                  ORDER BY y.from_at DESC LIMIT 2)
                UNION ALL
                (SELECT * FROM measure.interval_run y
                  WHERE y.measurement_id = %(m)s AND y.entity_id = e.entity_id AND y.from_at > %(at)s::timestamptz
                  ORDER BY y.from_at LIMIT 1)) r
         CROSS JOIN LATERAL measure.run_intervals(r.from_at, r.delta_us, r.n, %(flo)s::timestamptz,
                                                  %(hi)s::timestamptz) w
         WHERE w.to_at >= %(lo)s::timestamptz AND w.to_at <= %(hi)s::timestamptz
         ORDER BY abs(extract(epoch FROM w.to_at - %(at)s::timestamptz)), w.to_at LIMIT 1) x
 {_DETOAST}
"""

# A snapped window: per entity, [a, z] given in %(wa)s / %(wz)s (aligned with %(ids)s;
# NULL = open end).
_SNAPPED = """
   AND EXISTS (SELECT 1 FROM unnest(%(ids)s::bigint[], %(wa)s::timestamptz[], %(wz)s::timestamptz[])
                          AS v(entity_id, a, z)
                WHERE v.entity_id = x.entity_id AND w.from_at >= coalesce(v.a, '-infinity')
                  AND w.to_at <= coalesce(v.z, 'infinity'))"""

# The interval records of the selected entities lying wholly inside [lo, hi] (runs from
# %(lo_run)s, the UTC hour of lo, on): @COLS@ of each.
_WINDOW = f"""
SELECT @COLS@
  FROM measure.interval_run x
 {_DETOAST}
 CROSS JOIN LATERAL measure.run_intervals(x.from_at, x.delta_us, x.n, %(lo)s::timestamptz, %(hi)s::timestamptz) w
 WHERE x.measurement_id = %(m)s AND x.system_id = %(s)s AND x.type_code = %(t)s
   AND x.entity_id = ANY(%(ids)s::bigint[])
   AND x.from_at >= %(lo_run)s::timestamptz AND x.from_at < %(hi)s::timestamptz
   AND w.to_at <= %(hi)s::timestamptz@SNAP@"""

# MEASREAD_DIFF_: per entity the sums over the window, and the first and last interval's
# counters for snapshot / max counters (%(src)s: 0 sum, 1 last interval, 2 first interval).
_SUMMARY = """
WITH iv AS MATERIALIZED (""" + _WINDOW.replace(
    "@COLS@", "x.entity_id, x.record_at, x.error, x.delta_us, w.from_at, w.to_at, @VCOLS@") + """),
s AS (
    SELECT iv.entity_id, min(iv.from_at) AS from_at, max(iv.to_at) AS to_at, max(iv.from_at) AS last_from,
           sum(iv.delta_us) AS delta_us, count(*) AS n,
           CASE WHEN max(iv.error) >= -min(iv.error) THEN max(iv.error) ELSE min(iv.error) END AS error,
           ARRAY[@SUMS@]::numeric[] AS sums
      FROM iv GROUP BY iv.entity_id)
SELECT s.entity_id, s.from_at, s.to_at, s.delta_us, s.n,
       ARRAY(SELECT CASE u.src WHEN 0 THEN s.sums[u.i] WHEN 1 THEN l.v[u.i] ELSE f.v[u.i] END
               FROM unnest(%(src)s::int[]) WITH ORDINALITY AS u(src, i) ORDER BY u.i)::numeric[] AS vals, s.error
  FROM s
 CROSS JOIN LATERAL (SELECT ARRAY[@IVVALS@] AS v FROM iv
                      WHERE iv.entity_id = s.entity_id AND iv.from_at = s.last_from
                      ORDER BY iv.record_at DESC LIMIT 1) l
 CROSS JOIN LATERAL (SELECT ARRAY[@IVVALS@] AS v FROM iv
                      WHERE iv.entity_id = s.entity_id AND iv.from_at = s.from_at
                      ORDER BY iv.record_at LIMIT 1) f
"""

# LISTALL: the next %(batch)s interval records after the cursor (cf, ce, cr) in (FROM, entity,
# record) order, from the runs of [%(span_lo)s, %(span_hi)s) (one UTC hour at a time).
_INTERVALS = f"""
SELECT x.entity_id, w.from_at, w.to_at, x.delta_us, 1 AS n, @VALS(w.i)@ AS vals, x.error,
       x.record_at
  FROM measure.interval_run x
 {_DETOAST}
 CROSS JOIN LATERAL measure.run_intervals(x.from_at, x.delta_us, x.n,
                                          greatest(%(lo)s::timestamptz, %(cf)s::timestamptz), %(hi)s::timestamptz) w
 WHERE x.measurement_id = %(m)s AND x.system_id = %(s)s AND x.type_code = %(t)s
   AND x.entity_id = ANY(%(ids)s::bigint[])
   AND x.from_at >= %(span_lo)s::timestamptz AND x.from_at < %(span_hi)s::timestamptz
   AND w.to_at <= %(hi)s::timestamptz@SNAP@
   AND (w.from_at, x.entity_id, x.record_at) > (%(cf)s::timestamptz, %(ce)s::bigint, %(cr)s::timestamptz)
 ORDER BY w.from_at, x.entity_id, x.record_at
 LIMIT %(batch)s
"""

# The first run start at or after %(after)s of any selected entity (LISTALL skips gaps).
_NEXT_RUN = """
SELECT min(x.from_at)
  FROM unnest(%(ids)s::bigint[]) AS e(entity_id)
 CROSS JOIN LATERAL (
        SELECT y.from_at FROM measure.interval_run y
         WHERE y.measurement_id = %(m)s AND y.entity_id = e.entity_id AND y.from_at >= %(after)s::timestamptz
         ORDER BY y.from_at LIMIT 1) x
"""

# Window ends moved to copy times (snap nearest / enclose), per entity. The copy times
# nearest to an end t are among the TO of the last record ending at or before t and the FROM
# and TO of the first record ending after it (an entity's records do not overlap in time):
# the intervals of the two latest runs starting at or before t and of the first run after it.
# nearest: the closest of them (equally close: the earlier for FROM, the later for TO);
# enclose: the latest at or before FROM, the earliest at or after TO. No copy time there: the
# end stays. nearest with both ends and no whole interval left inside: the interval
# overlapping [lo, hi] most. An open (infinite) end comes back as NULL.
_END_RUNS = """
        SELECT w.from_at, w.to_at
          FROM ((SELECT * FROM measure.interval_run y
                  WHERE y.measurement_id = %(m)s AND y.entity_id = e.entity_id AND y.from_at <= %({t})s::timestamptz
                  ORDER BY y.from_at DESC LIMIT 2)
                UNION ALL
                (SELECT * FROM measure.interval_run y
                  WHERE y.measurement_id = %(m)s AND y.entity_id = e.entity_id AND y.from_at > %({t})s::timestamptz
                  ORDER BY y.from_at LIMIT 1)) r
         CROSS JOIN LATERAL measure.run_intervals(r.from_at, r.delta_us, r.n) w"""
_END_PROBES = """
  LEFT JOIN LATERAL (
        SELECT k.to_at FROM ({runs}) k WHERE k.to_at <= %({t})s::timestamptz
         ORDER BY k.to_at DESC LIMIT 1) {p}p ON isfinite(%({t})s::timestamptz)
  LEFT JOIN LATERAL (
        SELECT k.from_at, k.to_at FROM ({runs}) k WHERE k.to_at > %({t})s::timestamptz
         ORDER BY k.to_at LIMIT 1) {p}n ON isfinite(%({t})s::timestamptz)"""
_END_PICK = """coalesce((
        SELECT k FROM unnest(ARRAY[{p}p.to_at, {p}n.from_at, {p}n.to_at]) AS k
         WHERE k IS NOT NULL AND (%(snap)s::text = 'nearest' OR k {cmp} %({t})s::timestamptz)
         ORDER BY CASE WHEN %(snap)s::text = 'nearest' THEN abs(extract(epoch FROM k - %({t})s::timestamptz)) END,
                  CASE WHEN %(snap)s::text = 'nearest' THEN k END {tie}, k {order} LIMIT 1),
        %({t})s::timestamptz)"""
_ENDS = f"""
SELECT e.entity_id, CASE WHEN isfinite(coalesce(fb.from_at, ends.a)) THEN coalesce(fb.from_at, ends.a) END,
       CASE WHEN isfinite(coalesce(fb.to_at, ends.z)) THEN coalesce(fb.to_at, ends.z) END
  FROM unnest(%(ids)s::bigint[]) AS e(entity_id)
  {_END_PROBES.format(t="lo", p="l", runs=_END_RUNS.format(t="lo"))}
  {_END_PROBES.format(t="hi", p="h", runs=_END_RUNS.format(t="hi"))}
  CROSS JOIN LATERAL (
        SELECT {_END_PICK.format(t="lo", p="l", cmp="<=", tie="ASC", order="DESC")} AS a,
               {_END_PICK.format(t="hi", p="h", cmp=">=", tie="DESC", order="ASC")} AS z) ends
  LEFT JOIN LATERAL (
        SELECT w.from_at, w.to_at
          FROM measure.interval_run y
         CROSS JOIN LATERAL measure.run_intervals(y.from_at, y.delta_us, y.n) w
         WHERE %(snap)s::text = 'nearest' AND isfinite(%(lo)s::timestamptz) AND isfinite(%(hi)s::timestamptz)
           AND y.measurement_id = %(m)s AND y.entity_id = e.entity_id
           AND y.from_at >= %(lo_run)s::timestamptz - INTERVAL '1 hour' AND y.from_at < %(hi)s::timestamptz
           AND w.to_at > %(lo)s::timestamptz AND w.from_at < %(hi)s::timestamptz
           AND NOT EXISTS (
                SELECT 1 FROM measure.interval_run i
                 CROSS JOIN LATERAL measure.run_intervals(i.from_at, i.delta_us, i.n, ends.a, ends.z) v
                 WHERE i.measurement_id = %(m)s AND i.entity_id = e.entity_id
                   AND i.from_at >= date_bin('1 hour', ends.a, TIMESTAMPTZ '2000-01-01 00:00:00+00')
                   AND i.from_at < ends.z AND v.to_at <= ends.z)
         ORDER BY least(w.to_at, %(hi)s::timestamptz) - greatest(w.from_at, %(lo)s::timestamptz) DESC,
                  w.from_at LIMIT 1) fb ON true
"""


@functools.cache
def _sql(mode: str, exact: bool, snapped: bool, n: int) -> str:
    """The statement of a mode (n: counters read, for the summary's sums)."""
    inner = {"latest": _LATEST, "nearest": _NEAREST, "summary": _SUMMARY,
             "intervals": _INTERVALS}[mode]
    inner = inner.replace("@SNAP@", _SNAPPED if snapped else "")
    inner = inner.replace("@VCOLS@", ", ".join(f"d.c[w.i][%(c{i}_pos)s] AS v{i}" for i in range(n)))
    inner = inner.replace("@SUMS@", ", ".join(f"sum(iv.v{i})" for i in range(n)))
    inner = inner.replace("@IVVALS@", ", ".join(f"iv.v{i}" for i in range(n)))
    inner = re.sub(r"@VALS\((\S+?)\)@", lambda m: "ARRAY[" + ", ".join(
        f"d.c[{m.group(1)}][%(c{i}_pos)s]" for i in range(n)) + "]::bigint[]", inner)
    text = _RATED.replace("@CAST@", "" if exact else "::float8").replace("@INNER@", inner)
    if mode == "intervals":
        text += " ORDER BY r.from_at, r.entity_id, r.record_at"
    return text


# Caches keyed by the exact text the database returned (bounded; cleared when full).
_CACHE_MAX = 512
_contab_cache: dict[str, Contab | None] = {}
_match_cache: dict[tuple[int, str, str], list[EntityRow]] = {}


def _cached_contab(text: str | None) -> Contab | None:
    if text is None:
        return None
    try:
        return _contab_cache[text]
    except KeyError:
        pass
    try:
        contab: Contab | None = Contab.model_validate_json(text)
    except ValueError:
        contab = None
    if len(_contab_cache) >= _CACHE_MAX:
        _contab_cache.clear()
    _contab_cache[text] = contab
    return contab


def _descriptor(ent: EntityDef, descriptor: Mapping[str, Any]) -> EntityDescriptor:
    try:
        tname, fields = normalize_fields(ent.measure_name, descriptor)
    except DescriptorError as exc:
        raise ReadError(f"{ent.measure_name} descriptor: {exc.message}",
                        field=f"descriptor.{exc.field}" if exc.field else "descriptor") from None
    return EntityDescriptor(type=tname, fields=fields)


def _descriptors(ent: EntityDef, q: ReadQuery) -> list[EntityDescriptor]:
    return [_descriptor(ent, d) for d in (q.descriptors or [q.descriptor])]


def _matching(ent: EntityDef, descs: list[EntityDescriptor], entities_json: str | None) -> list[EntityRow]:
    """The entities (json_agg text of _INFO) any descriptor selects; cached by that text."""
    if entities_json is None:
        return []
    key = (ent.code, json.dumps([d.fields for d in descs], sort_keys=True), entities_json)
    hit = _match_cache.get(key)
    if hit is not None:
        return hit
    rows = [EntityRow(r[0], r[1], r[2], r[3]) for r in json.loads(entities_json)
            if any(d.matches(r[2]) for d in descs)]
    if len(_match_cache) >= _CACHE_MAX:
        _match_cache.clear()
    _match_cache[key] = rows
    return rows


def _check(q: ReadQuery) -> None:
    if q.limit is not None and not 1 <= q.limit <= MAX_LIMIT:
        raise ReadError(f"limit must be 1-{MAX_LIMIT}, got {q.limit}", field="limit")
    if q.from_at is not None and q.to_at is not None and q.from_at > q.to_at:
        raise ReadError(f"window starts ({q.from_at.isoformat()}) after it ends "
                        f"({q.to_at.isoformat()}); swap from_at and to_at", field="from_at")
    for name in ("from_at", "to_at", "at"):
        v = getattr(q, name)
        if v is not None and v.tzinfo is None:
            raise ReadError(f"{name} needs a time zone (e.g. 2024-05-01T08:00:00Z)", field=name)
    window = q.from_at is not None or q.to_at is not None or q.all_records or q.summary
    if q.at is not None and window:
        raise ReadError("give either a target time (at) or a window (from_at/to_at, "
                        "all_records), not both", field="at")
    if q.snap not in SNAPS:
        raise ReadError(f"snap must be one of {', '.join(SNAPS)}, got {q.snap!r}", field="snap")
    if q.totals not in TOTALS:
        raise ReadError(f"totals must be one of {', '.join(TOTALS)}, got {q.totals!r}",
                        field="totals")
    if q.tolerance is not None:
        if q.at is None and not window:
            raise ReadError("tolerance needs a target time (at) or a window (from_at/to_at)",
                            field="tolerance")
        if q.tolerance < timedelta(0):
            raise ReadError("tolerance must not be negative (snap='enclose' is MEASREAD_DIFF_'s "
                            "timetol -1)", field="tolerance")
        if q.at is None and q.snap != "inside":
            raise ReadError(f"tolerance widens an 'inside' window; snap={q.snap!r} moves the "
                            "window ends to copy times itself", field="tolerance")
    if q.by is not None and q.all_records and q.limit is not None:
        raise ReadError("BY is not available with a paged all_records read (LISTALL pages "
                        "come in time order)", field="by")
    if q.totals != "exclude" and q.all_records and q.limit is not None:
        raise ReadError("totals need an unpaged all_records read (limit=None)", field="totals")
    if q.descriptors and q.descriptor:
        raise ReadError("give descriptor or descriptors, not both", field="descriptor")
    if q.if_ is not None and q.if_.op not in RELOPS:
        raise ReadError(f"IF operator {q.if_.op!r} must be one of {' '.join(RELOPS)}", field="if_op")


def counter_kind(c: CounterDef, ent: EntityDef, ids: Mapping[str, Any], contab: Contab | None) -> str:
    """The kind a counter is rated by (USERDEF TIME-VALUE: by its CONTAB counter TYPE)."""
    if ent.name == "userdef" and c.name == "time_value" and contab is not None:
        name = str(ids.get("name", "")).upper()
        for spec in contab.counters:
            if spec.name == name and spec.applies_to(ids):
                return USERDEF_KINDS.get(spec.type, c.kind)
    return c.kind


def _plan(ent: EntityDef, q: ReadQuery) -> tuple[list[CounterDef], list[CounterDef], CounterDef | None,
                                                  CounterDef | str | None, CounterDef | str | None]:
    """(shown, needed, paired, by, cond): the counters to read and why."""
    shown = resolve_counters(ent, q.counters)
    by = _item(ent, q.by, "by") if q.by else None
    cond = _item(ent, q.if_.counter, "if_counter") if q.if_ else None
    needed = list(shown)
    for extra in (by, cond):
        if isinstance(extra, CounterDef) and extra not in needed:
            needed.append(extra)
    paired = ent.counter(PAIRED_COUNTER) if PAIRED_COUNTER in ent else None
    if paired is not None and any(c.kind == "response" for c in needed) and paired not in needed:
        needed.append(paired)
    return shown, needed, paired, by, cond


def _mode(q: ReadQuery) -> ReadMode:
    if q.at is not None:
        return "nearest"
    if q.all_records:
        return "intervals"
    if q.from_at is not None or q.to_at is not None or q.summary:
        return "summary"
    return "latest"


def read(conn: psycopg.Connection, measurement_id: int, q: ReadQuery) -> ReadResult:
    """MEASREAD / MEASREAD_DIFF_ of one measurement; see the module docstring."""
    _check(q)
    ent = entity_def(q.entity)
    info_row = conn.execute(_INFO, {"m": measurement_id, "t": ent.code}).fetchone()
    if info_row is None:
        raise ReadError(f"no measurement {measurement_id}", field="measurement_id", status=404)
    info = MeasurementInfo(info_row[0], info_row[1], info_row[2], info_row[3], info_row[4],
                           _cached_contab(info_row[5]))
    shown, needed, paired, by, cond = _plan(ent, q)
    entity_rows = _matching(ent, _descriptors(ent, q), info_row[6])
    entities = {e.entity_id: e for e in entity_rows}
    mode = _mode(q)
    ctx = _Ctx(conn, ent, info, q, mode, needed, shown, paired, by, cond)
    if not entities:
        return ctx.page([])

    p: dict[str, Any] = {"m": measurement_id, "s": info.system_id, "t": ent.code, "ids": list(entities),
                         "pos": [c.position + 1 for c in needed], "rate": q.rate,
                         "kinds": [c.kind for c in needed],
                         "pidx": needed.index(paired) + 1 if paired in needed else None,
                         "tvi": None, "oe": [], "ok": []}
    if ent.name == "userdef" and info.contab is not None:
        for i, c in enumerate(needed):
            if c.name == "time_value":
                p["tvi"] = i + 1
                for e in entity_rows:
                    kind = counter_kind(c, ent, e.ids, info.contab)
                    if kind != c.kind:
                        p["oe"].append(e.entity_id)
                        p["ok"].append(kind)
    for i, c in enumerate(needed):
        p[f"c{i}_pos"] = c.position + 1
    tol = q.tolerance if q.tolerance is not None and q.at is None else timedelta(0)
    p["lo"] = q.from_at - tol if q.from_at is not None else "-infinity"
    p["hi"] = q.to_at + tol if q.to_at is not None else "infinity"
    p["lo_run"] = _hour_of(p["lo"])
    snapped = mode in ("summary", "intervals") and q.snap != "inside"
    if snapped:
        p["snap"] = q.snap
        ends = {r[0]: (r[1], r[2]) for r in conn.execute(_ENDS, p).fetchall()}
        p["wa"] = [ends[e][0] for e in p["ids"]]
        p["wz"] = [ends[e][1] for e in p["ids"]]
        p["lo"] = "-infinity" if None in p["wa"] else min(p["wa"])
        p["hi"] = "infinity" if None in p["wz"] else max(p["wz"])
        p["lo_run"] = _hour_of(p["lo"])

    sql = functools.partial(_sql, mode, q.exact, snapped, len(needed))
    if mode == "intervals":
        return ctx.intervals(sql(), p, entities)
    if mode == "latest":
        rows = conn.execute(sql(), p).fetchall()
    elif mode == "nearest":
        assert q.at is not None  # (_mode: a read at a time)
        ntol = q.tolerance
        p["at"] = q.at
        p["lo"] = q.at - ntol if ntol is not None else "-infinity"
        p["hi"] = q.at + ntol if ntol is not None else "infinity"
        p["flo"] = (q.at - ntol - timedelta(microseconds=info.interval_us)
                    if ntol is not None and info.interval_us else "-infinity")
        rows = conn.execute(sql(), p).fetchall()
    else:
        p["src"] = [(2 if _is_start_snapshot(c) else 1) if c.kind_code in LEVEL_KINDS else 0
                    for c in needed]
        rows = conn.execute(sql(), p).fetchall()
    return ctx.page(ctx.records((entities[r[0]], r) for r in rows))


def read_given(conn: psycopg.Connection, given: Sequence[GivenRecord], q: ReadQuery, *,
               contab: Contab | None = None, measurement_id: int | None = None) -> ReadResult:
    """The same selection, RATE ON (measure.rate), IF, BY, ZERO-REPORTS and TOTALS as
    :func:`read`, over records read elsewhere (live counter records: MEASREADACTIVE,
    MEASCOM LISTACTIVE). Every given record is kept (no descriptor or window applies)."""
    if q.if_ is not None and q.if_.op not in RELOPS:
        raise ReadError(f"IF operator {q.if_.op!r} must be one of {' '.join(RELOPS)}", field="if_op")
    if q.totals not in TOTALS:
        raise ReadError(f"totals must be one of {', '.join(TOTALS)}, got {q.totals!r}",
                        field="totals")
    ent = entity_def(q.entity)
    shown, needed, paired, by, cond = _plan(ent, q)
    info = MeasurementInfo(measurement_id or 0, 0, "", "", None, contab)
    ctx = _Ctx(conn, ent, info, q, "active", needed, shown, paired, by, cond)
    pidx = needed.index(paired) if paired in needed else None
    rows, items = [], []
    for g in given:
        vals = [g.counters[c.position] if c.position < len(g.counters) else None for c in needed]
        rows.append((EntityRow(g.entity_id, g.key, g.ids, g.cpu),
                     (g.entity_id, g.from_at, g.to_at, g.delta_us, 1, vals, g.error)))
        pv = vals[pidx] if pidx is not None else None
        items += [(counter_kind(c, ent, g.ids, contab), v, g.delta_us, pv)
                  for c, v in zip(needed, vals, strict=True)]
    rated = iter(rate_values(conn, items, exact=q.exact) if q.rate else [])
    full = [(e, (*row, [next(rated) for _ in needed] if q.rate else None)) for e, row in rows]
    return ctx.page(ctx.records(full))


@dataclass
class _Ctx:
    conn: psycopg.Connection
    ent: EntityDef
    info: MeasurementInfo
    q: ReadQuery
    mode: ReadMode
    needed: list[CounterDef]
    shown: list[CounterDef]
    paired: CounterDef | None
    by: CounterDef | str | None
    cond: CounterDef | str | None

    def records(self, rows: Any) -> list[Record]:
        """(entity, (entity_id, from, to, delta_us, n, vals, error, …, rated)) → the records
        ZERO-REPORTS and the IF condition keep."""
        names = [c.name for c in self.needed]
        shown_idx = [i for i, c in enumerate(self.needed) if c in self.shown]
        drop_zero = not self.q.zero_reports
        out: list[Record] = []
        for e, row in rows:
            raw_list = [None if v is None else int(v) for v in row[5]]
            raw = dict(zip(names, raw_list, strict=True))
            values: dict[str, int | float | Decimal | None] = (
                dict(zip(names, row[-1], strict=True)) if self.q.rate else dict(raw))
            rec = Record(e.entity_id, e.key, e.ids, e.cpu, row[1], row[2], int(row[3]), int(row[4]),
                         values, int(row[6] or 0), raw, self._kinds(e.ids))
            if drop_zero and not any(raw_list[i] for i in shown_idx) or not self._passes(rec):
                continue
            out.append(rec)
        return out

    def _kinds(self, ids: Mapping[str, Any]) -> dict[str, str]:
        if self.ent.name != "userdef" or self.info.contab is None:
            return {}
        out = {}
        for c in self.needed:
            kind = counter_kind(c, self.ent, ids, self.info.contab)
            if kind != c.kind:
                out[c.name] = kind
        return out

    def _passes(self, rec: Record) -> bool:
        if self.q.if_ is None or self.cond is None:
            return True
        if isinstance(self.cond, str):
            v = rec.ids.get(self.cond)
            if isinstance(v, bool) or not isinstance(v, int | float):
                return False
        else:
            v = rec.values.get(self.cond.name)
        return v is not None and RELOPS[self.q.if_.op](v, self.q.if_.value)

    def _finish(self, rec: Record) -> Record:
        rec.values = {c.name: rec.values.get(c.name) for c in self.shown}
        rec.raw = {c.name: rec.raw.get(c.name) for c in self.shown}
        rec.kinds = {c.name: rec.kinds[c.name] for c in self.shown if c.name in rec.kinds}
        return rec

    def _by_key(self, r: Record) -> list[Any]:
        if self.by is None:
            return []
        if isinstance(self.by, str):
            return [_sort_value(r.ids.get(self.by))]
        v = r.values.get(self.by.name)
        return [[1, 0]] if v is None else [[0, float(-v if self.q.descending else v)]]

    def total(self, records: list[Record]) -> Record | None:
        """The TOTAL record of the kept records (MEASREAD_DIFF_ totals), rated by measure.rate."""
        if self.q.totals == "exclude" or not records:
            return None
        raw: dict[str, int | None] = {}
        for c in self.needed:
            vals = [v for r in records if (v := r.raw.get(c.name)) is not None]
            if not vals:
                raw[c.name] = None
            elif c.kind_code in (KIND_MAXQ, KIND_MAXVALUE):
                raw[c.name] = max(vals)
            else:  # deltas add up; so do snapshot levels (free pages of all CPUs …)
                raw[c.name] = sum(vals)
        delta_us = max(r.delta_us for r in records)
        kinds: dict[str, str] = {}  # a kind all members were rated by, else the catalogue's
        for c in self.needed:
            ks = {r.kinds.get(c.name, c.kind) for r in records}
            if len(ks) == 1 and (k := ks.pop()) != c.kind:
                kinds[c.name] = k
        values: dict[str, Any] = dict(raw)
        if self.q.rate:
            pv = raw[self.paired.name] if self.paired in self.needed else None
            rated = rate_values(self.conn, [(kinds.get(c.name, c.kind), raw[c.name], delta_us, pv)
                                            for c in self.needed], exact=self.q.exact)
            values = dict(zip([c.name for c in self.needed], rated, strict=True))
        return Record(None, "TOTAL", {}, None, min(r.from_at for r in records),
                      max(r.to_at for r in records), delta_us, sum(r.intervals for r in records),
                      values, max((r.error for r in records), key=abs), raw, kinds)

    def page(self, records: list[Record]) -> ReadResult:
        total = self.total(records)
        if self.q.totals == "only":
            records = []

        def key(r: Record) -> list[Any]:
            eid = r.entity_id if r.entity_id is not None else -1
            return self._by_key(r) + _id_sort_key(self.ent, r.ids) + [eid]

        keyed = sorted(((key(r), r) for r in records), key=lambda kr: kr[0])
        if self.q.cursor is not None:
            after = _decode_cursor(self.q.cursor)
            try:
                keyed = [kr for kr in keyed if kr[0] > after]
            except TypeError:
                raise ReadError("cursor does not belong to this query; start again without it",
                                field="cursor") from None
        if self.q.limit is None:
            page, nxt = keyed, None
        else:
            page = keyed[: self.q.limit]
            nxt = _encode_cursor(page[-1][0]) if len(keyed) > self.q.limit else None
        return ReadResult(self.info.measurement_id or None, self.ent, self.mode, self.q.rate,
                          self.shown, [self._finish(r) for _, r in page], nxt,
                          self._finish(total) if total is not None else None)

    def intervals(self, sql: str, p: dict[str, Any], entities: dict[int | None, EntityRow]) -> ReadResult:
        """LISTALL: keyset over (from_at, entity_id, record_at), filtered batch by batch."""
        cf: datetime | str
        cr: datetime | str
        if self.q.cursor is not None:
            c = _decode_cursor(self.q.cursor)
            try:
                cf, ce, cr = datetime.fromisoformat(c[0]), int(c[1]), datetime.fromisoformat(c[2])
            except (TypeError, ValueError, IndexError, KeyError):
                raise ReadError("cursor does not belong to this query; start again without it",
                                field="cursor") from None
        else:
            cf, ce, cr = "-infinity", -1, "-infinity"
        limit = self.q.limit
        batch = _ALL_BATCH if limit is None else max(limit * 2, 200)
        out: list[tuple[Record, tuple]] = []
        more = False
        hi = p["hi"]
        # the runs of one UTC hour at a time, from the cursor's (or the window's first run)
        start = cf if not isinstance(cf, str) else p["lo"]
        span_lo = scalar(self.conn.execute(_NEXT_RUN, {**p, "after": _hour_of(start)}))
        while span_lo is not None and (isinstance(hi, str) or span_lo < hi):
            span_hi = span_lo + timedelta(hours=1)
            rows = self.conn.execute(sql, {**p, "cf": cf, "ce": ce, "cr": cr, "batch": batch,
                                           "span_lo": span_lo, "span_hi": span_hi}).fetchall()
            for row in rows:
                kept = self.records([(entities[row[0]], row)])
                if not kept:
                    continue
                if limit is not None and len(out) == limit:
                    more = True
                    break
                out.append((kept[0], (row[1], row[0], row[7])))
            if more:
                break
            if len(rows) == batch:  # more in this hour
                cf, ce, cr = rows[-1][1], rows[-1][0], rows[-1][7]
                continue
            span_lo = scalar(self.conn.execute(_NEXT_RUN, {**p, "after": span_hi}))
        cursor = None
        if more:
            f, e, r = out[-1][1]
            cursor = _encode_cursor([f.isoformat(), e, r.isoformat()])
        records = [rec for rec, _ in out]
        total = self.total(records)
        if self.q.totals == "only":
            records = []
        if self.by is not None:  # unpaged only (_check): by the item, then time order
            records.sort(key=self._by_key)
        return ReadResult(self.info.measurement_id, self.ent, "intervals", self.q.rate, self.shown,
                          [self._finish(r) for r in records], cursor,
                          self._finish(total) if total is not None else None)
