"""LIST / LISTALL / LISTACTIVE for the MEASCOM interpreter (MEASREAD semantics, §6).

* LIST: one summary record per entity (per counter record: an entity's successive
  incarnations stay apart) over the report window, the sum of the interval records the
  window selects (MEASREAD_DIFF_ with all^recs = 0). Each window end moves to the nearest
  copy time of that record (ties widen the window): ``FROM 23:00, FOR 1 HOURS`` over hourly
  copies at hh:05 selects 23:05-00:05, the 1986 article's "hour 23"; a window narrower than
  one interval selects the record it overlaps most. Snapshot counters named ``…START…``
  take the first record's value, other snapshot counters the last one's; max-queue and
  max-value counters the largest. An entity without records in the window is omitted.
  LISTALL: every selected interval record (all^recs = 1).
* Window (semantics C): FROM / TO / FOR of the command, else of SET REPORT; no FROM =
  measurement start; neither TO nor FOR = measurement (or entity) end.
* RATE ON: per second for incrementing/accumulating counters, % of the interval for busy and
  queue-busy, average queue length for queue counters, ms per transaction for response
  counters (paired with the record's TRANSACTIONS), raw for snapshot/max counters; counter
  decreases are clamped to 0. A user counter's TIME-VALUE is rated by its TYPE in the
  measurement's CONTAB. RATE OFF: raw values. FORMAT STRUCTURED is always raw.
* ZERO-REPORTS EXCLUDE drops all-zero records; TOTALS INCLUDE adds a TOTAL record (sums;
  max for max counters; elapsed = the longest member's), ONLY prints it alone;
  IF keeps records satisfying the condition (on rated values under RATE ON); BY orders by a
  counter, largest first (or by an identifying field, ascending).
* FORMAT STRUCTURED appends the records to ``_measure.structured_record`` tagged with the
  LOADID (duplicates are not removed, as in MEASURE). A LIST naming a LOADID writes
  structured records unless it says FORMAT itself: a LOADID exists only for structured
  files, and the 1986 Figure 4 OBEY file names LOADIDs without setting FORMAT.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any

from collector.catalog import CounterDef, EntityDef, UnknownCounter
from collector.meascom import ast
from collector.measure.contab import Contab, ContabBuilder, EntityDescriptor

if TYPE_CHECKING:
    from collector.meascom.interpreter import Measurement, Session

__all__ = ["Record", "entity_label", "list_active", "list_stored", "rate_values"]

_DELTA_KINDS = ("incrementing", "accumulating", "busy", "queue", "qbusy", "response")
_USER_KIND = {"ACCUM": "accumulating", "FACCUM": "accumulating", "BUSY": "busy",
              "QUEUE": "queue", "QBUSY": "qbusy"}
BRIEF = {
    "CPU": ("CPU-BUSY-TIME", "CPU-QTIME", "DISPATCHES", "SWAPS", "DISC-IOS"),
    "PROCESS": ("CPU-BUSY-TIME", "READY-TIME", "DISPATCHES", "PAGE-FAULTS", "MESSAGES-SENT"),
    "DISC": ("REQUESTS", "REQUEST-QTIME", "READS", "WRITES", "DEVICE-QBUSY-TIME"),
    "LINE": ("REQUESTS", "READ-BUSY-TIME", "WRITE-BUSY-TIME", "TRANSACTIONS", "RESPONSE-TIME"),
    "TERMINAL": ("REQUESTS", "TRANSACTIONS", "RESPONSE-TIME", "INPUT-BYTES", "OUTPUT-BYTES"),
    "USERDEF": ("TIME-VALUE", "MAX-VALUE"),
    "TMF": ("HOME-TRANS", "HOME-TRANS-QTIME", "REMOTE-TRANS", "ABORTING-TRANS"),
}


@dataclass
class Record:
    """One report record: an entity's counters over [from_at, to_at)."""

    label: str
    ids: dict[str, Any]
    entity_id: int | None
    from_at: datetime
    to_at: datetime
    delta_us: int
    counters: list[int]
    error: int = 0


