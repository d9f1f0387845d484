"""Counter reads: MEASREAD over stored interval records (collector/measure/read.py) and
MEASREADACTIVE / LISTACTIVE through the running collector.

Active reads go through the running collector: a ``read_active`` control request (core/control.py:
payload :class:`~core.control.ReadActive`, answer :class:`~core.control.ActiveRead`, the live
counter records with, for a measurement, their baseline copy). An entity that no active
measurement measures is simply absent; when none matches at all the collector answers with an
empty list (not an error). The API turns the answer into the same record shape as MEASREAD:
from_at = record_at, to_at = at, DELTA-TIME = at − record_at, values rated with measure.rate
when RATE ON (activity since measurement start, or since CPU load for CPUs).
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from api.control import call_collector, resolve_system
from api.counters.schemas import (
    ActiveReadQuery,
    CounterColumnRead,
    CounterDefRead,
    CounterReadPage,
    CounterReadQuery,
    CounterRecordRead,
    EntityTypeRead,
)
from api.db import psycopg_connection
from api.errors import InvalidInput, MeasureError, NotFound, Unavailable
from collector.measure import read as measread
from collector.measure.contab import Contab, DescriptorError, normalize_fields
from core import control
from core.catalog import load_catalog
from core.times import to_us

NOT_ACTIVE = ("discopen", "processh")  # MEASREADACTIVE refuses these (measure-reference §6.6)


def _typed(exc: measread.ReadError) -> MeasureError:
    return (NotFound if exc.status == 404 else InvalidInput)(exc.message, field=exc.field)


def parse_ids(values: list[str]) -> dict[str, Any]:
    """``field:value`` strings → descriptor fields."""
    out: dict[str, Any] = {}
    for v in values:
        name, sep, value = v.partition(":")
        if not sep or not name.strip():
            raise InvalidInput(f"ids entry {v!r} must be field:value, e.g. cpu:3", field="ids")
        out[name.strip()] = value.strip()
    return out


def _record(r: measread.Record) -> CounterRecordRead:
    return CounterRecordRead(entity_key=r.key, ids=r.ids, cpu=r.cpu, from_at=r.from_at, to_at=r.to_at,
                             delta_seconds=r.delta_us / 1e6, intervals=r.intervals,
                             values={k: _number(v) for k, v in r.values.items()})


def _number(v: int | float | Decimal | None) -> int | float | None:
    """A value for JSON: a Decimal (an exact rate) as the float pydantic would make of it."""
    return float(v) if isinstance(v, Decimal) else v


def _columns(ent: Any, counters: list, rate: bool) -> list[CounterColumnRead]:
    return list(_columns_of(ent.name, tuple(c.name for c in counters), rate))


@functools.lru_cache(maxsize=1024)
def _columns_of(entity: str, names: tuple[str, ...], rate: bool) -> tuple[CounterColumnRead, ...]:
    """The column descriptions of a counter selection (the catalogue does not change)."""
    ent = load_catalog().entity(entity)
    return tuple(CounterColumnRead(**c) for c in measread.counter_columns(
        ent, [ent.counter(n) for n in names], rate))


def read_counters(session: Session, measurement_id: int, entity: str, q: CounterReadQuery) -> CounterReadPage:
    given = [x is not None for x in (q.if_counter, q.if_op, q.if_value)]
    if any(given) and not all(given):
        raise InvalidInput("IF needs if_counter, if_op and if_value together", field="if_counter")
    condition = None
    if q.if_counter is not None and q.if_op is not None and q.if_value is not None:
        condition = measread.Condition(q.if_counter, q.if_op, q.if_value)
    query = measread.ReadQuery(
        entity=entity, descriptor=parse_ids(q.ids), counters=q.counters, from_at=q.from_at,
        to_at=q.to_at, at=q.at,
        tolerance=timedelta(seconds=q.tolerance_seconds) if q.tolerance_seconds is not None else None,
        all_records=q.all_records, rate=q.rate, by=q.by, descending=q.descending,
        if_=condition,
        zero_reports=q.zero_reports, limit=q.limit, cursor=q.cursor)
    try:
        result = measread.read(psycopg_connection(session), measurement_id, query)
    except measread.ReadError as exc:
        raise _typed(exc) from None
    return CounterReadPage(measurement_id=measurement_id, entity=result.entity.name, mode=result.mode,
                           rate=result.rate, counters=_columns(result.entity, result.counters, result.rate),
                           records=[_record(r) for r in result.records], next_cursor=result.next_cursor)


def read_active(session: Session, engine: Engine, entity: str, q: ActiveReadQuery, *,
                timeout: float) -> CounterReadPage:
    ent = load_catalog().entity(entity)
    if ent.name in NOT_ACTIVE:
        raise InvalidInput(f"MEASREADACTIVE cannot read {ent.measure_name} records", field="entity")
    try:
        _, fields = normalize_fields(ent.measure_name, parse_ids(q.ids))
        shown = measread.resolve_counters(ent, q.counters)
    except DescriptorError as exc:
        raise InvalidInput(f"{ent.measure_name} descriptor: {exc.message}",
                           field=f"ids.{exc.field}" if exc.field else "ids") from None
    except measread.ReadError as exc:
        raise _typed(exc) from None
    contab: Contab | None = None
    if q.measurement_id is not None:
        conn = psycopg_connection(session)
        try:
            info = measread.measurement_info(conn, q.measurement_id)
        except measread.ReadError as exc:
            raise _typed(exc) from None
        system_id, contab = info.system_id, info.contab
    else:
        system_id = resolve_system(session, q.system).system_id
    answer = call_collector(engine, system_id, control.ReadActive(
        entity=ent.name, descriptor=fields, measurement_id=q.measurement_id), timeout=timeout)
    at_us = to_us(answer.at)
    try:
        raw = [_active_record(ent, r) for r in answer.records]
    except KeyError as exc:
        raise Unavailable(f"the collector's read_active answer is malformed (no counter {exc})") from None
    paired = ent.counter(measread.PAIRED_COUNTER) if measread.PAIRED_COUNTER in ent else None
    records: list[CounterRecordRead] = []
    items: list[tuple[str, int | None, int, int | None]] = []
    for r, rec_at, counters in raw:
        delta_us = max(at_us - rec_at, 1)
        pv = counters[paired.position] if paired is not None and paired.position < len(counters) else None
        for c in shown:
            v = counters[c.position] if c.position < len(counters) else None
            items.append((measread.counter_kind(c, ent, r.ids, contab), v, delta_us, pv))
        records.append(CounterRecordRead(
            entity_key=r.key, ids=r.ids, cpu=r.cpu,
            from_at=_ts(rec_at), to_at=_ts(at_us), delta_seconds=delta_us / 1e6, intervals=1,
            values={c.name: counters[c.position] if c.position < len(counters) else None for c in shown}))
    if q.rate:
        rated = iter(measread.rate_values(psycopg_connection(session), items))
        for rec in records:
            rec.values = {c.name: _number(next(rated)) for c in shown}
    return CounterReadPage(measurement_id=q.measurement_id, entity=ent.name, mode="active", rate=q.rate,
                           counters=_columns(ent, shown, q.rate), records=records, next_cursor=None)


def _active_record(ent, r: control.ActiveRecord) -> tuple[control.ActiveRecord, int, list[int]]:
    """(record, since_us, counters in catalogue order): the change since the measurement's
    baseline copy when the collector sent one (MEASREADACTIVE: activity since measurement
    start), else the cumulative values since the record was allocated. Snapshot, max-queue
    and max-value counters are levels: their current value, not a difference. KeyError: the
    answer lacks a counter."""
    names = [c.measure_name for c in ent.counters]
    now = [int(r.counters[n]) for n in names]
    if r.baseline is None or r.baseline_at is None:
        return r, to_us(r.record_at), now
    levels = {"snapshot", "maxq", "maxvalue"}
    base = [int(r.baseline[n]) for n in names]
    delta = [v if c.kind in levels else v - b for c, v, b in zip(ent.counters, now, base, strict=True)]
    return r, to_us(r.baseline_at), delta


def _ts(us: int) -> datetime:
    return datetime.fromtimestamp(us // 1_000_000, UTC).replace(microsecond=us % 1_000_000)


def entity_types() -> list[EntityTypeRead]:
    return [EntityTypeRead(entity=e.name, measure_name=e.measure_name, type_code=e.code,
                           id_fields=list(e.id_fields), help=e.help) for e in load_catalog()]


def counter_defs(entity: str) -> list[CounterDefRead]:
    return [CounterDefRead(name=c.name, measure_name=c.measure_name, kind=c.kind, unit=c.unit,
                           rate_unit=measread.rate_unit(c), position=c.position + 1, help=c.help)
            for c in load_catalog().entity(entity).counters]
