"""LIST / LISTALL / LISTACTIVE for the MEASCOM interpreter: MEASCOM's words turned into a
MEASREAD query (collector/measure/read.py, the one implementation of selection, summing and
RATE ON, shared with the REST API), and the read's records turned into MEASCOM's output.

* LIST: MEASREAD_DIFF_ with all^recs = 0 over the report window: one summary record per
  entity, the sum of its interval records in the window. Window ends snap to the nearest
  copy time of the entity's records (``snap="nearest"``; ties widen the window): ``FROM 23:00,
  FOR 1 HOURS`` over hourly copies at hh:05 selects 23:05-00:05, the 1986 article's
  "hour 23"; a window narrower than one interval selects the interval it overlaps most.
  Snapshot, max-queue and max-value counters take the last interval's value (``STARTING-…``
  snapshots the first one's). An entity without records in the window is omitted.
  LISTALL: every selected interval record (all^recs = 1), in time order.
* Window (semantics C): FROM / TO / FOR of the command, else of SET REPORT; no FROM =
  measurement start; neither TO nor FOR = measurement (or entity) end. Times without a date:
  see :func:`_resolve_list_time`.
* RATE ON (``measure.rate``): per second for incrementing/accumulating counters, % of the
  interval for busy and queue-busy, average queue length for queue counters, ms per
  transaction for response counters (the read's µs per transaction, shown in ms), raw for
  snapshot/max counters; counter decreases are clamped to 0. A user counter's TIME-VALUE is
  rated by its TYPE in the measurement's CONTAB. RATE OFF: raw values. FORMAT STRUCTURED is
  always raw. Shown rounded half up: 3 decimals, 2 for percentages.
* ZERO-REPORTS EXCLUDE drops all-zero records; TOTALS INCLUDE adds a TOTAL record (sums;
  max for max counters; elapsed = the longest member's), ONLY prints it alone;
  IF keeps records satisfying the condition (on rated values under RATE ON); BY orders by a
  counter, largest first (or by an identifying field, ascending).
* FORMAT STRUCTURED appends the records to the structured records through
  ``measure.append_structured_record``, tagged with the LOADID (duplicates are not removed,
  as in MEASURE). A LIST naming a LOADID writes structured records unless it says FORMAT
  itself: a LOADID exists only for structured files, and the 1986 Figure 4 OBEY file names
  LOADIDs without setting FORMAT.
* LISTACTIVE: live counter records from the collector, differenced
  (:func:`collector.measure.read.difference`) and then reduced exactly like stored ones
  (:func:`collector.measure.read.read_given`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Protocol
from zoneinfo import ZoneInfo

import psycopg

from collector.meascom import ast
from collector.meascom.state import MeascomError, Measurement, SessionState
from collector.measure.contab import (
    CPU_SPEC_TYPES,
    PROCESS_SPEC_TYPES,
    ContabBuilder,
    EntityDescriptor,
)
from collector.measure.read import (
    LEVEL_KINDS,
    Condition,
    GivenRecord,
    ReadError,
    ReadQuery,
    ReadResult,
    Record,
    difference,
    read,
    read_given,
)
from core import control
from core.catalog import Catalog, EntityDef
from core.entities import entity_id, entity_key

__all__ = ["ListingSession", "entity_label", "list_active", "list_stored"]


class ListingSession(Protocol):
    """What LIST reads of the MEASCOM session (collector.meascom.interpreter.Session)."""

    catalog: Catalog
    conn: psycopg.Connection
    system_id: int
    system_name: str
    tz: ZoneInfo
    state: SessionState
    sleep: Callable[[float], None]

    def now(self) -> datetime: ...

    def local_datetime(self, dt: ast.DateTime, today: datetime) -> datetime: ...

    def current_measurement(self) -> Measurement: ...

    def ask_collector(self, request: control.Request) -> tuple[control.Answer | None, str | None]: ...



BRIEF = {
    "CPU": ("CPU-BUSY-TIME", "CPU-QTIME", "DISPATCHES", "SWAPS", "DISC-IOS"),
    "PROCESS": ("CPU-BUSY-TIME", "READY-TIME", "DISPATCHES", "PAGE-FAULTS", "MESSAGES-SENT"),
    "DISC": ("REQUESTS", "REQUEST-QTIME", "READS", "WRITES", "DEVICE-QBUSY-TIME"),
    "LINE": ("REQUESTS", "READ-BUSY-TIME", "WRITE-BUSY-TIME", "TRANSACTIONS", "RESPONSE-TIME"),
    "TERMINAL": ("REQUESTS", "TRANSACTIONS", "RESPONSE-TIME", "INPUT-BYTES", "OUTPUT-BYTES"),
    "USERDEF": ("TIME-VALUE", "MAX-VALUE"),
    "TMF": ("HOME-TRANS", "HOME-TRANS-QTIME", "REMOTE-TRANS", "ABORTING-TRANS"),
}
# How a RATE ON value is shown, by the kind it was rated as: unit, rounding, divisor (the
# read gives response time in µs per transaction; MEASCOM shows ms). Display only: the
# reduction itself is measure.rate's.
_SHOW = {"incrementing": ("/s", Decimal("0.001"), 1), "accumulating": ("/s", Decimal("0.001"), 1),
         "busy": ("%", Decimal("0.01"), 1), "qbusy": ("%", Decimal("0.01"), 1),
         "elapsed": ("%", Decimal("0.01"), 1),
         "queue": ("aql", Decimal("0.001"), 1), "response": ("ms/trans", Decimal("0.001"), 1000)}
_APPEND = ("SELECT measure.append_structured_record(%s, %s::smallint, %s::smallint, %s::integer, "
           "%s::bigint, %s::timestamptz, %s::timestamptz, %s::bigint, %s::bigint[])")


def _err(msg: str, node: ast.Node | None = None) -> MeascomError:
    return MeascomError(msg, node.line if node else 0, node.column if node else 0)


# ------------------------------------------------------------------------------ labels


def entity_label(ent: EntityDef, ids: dict[str, Any]) -> str:
    t = ent.measure_name
    g = ids.get
    if t in CPU_SPEC_TYPES:
        return f"{t} {g('cpu')}"
    if t in PROCESS_SPEC_TYPES:
        parts = [t, f"{g('cpu')},{g('pin')}"]
        parts += [str(g(k)) for k in ("process_name", "program_file_name") if g(k)]
        if t == "SQLSTMT":
            parts.append(f"{g('module_name')}#{g('statement_index')}")
        if t == "USERDEF" and g("name"):
            parts.append(f"{g('name')}[{g('index', 0)}]")
        return " ".join(parts)
    if t in ("DISC", "DEVICE", "LINE", "NETLINE"):
        s = f"{t} {g('device_name')}"
        if g("path"):
            s += f" {g('path')}"
        return s + (f" (CPU {g('cpu')})" if g("cpu") is not None else "")
    if t == "TERMINAL":
        return f"{t} {g('line_name')}.{g('subdev_name')}"
    if t == "SYSTEM":
        return f"{t} {g('remote_system_name') or g('remote_system')}"
    return t + " " + " ".join(f"{k}={g(k)}" for k in ent.id_fields if g(k) is not None)


# ------------------------------------------------------------------------------ window


def _resolve_list_time(s: ListingSession, dt: ast.DateTime, m: Measurement) -> datetime:
    """A LIST time: with a date, that date; without, the latest such time not after the
    measurement's end (or now), and not before its start."""
    if dt.date is not None:
        return s.local_datetime(dt, s.now())
    anchor = (m.stop_at or s.now()).astimezone(s.tz)
    t = s.local_datetime(dt, anchor)
    if t > anchor:
        t = s.local_datetime(dt, anchor - timedelta(days=1))
    if m.start_at is not None and t < m.start_at:
        t = s.local_datetime(dt, t + timedelta(days=1))
    return t


