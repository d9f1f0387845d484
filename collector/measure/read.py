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
    desc = _descriptor(ent, descriptor)
    text = conn.execute(
        "SELECT json_agg(json_build_array(e.entity_id, e.key, e.ids, e.cpu) ORDER BY e.entity_id)::text"
        "  FROM measure.entity e WHERE e.system_id = %s AND e.type_code = %s",
        (system_id, ent.code),
    ).fetchone()[0]
    return _matching(ent, desc, text)


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
#
# A read is two round trips: _INFO (the measurement and the entities of the type, one row)
# and one statement per mode that selects the records and rates them (measure.rate, the one
# place of the reduction) in the same statement. The SQL text depends only on the mode and
# on how many counters are read, never on request text: counter positions, kinds, entity
# ids and times are parameters. Parsed CONTABs and descriptor matches are cached by the
# exact text the database returned, so a changed measurement or a new entity is seen at
# once (nothing to invalidate by hand).

_INFO = """
SELECT m.measurement_id, s.system_id, m.name, m.state,
       (m.interval_seconds * 1000000)::bigint, m.contab::text,
       (SELECT json_agg(json_build_array(e.entity_id, e.key, e.ids, e.cpu) ORDER BY e.entity_id)::text
          FROM measure.entity e WHERE e.system_id = s.system_id AND e.type_code = %(t)s)
  FROM measure.measurement m JOIN measure.system s USING (system_name)
 WHERE m.measurement_id = %(m)s
"""

# The selected counters of an interval record x, in the order of %(pos)s (1-based positions;
# a position beyond the stored array gives NULL).
_VALS = "ARRAY(SELECT x.counters[u.p] FROM unnest(%(pos)s::int[]) WITH ORDINALITY AS u(p, i) ORDER BY u.i)"

# Rating wrapper: r.vals rated per counter kind (%(kinds)s, with per-entity overrides for
# USERDEF TIME-VALUE at index %(tvi)s), the paired TRANSACTIONS at index %(pidx)s.
_RATED = """
SELECT r.*, CASE WHEN %(rate)s THEN ARRAY(
         SELECT measure.rate(coalesce(o.kind, u.kind), u.v, r.delta_us, r.vals[%(pidx)s::int])::float8
           FROM unnest(%(kinds)s::text[], r.vals::numeric[]) WITH ORDINALITY AS u(kind, v, i)
           LEFT JOIN unnest(%(oe)s::bigint[], %(ok)s::text[]) AS o(entity_id, kind)
                  ON u.i = %(tvi)s::int AND o.entity_id = r.entity_id
          ORDER BY u.i) END AS rated
  FROM ({inner}) r
"""

_LATEST = _RATED.format(inner=f"""
SELECT x.entity_id, x.from_at, x.to_at, x.delta_us, 1 AS n, {_VALS} AS vals
  FROM unnest(%(ids)s::bigint[]) AS e(entity_id)
  CROSS JOIN LATERAL (
        SELECT * FROM measure.interval_record y
         WHERE y.measurement_id = %(m)s AND y.entity_id = e.entity_id
         ORDER BY y.record_at DESC, y.from_at DESC LIMIT 1) x
""")

# Per entity, the closest record at or before `at` and the closest one after it (two index
# probes on (measurement_id, entity_id, to_at)); the nearer wins, a tie the earlier.
_NEAREST_PROBE = """
        SELECT y.* FROM measure.interval_record y
         WHERE y.measurement_id = %(m)s AND y.entity_id = e.entity_id
           AND y.to_at {cmp} %(at)s::timestamptz
           AND y.to_at >= %(lo)s::timestamptz AND y.to_at <= %(hi)s::timestamptz
           AND y.from_at >= %(flo)s::timestamptz AND y.from_at < %(hi)s::timestamptz
         ORDER BY y.to_at {order} LIMIT 1"""
_NEAREST = _RATED.format(inner=f"""
SELECT x.entity_id, x.from_at, x.to_at, x.delta_us, 1 AS n, {_VALS} AS vals
  FROM unnest(%(ids)s::bigint[]) AS e(entity_id)
  CROSS JOIN LATERAL (
        SELECT c.* FROM (({_NEAREST_PROBE.format(cmp="<=", order="DESC")})
                          UNION ALL ({_NEAREST_PROBE.format(cmp=">", order="ASC")})) c
         ORDER BY abs(extract(epoch FROM c.to_at - %(at)s::timestamptz)), c.to_at LIMIT 1) x
""")