def _err(msg: str, node: ast.Node | None = None):
    from collector.meascom.interpreter import MeascomError

    return MeascomError(msg, node.line if node else 0, node.column if node else 0)


# ------------------------------------------------------------------------------ labels


def entity_label(ent: EntityDef, ids: dict[str, Any]) -> str:
    t = ent.measure_name
    g = ids.get
    if t in ("CPU", "TMF"):
        return f"{t} {g('cpu')}"
    if t in ("PROCESS", "USERDEF", "PROCESSH"):
        parts = [t, f"{g('cpu')},{g('pin')}"]
        parts += [str(g(k)) for k in ("process_name", "program_file_name") if g(k)]
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


# ------------------------------------------------------------------------------ rates


def _kinds(ent: EntityDef, ids: dict[str, Any], contab: Contab | None) -> list[str]:
    kinds = [c.kind for c in ent.counters]
    if ent.measure_name == "USERDEF" and contab is not None:
        for c in contab.counters:
            if c.name == str(ids.get("name", "")).upper() and c.applies_to(ids):
                kinds[ent.index("time_value")] = _USER_KIND[c.type]
                break
    return kinds


_Q = {"per_s": Decimal("0.001"), "pct": Decimal("0.01"), "aql": Decimal("0.001"),
      "ms": Decimal("0.001")}


def rate_values(ent: EntityDef, rec: Record, kinds: list[str]) -> list[tuple[Decimal | int | None, str]]:
    """RATE ON: (value, unit) per counter; Decimal values are rounded half up."""
    secs = Decimal(rec.delta_us) / Decimal(1_000_000)
    dus = Decimal(rec.delta_us)
    trans = rec.counters[ent.index("transactions")] if "transactions" in ent else None
    out: list[tuple[Decimal | int | None, str]] = []
    for v, kind in zip(rec.counters, kinds, strict=True):
        d = Decimal(max(v, 0))
        if kind in ("incrementing", "accumulating"):
            out.append(((d / secs).quantize(_Q["per_s"], ROUND_HALF_UP), "/s"))
        elif kind in ("busy", "qbusy"):
            out.append(((100 * d / dus).quantize(_Q["pct"], ROUND_HALF_UP), "%"))
        elif kind == "queue":
            out.append(((d / dus).quantize(_Q["aql"], ROUND_HALF_UP), "aql"))
        elif kind == "response":
            out.append(((d / 1000 / trans).quantize(_Q["ms"], ROUND_HALF_UP) if trans else None,
                        "ms/trans"))
        else:
            out.append((v, ""))
    return out


def _values(ent: EntityDef, rec: Record, kinds: list[str], rate: bool):
    if rate:
        return rate_values(ent, rec, kinds)
    return [(v, c.unit) for v, c in zip(rec.counters, ent.counters, strict=True)]


# ------------------------------------------------------------------------------ window


def _resolve_list_time(s: Session, dt: ast.DateTime, m: Measurement) -> datetime:
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


def _window(s: Session, cmd: ast.ListCommand, m: Measurement):
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


# ------------------------------------------------------------------------------ selection


def _descriptors(s: Session, cmd: ast.ListCommand) -> list[EntityDescriptor]:
    b = ContabBuilder(default_subvol=s.state.builder.default_subvol)
    try:
        for spec in cmd.specs:
            b.add_spec(spec)
    except ValueError as exc:
        raise _err(f"{cmd.entity}: {getattr(exc, 'message', exc)}", cmd.specs[0]) from None
    return b.descriptors


def _counter(ent: EntityDef, name: str, node: ast.Node, what: str) -> CounterDef | str:
    if name.lower().replace("-", "_") in ent.id_fields:
        return name.lower().replace("-", "_")
    try:
        return ent.counter(name)
    except UnknownCounter as exc:
        raise _err(f"{what}: {exc}", node) from None