def _window(s: ListingSession, cmd: ast.ListCommand, m: Measurement):
    r = s.state.report
    start = cmd.start if cmd.start is not None else r.from_
    if cmd.to is not None or cmd.for_ is not None:
        to, for_ = cmd.to, cmd.for_
    else:
        to, for_ = r.to, r.for_
    lo = _resolve_list_time(s, start, m) if start is not None else m.start_at
    hi = None
    if to is not None:
        hi = _resolve_list_time(s, to, m)
    elif for_ is not None:
        if lo is None:
            raise _err("FOR needs a start: the measurement has not started; give FROM", for_)
        hi = lo + timedelta(seconds=for_.seconds)
    if lo is not None and hi is not None and hi <= lo:
        raise _err(f"the report window ends ({hi:%d %b %Y %H:%M:%S}) before it begins "
                   f"({lo:%d %b %Y %H:%M:%S})", to or for_)
    return lo, hi


# ------------------------------------------------------------------------------ the query


def _descriptors(s: ListingSession, cmd: ast.ListCommand) -> list[EntityDescriptor]:
    b = ContabBuilder(default_subvol=s.state.builder.default_subvol)
    try:
        for spec in cmd.specs:
            b.add_spec(spec)
    except ValueError as exc:
        raise _err(f"{cmd.entity}: {getattr(exc, 'message', exc)}", cmd.specs[0]) from None
    return b.descriptors


