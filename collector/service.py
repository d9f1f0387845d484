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
3. Backfill as fast as possible up to now (a progress bar on a terminal), then run live:
   pace the virtual clock at real time (or MEASUREDB_COLLECTOR_SPEED times it), pick up new
   or changed measurements from the database within a second, beat the heartbeat.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from collector.catalog import load_catalog
from collector.config import CollectorSettings
from collector.measure.contab import Contab, ContabBuilder
from collector.measure.measmon import Measmon, Measurement, MeasureStateError
from collector.sink import Pipeline, SpoolFull, Writer, entity_key

log = logging.getLogger(__name__)

SECOND = 1_000_000
HOUR = 3600 * SECOND
# Which workload a shipped node runs unless MEASUREDB_COLLECTOR_WORKLOAD says otherwise.
DEFAULT_WORKLOADS = {"demo": "demo", "et1-txp": "et1", "rds-txp": "rds", "rds-vlx": "rds",
                     "ref16": "ref16-day"}
DEFAULT_MEASUREMENT = "DEFAULT"


class CollectorConfigError(RuntimeError):
    """The collector cannot start with these settings (message says why and what to do)."""


def now_us() -> int:
    return time.time_ns() // 1000


def to_us(ts: datetime | None) -> int | None:
    if ts is None:
        return None
    return int(ts.timestamp()) * SECOND + ts.microsecond