def _stored_records(s: Session, ent: EntityDef, m: Measurement, lo, hi,
                    descs: list[EntityDescriptor]) -> list[list[Record]]:
    """The interval records of each matching counter record (entity incarnation) that the
    window selects, in time order. MEASREAD-style: each window end moves to the nearest copy
    time of that record (ties widen the window), so ``FROM 23:00 FOR 1 HOURS`` over hourly
    copies at hh:05 selects 23:05-00:05; a window narrower than one interval selects the
    record it overlaps most."""
    rows = s.q(
        """SELECT r.entity_id, r.record_at, r.from_at, r.to_at, r.delta_us, r.error,
                  r.counters, e.ids
             FROM _measure.interval_record r JOIN _measure.entity e USING (entity_id)
            WHERE r.measurement_id = %(m)s AND r.type_code = %(t)s
              AND (%(lo)s::timestamptz IS NULL OR r.to_at > %(lo)s)
              AND (%(hi)s::timestamptz IS NULL OR r.from_at < %(hi)s)
            ORDER BY r.entity_id, r.record_at, r.from_at""",
        {"m": m.measurement_id, "t": ent.code, "lo": lo, "hi": hi})
    groups: dict[tuple, list[Record]] = {}
    for r in rows:
        ids = r["ids"] if isinstance(r["ids"], dict) else json.loads(r["ids"])
        if not any(d.matches(ids) for d in descs):
            continue
        rec = Record(entity_label(ent, ids), ids, r["entity_id"], r["from_at"], r["to_at"],
                     r["delta_us"], list(r["counters"]), r["error"])
        groups.setdefault((r["entity_id"], r["record_at"]), []).append(rec)
    out = []
    for recs in groups.values():
        bounds = sorted({x.from_at for x in recs} | {x.to_at for x in recs})
        a = None if lo is None else min(bounds, key=lambda b: (abs(b - lo), b))
        z = None if hi is None else min(bounds, key=lambda b: (abs(b - hi), -b.timestamp()))
        inside = [x for x in recs if (a is None or x.from_at >= a) and (z is None or x.to_at <= z)]
        if not inside and lo is not None and hi is not None:
            inside = [max(recs, key=lambda x: min(x.to_at, hi) - max(x.from_at, lo))]
        if inside:
            out.append(inside)
    return out


def _combine(ent: EntityDef, recs: list[Record], label: str | None = None,
             entity_id: Any = "same", total: bool = False) -> Record:
    """Add up records (in time order) of one entity, or of all entities for a TOTAL."""
    counters = []
    for i, c in enumerate(ent.counters):
        vals = [r.counters[i] for r in recs]
        if c.kind in _DELTA_KINDS or (total and c.kind == "snapshot"):
            counters.append(sum(vals))
        elif c.kind == "snapshot":
            counters.append(vals[0] if "START" in c.measure_name else vals[-1])
        else:
            counters.append(max(vals))
    first = recs[0]
    return Record(label or first.label, first.ids if not total else {},
                  first.entity_id if entity_id == "same" else entity_id,
                  min(r.from_at for r in recs), max(r.to_at for r in recs),
                  max(r.delta_us for r in recs) if total else sum(r.delta_us for r in recs),
                  counters, max((r.error for r in recs), key=abs))


def _select(s: Session, cmd: ast.ListCommand, ent: EntityDef, records: list[Record],
            contab: Contab | None) -> list[Record]:
    r = s.state.report
    rate = _attr(cmd, "RATE", r.rate) == "ON"
    zero = _attr(cmd, "ZERO-REPORTS", r.zero_reports)
    totals = _attr(cmd, "TOTALS", r.totals)
    if zero == "EXCLUDE":
        records = [x for x in records if any(x.counters)]
    if cmd.if_ is not None:
        cond = cmd.if_
        target = _counter(ent, cond.counter, cond, "IF")
        keep = []
        for x in records:
            v = _item_value(ent, x, target, _kinds(ent, x.ids, contab), rate)
            if v is not None and _compare(v, cond.op, Decimal(str(cond.value))):
                keep.append(x)
        records = keep
    if cmd.by is not None:
        target = _counter(ent, cmd.by, cmd, "BY")
        if isinstance(target, str):
            records.sort(key=lambda x: (x.ids.get(target) is None, str(x.ids.get(target))
                                        if not isinstance(x.ids.get(target), int)
                                        else f"{x.ids.get(target):012d}"))
        else:
            def key(x: Record):
                v = _item_value(ent, x, target, _kinds(ent, x.ids, contab), rate)
                return (v is None, -(v or 0))
            records.sort(key=key)
    if totals in ("INCLUDE", "ONLY") and records:
        tot = _combine(ent, records, label=f"TOTAL {ent.measure_name}", entity_id=None,
                       total=True)
        records = [tot] if totals == "ONLY" else [*records, tot]
    return records