# MEASREAD_DIFF_: per entity the sums over the window, and the first and last interval's
# counters for snapshot / max counters (%(src)s: 0 sum, 1 last interval, 2 first interval).
_SUMMARY = _RATED.format(inner="""
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
SELECT s.entity_id, s.from_at, s.to_at, s.delta_us, s.n,
       ARRAY(SELECT CASE u.src WHEN 0 THEN s.sums[u.i] WHEN 1 THEN l.counters[u.p] ELSE f.counters[u.p] END
               FROM unnest(%(src)s::int[], %(pos)s::int[]) WITH ORDINALITY AS u(src, p, i)
              ORDER BY u.i)::numeric[] AS vals
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
""")

_INTERVALS = _RATED.format(inner=f"""
SELECT x.entity_id, x.from_at, x.to_at, x.delta_us, 1 AS n, {_VALS} AS vals, x.record_at
  FROM measure.interval_record x
 WHERE x.measurement_id = %(m)s AND x.system_id = %(s)s AND x.type_code = %(t)s
   AND x.entity_id = ANY(%(ids)s::bigint[])
   AND x.from_at >= %(lo)s::timestamptz AND x.from_at < %(hi)s::timestamptz
   AND x.to_at <= %(hi)s::timestamptz
   AND (x.from_at, x.entity_id, x.record_at) > (%(cf)s::timestamptz, %(ce)s::bigint, %(cr)s::timestamptz)
 ORDER BY x.from_at, x.entity_id, x.record_at
 LIMIT %(batch)s
""") + " ORDER BY r.from_at, r.entity_id, r.record_at"

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


def _matching(ent: EntityDef, desc: EntityDescriptor, entities_json: str | None) -> list[EntityRow]:
    """The entities (json_agg text of _INFO) a descriptor selects; cached by that text."""
    if entities_json is None:
        return []
    key = (ent.code, json.dumps(desc.fields, sort_keys=True), entities_json)
    hit = _match_cache.get(key)
    if hit is not None:
        return hit
    rows = [EntityRow(r[0], r[1], r[2], r[3]) for r in json.loads(entities_json) if desc.matches(r[2])]
    if len(_match_cache) >= _CACHE_MAX:
        _match_cache.clear()
    _match_cache[key] = rows
    return rows


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
    info_row = conn.execute(_INFO, {"m": measurement_id, "t": ent.code}).fetchone()
    if info_row is None:
        raise ReadError(f"no measurement {measurement_id}", field="measurement_id", status=404)
    info = MeasurementInfo(info_row[0], info_row[1], info_row[2], info_row[3], info_row[4],
                           _cached_contab(info_row[5]))
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
    entity_rows = _matching(ent, _descriptor(ent, q.descriptor), info_row[6])
    entities = {e.entity_id: e for e in entity_rows}
    if q.at is not None:
        mode = "nearest"
    elif q.all_records:
        mode = "intervals"
    elif q.from_at is not None or q.to_at is not None:
        mode = "summary"
    else:
        mode = "latest"
    if not entities:
        return ReadResult(measurement_id, ent, mode, q.rate, shown, [], None)

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
    p["lo"] = q.from_at if q.from_at is not None else "-infinity"
    p["hi"] = q.to_at if q.to_at is not None else "infinity"

    ctx = _Ctx(conn, ent, info, q, needed, shown, paired, by, cond, entities)
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
        p["src"] = [(2 if _is_start_snapshot(c) else 1) if c.kind_code in LEVEL_KINDS else 0
                    for c in needed]
        sums = ", ".join([f"sum(x.counters[%(c{i}_pos)s])" for i in range(len(needed))])
        for i, c in enumerate(needed):
            p[f"c{i}_pos"] = c.position + 1
        rows = conn.execute(_SUMMARY.format(sums=sums), p).fetchall()
    records = [r for r in ctx.records(rows) if r is not None]
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

    def records(self, rows: Sequence[tuple]) -> list[Record | None]:
        """Rows (entity_id, from, to, delta_us, n, vals[, record_at], rated) → records, aligned
        with rows; None where ZERO-REPORTS EXCLUDE or the IF condition drops the record."""
        names = [c.name for c in self.needed]
        shown_idx = [i for i, c in enumerate(self.needed) if c in self.shown]
        drop_zero = not self.q.zero_reports
        out: list[Record | None] = []
        for row in rows:
            e = self.entities[row[0]]
            raw = [None if v is None else int(v) for v in row[5]]
            values = dict(zip(names, row[-1] if self.q.rate else raw, strict=True))
            rec = Record(e.entity_id, e.key, e.ids, e.cpu, row[1], row[2], int(row[3]), int(row[4]), values)
            if drop_zero and not any(raw[i] for i in shown_idx) or not self._passes(rec):
                out.append(None)
            else:
                out.append(rec)
        return out

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
            return head + _id_sort_key(self.ent, r.ids) + [r.entity_id]

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
            for row, rec in zip(rows, self.records(rows), strict=True):
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