def _format(s: ListingSession, cmd: ast.ListCommand) -> str:
    """FORMAT of the command, else STRUCTURED when the command names a LOADID (a LOADID
    means structured output: the 1986 Figure 4 OBEY file sets no FORMAT), else SET REPORT's."""
    given = _attr(cmd, "FORMAT", "")
    if given:
        return given
    return "STRUCTURED" if cmd.loadid else s.state.report.format


def _attr(cmd: ast.ListCommand, name: str, default: str) -> str:
    for a in cmd.attrs:
        if a.name == name:
            return str(a.value)
    return default


def _query(s: ListingSession, cmd: ast.ListCommand, ent: EntityDef, **window: Any) -> ReadQuery:
    """The MEASREAD query of a LIST-type command: its entities, RATE, BY, IF, ZERO-REPORTS
    and TOTALS (the command's, else SET REPORT's); every record at once, exact values."""
    r = s.state.report
    cond = None
    if cmd.if_ is not None:
        cond = Condition(cmd.if_.counter, cmd.if_.op, Decimal(str(cmd.if_.value)))
    return ReadQuery(
        entity=ent.name, descriptors=[d.fields for d in _descriptors(s, cmd)],
        rate=_attr(cmd, "RATE", r.rate) == "ON", by=cmd.by, if_=cond,
        zero_reports=_attr(cmd, "ZERO-REPORTS", r.zero_reports) != "EXCLUDE",
        totals=_attr(cmd, "TOTALS", r.totals).lower(), limit=None, exact=True, **window)


def _run(cmd: ast.ListCommand, call: Callable[[], ReadResult]) -> ReadResult:
    """Run a read; its refusal becomes a MeascomError at the clause it concerns."""
    try:
        return call()
    except ReadError as exc:
        if exc.field in ("by",):
            raise _err(f"BY: {exc.message}", cmd) from None
        if exc.field in ("if_counter", "if_op"):
            raise _err(f"IF: {exc.message}", cmd.if_) from None
        raise _err(f"{cmd.verb} {cmd.entity}: {exc.message}", cmd) from None


# ------------------------------------------------------------------------------ output


def _num(v: Decimal | int | None) -> str:
    if v is None:
        return "-"
    return f"{v:,}"


def _t(s: ListingSession, dt: datetime) -> str:
    return f"{dt.astimezone(s.tz):%d %b %Y %H:%M:%S}"


