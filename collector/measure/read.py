"""MEASREAD / MEASREAD_DIFF_ over stored data (measure-reference §6), for the API and MEASCOM.

Plain functions over a psycopg connection (any role that can read ``measure.entity``,
``measure.interval_record`` and ``measure.measurement``: the owner, measure_api, measure_reader).

What a read selects (:class:`ReadQuery`), always within one measurement (a data file):

* **entities**: one entity type and a descriptor with wildcards, exactly as in CONTAB
  (:func:`collector.measure.contab.normalize_fields` validates it,
  :meth:`EntityDescriptor.matches` selects; absent field, ``'*'`` or ``-1`` = wildcard).
* **which records** (:attr:`ReadResult.mode`):

  - ``latest`` (nothing given): MEASREAD's default, the most recent interval record of each
    entity (written at the last interval, at entity stop or at measurement stop).
  - ``nearest`` (``at``, optional ``tolerance``): per entity the record whose TO-TIMESTAMP is
    closest to ``at``, within ±tolerance when given; an entity with no record there is
    omitted (MEASREAD's nomtime/timetol, User's Guide behaviour). Ties: the earlier record.
  - ``summary`` (``from_at`` and/or ``to_at``): MEASREAD_DIFF_ with ``all^recs = 0``: one
    record per entity for the window = the sum of the deltas of its interval records lying
    wholly inside [from_at, to_at] (a missing end is the measurement's start / end).
    FROM/TO-TIMESTAMP of the summary are the first interval's from and the last one's to,
    DELTA-TIME is the sum of the intervals' DELTA-TIMEs (a gap is not counted as measured
    time). Snapshot, maxq and maxvalue counters are not summed: they take the value of the
    last interval (``STARTING-…``/``…-START`` snapshots: of the first interval).
  - ``intervals`` (``all_records=True``, LISTALL / ``all^recs = 1``): every interval record in
    the window, in time order (FROM-TIMESTAMP, then entity).

* **initial values**: nothing to do here. When a measurement shares an already nonzero
  counter record, the collector stores an initial-value copy and the first interval record
  is computed against it (collector/measure/copies.py), so interval records already hold
  only this measurement's activity. Likewise CPU records (cumulative since CPU load) are
  differenced at ingest.
* **RATE ON** (``rate=True``, MEASURE's default) per counter kind by ``measure.rate`` in SQL
  (schema/idempotent/010-interface.sql, the one place of the reduction, style P3): per second
  (incrementing, accumulating), busy % (busy, qbusy), average queue length (queue), average
  response per transaction (response ÷ the entity's TRANSACTIONS delta); snapshot, maxq and
  maxvalue as is. RATE OFF gives raw deltas (µs, counts). USERDEF ``TIME-VALUE`` is rated by
  the TYPE of its counter in the measurement's CONTAB (ACCUM/FACCUM per second, BUSY %, QUEUE
  average length, QBUSY %).
* **counters**: by MEASURE name (``CPU-BUSY-TIME``) or snake name (``cpu_busy_time``), any
  case, validated against the catalogue and turned into array positions passed as query
  parameters; no SQL text is ever built from request text.
* ``by``: order by a counter's (rated, if RATE ON) value, highest first (``descending=False``:
  lowest first); missing values (÷0) last; ties by entity. Without ``by``: by the entity's
  identifying fields. Not available with ``all_records`` (intervals come in time order).
* ``if_``: keep records where ``counter relop value`` (relop ``= <> < > <= >=``; the value
  compared is rated when ``rate`` is on, MEASREAD_DIFF_'s rated flag).
* ``zero_reports=False``: drop records whose selected counters are all zero (raw).
* **paging**: keyset. ``limit`` records per page, ``next_cursor`` (opaque) continues after the
  last record returned; a page never repeats or skips a record of an unchanged result.

Errors are :class:`ReadError` with ``field`` naming the query field and ``status`` 404 for an
unknown measurement or counter, 422 for any other bad value.
"""

from __future__ import annotations

import base64
import binascii
import json
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from collector.catalog import (
    KIND_MAXQ,
    KIND_MAXVALUE,
    KIND_SNAPSHOT,
    CounterDef,
    EntityDef,
    UnknownCounter,
    UnknownEntityType,
    load_catalog,
)
from collector.measure.contab import Contab, DescriptorError, EntityDescriptor, normalize_fields