def to_ts(us: int) -> datetime:
    return datetime.fromtimestamp(us // SECOND, UTC).replace(microsecond=us % SECOND)


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
        from collector.node.topology import load_node

        self.settings = settings
        self.url = url
        self.catalog = load_catalog()
        self.topology = load_node(settings.node)
        self.collector_id = collector_id or self.topology.system_name
        self.workload = settings.workload or DEFAULT_WORKLOADS.get(settings.node, settings.node)
        self.state: State | None = None
        self.node: Any = None
        self.measmon: Measmon | None = None
        self.pipeline: Pipeline | None = None
        self.writer = Writer(url, self.collector_id, settings.spool_path, settings.spool_max_bytes)
        self._last_beat = 0.0
        self.mode = "starting"

    # ------------------------------------------------------------------ set-up

    def register(self, *, epoch_us: int | None = None) -> State:
        """The system, the checkpoint row, and on a first start the default measurement
        (epoch_us pins the virtual clock's origin of a first start; tests use it)."""
        t = self.topology
        s = self.settings
        with psycopg.connect(self.url) as conn:
            system_id = conn.execute(
                """
                INSERT INTO _measure.system (system_name, system_number, time_zone)
                VALUES (%s, %s, %s)
                ON CONFLICT (system_name) DO UPDATE SET time_zone = excluded.time_zone
                RETURNING system_id
                """,
                (t.system_name, t.system_number, t.time_zone),
            ).fetchone()[0]
            register_components(conn, system_id, t)
            row = conn.execute(
                "SELECT node, seed, step_us, _measure.timestamptz_to_us(epoch_at),"
                " _measure.timestamptz_to_us(durable_until) FROM _measure.collector_state"
                " WHERE collector_id = %s",
                (self.collector_id,),
            ).fetchone()
            if row is None:
                interval = s.interval_seconds * SECOND
                epoch = epoch_us if epoch_us is not None else (
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
        self.state = State(system_id, epoch, durable)
        return self.state

    def build(self) -> None:
        """A node at the origin and MEASMON, or the newest usable checkpoint file."""
        from collector.node.engine import Node

        assert self.state is not None
        restored = self._load_checkpoint()
        if restored is None:
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
        with psycopg.connect(self.url) as conn:
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
                self.measmon.add(Measurement(mid, name, Contab.model_validate(contab),
                                             start_us=max(start_us, self.state.epoch_us),
                                             stop_us=stop_us, interval_us=interval_us))
                changed += 1
            elif known.state != "stopped" and stop_us != known.stop_us:
                self.measmon.set_stop(mid, stop_us)
                changed += 1
        return changed

    # ------------------------------------------------------------------ requests from the API

    def handle_requests(self) -> int:
        """Answer the API's pending control requests (MEASREADACTIVE, MEASSTATUS,
        MEASCOUNTERBUMPINIT, MEASCOUNTERBUMP); returns how many were answered."""
        assert self.state and self.measmon
        answered = 0
        with psycopg.connect(self.url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT request_id, kind, payload FROM _measure.control_request"
                " WHERE system_id = %s AND answered_at IS NULL ORDER BY request_id",
                (self.state.system_id,),
            ).fetchall()
            for request_id, kind, payload in rows:
                response, error = None, None
                try:
                    response = self._answer(kind, payload)
                except (ValueError, KeyError, LookupError, MeasureStateError) as exc:
                    error = str(exc).strip("'\"")
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

    def backfill(self, until_us: int, *, chunk_us: int = HOUR, progress: bool = False) -> None:
        """Run as fast as possible up to until_us, a slice (and a checkpoint) per chunk."""
        self.mode = "backfill"
        start = self.node.now_us
        with _progress(progress, total=max(1, until_us - start)) as bar:
            task = bar.add_task("backfill", total=max(1, until_us - start)) if bar else None
            while self.node.now_us < until_us:
                target = min(until_us, (self.node.now_us // chunk_us + 1) * chunk_us)
                self.advance(target)
                self.heartbeat()
                if target % (6 * HOUR) == 0:
                    self.checkpoint()
                if bar:
                    bar.update(task, completed=self.node.now_us - start)
        self.condense_months()

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
        from collector import scheduler

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
            from collector.retention_cli import describe

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

    def live(self, *, stop_after_s: float | None = None) -> None:
        """Pace the virtual clock at real time × speed; poll the control plane each second."""
        self.mode = "live"
        speed = self.settings.speed
        real0, virt0 = time.monotonic(), self.node.now_us
        began = time.monotonic()
        last_checkpoint = time.monotonic()
        while stop_after_s is None or time.monotonic() - began < stop_after_s:
            target = virt0 + int((time.monotonic() - real0) * speed * SECOND)
            if speed == 1.0:
                target = min(target, now_us())
            # Only ever stop on the step grid: a replay after a restart then cuts the same
            # steps and reproduces this run's counters exactly.
            target -= target % self.node.step_us
            if target > self.node.now_us:
                self.advance(target)
            self.poll_control()
            self.handle_requests()
            self.heartbeat()
            if time.monotonic() - last_checkpoint > 600 and self.checkpoint():
                last_checkpoint = time.monotonic()
            behind = (time.monotonic() - real0) * speed * SECOND - (self.node.now_us - virt0)
            if behind > self.node.step_us + 5 * SECOND:  # the grid alone makes it lag a step
                log.warning("live mode is %.1f s behind real time", behind / SECOND)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - real0) % 1.0))

    def heartbeat(self, *, force: bool = False) -> None:
        if not force and time.monotonic() - self._last_beat < self.settings.heartbeat_seconds:
            return
        self._last_beat = time.monotonic()
        detail = {"spooled_slices": len(self.writer.spooled()),
                  "durable_until_us": self.writer.durable_until_us}
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
        """Save node + MEASMON at a slice boundary whose copies are all stored."""
        if self.writer.durable_until_us != self.node.now_us:
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


def _progress(enabled: bool, total: int):
    if not enabled:
        from contextlib import nullcontext

        return nullcontext(None)
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                    TextColumn("{task.percentage:>5.1f}%"), TimeRemainingColumn())


def run_collector(settings: CollectorSettings, url: str) -> None:
    """`measuredb collector`: register, rebuild, backfill to now, then live until a signal."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s collector %(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    collector = Collector(settings, url)
    collector.register()
    collector.build()
    try:
        t = now_us()
        collector.backfill(t - t % collector.node.step_us, progress=os.isatty(2))  # on the grid
        collector.checkpoint()
        collector.upkeep()
        collector.start_scheduler()
        collector.start_upkeep()
        collector.live()
    except KeyboardInterrupt:
        try:  # store what was measured since the last slice (e.g. start copies)
            collector.writer.flush(collector.pipeline.take(collector.node.now_us))
        except SpoolFull:
            pass
        log.info("stopping: copies up to %s are stored", to_ts(max(collector.writer.durable_until_us, 0)))
    except SpoolFull as exc:
        raise CollectorConfigError(str(exc)) from None
    finally:
        collector.close()