def _shown(ent: EntityDef, rec: Record, rate: bool):
    """(value, unit) per counter, in catalogue order, as MEASCOM shows them (RATE ON: by the
    kind the read rated the counter by)."""
    out: list[tuple[Decimal | int | None, str]] = []
    for c in ent.counters:
        if not rate:
            out.append((rec.raw.get(c.name), c.unit))
            continue
        kind = rec.kinds.get(c.name, c.kind)
        if kind not in _SHOW:
            out.append((rec.raw.get(c.name), ""))
            continue
        unit, step, div = _SHOW[kind]
        v = rec.values.get(c.name)
        out.append((None if v is None else (Decimal(v) / div).quantize(step, ROUND_HALF_UP), unit))
    return out


def _labelled(ent: EntityDef, res: ReadResult) -> list[tuple[str, Record]]:
    rows = [(entity_label(ent, r.ids), r) for r in res.records]
    if res.total is not None:
        rows.append((f"TOTAL {ent.measure_name}", res.total))
    return rows


def _render(s: ListingSession, cmd: ast.ListCommand, ent: EntityDef, res: ReadResult,
            m: Measurement | None, fmt: str) -> str:
    rate = res.rate
    head = (f"{cmd.verb} {ent.measure_name} on {s.system_name}"
            + (f", measurement {m.name}" if m else "") + f", RATE {'ON' if rate else 'OFF'}")
    records = _labelled(ent, res)
    if not records:
        return head + f": no {ent.measure_name} records in the report window"
    if fmt == "BRIEF":
        cols = [c for c in BRIEF.get(ent.measure_name, ()) if c in ent] or [
            c.measure_name for c in ent.counters if c.kind_code not in LEVEL_KINDS][:5]
        idx = [ent.index(c) for c in cols]
        width = max(len(label) for label, _ in records)
        widths = [max(len(c), 12) for c in cols]
        lines = [head, "  " + "ENTITY".ljust(width) + " FROM     TO       "
                 + " ".join(c.rjust(w) for c, w in zip(cols, widths, strict=True))]
        for label, r in records:
            vals = _shown(ent, r, rate)
            lines.append("  " + label.ljust(width)
                         + f" {r.from_at.astimezone(s.tz):%H:%M:%S} {r.to_at.astimezone(s.tz):%H:%M:%S} "
                         + " ".join(_num(vals[i][0]).rjust(w) for i, w in zip(idx, widths, strict=True)))
        return "\n".join(lines)
    blocks = [head]
    for label, r in records:
        lines = [label,
                 f"  from {_t(s, r.from_at)}  to {_t(s, r.to_at)}  elapsed "
                 f"{Decimal(r.delta_us) / 1_000_000:.3f} s"
                 + (f"  ERROR {r.error}" if r.error else "")]
        for c, (v, unit) in zip(ent.counters, _shown(ent, r, rate), strict=True):
            lines.append(f"  {c.measure_name:<24}{_num(v):>22} {unit}".rstrip())
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _write_structured(s: ListingSession, cmd: ast.ListCommand, ent: EntityDef, res: ReadResult,
                      measurement_id: int) -> str:
    """FORMAT STRUCTURED: raw values, one row per record (entity_id NULL: the TOTAL)."""
    loadid = cmd.loadid or s.state.report.loadid
    records = [r for _, r in _labelled(ent, res)]
    with s.conn.cursor() as cur:
        cur.executemany(_APPEND, [
            (loadid, s.system_id, ent.code, measurement_id, r.entity_id, r.from_at, r.to_at,
             r.delta_us, [r.raw.get(c.name) for c in ent.counters]) for r in records])
    return (f"{cmd.verb} {ent.measure_name}: {len(records)} structured "
            f"record{'s' if len(records) != 1 else ''} written"
            + (f", LOADID {loadid}" if loadid else ", no LOADID"))