__all__ = [
    "MAX_LIMIT",
    "RELOPS",
    "Condition",
    "EntityRow",
    "ReadError",
    "ReadQuery",
    "ReadResult",
    "Record",
    "counter_columns",
    "counter_kind",
    "entity_def",
    "measurement_info",
    "rate_unit",
    "rate_values",
    "read",
    "resolve_counters",
    "select_entities",
]

MAX_LIMIT = 1000
RELOPS: dict[str, Any] = {"=": operator.eq, "<>": operator.ne, "<": operator.lt,
                          ">": operator.gt, "<=": operator.le, ">=": operator.ge}
# A response counter is rated per transaction: measure-reference §2 pairs RESPONSE-TIME with
# the entity's TRANSACTIONS counter (CPU, LINE, TERMINAL).
PAIRED_COUNTER = "transactions"
# USERDEF TIME-VALUE takes its kind from the CONTAB counter TYPE (counters.csv help text).
USERDEF_KINDS = {"ACCUM": "accumulating", "FACCUM": "accumulating", "BUSY": "busy",
                 "QUEUE": "queue", "QBUSY": "qbusy"}
LEVEL_KINDS = (KIND_SNAPSHOT, KIND_MAXQ, KIND_MAXVALUE)


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
    """``IF counter relop value``."""

    counter: str
    op: str
    value: float


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
    limit: int = 100
    cursor: str | None = None


@dataclass(frozen=True)
class EntityRow:
    entity_id: int
    key: str
    ids: dict[str, Any]
    cpu: int | None


@dataclass
class Record:
    entity_id: int
    key: str
    ids: dict[str, Any]
    cpu: int | None
    from_at: datetime
    to_at: datetime
    delta_us: int
    intervals: int
    values: dict[str, int | float | None]  # snake counter name -> value (rated or raw)


@dataclass
class ReadResult:
    measurement_id: int
    entity: EntityDef
    mode: str  # latest | nearest | summary | intervals
    rate: bool
    counters: list[CounterDef]
    records: list[Record]
    next_cursor: str | None


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


def rate_unit(c: CounterDef, kind: str | None = None) -> str:
    """The unit of a counter's RATE ON value."""
    kind = kind or c.kind
    return {"incrementing": f"{c.unit}/s", "accumulating": f"{c.unit}/s", "busy": "%",
            "qbusy": "%", "queue": "length", "response": "us/transaction"}.get(kind, c.unit)


def counter_columns(ent: EntityDef, counters: Sequence[CounterDef], rate: bool) -> list[dict[str, Any]]:
    return [{"name": c.name, "measure_name": c.measure_name, "kind": c.kind,
             "unit": rate_unit(c) if rate else c.unit} for c in counters]


def _is_start_snapshot(c: CounterDef) -> bool:
    # Same rule as collector/measure/copies.py: the snapshot holds its value at FROM.
    return c.kind == "snapshot" and (c.measure_name.startswith("STARTING-")
                                     or c.measure_name.endswith("-START"))


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
    try:
        tname, fields = normalize_fields(ent.measure_name, descriptor)
    except DescriptorError as exc:
        raise ReadError(f"{ent.measure_name} descriptor: {exc.message}",
                        field=f"descriptor.{exc.field}" if exc.field else "descriptor") from None
    desc = EntityDescriptor(type=tname, fields=fields)
    rows = conn.execute(
        "SELECT entity_id, key, ids, cpu FROM measure.entity WHERE system_id = %s AND type_code = %s",
        (system_id, ent.code),
    ).fetchall()
    return [EntityRow(r[0], r[1], r[2], r[3]) for r in rows if desc.matches(r[2])]


