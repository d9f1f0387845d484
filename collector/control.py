"""The collector's side of the control plane (the protocol is core/control.py):

* measurements: each round reads the system's rows of _measure.measurement and tells MEASMON
  of new measurements and of changed stop times (the database row is the control plane);
* requests: the API's and MEASCOM's pending control requests are answered from MEASMON's
  live state at the node's current time (MEASREADACTIVE, MEASSTATUS, MEASCOUNTERBUMPINIT,
  MEASCOUNTERBUMP). A bad request is answered with a typed error, never fatal.

A database outage is logged once and retried with backoff (1 s growing to 30 s); measuring
goes on meanwhile (the copies go to the spool, collector/sink.py).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Literal, Protocol, overload

import psycopg
from pydantic import ValidationError

from collector.measure.contab import Contab, EntityDescriptor
from collector.measure.measmon import Measmon, Measurement, MeasureStateError, entity_ids
from collector.nodekind import NodeKind
from collector.registration import State
from collector.sink import Pipeline
from core import control
from core.catalog import Catalog, UnknownEntityType
from core.entities import entity_key
from core.errors import Conflict, ErrorKind, InvalidValue, NotFound, ServiceError
from core.times import to_ts

log = logging.getLogger(__name__)


class Controlled(Protocol):
    """What the control plane reads of the collector it serves (read at each use: a restored
    checkpoint replaces node, MEASMON and pipeline, a test may move the database)."""

    url: str
    state: State | None
    catalog: Catalog
    node_kind: NodeKind
    node: Any
    measmon: Measmon | None
    pipeline: Pipeline | None


class ControlServer:
    def __init__(self, collector: Controlled) -> None:
        self.c = collector
        self._down_since: float | None = None
        self._next_try = 0.0

    @property
    def _measmon(self) -> Measmon:
        """MEASMON, once the collector has started (requests are served only then)."""
        assert self.c.measmon is not None, "the collector has started"
        return self.c.measmon

    @property
    def _pipeline(self) -> Pipeline:
        assert self.c.pipeline is not None, "the collector has started"
        return self.c.pipeline

    def round(self) -> bool:
        """Pick up measurement changes and answer pending requests. A database outage is
        logged once and retried with backoff, never fatal. True when the database answered."""
        if self._down_since is not None and time.monotonic() < self._next_try:
            return False
        try:
            self.poll()
            self.serve()
        except psycopg.OperationalError as exc:
            if self._down_since is None:
                self._down_since = time.monotonic()
                log.warning("control plane unreachable (the database is away): %s; measuring "
                            "on, copies go to the spool", str(exc).strip().splitlines()[0])
            waited = time.monotonic() - self._down_since
            self._next_try = time.monotonic() + min(30.0, max(1.0, waited / 2))
            return False
        if self._down_since is not None:
            log.warning("control plane reachable again after %.0f s", time.monotonic() - self._down_since)
            self._down_since = None
        return True

    # ------------------------------------------------------------------ measurements

    def poll(self) -> int:
        """Add new measurements and apply changed stop times; returns how many changed."""
        c = self.c
        assert c.state and c.measmon
        with psycopg.connect(c.url, connect_timeout=3) as conn:
            rows = conn.execute(
                """
                SELECT measurement_id, name, contab, state,
                       _measure.timestamptz_to_us(coalesce(started_at, start_at)),
                       _measure.timestamptz_to_us(coalesce(stopped_at, stop_at)),
                       interval_us
                  FROM _measure.measurement
                 WHERE system_id = %s
                 ORDER BY measurement_id
                """,
                (c.state.system_id,),
            ).fetchall()
        # Every row, every time: the table is small, and filtering on updated_at would miss a
        # row whose transaction committed after a later one (updated_at is its start time).
        epoch = c.state.epoch_us
        changed = 0
        for mid, name, contab, state, start_us, stop_us, interval_us in rows:
            known = c.measmon.measurements.get(mid)
            if known is None:
                if start_us is None or state == "configured":
                    continue  # configured, not started
                if state in ("stopped", "failed") and stop_us is not None and stop_us <= start_us:
                    continue
                if c.node_kind.ended_before(stop_us, epoch):
                    self._ended_before_epoch(mid, name, contab, state, stop_us)
                    continue
                c.measmon.add(Measurement(mid, name, Contab.model_validate(contab),
                                          start_us=max(start_us, epoch), stop_us=stop_us,
                                          interval_us=interval_us))
                changed += 1
            elif known.state != "stopped" and stop_us != known.stop_us:
                c.measmon.set_stop(mid, stop_us)
                changed += 1
        return changed

    def _ended_before_epoch(self, mid: int, name: str, contab: Any, state: str, stop_us: int) -> None:
        """A measurement that ended before this epoch (a host node's restart): known to MEASMON
        as stopped (so it is not looked at again), and marked stopped in the database if it
        was still scheduled or running."""
        self._measmon.measurements[mid] = Measurement(mid, name, Contab.model_validate(contab),
                                                       start_us=stop_us, stop_us=stop_us, state="stopped")
        if state in ("scheduled", "running"):
            self._pipeline.control("stopped", mid, stop_us, None)

    # ------------------------------------------------------------------ requests

    def serve(self) -> int:
        """Answer the system's pending control requests; returns how many were answered."""
        c = self.c
        assert c.state and c.measmon
        answered = 0
        with psycopg.connect(c.url, autocommit=True, connect_timeout=3) as conn:
            for request_id, kind, payload in control.pending(conn, c.state.system_id):
                control.reply(conn, request_id, self._outcome(request_id, kind, payload))
                answered += 1
        return answered

    def _outcome(self, request_id: int, kind: str, payload: Any) -> control.Answer | control.Refusal:
        try:
            return self.answer(control.parse_request(kind, payload))
        except ValidationError as exc:
            return control.Refusal(ErrorKind.INVALID, control.describe_invalid(exc))
        except ServiceError as exc:
            return control.Refusal(exc.kind, str(exc))
        except UnknownEntityType as exc:
            return control.Refusal(ErrorKind.INVALID, str(exc.args[0]))
        except MeasureStateError as exc:
            return control.Refusal(ErrorKind.CONFLICT, str(exc))
        except ValueError as exc:
            return control.Refusal(ErrorKind.INVALID, str(exc))
        except Exception as exc:  # noqa: BLE001 - one bad request never stops the collector
            log.exception("control request %s (%s) failed", request_id, kind)
            # a 409 quoting the collector, to the API
            return control.Refusal(ErrorKind.CONFLICT,
                                   f"the collector failed on this request: {type(exc).__name__}: {exc}")

    def answer(self, request: control.Request) -> control.Answer:
        """The answer to one request, at the node's current time."""
        match request:
            case control.ReadActive():
                return self._read_active(request)
            case control.Status():
                return self._status(request)
            case control.BumpInit():
                return self._bump_init(request)
            case control.Bump():
                return self._bump(request)
        raise InvalidValue(f"no answer to a {type(request).__name__} request")

    def _status(self, request: control.Status) -> control.StatusAnswer:
        mon, mid = self._measmon, request.measurement_id
        if mid not in mon.measurements:
            raise NotFound(f"measurement {mid} is not known to the collector (not started yet?)")
        return control.StatusAnswer.model_validate({
            "status": mon.status(mid), "cpus": {str(k): v for k, v in mon.cpu_status().items()},
            "at": to_ts(self.c.node.now_us)})

    def _read_active(self, request: control.ReadActive) -> control.ActiveRead:
        """Live counter records matching a descriptor: cumulative values at the node's now,
        and, for a measurement, its baseline copy so the caller can show the change since."""
        c = self.c
        entity = c.catalog.entity(request.entity).name
        try:
            descriptor = EntityDescriptor(type=entity, fields=request.descriptor)
        except ValidationError as exc:
            raise InvalidValue(f"descriptor: {exc.errors()[0]['msg']}") from None
        table = c.node.tables[entity]
        slots = [s for s in table.measured_slots().tolist() if descriptor.matches(entity_ids(table, s))]
        mid = request.measurement_id
        if mid is not None:
            m = self._measmon.measurements.get(mid)
            if m is None or m.state != "running":
                raise NotFound(f"measurement {mid} is not running")
            space = self._measmon.spaces[entity]
            slots = [s for s in slots if space.sharemask[table.xptr[s]] & m.flag]
        copy = self._measmon.read_active(entity, slots)
        baselines = None
        if mid is not None and slots:
            baselines = self._pipeline.builder.baselines(mid, entity, copy.recs.tolist(), copy.alloc_us.tolist())
        names = [counter.measure_name for counter in table.entity.counters]
        records = []
        for i, slot in enumerate(slots):
            ids = entity_ids(table, slot)
            base = baselines[i] if baselines is not None else None
            records.append(control.ActiveRecord(
                key=entity_key(table.entity.id_fields, ids), ids=ids, cpu=int(copy.cpu[i]),
                record_at=to_ts(int(copy.alloc_us[i])),
                counters=dict(zip(names, copy.values[i].tolist(), strict=True)),
                baseline_at=to_ts(base[1]) if base is not None else None,
                baseline=dict(zip(names, base[0], strict=True)) if base is not None else None))
        return control.ActiveRead(entity=entity, at=to_ts(c.node.now_us), records=records)

    @overload
    def _userdef_slot(self, ids: control.UserCounterIds, *, create: Literal[True]) -> int: ...
    @overload
    def _userdef_slot(self, ids: control.UserCounterIds, *, create: Literal[False]) -> int | None: ...

    def _userdef_slot(self, ids: control.UserCounterIds, *, create: bool) -> int | None:
        """The USERDEF slot of one user counter element (cpu, pin, name, index, and optionally
        process_name / program_file_name). A process outside the simulated node gets its
        elements created on first use (entity start: active measurements whose CONTAB names
        the counter attach to it)."""
        node = self.c.node
        table = node.tables["userdef"]
        want: dict[str, Any] = {"pin": ids.pin, "name": ids.name.upper(), "index": ids.index}
        for extra in ("process_name", "program_file_name"):
            if getattr(ids, extra):
                want[extra] = getattr(ids, extra).upper()
        for s in range(table.n):
            if table.alive[s] and int(table.cpu[s]) == ids.cpu:
                got = table.id_of(s)
                if all(str(got.get(k, "")).upper() == str(v).upper() if isinstance(v, str) else got.get(k) == v
                       for k, v in want.items()):
                    return s
        if not create:
            return None
        if not 1 <= len(want["name"]) <= 16:
            raise InvalidValue("a counter name has 1-16 characters")
        if not 0 <= want["index"] <= 255:
            raise InvalidValue("an element index is 0-255 (at most 256 elements per process)")
        fields = {"process_name": "", "program_file_name": "", **want}
        slot = table.add(cpu=ids.cpu, at_us=node.now_us, transient=True, **fields)
        self._measmon.entity_started("userdef", slot, node.now_us)
        return slot

    def _bump_init(self, request: control.BumpInit) -> control.BumpInitAnswer:
        """MEASCOUNTERBUMPINIT: the element's offset (its USERDEF slot) or -1 when no active
        measurement has the counter (ERR^UDCNOTPRESENT)."""
        slot = self._userdef_slot(request.ids, create=True)
        offset = self._measmon.counter_bump_init(slot)
        return control.BumpInitAnswer(offset=slot if offset >= 0 else -1)

    def _bump(self, request: control.Bump) -> control.BumpAnswer:
        """MEASCOUNTERBUMP at the node's current time; an unmeasured counter costs nothing."""
        now = self.c.node.now_us
        slot = self._userdef_slot(request.ids, create=False)
        if slot is None:
            return control.BumpAnswer(bumped=False, at=to_ts(now))
        if request.offset is not None and request.offset != slot:
            raise Conflict(f"offset {request.offset} is not this counter's (call bump-init again)")
        done = self._measmon.counter_bump(slot, request.op, float(request.value), now)
        return control.BumpAnswer(bumped=done, at=to_ts(now))