def _output(s: ListingSession, cmd: ast.ListCommand, ent: EntityDef, res: ReadResult,
            m: Measurement | None, measurement_id: int | None) -> str:
    fmt = _format(s, cmd)
    if fmt == "STRUCTURED":
        if measurement_id is None:
            raise _err(f"{cmd.verb} with FORMAT STRUCTURED needs a current measurement "
                       "(ADD MEASUREMENT name)", cmd)
        return _write_structured(s, cmd, ent, res, measurement_id)
    return _render(s, cmd, ent, res, m, fmt)


# ------------------------------------------------------------------------------ commands


def list_stored(s: ListingSession, cmd: ast.ListCommand) -> str:
    """LIST / LISTALL over the current measurement's interval records."""
    m = s.current_measurement()
    ent = s.catalog.entity(cmd.entity)
    lo, hi = _window(s, cmd, m)
    q = _query(s, cmd, ent, from_at=lo, to_at=hi, snap="nearest", summary=True,
               all_records=cmd.verb == "LISTALL")
    res = _run(cmd, lambda: read(s.conn, m.measurement_id, q))
    return _output(s, cmd, ent, res, m, m.measurement_id)


def list_active(s: ListingSession, cmd: ast.ListCommand) -> str:
    """LISTACTIVE: live counter records through the collector (control request 'read_active').

    Without FOR: the change since measurement start (the record's baseline copy) or, when the
    collector has no baseline, since the counter record was allocated. With FOR d: read, wait
    d, read again, and show the difference."""
    ent = s.catalog.entity(cmd.entity)
    try:
        m = s.current_measurement()
    except Exception:  # noqa: BLE001 - LISTACTIVE works without a current measurement
        m = None
    mid = m.measurement_id if m else None
    descs = _descriptors(s, cmd)

    def read_live() -> tuple[datetime, dict[tuple, control.ActiveRecord]]:
        at: datetime | None = None
        found: dict[tuple, control.ActiveRecord] = {}
        for d in descs:
            resp, why = s.ask_collector(control.ReadActive(entity=ent.name, descriptor=d.fields,
                                                           measurement_id=mid))
            if not isinstance(resp, control.ActiveRead):  # None: why not
                raise _err(f"LISTACTIVE {ent.measure_name}: {why}", cmd)
            at = resp.at
            for r in resp.records:
                found[(json.dumps(r.ids, sort_keys=True), r.record_at)] = r
        assert at is not None  # (a command has at least one spec, so one descriptor)
        return at, found

    def vector(d: dict[str, Any]) -> list[int]:
        return [round(float(d.get(c.measure_name, 0) or 0)) for c in ent.counters]

    def given(r: control.ActiveRecord, since: datetime, at: datetime, counters: list[int]) -> GivenRecord:
        key = entity_key(ent.id_fields, r.ids)
        return GivenRecord(r.ids, since, at, int((at - since) / timedelta(microseconds=1)),
                           counters, entity_id(s.system_id, ent.code, key), key, r.cpu)

    records: list[GivenRecord] = []
    if cmd.for_ is None:
        at, found = read_live()
        for r in found.values():
            if r.baseline is not None and r.baseline_at is not None:
                since, base = r.baseline_at, vector(r.baseline)
            else:
                since, base = r.record_at, None
            records.append(given(r, since, at, difference(ent, vector(r.counters), base)))
    else:
        at1, first = read_live()
        s.sleep(cmd.for_.seconds)
        at2, second = read_live()
        for key, r in second.items():
            if key in first:
                records.append(given(r, at1, at2, difference(ent, vector(r.counters),
                                                             vector(first[key].counters))))
    records = [x for x in records if x.delta_us > 0]
    q = _query(s, cmd, ent)
    res = _run(cmd, lambda: read_given(s.conn, records, q, contab=m.contab if m else None,
                                       measurement_id=mid))
    return _output(s, cmd, ent, res, m, mid)