def rate_values(conn: psycopg.Connection, items: Sequence[tuple[str, int | None, int, int | None]]) -> list[float | None]:
    """measure.rate(kind, delta, delta_us, paired) for many (kind, delta, delta_us, paired)."""
    if not items:
        return []
    kinds, deltas, dus, paired = zip(*items, strict=True)
    rows = conn.execute(
        "SELECT measure.rate(k, d, u, p)::float8 FROM unnest(%s::text[], %s::numeric[], "
        "%s::numeric[], %s::numeric[]) WITH ORDINALITY AS t(k, d, u, p, i) ORDER BY i",
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


def _jsonable(key: Any) -> Any:
    return json.loads(json.dumps(key))


def _id_sort_key(ent: EntityDef, ids: Mapping[str, Any]) -> list[Any]:
    out: list[Any] = []
    for f in ent.id_fields:
        v = ids.get(f)
        if isinstance(v, bool) or v is None:
            out.append([2, ""])
        elif isinstance(v, int | float):
            out.append([0, v])
        else:
            out.append([1, str(v)])
    return out


# ---------------------------------------------------------------- the read


_COLS = "x.entity_id, x.from_at, x.to_at, x.delta_us, 1, x.counters"

_LATEST = f"""
SELECT {_COLS.replace('x.', 'r.')}
  FROM unnest(%(ids)s::bigint[]) AS e(entity_id)
  CROSS JOIN LATERAL (
        SELECT * FROM measure.interval_record x
         WHERE x.measurement_id = %(m)s AND x.entity_id = e.entity_id
         ORDER BY x.record_at DESC, x.from_at DESC LIMIT 1) r
"""

_NEAREST = f"""
SELECT DISTINCT ON (x.entity_id) {_COLS}
  FROM measure.interval_record x
 WHERE x.measurement_id = %(m)s AND x.system_id = %(s)s AND x.type_code = %(t)s
   AND x.entity_id = ANY(%(ids)s::bigint[])
   AND x.to_at >= %(lo)s::timestamptz AND x.to_at <= %(hi)s::timestamptz
   AND x.from_at >= %(flo)s::timestamptz AND x.from_at < %(hi)s::timestamptz
 ORDER BY x.entity_id, abs(extract(epoch FROM x.to_at - %(at)s::timestamptz)), x.to_at
"""

_SUMMARY = """
WITH s AS (
    SELECT x.entity_id, min(x.from_at) AS from_at, max(x.to_at) AS to_at,
           max(x.from_at) AS last_from, sum(x.delta_us) AS delta_us, count(*) AS n,
           ARRAY[{sums}]::numeric[] AS sums
      FROM measure.interval_record x
     WHERE x.measurement_id = %(m)s AND x.system_id = %(s)s AND x.type_code = %(t)s
       AND x.entity_id = ANY(%(ids)s::bigint[])
       AND x.from_at >= %(lo)s::timestamptz AND x.from_at < %(hi)s::timestamptz
       AND x.to_at <= %(hi)s::timestamptz
     GROUP BY x.entity_id)
SELECT s.entity_id, s.from_at, s.to_at, s.delta_us, s.n, s.sums, l.counters, f.counters
  FROM s
 CROSS JOIN LATERAL (
        SELECT y.counters FROM measure.interval_record y
         WHERE y.system_id = %(s)s AND y.type_code = %(t)s AND y.from_at = s.last_from
           AND y.measurement_id = %(m)s AND y.entity_id = s.entity_id
         ORDER BY y.record_at DESC LIMIT 1) l
 CROSS JOIN LATERAL (
        SELECT y.counters FROM measure.interval_record y
         WHERE y.system_id = %(s)s AND y.type_code = %(t)s AND y.from_at = s.from_at
           AND y.measurement_id = %(m)s AND y.entity_id = s.entity_id
         ORDER BY y.record_at LIMIT 1) f
"""

_INTERVALS = f"""
SELECT {_COLS}, x.record_at
  FROM measure.interval_record x
 WHERE x.measurement_id = %(m)s AND x.system_id = %(s)s AND x.type_code = %(t)s
   AND x.entity_id = ANY(%(ids)s::bigint[])
   AND x.from_at >= %(lo)s::timestamptz AND x.from_at < %(hi)s::timestamptz
   AND x.to_at <= %(hi)s::timestamptz
   AND (x.from_at, x.entity_id, x.record_at) > (%(cf)s::timestamptz, %(ce)s::bigint, %(cr)s::timestamptz)
 ORDER BY x.from_at, x.entity_id, x.record_at
 LIMIT %(batch)s
"""


def _check(q: ReadQuery) -> None:
    if not 1 <= q.limit <= MAX_LIMIT:
        raise ReadError(f"limit must be 1-{MAX_LIMIT}, got {q.limit}", field="limit")
    if q.from_at is not None and q.to_at is not None and q.from_at > q.to_at:
        raise ReadError(f"window starts ({q.from_at.isoformat()}) after it ends "
                        f"({q.to_at.isoformat()}); swap from_at and to_at", field="from_at")
    for name in ("from_at", "to_at", "at"):
        v = getattr(q, name)
        if v is not None and v.tzinfo is None:
            raise ReadError(f"{name} needs a time zone (e.g. 2024-05-01T08:00:00Z)", field=name)
    if q.at is not None and (q.from_at is not None or q.to_at is not None or q.all_records):
        raise ReadError("give either a target time (at) or a window (from_at/to_at, "
                        "all_records), not both", field="at")
    if q.tolerance is not None:
        if q.at is None:
            raise ReadError("tolerance needs a target time (at)", field="tolerance")
        if q.tolerance < timedelta(0):
            raise ReadError("tolerance must not be negative", field="tolerance")
    if q.by is not None and q.all_records:
        raise ReadError("BY is not available with all_records (LISTALL lists in time order)",
                        field="by")
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


def read(conn: psycopg.Connection, measurement_id: int, q: ReadQuery) -> ReadResult:
    """MEASREAD / MEASREAD_DIFF_ of one measurement; see the module docstring."""
    _check(q)
    ent = entity_def(q.entity)
    info = measurement_info(conn, measurement_id)
    shown = resolve_counters(ent, q.counters)
    by = resolve_counters(ent, [q.by], field="by")[0] if q.by else None
    cond = resolve_counters(ent, [q.if_.counter], field="if_counter")[0] if q.if_ else None
    needed = list(shown)
    for extra in (by, cond):
        if extra is not None and extra not in needed:
            needed.append(extra)
    paired = ent.counter(PAIRED_COUNTER) if PAIRED_COUNTER in ent else None
    if paired is not None and any(c.kind == "response" for c in needed) and paired not in needed:
        needed.append(paired)
    entities = {e.entity_id: e for e in select_entities(conn, info.system_id, ent.name, q.descriptor)}
    p = {"m": measurement_id, "s": info.system_id, "t": ent.code, "ids": list(entities)}
    if q.at is not None:
        mode = "nearest"
    elif q.all_records:
        mode = "intervals"
    elif q.from_at is not None or q.to_at is not None:
        mode = "summary"
    else:
        mode = "latest"
    p["lo"] = q.from_at if q.from_at is not None else "-infinity"
    p["hi"] = q.to_at if q.to_at is not None else "infinity"

    ctx = _Ctx(conn, ent, info, q, needed, shown, paired, by, cond, entities)
    if not entities:
        return ReadResult(measurement_id, ent, mode, q.rate, shown, [], None)
    if mode == "intervals":
        records, cursor = ctx.intervals(p)
        return ReadResult(measurement_id, ent, mode, q.rate, shown, records, cursor)
    if mode == "latest":
        rows = conn.execute(_LATEST, p).fetchall()
    elif mode == "nearest":
        tol = q.tolerance
        p["at"] = q.at
        p["lo"] = q.at - tol if tol is not None else "-infinity"
        p["hi"] = q.at + tol if tol is not None else "infinity"
        p["flo"] = (q.at - tol - timedelta(microseconds=info.interval_us)
                    if tol is not None and info.interval_us else "-infinity")
        rows = conn.execute(_NEAREST, p).fetchall()
    else:
        sums = ", ".join([f"sum(x.counters[%(c{i}_pos)s])" for i in range(len(needed))])
        for i, c in enumerate(needed):
            p[f"c{i}_pos"] = c.position + 1
        rows = conn.execute(_SUMMARY.format(sums=sums), p).fetchall()
    records = [r for r in ctx.records(rows, summary=(mode == "summary")) if r is not None]
    return ctx.page(records)


@dataclass
class _Ctx:
    conn: psycopg.Connection
    ent: EntityDef
    info: MeasurementInfo
    q: ReadQuery
    needed: list[CounterDef]
    shown: list[CounterDef]
    paired: CounterDef | None
    by: CounterDef | None
    cond: CounterDef | None
    entities: dict[int, EntityRow]

    def records(self, rows: Sequence[tuple], *, summary: bool) -> list[Record | None]:
        """Rows (entity_id, from, to, delta_us, n, counters-or-sums[, last, first]) → records
        (rated in one round trip when RATE ON), aligned with rows; None where ZERO-REPORTS
        EXCLUDE or the IF condition drops the record."""
        out: list[Record] = []
        raw_all: list[list[int | None]] = []
        for row in rows:
            e = self.entities[row[0]]
            raw: list[int | None] = []
            for i, c in enumerate(self.needed):
                if c.kind_code in LEVEL_KINDS:
                    src = (row[7] if _is_start_snapshot(c) else row[6]) if summary else row[5]
                    v = src[c.position] if src is not None and c.position < len(src) else None
                else:
                    v = row[5][i] if summary else (row[5][c.position] if c.position < len(row[5]) else None)
                raw.append(None if v is None else int(v))
            raw_all.append(raw)
            out.append(Record(e.entity_id, e.key, e.ids, e.cpu, row[1], row[2], int(row[3]),
                              int(row[4]), {}))
        if self.q.rate:
            items = []
            pidx = self.needed.index(self.paired) if self.paired in self.needed else None
            for rec, raw in zip(out, raw_all, strict=True):
                for c, v in zip(self.needed, raw, strict=True):
                    items.append((counter_kind(c, self.ent, rec.ids, self.info.contab), v, rec.delta_us,
                                  raw[pidx] if pidx is not None else None))
            rated = iter(rate_values(self.conn, items))
            for rec in out:
                rec.values = {c.name: next(rated) for c in self.needed}
        else:
            for rec, raw in zip(out, raw_all, strict=True):
                rec.values = dict(zip((c.name for c in self.needed), raw, strict=True))
        kept: list[Record | None] = []
        for rec, raw in zip(out, raw_all, strict=True):
            shown_raw = [v for c, v in zip(self.needed, raw, strict=True) if c in self.shown]
            if not self.q.zero_reports and not any(shown_raw) or not self._passes(rec):
                kept.append(None)
            else:
                kept.append(rec)
        return kept

    def _passes(self, rec: Record) -> bool:
        if self.q.if_ is None or self.cond is None:
            return True
        v = rec.values.get(self.cond.name)
        return v is not None and RELOPS[self.q.if_.op](v, self.q.if_.value)

    def _finish(self, rec: Record) -> Record:
        rec.values = {c.name: rec.values.get(c.name) for c in self.shown}
        return rec

    def page(self, records: list[Record]) -> ReadResult:
        def key(r: Record) -> list[Any]:
            head: list[Any] = []
            if self.by is not None:
                v = r.values.get(self.by.name)
                head = [[1, 0]] if v is None else [[0, -v if self.q.descending else v]]
            return _jsonable(head + _id_sort_key(self.ent, r.ids) + [r.entity_id])

        keyed = sorted(((key(r), r) for r in records), key=lambda kr: kr[0])
        if self.q.cursor is not None:
            after = _decode_cursor(self.q.cursor)
            try:
                keyed = [kr for kr in keyed if kr[0] > after]
            except TypeError:
                raise ReadError("cursor does not belong to this query; start again without it",
                                field="cursor") from None
        page = keyed[: self.q.limit]
        nxt = _encode_cursor(page[-1][0]) if len(keyed) > self.q.limit else None
        mode = "nearest" if self.q.at is not None else (
            "summary" if self.q.from_at is not None or self.q.to_at is not None else "latest")
        return ReadResult(self.info.measurement_id, self.ent, mode, self.q.rate, self.shown,
                          [self._finish(r) for _, r in page], nxt)

    def intervals(self, p: dict[str, Any]) -> tuple[list[Record], str | None]:
        """LISTALL: keyset over (from_at, entity_id, record_at), filtered batch by batch."""
        if self.q.cursor is not None:
            c = _decode_cursor(self.q.cursor)
            try:
                cf, ce, cr = datetime.fromisoformat(c[0]), int(c[1]), datetime.fromisoformat(c[2])
            except (TypeError, ValueError, IndexError, KeyError):
                raise ReadError("cursor does not belong to this query; start again without it",
                                field="cursor") from None
        else:
            cf, ce, cr = "-infinity", -1, "-infinity"
        batch = max(self.q.limit * 2, 200)
        out: list[tuple[Record, tuple]] = []
        more = False
        while True:
            rows = self.conn.execute(_INTERVALS, {**p, "cf": cf, "ce": ce, "cr": cr, "batch": batch}).fetchall()
            for row, rec in zip(rows, self.records(rows, summary=False), strict=True):
                if rec is None:
                    continue
                if len(out) == self.q.limit:
                    more = True
                    break
                out.append((rec, (row[1], row[0], row[6])))
            if more or len(rows) < batch:
                break
            cf, ce, cr = rows[-1][1], rows[-1][0], rows[-1][6]
        cursor = None
        if more:
            f, e, r = out[-1][1]
            cursor = _encode_cursor([f.isoformat(), e, r.isoformat()])
        return [self._finish(rec) for rec, _ in out], cursor
