"""Performance-data-base tiers: rows of the measure.<entity>_<tier> views (schema/idempotent/
020-tiers.sql), filtered and paged.

* The view is chosen from a fixed map (:data:`VIEWS`); its columns come from the database
  catalogue (read once per process); filters and the cursor are query parameters. No SQL text
  is ever built from request text.
* ``auto`` picks the tier that fits the from/to range: up to 7 days the hour tier, up to 120
  days the shift tier, beyond that the month tier (:func:`auto_tier`). It needs ``from``;
  ``to`` defaults to now. The page says which tier it used.
* from/to select buckets by their start: hours with from ≤ hour_at < to; shift days, months
  and years whose first day (in the system's time zone) lies in [the day/month/year holding
  ``from``, ``to``).
* Paging is keyset over the bucket, then system and subject: a cursor continues after the
  last row returned.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from psycopg import errors, sql
from sqlalchemy.orm import Session

from api.control import resolve_system
from api.db import psycopg_connection
from api.errors import InvalidInput
from api.tiers.schemas import TierEntity, TierName, TierPage, TierQuery, TierRowRead

AUTO_HOUR_MAX = timedelta(days=7)
AUTO_SHIFT_MAX = timedelta(days=120)
AUTO_RULE = "hour up to 7 days, shift up to 120 days, month beyond (range = to - from)"

# (entity, tier) -> view; the only views this endpoint reads.
VIEWS: dict[tuple[str, str], str] = {
    (e.value, t.value): f"{e.value}_{t.value}" for e in TierEntity for t in TierName if t is not TierName("auto")
}
# Identifying columns (subject), per entity, in key order.
SUBJECT: dict[str, tuple[str, ...]] = {
    "cpu": ("cpu", "cpu_type", "os_version"),
    "disc": ("volume",),
    "line": ("line", "cpu"),
    "process": ("cpu", "pin", "process_name", "program_file_name", "priority"),
    "userdef": ("cpu", "pin", "process_name", "program_file_name", "counter_name", "counter_index",
                "counter_type"),
    "tmf": ("cpu",),
}
BUCKET: dict[str, tuple[str, ...]] = {
    "hour": ("hour_at", "local_hour", "loadid", "measurement_id"),
    "shift": ("shift_day", "shift_no", "hours", "shift_hours"),
    "month": ("month", "shift_no", "shifts", "hours", "shift_hours"),
    "year": ("year", "shift_no", "months", "hours", "shift_hours"),
}
HIDDEN = ("system_name", "system_id", "entity_id", "subject")
# Keyset order per tier: (column, SQL type) — the bucket first, then system and subject.
# Hour views: entity_id where the view has it, the volume for the disc view.
KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "hour": (("hour_at", "timestamptz"), ("system_id", "smallint"), ("entity_id", "bigint")),
    "hour_disc": (("hour_at", "timestamptz"), ("system_id", "smallint"), ("volume", "text")),
    "shift": (("shift_day", "date"), ("shift_no", "smallint"), ("system_id", "smallint"), ("subject", "text")),
    "month": (("month", "date"), ("shift_no", "smallint"), ("system_id", "smallint"), ("subject", "text")),
    "year": (("year", "smallint"), ("shift_no", "smallint"), ("system_id", "smallint"), ("subject", "text")),
}
# Where a time bound applies: the expression of a bucket's start, as local timestamp.
_LOCAL_START = {
    "shift": sql.SQL("v.shift_day::timestamp"),
    "month": sql.SQL("v.month::timestamp"),
    "year": sql.SQL("make_date(v.year::int, 1, 1)::timestamp"),
}
_TRUNC = {"shift": "day", "month": "month", "year": "year"}


def auto_tier(from_at: datetime, to_at: datetime) -> TierName:
    span = to_at - from_at
    if span <= AUTO_HOUR_MAX:
        return TierName("hour")
    if span <= AUTO_SHIFT_MAX:
        return TierName("shift")
    return TierName("month")


_column_cache: dict[tuple[str, str], tuple[str, ...]] = {}


def view_columns(conn: Any, view: str) -> tuple[str, ...]:
    key = (conn.info.dbname, view)
    cols = _column_cache.get(key)
    if cols is None:
        cols = tuple(r[0] for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
            "AND NOT attisdropped ORDER BY attnum", (f"measure.{view}",)).fetchall())
        _column_cache[key] = cols
    return cols


def _encode(values: list[Any]) -> str:
    raw = json.dumps([v.isoformat() if isinstance(v, (datetime, date)) else v for v in values],
                     separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode(cursor: str, n: int) -> list[Any]:
    try:
        out = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode())
    except (ValueError, binascii.Error, UnicodeDecodeError):
        out = None
    if not isinstance(out, list) or len(out) != n:
        raise InvalidInput("cursor is not one this endpoint returned for this query; start again "
                           "without it", field="cursor")
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, Decimal):
        return float(v)
    return v


def _utc(v: datetime) -> datetime:
    """An instant for comparing two bounds: local times (naive) read as UTC (at most a day off)."""
    return v if v.tzinfo is not None else v.replace(tzinfo=UTC)


def _check(entity: str, tier: str, q: TierQuery) -> None:
    if q.from_at is not None and q.to_at is not None and _utc(q.from_at) > _utc(q.to_at):
        raise InvalidInput(f"from ({q.from_at.isoformat()}) is after to ({q.to_at.isoformat()}); "
                           "swap them", field="from")
    if q.cpu is not None and entity == "disc":
        raise InvalidInput("cpu does not apply to disc (volumes are folded over their paths); "
                           "use volume", field="cpu")
    if q.volume is not None and entity != "disc":
        raise InvalidInput(f"volume applies to disc only, not {entity}", field="volume")
    if q.process is not None and entity not in ("process", "userdef"):
        raise InvalidInput(f"process applies to process and userdef only, not {entity}", field="process")
    if q.shift is not None and tier == "hour":
        raise InvalidInput("shift applies to the shift, month and year tiers, not hour", field="shift")
    if q.system is not None:
        s = q.system.strip().upper()
        s = s if s.startswith("\\") else "\\" + s
        if not re.fullmatch(r"\\[A-Z][A-Z0-9]{0,6}", s):
            raise InvalidInput(f"system {q.system!r} is not a system name: \\ then a letter and up "
                               "to 6 letters or digits, e.g. \\DEMO", field="system")


def _time_bounds(tier: TierName, q: TierQuery) -> list[sql.Composable]:
    """The conditions of from and to (parameters %(from)s, %(to)s). A bound with an offset is
    an instant; without (a plain date, a local date-time) it is the local time of each row's
    system."""
    def local(name: str, v: datetime) -> sql.Composable:
        return sql.SQL("(%({})s AT TIME ZONE s.time_zone)" if v.tzinfo is not None
                       else "%({})s::timestamp").format(sql.SQL(name))

    def instant(name: str, v: datetime) -> sql.Composable:
        return sql.SQL("%({})s" if v.tzinfo is not None
                       else "(%({})s::timestamp AT TIME ZONE s.time_zone)").format(sql.SQL(name))

    out: list[sql.Composable] = []
    if tier is TierName("hour"):
        if q.from_at is not None:
            out.append(sql.SQL("v.hour_at >= {}").format(instant("from", q.from_at)))
        if q.to_at is not None:
            out.append(sql.SQL("v.hour_at < {}").format(instant("to", q.to_at)))
    else:
        start = _LOCAL_START[tier.value]
        if q.from_at is not None:
            out.append(sql.SQL("{} >= date_trunc({}, {})").format(
                start, sql.Literal(_TRUNC[tier.value]), local("from", q.from_at)))
        if q.to_at is not None:
            out.append(sql.SQL("{} < {}").format(start, local("to", q.to_at)))
    return out


def read_tier(session: Session, entity: TierEntity, tier: TierName, q: TierQuery, *,
              now: datetime | None = None) -> TierPage:
    requested = tier
    auto_rule = None
    if tier is TierName("auto"):
        if q.from_at is None:
            raise InvalidInput("tier auto needs from (and to, default now) to choose a tier",
                               field="from")
        to = _utc(q.to_at or now or datetime.now(UTC))
        if _utc(q.from_at) > to:
            raise InvalidInput(f"from {q.from_at.isoformat()} is after to {to.isoformat()}", field="from")
        tier = auto_tier(_utc(q.from_at), to)
        auto_rule = AUTO_RULE
    _check(entity.value, tier.value, q)
    system_name = None
    if q.system is not None:
        s = q.system.strip().upper()
        system_name = resolve_system(session, s if s.startswith("\\") else "\\" + s).system_name
    view = VIEWS[(entity.value, tier.value)]
    conn = psycopg_connection(session)
    cols = view_columns(conn, view)
    keys = KEYS["hour_disc" if (tier.value == "hour" and entity.value == "disc") else tier.value]

    where: list[sql.Composable] = []
    params: dict[str, Any] = {}
    if system_name is not None:
        where.append(sql.SQL("v.system_name = %(system)s"))
        params["system"] = system_name
    if q.cpu is not None:
        where.append(sql.SQL("v.cpu = %(cpu)s"))
        params["cpu"] = q.cpu
    if q.volume is not None:
        where.append(sql.SQL("upper(v.volume) = upper(%(volume)s)"))
        params["volume"] = q.volume
    if q.process is not None:
        where.append(sql.SQL("(upper(v.process_name) = upper(%(process)s) "
                             "OR upper(v.program_file_name) = upper(%(process)s))"))
        params["process"] = q.process
    if q.shift is not None:
        where.append(sql.SQL("v.shift_no = %(shift)s"))
        params["shift"] = q.shift
    where += _time_bounds(tier, q)
    params["from"], params["to"] = q.from_at, q.to_at
    if q.cursor is not None:
        after = _decode(q.cursor, len(keys))
        where.append(sql.SQL("({}) > ({})").format(
            sql.SQL(", ").join(sql.SQL("v.{}").format(sql.Identifier(c)) for c, _ in keys),
            sql.SQL(", ").join(sql.SQL("CAST({} AS {})").format(sql.Placeholder(f"k{i}"), sql.SQL(t))
                               for i, (_, t) in enumerate(keys))))
        params.update({f"k{i}": v for i, v in enumerate(after)})
    stmt = sql.SQL("SELECT {cols} FROM measure.{view} v JOIN measure.system s USING (system_name)"
                   "{where} ORDER BY {order} LIMIT %(lim)s").format(
        cols=sql.SQL(", ").join(sql.SQL("v.{}").format(sql.Identifier(c)) for c in cols),
        view=sql.Identifier(view),
        where=sql.SQL(" WHERE ") + sql.SQL(" AND ").join(where) if where else sql.SQL(""),
        order=sql.SQL(", ").join(sql.SQL("v.{}").format(sql.Identifier(c)) for c, _ in keys))
    params["lim"] = q.limit + 1
    try:
        rows = conn.execute(stmt, params).fetchall()
    except Exception as exc:  # a cursor value of the wrong type: a client mistake
        if isinstance(exc, (errors.InvalidDatetimeFormat, errors.InvalidTextRepresentation,
                            errors.DatetimeFieldOverflow, errors.NumericValueOutOfRange)):
            session.rollback()
            raise InvalidInput("cursor is not one this endpoint returned for this query; start "
                               "again without it", field="cursor") from None
        raise
    subj, bucket = SUBJECT[entity.value], BUCKET[tier.value]
    key_idx = [cols.index(c) for c, _ in keys]
    items: list[TierRowRead] = []
    for row in rows[: q.limit]:
        d = dict(zip(cols, row, strict=True))
        items.append(TierRowRead(
            system_name=d["system_name"],
            subject={c: _plain(d[c]) for c in subj if c in d},
            bucket={c: _plain(d[c]) for c in bucket if c in d},
            values={c: _plain(v) for c, v in d.items()
                    if c not in subj and c not in bucket and c not in HIDDEN
                    and (v is None or isinstance(v, (int, float, Decimal)))}))
    nxt = _encode([rows[q.limit - 1][i] for i in key_idx]) if len(rows) > q.limit else None
    return TierPage(entity=entity, tier=tier, requested_tier=requested, view=f"measure.{view}",
                    auto_rule=auto_rule, items=items, next_cursor=nxt)