def _item_value(ent, rec, target, kinds, rate):
    if isinstance(target, str):
        v = rec.ids.get(target)
        return Decimal(v) if isinstance(v, int) else None
    v, _ = _values(ent, rec, kinds, rate)[target.position]
    return None if v is None else Decimal(v)


def _compare(a: Decimal, op: str, b: Decimal) -> bool:
    return {"=": a == b, "<>": a != b, "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]


def _format(s: Session, cmd: ast.ListCommand) -> str:
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


# ------------------------------------------------------------------------------ output


def _num(v: Decimal | int | None) -> str:
    if v is None:
        return "-"
    return f"{v:,}"


def _t(s: Session, dt: datetime) -> str:
    return f"{dt.astimezone(s.tz):%d %b %Y %H:%M:%S}"


def _render(s: Session, cmd: ast.ListCommand, ent: EntityDef, records: list[Record],
            m: Measurement | None, contab: Contab | None, fmt: str, rate: bool) -> str:
    head = (f"{cmd.verb} {ent.measure_name} on {s.system_name}"
            + (f", measurement {m.name}" if m else "") + f", RATE {'ON' if rate else 'OFF'}")
    if not records:
        return head + f": no {ent.measure_name} records in the report window"
    if fmt == "BRIEF":
        cols = [c for c in BRIEF.get(ent.measure_name, ()) if c in ent] or [
            c.measure_name for c in ent.counters if c.kind in _DELTA_KINDS][:5]
        idx = [ent.index(c) for c in cols]
        width = max(len(r.label) for r in records)
        widths = [max(len(c), 12) for c in cols]
        lines = [head, "  " + "ENTITY".ljust(width) + " FROM     TO       "
                 + " ".join(c.rjust(w) for c, w in zip(cols, widths, strict=True))]
        for r in records:
            vals = _values(ent, r, _kinds(ent, r.ids, contab), rate)
            lines.append("  " + r.label.ljust(width)
                         + f" {r.from_at.astimezone(s.tz):%H:%M:%S} {r.to_at.astimezone(s.tz):%H:%M:%S} "
                         + " ".join(_num(vals[i][0]).rjust(w) for i, w in zip(idx, widths, strict=True)))
        return "\n".join(lines)
    blocks = [head]
    for r in records:
        vals = _values(ent, r, _kinds(ent, r.ids, contab), rate)
        lines = [f"{r.label}",
                 f"  from {_t(s, r.from_at)}  to {_t(s, r.to_at)}  elapsed "
                 f"{Decimal(r.delta_us) / 1_000_000:.3f} s"
                 + (f"  ERROR {r.error}" if r.error else "")]
        for c, (v, unit) in zip(ent.counters, vals, strict=True):
            lines.append(f"  {c.measure_name:<24}{_num(v):>22} {unit}".rstrip())
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _write_structured(s: Session, cmd: ast.ListCommand, ent: EntityDef, records: list[Record],
                      measurement_id: int) -> str:
    loadid = cmd.loadid or s.state.report.loadid
    with s.conn.cursor() as cur:
        cur.executemany(
            """INSERT INTO _measure.structured_record (loadid, system_id, type_code,
                   measurement_id, entity_id, from_at, to_at, delta_us, counters)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)""",
            [(loadid, s.system_id, ent.code, measurement_id, r.entity_id, r.from_at, r.to_at,
              r.delta_us, r.counters) for r in records])
    return (f"{cmd.verb} {ent.measure_name}: {len(records)} structured "
            f"record{'s' if len(records) != 1 else ''} written"
            + (f", LOADID {loadid}" if loadid else ", no LOADID"))


# ------------------------------------------------------------------------------ commands


def list_stored(s: Session, cmd: ast.ListCommand) -> str:
    """LIST / LISTALL over the current measurement's interval records."""
    m = s.current_measurement()
    ent = s.catalog.entity(cmd.entity)
    lo, hi = _window(s, cmd, m)
    descs = _descriptors(s, cmd)
    groups = _stored_records(s, ent, m, lo, hi, descs)
    if cmd.verb == "LISTALL":
        records = [rec for g in groups for rec in g]
    else:
        records = [_combine(ent, g) for g in groups]
    records = _select(s, cmd, ent, records, m.contab)
    fmt = _format(s, cmd)
    if fmt == "STRUCTURED":
        return _write_structured(s, cmd, ent, records, m.measurement_id)
    rate = _attr(cmd, "RATE", s.state.report.rate) == "ON"
    return _render(s, cmd, ent, records, m, m.contab, fmt, rate)


def list_active(s: Session, cmd: ast.ListCommand) -> str:
    """LISTACTIVE: live counter records through the collector (control request 'read_active').

    Without FOR: the change since measurement start (the record's baseline copy) or, when the
    collector has no baseline, since the counter record was allocated. With FOR d: read, wait
    d, read again, and show the difference."""
    ent = s.catalog.entity(cmd.entity)
    mid: int | None = None
    m = None
    try:
        m = s.current_measurement()
        mid = m.measurement_id
    except Exception:  # noqa: BLE001 - LISTACTIVE works without a current measurement
        m = None
    descs = _descriptors(s, cmd)

    def read() -> tuple[datetime, dict[tuple, dict]]:
        at, found = None, {}
        for d in descs:
            payload = {"entity": ent.name, "descriptor": d.fields, "measurement_id": mid}
            resp, why = s.ask_collector("read_active", payload)
            if resp is None:
                raise _err(f"LISTACTIVE {ent.measure_name}: {why}", cmd)
            at = datetime.fromisoformat(resp["at"])
            for r in resp.get("records", []):
                key = (json.dumps(r["ids"], sort_keys=True), r.get("record_at"))
                found[key] = r
        return at, found

    def vector(d: dict[str, Any]) -> list[int]:
        return [round(float(d.get(c.measure_name, 0) or 0)) for c in ent.counters]

    records: list[Record] = []
    if cmd.for_ is None:
        at, found = read()
        for r in found.values():
            now_v = vector(r["counters"])
            if r.get("baseline") is not None:
                since = datetime.fromisoformat(r["baseline_at"])
                base = vector(r["baseline"])
            else:
                since = datetime.fromisoformat(r["record_at"])
                base = [0] * len(now_v)
            records.append(_active_record(ent, r, since, at, now_v, base))
    else:
        at1, first = read()
        s.sleep(cmd.for_.seconds)
        at2, second = read()
        for key, r in second.items():
            if key in first:
                records.append(_active_record(ent, r, at1, at2, vector(r["counters"]),
                                              vector(first[key]["counters"])))
    records = [x for x in records if x.delta_us > 0]
    records = _select(s, cmd, ent, records, m.contab if m else None)
    fmt = _format(s, cmd)
    if fmt == "STRUCTURED":
        if mid is None:
            raise _err("LISTACTIVE with FORMAT STRUCTURED needs a current measurement "
                       "(ADD MEASUREMENT name)", cmd)
        from collector.sink import entity_id_for, entity_key

        for x in records:
            if x.entity_id is None and x.ids:
                x.entity_id = entity_id_for(s.system_id, ent.code, entity_key(ent.id_fields, x.ids))
        return _write_structured(s, cmd, ent, records, mid)
    rate = _attr(cmd, "RATE", s.state.report.rate) == "ON"
    return _render(s, cmd, ent, records, m, m.contab if m else None, fmt, rate)


def _active_record(ent: EntityDef, r: dict, since: datetime, at: datetime, now_v: list[int],
                   base: list[int]) -> Record:
    kinds = [c.kind for c in ent.counters]
    counters = [n if k not in _DELTA_KINDS else n - b
                for n, b, k in zip(now_v, base, kinds, strict=True)]
    delta_us = int((at - since) / timedelta(microseconds=1))
    return Record(entity_label(ent, r["ids"]), r["ids"], None, since, at, delta_us, counters)

