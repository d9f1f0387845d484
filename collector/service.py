"""The collector: a simulated node, MEASURE on top of it, copies into the database.

Life of a collector (one per simulated system):

1. Register the system and the collector's checkpoint row (node, seed, the virtual clock's
   origin). A first start places the origin ``backfill_days`` before now and configures a
   default measurement of every entity (the interval of MEASUREDB_COLLECTOR_INTERVAL_SECONDS).
2. Rebuild: the node is deterministic (same seed, same counters), so the collector rebuilds
   MEASMON's state by replaying from the origin (or from its latest local checkpoint file),
   with every measurement started and stopped at the times recorded in the database, and
   without writing the copies the database already holds (MEASMON's checkpoint to its
   backup). After a crash nothing is missing and nothing is stored twice.
3. Backfill as fast as possible up to now (a progress bar on a terminal, log lines under
   `measuredb run`), answering control requests between hours, then run live: the node's
   clock follows the wall clock (or runs MEASUREDB_COLLECTOR_SPEED times real time), catching
   up after a backfill or an outage; pick up new or changed measurements from the database
   within a second, beat the heartbeat.
4. Stay up: a database outage is waited out with backoff (copies go to the spool and replay
   in order, collector/sink.py), a bad control request is answered with an error, never
   fatal.

The node may also be this machine (MEASUREDB_COLLECTOR_NODE=host, collector/node/host.py):
then there is no backfill and no replay, a restart starts a fresh epoch (the "host node"
section at the end of Collector; docs/host-node.md).
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from collector.measure.contab import Contab, ContabBuilder
from collector.measure.measmon import Measmon, Measurement, MeasureStateError
from collector.settings import CollectorSettings
from collector.sink import Pipeline, SpoolFull, Writer, entity_key
from core.catalog import load_catalog
from core.times import HOUR, SECOND, now_us, to_ts, to_us  # noqa: F401 - to_us: part of this module's interface

log = logging.getLogger(__name__)

CATCHUP_CHUNK_US = 10 * 60 * SECOND  # live catch-up: control is answered at least this often
ON_TIME_US = 2 * SECOND               # live: "within real time" means at most this late
BEHIND_WARNING_S = 30.0               # live: warn (and repeat) once behind for this long
PROGRESS_EVERY_S = 10.0               # backfill progress as log lines: one this often
# Which workload a shipped node runs unless MEASUREDB_COLLECTOR_WORKLOAD says otherwise.
DEFAULT_WORKLOADS = {"demo": "demo", "et1-txp": "et1", "et1-vlx": "et1", "rds-txp": "rds",
                     "rds-vlx": "rds", "ref16": "ref16-day"}
DEFAULT_MEASUREMENT = "DEFAULT"


class CollectorConfigError(RuntimeError):
    """The collector cannot start with these settings (message says why and what to do)."""


class SpooledDataLeft(RuntimeError):
    """A backfill ended with copies still in the spool (the database did not come back)."""


def default_contab(topology: Any) -> Contab:
    """Every entity of every type, and every user counter the node's programs declare (an
    ADD COUNTER each, as Figure 3 does for RESP-TIME and THROUGHPUT)."""
    from collector.node.extras import user_counter_specs

    b = ContabBuilder()
    for entity in load_catalog().entities:
        b.add(entity, None)
    for name, program, ctr_type in user_counter_specs(topology):
        b.add_counter(name, program, ctr_type)
    return b.build()


def code_fingerprint() -> str:
    """A hash of the simulation and MEASURE code: a checkpoint pickled by other code is not
    resumed (its objects may lack what this code expects); the collector replays instead."""
    import hashlib

    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted([*root.glob("node/*.py"), *root.glob("measure/*.py"), root / "sink.py"]):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@dataclass
class State:
    system_id: int
    epoch_us: int
    durable_until_us: int


def register_components(conn: psycopg.Connection, system_id: int, topology: Any) -> int:
    """The node's own PATHWAY server programs are "application servers" of the transaction
    resource report (_measure.component_map, ATM article Table 4): one row per program for
    this system, added once (an analyst's own rows and edits are left alone). The generic
    rows of the schema cover system programs and $APPL/$PROGS programs."""
    n = 0
    for program in sorted({sc["program"].upper() for sc in topology.server_classes}):
        n += conn.execute(
            "INSERT INTO _measure.component_map (system_id, priority, match_on, pattern, component)"
            " SELECT %s, 45, 'program_file_name', %s, 'server' WHERE NOT EXISTS ("
            "   SELECT 1 FROM _measure.component_map WHERE system_id = %s"
            "      AND match_on = 'program_file_name' AND pattern = %s)",
            (system_id, program, system_id, program),
        ).rowcount
    return n


class Collector:
    def __init__(self, settings: CollectorSettings, url: str, *, collector_id: str | None = None) -> None:
        from collector.node.host import host_topology, is_host_node
        from collector.node.topology import load_node

        self.settings = settings
        self.url = url
        self.catalog = load_catalog()
        # node `host`: this machine, measured in real time (collector/node/host.py, "host node"
        # at the end of this class); any other name: a simulated node
        self.host = is_host_node(settings.node)
        self._resumed: set[int] = set()
        self.topology = host_topology(settings.node) if self.host else load_node(settings.node)
        self.collector_id = collector_id or self.topology.system_name
        self.workload = settings.workload or DEFAULT_WORKLOADS.get(settings.node, settings.node)
        self.state: State | None = None
        self.node: Any = None
        self.measmon: Measmon | None = None
        self.pipeline: Pipeline | None = None
        self.writer = Writer(url, self.collector_id, settings.spool_path, settings.spool_max_bytes,
                             spool_full=settings.spool_full)
        self._last_beat = 0.0
        self.mode = "starting"
        self.lag_us = 0
        self._control_down_since: float | None = None
        self._control_next_try = 0.0

    # ------------------------------------------------------------------ set-up

    def register(self, *, epoch_us: int | None = None) -> State:
        """The system, the checkpoint row, and on a first start the default measurement
        (epoch_us pins the virtual clock's origin of a first start; tests use it)."""
        t = self.topology
        s = self.settings
        with psycopg.connect(self.url) as conn:
            # A system already configured keeps its settings (`measuredb system set` may have
            # changed its time zone: the node file's is only the first value).
            system_id, time_zone = conn.execute(
                """
                INSERT INTO _measure.system (system_name, system_number, time_zone)
                VALUES (%s, %s, %s)
                ON CONFLICT (system_name) DO UPDATE SET system_name = excluded.system_name
                RETURNING system_id, time_zone
                """,
                (t.system_name, t.system_number, t.time_zone),
            ).fetchone()
            if time_zone != t.time_zone:
                log.info("%s keeps its configured time zone %s (the node says %s)",
                         t.system_name, time_zone, t.time_zone)
            # CPU TYPE of the reports and views: the node's processor type, unless configured
            conn.execute("INSERT INTO _measure.system_cpu_type (system_id, cpu, cpu_type)"
                         " SELECT %s, NULL, %s WHERE NOT EXISTS"
                         " (SELECT 1 FROM _measure.system_cpu_type WHERE system_id = %s)",
                         (system_id, t.cpu_type, system_id))
            register_components(conn, system_id, t)
            if self.host:
                self._register_host(conn, system_id, epoch_us)
            row = conn.execute(
                "SELECT node, seed, step_us, _measure.timestamptz_to_us(epoch_at),"
                " _measure.timestamptz_to_us(durable_until) FROM _measure.collector_state"
                " WHERE collector_id = %s",
                (self.collector_id,),
            ).fetchone()
            if row is None:
                interval = s.interval_seconds * SECOND
                epoch = epoch_us if epoch_us is not None else (
                    _next_on_grid(now_us(), interval) if self.host else  # a host has no history
                    (now_us() - s.backfill_days * 86_400 * SECOND) // interval * interval)
                conn.execute(
                    "INSERT INTO _measure.collector_state (collector_id, system_id, node, seed, step_us, epoch_at)"
                    " VALUES (%s, %s, %s, %s, %s, _measure.us_to_timestamptz(%s))",
                    (self.collector_id, system_id, s.node, s.seed, s.step_seconds * SECOND, epoch),
                )
                conn.execute(
                    "INSERT INTO _measure.measurement (system_id, name, contab, source, start_at, interval_us, state)"
                    " VALUES (%s, %s, %s, %s, _measure.us_to_timestamptz(%s), %s, 'scheduled')",
                    (system_id, DEFAULT_MEASUREMENT, default_contab(t).model_dump_json(),
                     "default measurement of every entity, created at the collector's first start",
                     epoch, interval),
                )
                durable = -1
            else:
                node, seed, step_us, epoch, durable = row
                if (node, seed, step_us) != (s.node, s.seed, s.step_seconds * SECOND):
                    raise CollectorConfigError(
                        f"the database holds {t.system_name} simulated as node {node!r} with seed {seed} "
                        f"and a {step_us // SECOND} s step; settings ask for node {s.node!r} seed {s.seed} "
                        f"step {s.step_seconds} s. Use the same settings (MEASUREDB_COLLECTOR_NODE, _SEED, "
                        "_STEP_SECONDS), or another database"
                    )
                durable = -1 if durable is None else durable
                if self.host:
                    epoch = self._fresh_host_epoch(conn, system_id, epoch_us)
        self.state = State(system_id, epoch, durable)
        return self.state

    def build(self) -> None:
        """A node at the origin and MEASMON, or the newest usable checkpoint file."""
        from collector.node.engine import Node

        assert self.state is not None
        restored = None if self.host else self._load_checkpoint()
        if restored is None:
            if self.host:
                from collector.node.host import HostNode

                self.node = HostNode(self.topology, catalog=self.catalog,
                                     step_us=self.settings.step_seconds * SECOND)
            else:
                self.node = Node(self.topology, self.workload, seed=self.settings.seed,
                                 start_us=self.state.epoch_us, catalog=self.catalog,
                                 step_us=self.settings.step_seconds * SECOND)
            self.pipeline = Pipeline(self.catalog, self.node.tables, self.state.system_id)
            self.measmon = Measmon(self.node, self.pipeline.on_copy, catalog=self.catalog,
                                   on_state=self._on_state)
        self.pipeline.skip_until_us = self.state.durable_until_us
        self.writer.durable_until_us = self.state.durable_until_us
        self.poll_control()

    def _on_state(self, m: Measurement, event: str, at_us: int) -> None:
        if event == "started" and m.measurement_id in self._resumed:
            return  # a host measurement resumed after a restart keeps its start time
        usage = None
        if event == "stopped":
            usage = {"entities": m.usage,
                     "not_allocated": {f"{e}:{err}": n for (e, err), n in m.unallocated.items()},
                     "copies_written": m.copies_written}
        self.pipeline.control(event, m.measurement_id, at_us, usage)

    # ------------------------------------------------------------------ control plane

    def poll_control(self) -> int:
        """Add new measurements and apply changed stop times; returns how many changed."""
        assert self.state and self.measmon
        with psycopg.connect(self.url, connect_timeout=3) as conn:
            rows = conn.execute(
                """
                SELECT measurement_id, name, contab, state,
                       _measure.timestamptz_to_us(coalesce(started_at, start_at)),
                       _measure.timestamptz_to_us(coalesce(stopped_at, stop_at)),
                       interval_us, updated_at
                  FROM _measure.measurement
                 WHERE system_id = %s
                 ORDER BY measurement_id
                """,
                (self.state.system_id,),
            ).fetchall()
        # Every row, every time: the table is small, and filtering on updated_at would miss a
        # row whose transaction committed after a later one (updated_at is its start time).
        changed = 0
        for mid, name, contab, state, start_us, stop_us, interval_us, _updated_at in rows:
            known = self.measmon.measurements.get(mid)
            if known is None:
                if start_us is None or state == "configured":
                    continue  # configured, not started
                if state in ("stopped", "failed") and stop_us is not None and stop_us <= start_us:
                    continue
                if self.host and stop_us is not None and stop_us <= self.state.epoch_us:
                    self._host_ended(mid, name, contab, state, stop_us)
                    continue
                self.measmon.add(Measurement(mid, name, Contab.model_validate(contab),
                                             start_us=max(start_us, self.state.epoch_us),
                                             stop_us=stop_us, interval_us=interval_us))
                changed += 1
            elif known.state != "stopped" and stop_us != known.stop_us:
                self.measmon.set_stop(mid, stop_us)
                changed += 1
        return changed

    def control_round(self) -> bool:
        """Pick up measurement changes and answer pending requests. A database outage is
        logged once and retried with backoff, never fatal. True when the database answered."""
        if self._control_down_since is not None and time.monotonic() < self._control_next_try:
            return False
        try:
            self.poll_control()
            self.handle_requests()
        except psycopg.OperationalError as exc:
            if self._control_down_since is None:
                self._control_down_since = time.monotonic()
                log.warning("control plane unreachable (the database is away): %s; measuring "
                            "on, copies go to the spool", str(exc).strip().splitlines()[0])
            waited = time.monotonic() - self._control_down_since
            self._control_next_try = time.monotonic() + min(30.0, max(1.0, waited / 2))
            return False
        if self._control_down_since is not None:
            log.warning("control plane reachable again after %.0f s",
                        time.monotonic() - self._control_down_since)
            self._control_down_since = None
        return True

    # ------------------------------------------------------------------ requests from the API

    def handle_requests(self) -> int:
        """Answer the API's pending control requests (MEASREADACTIVE, MEASSTATUS,
        MEASCOUNTERBUMPINIT, MEASCOUNTERBUMP); returns how many were answered."""
        assert self.state and self.measmon
        answered = 0
        with psycopg.connect(self.url, autocommit=True, connect_timeout=3) as conn:
            rows = conn.execute(
                "SELECT request_id, kind, payload FROM _measure.control_request"
                " WHERE system_id = %s AND answered_at IS NULL ORDER BY request_id",
                (self.state.system_id,),
            ).fetchall()
            for request_id, kind, payload in rows:
                response, error = None, None
                try:
                    response = self._answer(kind, payload if isinstance(payload, dict) else {})
                except (ValueError, KeyError, LookupError, TypeError, MeasureStateError) as exc:
                    error = str(exc).strip("'\"")
                    if isinstance(exc, KeyError | TypeError) and not error.startswith(("invalid:", "not_found:")):
                        error = f"invalid: the request lacks or mistypes a field ({error})"
                except Exception as exc:  # noqa: BLE001 - one bad request never stops the collector
                    log.exception("control request %s (%s) failed", request_id, kind)
                    error = f"the collector failed on this request: {type(exc).__name__}: {exc}"
                conn.execute(
                    "UPDATE _measure.control_request SET response = %s, error = %s, answered_at = now()"
                    " WHERE request_id = %s",
                    (None if response is None else psycopg.types.json.Jsonb(response), error, request_id),
                )
                conn.execute("SELECT pg_notify('measuredb_answer', %s)", (str(request_id),))
                answered += 1
        return answered

    def _answer(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        mon = self.measmon
        if kind == "status":
            mid = int(payload["measurement_id"])
            if mid not in mon.measurements:
                raise LookupError(f"not_found: measurement {mid} is not known to the collector (not started yet?)")
            return {"status": mon.status(mid), "cpus": {str(k): v for k, v in mon.cpu_status().items()},
                    "at": to_ts(self.node.now_us).isoformat()}
        if kind == "read_active":
            return self._read_active(payload)
        if kind == "bump_init":
            return self._bump_init(payload)
        if kind == "bump":
            return self._bump(payload)
        raise ValueError(f"invalid: unknown request kind {kind!r}")

    def _read_active(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Live counter records matching a descriptor: cumulative values at the node's now,
        and, for a measurement, its baseline (start or initial-value copy) so the caller can
        show the delta since measurement start."""
        from collector.measure.contab import EntityDescriptor
        from collector.measure.measmon import entity_ids

        entity = self.catalog.entity(payload["entity"]).name
        descriptor = EntityDescriptor(type=entity, fields=payload.get("descriptor") or {})
        table = self.node.tables[entity]
        slots = [s for s in table.measured_slots().tolist() if descriptor.matches(entity_ids(table, s))]
        mid = payload.get("measurement_id")
        if mid is not None:
            m = self.measmon.measurements.get(int(mid))
            if m is None or m.state != "running":
                raise LookupError(f"not_found: measurement {mid} is not running")
            space = self.measmon.spaces[entity]
            slots = [s for s in slots if space.sharemask[table.xptr[s]] & m.flag]
        copy = self.measmon.read_active(entity, slots)
        baselines = None
        if mid is not None and slots:
            base = self.pipeline.builder._state.get((int(mid), entity))
            if base is not None:
                baselines = [(base.values[r].tolist(), int(base.at[r]))
                             if base.valid[r] and base.alloc[r] == copy.alloc_us[i] else None
                             for i, r in enumerate(copy.recs.tolist())]
        names = [c.measure_name for c in table.entity.counters]
        records = []
        for i, slot in enumerate(slots):
            ids = entity_ids(table, slot)
            rec: dict[str, Any] = {
                "key": entity_key(table.entity.id_fields, ids), "ids": ids, "cpu": int(copy.cpu[i]),
                "record_at": to_ts(int(copy.alloc_us[i])).isoformat(),
                "counters": dict(zip(names, copy.values[i].tolist(), strict=True)),
            }
            if baselines is not None and baselines[i] is not None:
                values, at = baselines[i]
                rec["baseline_at"] = to_ts(at).isoformat()
                rec["baseline"] = dict(zip(names, values, strict=True))
            records.append(rec)
        return {"entity": entity, "at": to_ts(self.node.now_us).isoformat(), "records": records}

    def _userdef_slot(self, ids: dict[str, Any], *, create: bool) -> int | None:
        """The USERDEF slot of one user counter element (cpu, pin, name, index, and optionally
        process_name / program_file_name). A process outside the simulated node gets its
        elements created on first use (entity start: active measurements whose CONTAB names
        the counter attach to it)."""
        table = self.node.tables["userdef"]
        want = {"pin": int(ids["pin"]), "name": str(ids["name"]).upper(), "index": int(ids.get("index", 0))}
        for extra in ("process_name", "program_file_name"):
            if ids.get(extra):
                want[extra] = str(ids[extra]).upper()
        cpu = int(ids["cpu"])
        for s in range(table.n):
            if table.alive[s] and int(table.cpu[s]) == cpu:
                got = table.id_of(s)
                if all(str(got.get(k, "")).upper() == str(v).upper() if isinstance(v, str) else got.get(k) == v
                       for k, v in want.items()):
                    return s
        if not create:
            return None
        if not 1 <= len(want["name"]) <= 16:
            raise ValueError("invalid: a counter name has 1-16 characters")
        if not 0 <= want["index"] <= 255:
            raise ValueError("invalid: an element index is 0-255 (at most 256 elements per process)")
        fields = {"process_name": "", "program_file_name": "", **want}
        slot = table.add(cpu=cpu, at_us=self.node.now_us, transient=True, **fields)
        self.measmon.entity_started("userdef", slot, self.node.now_us)
        return slot

    def _bump_init(self, payload: dict[str, Any]) -> dict[str, Any]:
        """MEASCOUNTERBUMPINIT: the element's offset (its USERDEF slot) or -1 when no active
        measurement has the counter (ERR^UDCNOTPRESENT)."""
        slot = self._userdef_slot(payload["ids"], create=True)
        offset = self.measmon.counter_bump_init(slot)
        return {"offset": slot if offset >= 0 else -1}

    def _bump(self, payload: dict[str, Any]) -> dict[str, Any]:
        """MEASCOUNTERBUMP at the node's current time; an unmeasured counter costs nothing."""
        slot = self._userdef_slot(payload["ids"], create=False)
        offset = payload.get("offset")
        if slot is None:
            return {"bumped": False, "at": to_ts(self.node.now_us).isoformat()}
        if offset is not None and int(offset) != slot:
            raise ValueError(f"conflict: offset {offset} is not this counter's (call bump-init again)")
        done = self.measmon.counter_bump(slot, str(payload["op"]), float(payload.get("value", 1)),
                                         self.node.now_us)
        return {"bumped": done, "at": to_ts(self.node.now_us).isoformat()}

    # ------------------------------------------------------------------ running

    def advance(self, until_us: int) -> None:
        """Simulate and measure up to until_us, then write that time slice."""
        assert self.measmon and self.pipeline
        self.measmon.run_until(until_us)
        self.writer.flush(self.pipeline.take(until_us))

    def backfill(self, until_us: int, *, chunk_us: int = HOUR, progress: bool | str = False,
                 serve_control: bool = False) -> None:
        """Run as fast as possible up to until_us, a slice (and a checkpoint) per chunk.
        progress: False, True (bar), or a mode of MEASUREDB_COLLECTOR_PROGRESS; with
        serve_control the API's requests are answered between chunks (at the node's time)."""
        self.mode = "backfill"
        start = self.node.now_us
        mode = _progress_mode(progress)
        began = last_line = time.monotonic()
        if mode == "lines" and until_us > start:
            log.info("backfill: %s to %s (%.1f days of node time)", _when(start), _when(until_us),
                     (until_us - start) / 86_400 / SECOND)
        with _progress(mode == "bar") as bar:
            task = bar.add_task("backfill", total=max(1, until_us - start)) if bar else None
            while self.node.now_us < until_us:
                target = min(until_us, (self.node.now_us // chunk_us + 1) * chunk_us)
                self.advance(target)
                if serve_control:
                    self.control_round()
                self.heartbeat()
                if target % (6 * HOUR) == 0:
                    self.checkpoint()
                if bar:
                    bar.update(task, completed=self.node.now_us - start)
                elif mode == "lines" and time.monotonic() - last_line >= PROGRESS_EVERY_S:
                    last_line = time.monotonic()
                    log.info("backfill: %s", _progress_line(start, self.node.now_us, until_us,
                                                            last_line - began))
        if mode == "lines" and until_us > start:
            log.info("backfill done: %.1f days of node time in %.0f s",
                     (until_us - start) / 86_400 / SECOND, time.monotonic() - began)
        self.condense_months()

    def finish_backfill(self, wait_s: float) -> None:
        """End of a backfill: the spool replayed, waiting up to wait_s for the database.
        Raises SpooledDataLeft (with what is left and where) when it did not come back."""
        if self.writer.drain(wait_s):
            return
        n, size = len(self.writer.spooled()), self.writer.spooled_bytes()
        raise SpooledDataLeft(
            f"the database did not answer within {wait_s:g} s: {n} slices ({size / 2**20:.1f} MiB) "
            f"of copies up to {_when(self._spooled_until())} are still in the spool "
            f"{self.writer.spool_dir}. Nothing is lost: they are written, in order, when "
            "the collector or `measuredb backfill` next runs with the database reachable "
            "(raise MEASUREDB_COLLECTOR_OUTAGE_WAIT_SECONDS to wait longer)")

    def _spooled_until(self) -> int:
        files = self.writer.spooled()
        return int(files[-1].stem.split("-")[1]) if files else self.writer.durable_until_us

    def condense_months(self) -> int:
        """The month-level rows the slices written so far left (_measure.month_dirty): a
        backfill returns with every tier current. The number of hours done (0 when the
        database cannot be reached: the upkeep does them later)."""
        try:
            with psycopg.connect(self.url, connect_timeout=3) as conn:
                return conn.execute("SELECT _measure.condense_pending_months(%s::smallint)",
                                    (self.state.system_id,)).fetchone()[0]
        except psycopg.OperationalError:
            return 0

    def start_scheduler(self, every_s: float = 30.0) -> threading.Event:
        """Run due scheduled reports (collector/scheduler.py) every `every_s` seconds in a
        background thread, so a long report never holds up the virtual clock. Two collectors
        never run one schedule slot twice: slots are claimed in the database."""
        from core import scheduler

        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(every_s):
                scheduler.run_due_quietly(self.url, instance=self.collector_id)

        threading.Thread(target=loop, name="report-scheduler", daemon=True).start()
        return stop

    def upkeep(self) -> dict[str, Any] | None:
        """Pack live runs, compress old TimescaleDB chunks, apply retention once a day
        (_measure.upkeep); logs what it did. None when the database cannot be reached."""
        try:
            with psycopg.connect(self.url, connect_timeout=3) as conn:
                done = conn.execute(
                    "SELECT _measure.upkeep(now(), %s * INTERVAL '1 hour')",
                    (self.settings.compress_after_hours,)).fetchone()[0]
        except psycopg.OperationalError as exc:
            log.warning("upkeep skipped, database unreachable: %s", exc)
            return None
        if done["packed"]:
            log.info("upkeep: packed %d live runs", done["packed"])
        if done["compressed"]:
            log.info("upkeep: compressed %s", ", ".join(done["compressed"]))
        retention = done.get("retention")
        if retention:
            from core.retention import describe

            for line in describe(retention):
                (log.warning if "held back" in line else log.info)("retention: %s", line)
        return done

    def start_upkeep(self) -> threading.Event:
        """Run upkeep every MEASUREDB_COLLECTOR_UPKEEP_SECONDS in a background thread (its own
        connection: it never holds up the virtual clock)."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(self.settings.upkeep_seconds):
                try:
                    self.upkeep()
                except psycopg.Error as exc:  # a failed upkeep is retried at the next turn
                    log.warning("upkeep failed: %s", str(exc).strip())

        threading.Thread(target=loop, name="upkeep", daemon=True).start()
        return stop

    def live(self, *, stop_after_s: float | None = None, stop_at_us: int | None = None) -> None:
        """Run in real time. At speed 1 the node's clock is the wall clock cut to the step
        grid: after a backfill or an outage the node catches up (CATCHUP_CHUNK_US at a time,
        answering control in between) and then runs within ON_TIME_US of real time; at
        another speed it runs `speed` times real time from where it stands. A warning every
        30 s says how far behind it is while it cannot keep up. stop_after_s / stop_at_us
        (node time) end it, for tests and benchmarks."""
        self.mode = "live"
        speed = self.settings.speed
        step = self.node.step_us
        chunk = max(step, CATCHUP_CHUNK_US // step * step)
        real0, virt0 = time.monotonic(), self.node.now_us
        began = last_checkpoint = time.monotonic()
        behind_since: float | None = None
        last_warning = 0.0
        log.info("live collection began: node time %s (%s)", _when(self.node.now_us),
                 "real time" if speed == 1.0 else f"{speed:g} x real time")
        while stop_after_s is None or time.monotonic() - began < stop_after_s:
            if stop_at_us is not None and self.node.now_us >= stop_at_us:
                break
            if speed == 1.0:
                target = now_us()
            else:
                target = virt0 + int((time.monotonic() - real0) * speed * SECOND)
            if stop_at_us is not None:
                target = min(target, stop_at_us)
            # Only ever stop on the step grid: a replay after a restart then cuts the same
            # steps and reproduces this run's counters exactly.
            target -= target % step
            if behind_since is None and target - self.node.now_us > max(step, ON_TIME_US):
                behind_since = time.monotonic()
                log.info("catching up: %s behind real time", _duration(target - self.node.now_us))
            if target > self.node.now_us:
                self.advance(min(target, self.node.now_us + chunk))
            self.lag_us = max(0, target - self.node.now_us)
            self.control_round()
            self.heartbeat()
            if time.monotonic() - last_checkpoint > 600 and self.checkpoint():
                last_checkpoint = time.monotonic()
            if self.lag_us > ON_TIME_US:
                if behind_since is None:
                    behind_since = time.monotonic()
                elif (time.monotonic() - behind_since > BEHIND_WARNING_S
                      and time.monotonic() - last_warning > BEHIND_WARNING_S):
                    last_warning = time.monotonic()
                    log.warning("live collection is %s behind real time and has been behind for "
                                "%.0f s", _duration(self.lag_us), time.monotonic() - behind_since)
                continue  # no sleep while behind
            if behind_since is not None:
                log.info("caught up with real time after %.0f s (node time %s)",
                         time.monotonic() - behind_since, _when(self.node.now_us))
                behind_since = None
            time.sleep(max(0.0, 1.0 - (time.monotonic() - real0) % 1.0))

    def heartbeat(self, *, force: bool = False) -> None:
        if not force and time.monotonic() - self._last_beat < self.settings.heartbeat_seconds:
            return
        self._last_beat = time.monotonic()
        detail = {"spooled_slices": len(self.writer.spooled()),
                  "spooled_bytes": self.writer.spooled_bytes(),
                  "durable_until_us": self.writer.durable_until_us,
                  "lag_s": round(self.lag_us / SECOND, 1)}
        try:
            with psycopg.connect(self.url, connect_timeout=3) as conn:
                conn.execute(
                    """
                    INSERT INTO _measure.collector_heartbeat
                           (collector_id, system_id, node, started_at, beat_at, mode, simulated_at, detail)
                    VALUES (%s, %s, %s, now(), now(), %s, _measure.us_to_timestamptz(%s), %s)
                    ON CONFLICT (collector_id) DO UPDATE
                       SET beat_at = now(), mode = excluded.mode,
                           simulated_at = excluded.simulated_at, detail = excluded.detail
                    """,
                    (self.collector_id, self.state.system_id, self.settings.node, self.mode,
                     self.node.now_us, psycopg.types.json.Jsonb(detail)),
                )
        except psycopg.OperationalError:
            pass  # the writer is already spooling; the heartbeat resumes with the database

    # ------------------------------------------------------------------ checkpoints

    def _checkpoint_path(self) -> Path:
        safe = self.collector_id.replace("\\", "")
        return self.settings.data_dir / "checkpoints" / f"{safe}-{self.settings.seed}.pickle"

    def checkpoint(self) -> bool:
        """Save node + MEASMON at a slice boundary whose copies are all stored (not for a
        host node: it never resumes, a restart starts a fresh epoch)."""
        if self.host or self.writer.durable_until_us != self.node.now_us:
            return False
        path = self._checkpoint_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        callbacks = self.measmon.sink, self.measmon.on_state
        self.measmon.sink = self.measmon.on_state = None  # they hold the writer's connection
        try:
            with tmp.open("wb") as f:
                pickle.dump({"epoch_us": self.state.epoch_us, "code": code_fingerprint(), "node": self.node,
                             "measmon": self.measmon, "pipeline": self.pipeline}, f,
                            protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
            return True
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            log.warning("checkpoint not written (%s); a restart replays from the origin", exc)
            tmp.unlink(missing_ok=True)
            return False
        finally:
            self.measmon.sink, self.measmon.on_state = callbacks

    def _load_checkpoint(self) -> bool | None:
        path = self._checkpoint_path()
        if not path.exists():
            return None
        try:
            with path.open("rb") as f:
                saved = pickle.load(f)
        except Exception as exc:  # a damaged or stale file: replay instead
            log.warning("checkpoint %s unreadable (%s); replaying from the origin", path, exc)
            return None
        if (saved.get("code") != code_fingerprint() or saved["epoch_us"] != self.state.epoch_us
                or saved["node"].now_us > self.state.durable_until_us):
            return None
        self.node, self.measmon, self.pipeline = saved["node"], saved["measmon"], saved["pipeline"]
        self.measmon.sink = self.pipeline.on_copy
        self.measmon.on_state = self._on_state
        return True

    def close(self) -> None:
        self.writer.close()

    # ------------------------------------------------------------------ host node

    # A host node measures the present: no backfill, no replay (docs/host-node.md). A first
    # start begins the default measurement at the next interval boundary; a restart starts a
    # fresh epoch there too: measurements running in the database resume at it (keeping their
    # start time; the intervals while the collector was away are missing, nothing is
    # invented), those whose stop time passed meanwhile are marked stopped at it. The durable
    # watermark only moves forward (collector/sink.py), as for a simulated node.

    def _register_host(self, conn: psycopg.Connection, system_id: int, epoch_us: int | None) -> None:
        if epoch_us is not None and epoch_us < now_us() - self.settings.step_seconds * SECOND:
            raise CollectorConfigError(
                f"{self.topology.system_name} is this host, measured as it runs: it has no history "
                "to backfill (use a simulated node, e.g. --node demo, for history)")
        conn.execute("UPDATE _measure.system SET os_version = %s WHERE system_id = %s",
                     (self.topology.os_version, system_id))

    def _fresh_host_epoch(self, conn: psycopg.Connection, system_id: int, epoch_us: int | None) -> int:
        interval = self.settings.interval_seconds * SECOND
        epoch = epoch_us if epoch_us is not None else _next_on_grid(now_us(), interval)
        conn.execute("UPDATE _measure.collector_state SET epoch_at = _measure.us_to_timestamptz(%s),"
                     " updated_at = now() WHERE collector_id = %s", (epoch, self.collector_id))
        self._resumed = {mid for (mid,) in conn.execute(
            "SELECT measurement_id FROM _measure.measurement WHERE system_id = %s AND state = 'running'",
            (system_id,))}
        return epoch

    def _host_ended(self, mid: int, name: str, contab: Any, state: str, stop_us: int) -> None:
        """A measurement that ended before this epoch: known to MEASMON as stopped (so it is
        not looked at again), and marked stopped in the database if it was still scheduled
        or running."""
        self.measmon.measurements[mid] = Measurement(mid, name, Contab.model_validate(contab),
                                                     start_us=stop_us, stop_us=stop_us,
                                                     state="stopped")
        if state in ("scheduled", "running"):
            self.pipeline.control("stopped", mid, stop_us, None)


def _next_on_grid(us: int, grid_us: int) -> int:
    """The first time on the grid at or after us."""
    return -(-us // grid_us) * grid_us


def _when(us: int) -> str:
    return to_ts(max(us, 0)).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(us: int) -> str:
    s = us // SECOND
    return f"{s // 3600} h {s % 3600 // 60:02d} min" if s >= 3600 else f"{s // 60} min {s % 60:02d} s"


def _progress_line(start: int, now: int, until: int, elapsed_s: float) -> str:
    done = (now - start) / max(1, until - start)
    left = elapsed_s / done * (1 - done) if done > 0 else 0.0
    return (f"{100 * done:5.1f} % (node time {_when(now)} of {_when(until)}), "
            f"{elapsed_s:.0f} s elapsed, about {left:.0f} s left")


def _progress_mode(progress: bool | str) -> str:
    if progress is True:
        return "bar"
    if progress is False:
        return "off"
    if progress == "auto":
        return "bar" if os.isatty(2) else "lines"
    return progress


def _progress(enabled: bool):
    if not enabled:
        from contextlib import nullcontext

        return nullcontext(None)
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                    TextColumn("{task.percentage:>5.1f}%"), TimeRemainingColumn())


def wait_for_database(url: str, what: str, *, give_up_s: float | None = None) -> None:
    """Until the database answers: retry with backoff (1 s doubling to 30 s), logging each
    wait. A refused password or a missing database is not an outage: raised at once."""
    waited, delay = 0.0, 1.0
    while True:
        try:
            with psycopg.connect(url, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            if waited:
                log.info("database reachable after %.0f s; %s", waited, what)
            return
        except psycopg.OperationalError as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if "authentication failed" in reason or "does not exist" in reason:
                raise CollectorConfigError(f"cannot use the database: {reason}") from None
            if give_up_s is not None and waited >= give_up_s:
                raise
            log.warning("database unreachable (%s); retrying in %.0f s before %s", reason, delay, what)
            time.sleep(delay)
            waited += delay
            delay = min(30.0, delay * 2)


def run_collector(settings: CollectorSettings, url: str) -> None:
    """`measuredb collector`: register, rebuild, backfill to now, then live until a signal.
    Database outages, at start or later, are waited out; only bad settings end it."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s collector %(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    collector = Collector(settings, url)
    while True:
        wait_for_database(url, "registering the collector")
        try:
            collector.register()
            collector.build()
            break
        except psycopg.OperationalError as exc:  # went away again in between
            log.warning("database lost while starting (%s); waiting", str(exc).strip().splitlines()[0])
    try:
        t = now_us()
        collector.backfill(t - t % collector.node.step_us, progress=settings.progress,
                           serve_control=True)  # on the grid
        collector.checkpoint()
        collector.upkeep()
        collector.start_scheduler()
        collector.start_upkeep()
        collector.live()
    except KeyboardInterrupt:
        try:  # store what was measured since the last slice (e.g. start copies)
            collector.writer.flush(collector.pipeline.take(collector.node.now_us), wait=False)
        except SpoolFull:
            pass
        log.info("stopping: copies up to %s are stored%s", _when(collector.writer.durable_until_us),
                 f"; {len(collector.writer.spooled())} slices wait in the spool"
                 if collector.writer.spooled() else "")
    except SpoolFull as exc:
        raise CollectorConfigError(str(exc)) from None
    finally:
        collector.close()
