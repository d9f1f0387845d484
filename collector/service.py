"""The collector: a node, MEASURE on top of it, copies into the database.

Life of a collector (one per measured system):

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

The node may also be this machine (MEASUREDB_COLLECTOR_NODE=host): then there is no backfill
and no replay, a restart starts a fresh epoch (collector/hostnode.py; docs/host-node.md).

This module is the life cycle; each job around it has its module: collector/nodekind.py (what
differs between a simulated node and the host), collector/registration.py (the collector's
rows), collector/checkpoint.py (checkpoint files), collector/control.py (measurements and
control requests from the database), collector/upkeep.py (upkeep and scheduled reports in
background threads), collector/sink.py (writing the copies).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections import deque
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import psycopg
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from collector import checkpoint, registration, upkeep
from collector.control import ControlServer
from collector.errors import CollectorConfigError, SpooledDataLeft
from collector.measure.measmon import Measmon, Measurement
from collector.node.workload import DEFAULT_WORKLOADS
from collector.nodekind import node_kind
from collector.phases import Phases
from collector.registration import DEFAULT_MEASUREMENT, State, default_contab
from collector.settings import CollectorSettings
from collector.sink import Pipeline, SpoolFull, Writer
from collector.writer_thread import WriterThread
from core.catalog import load_catalog
from core.times import HOUR, SECOND, now_us, to_ts

__all__ = [
    # the collector and its errors
    "Collector", "CollectorConfigError", "SpooledDataLeft", "run_collector", "wait_for_database",
    # live pacing (tests and benchmarks read or change them)
    "BEHIND_WARNING_S", "CATCHUP_CHUNK_US", "ON_TIME_US", "PROGRESS_EVERY_S",
    # defined beside the node and the registration, kept here for the benchmarks
    "DEFAULT_MEASUREMENT", "DEFAULT_WORKLOADS", "default_contab",
]

log = logging.getLogger(__name__)

CATCHUP_CHUNK_US = 10 * 60 * SECOND  # live catch-up: control is answered at least this often
ON_TIME_US = 2 * SECOND               # live: "within real time" means at most this late
BEHIND_WARNING_S = 30.0               # live: warn (and repeat) once behind for this long
PROGRESS_EVERY_S = 10.0               # backfill progress as log lines: one this often
CHECKPOINT_EVERY_US = 6 * HOUR        # backfill: a checkpoint file at most this often (node time)
CONDENSE_EVERY_US = HOUR              # backfill: the hours written are condensed (after their commit) this often


class Collector:
    def __init__(self, settings: CollectorSettings, url: str, *, collector_id: str | None = None) -> None:
        self.settings = settings
        self.url = url
        self.catalog = load_catalog()
        self.node_kind = node_kind(settings)  # a simulated node, or this host
        self.topology = self.node_kind.topology
        self.collector_id = collector_id or self.topology.system_name
        self.state: State | None = None
        self.node: Any = None
        self.measmon: Measmon | None = None
        self.pipeline: Pipeline | None = None
        try:
            self.writer = Writer(url, self.collector_id, settings.spool_path, settings.spool_max_bytes,
                                 spool_full=settings.spool_full)
        except PermissionError as exc:  # a spool folder others may write (collector/sink.py)
            raise CollectorConfigError(f"spool folder: {exc}") from None
        self.control = ControlServer(self)
        self._last_beat = 0.0
        self.mode = "starting"
        self.backfill_done = 0.0
        self.backfill_left_s: float | None = None  # at the recent pace (Pace)
        self.lag_us = 0
        self.phases: Phases = self.writer.phases  # where a backfill's time goes (collector/phases.py)

    # ------------------------------------------------------------------ set-up

    def register(self, *, epoch_us: int | None = None) -> State:
        """The system, the checkpoint row, and on a first start the default measurement
        (epoch_us pins the virtual clock's origin of a first start; tests use it)."""
        s = self.settings
        with psycopg.connect(self.url) as conn:
            system_id = registration.register_system(conn, self.topology)
            self.node_kind.registering(conn, system_id, epoch_us)
            row = registration.collector_row(conn, self.collector_id)
            if row is None:
                epoch = epoch_us if epoch_us is not None else self.node_kind.first_epoch(now_us())
                registration.create_collector(
                    conn, self.collector_id, system_id, node=s.node, seed=s.seed,
                    step_us=s.step_seconds * SECOND, epoch_us=epoch,
                    interval_us=s.interval_seconds * SECOND, topology=self.topology)
                durable = -1
            else:
                if (row.node, row.seed, row.step_us) != (s.node, s.seed, s.step_seconds * SECOND):
                    raise CollectorConfigError(
                        f"the database holds {self.topology.system_name} simulated as node {row.node!r} "
                        f"with seed {row.seed} and a {row.step_us // SECOND} s step; settings ask for node "
                        f"{s.node!r} seed {s.seed} step {s.step_seconds} s. Use the same settings "
                        "(MEASUREDB_COLLECTOR_NODE, _SEED, _STEP_SECONDS), or another database"
                    )
                epoch = self.node_kind.restart_epoch(conn, self.collector_id, system_id, row.epoch_us, epoch_us)
                durable = row.durable_until_us
        self.state = State(system_id, epoch, durable)
        return self.state

    def build(self) -> None:
        """A node at the origin and MEASMON, or the newest usable checkpoint file."""
        assert self.state is not None
        restored = (checkpoint.load(self._checkpoint_path(), self.state.epoch_us, self.state.durable_until_us)
                    if self.node_kind.checkpoints else None)
        if restored is None:
            self.node = self.node_kind.make_node(self.catalog, self.state.epoch_us)
            self.pipeline = Pipeline(self.catalog, self.node.tables, self.state.system_id)
            self.measmon = Measmon(self.node, self.pipeline.on_copy, catalog=self.catalog,
                                   on_state=self._on_state)
        else:
            self.node, self.measmon, self.pipeline = restored.node, restored.measmon, restored.pipeline
            self.measmon.sink = self.pipeline.on_copy
            self.measmon.on_state = self._on_state
        self.pipeline.skip_until_us = self.state.durable_until_us
        self.writer.durable_until_us = self.state.durable_until_us
        self.poll_control()

    def _on_state(self, m: Measurement, event: str, at_us: int) -> None:
        if event == "started" and m.measurement_id in self.node_kind.resumed:
            return  # a host measurement resumed after a restart keeps its start time
        usage = None
        if event == "stopped":
            usage = {"entities": m.usage,
                     "not_allocated": {f"{e}:{err}": n for (e, err), n in m.unallocated.items()},
                     "copies_written": m.copies_written}
        assert self.pipeline is not None  # MEASMON, which calls this, comes with the pipeline
        self.pipeline.control(event, m.measurement_id, at_us, usage)

    # ------------------------------------------------------------------ control plane (collector/control.py)

    def poll_control(self) -> int:
        """Add new measurements and apply changed stop times; returns how many changed."""
        return self.control.poll()

    def handle_requests(self) -> int:
        """Answer the API's pending control requests; returns how many were answered."""
        return self.control.serve()

    def control_round(self) -> bool:
        """Both, an outage waited out with backoff; True when the database answered."""
        return self.control.round()

    # ------------------------------------------------------------------ running

    def advance(self, until_us: int) -> None:
        """Simulate and measure up to until_us, then write that time slice."""
        assert self.measmon and self.pipeline
        self.measmon.run_until(until_us)
        self.writer.flush(self.pipeline.take(until_us))

    def backfill(self, until_us: int, *, chunk_us: int = HOUR, progress: bool | str = False,
                 serve_control: bool = False, pipelined: bool = True) -> None:
        """Run as fast as possible up to until_us, a slice per chunk, its hours condensed
        after it commits, a checkpoint every 6 hours of node time. progress: False, True (bar), or
        a mode of MEASUREDB_COLLECTOR_PROGRESS; with serve_control the API's requests are
        answered between chunks (at the node's time). The slices are written by a thread of
        their own while the next ones are simulated (collector/writer_thread.py); when this
        returns, every slice is stored (or spooled) and every tier but the months condensed.
        pipelined=False: the way of release 130, for the profile's baseline (bench_scale.py):
        each slice written, and its hours condensed, before the next is simulated."""
        self.mode = "backfill"
        start = self.node.now_us
        self.backfill_done, self.backfill_left_s = 0.0, None
        mode = _progress_mode(progress)
        began = last_line = time.monotonic()
        pace = Pace()
        pace.add(began, start)
        if mode == "lines" and until_us > start:
            log.info("backfill: %s to %s (%.1f days of node time)", _when(start), _when(until_us),
                     (until_us - start) / 86_400 / SECOND)
        assert self.state is not None and self.measmon and self.pipeline, "built first"
        condense = self.writer.condense
        self.writer.condense = condense and not pipelined  # pipelined: marked only, condensed in batches
        try:
            with (_progress(mode == "bar") as bar,
                  WriterThread(self.writer, self.phases, threaded=pipelined) as writer):
                task = bar.add_task("backfill", total=max(1, until_us - start)) if bar else None
                while self.node.now_us < until_us:
                    target = min(until_us, (self.node.now_us // chunk_us + 1) * chunk_us)
                    with self.phases("simulate"):
                        self.measmon.run_until(target)
                    with self.phases("encode"):
                        sl = self.pipeline.take(target)
                    writer.flush(sl)
                    if pipelined and (target % CONDENSE_EVERY_US == 0 or target == until_us):
                        writer.condense(self.state.system_id)
                    self.backfill_done = (self.node.now_us - start) / max(1, until_us - start)
                    pace.add(time.monotonic(), self.node.now_us)
                    self.backfill_left_s = pace.left_s(until_us)
                    with self.phases("control, heartbeat"):
                        if serve_control:
                            self.control_round()
                        self.heartbeat()
                    if target % CHECKPOINT_EVERY_US == 0:
                        self._checkpoint_when_stored(writer)
                    if bar:
                        bar.update(task, completed=self.node.now_us - start)
                    elif mode == "lines" and time.monotonic() - last_line >= PROGRESS_EVERY_S:
                        last_line = time.monotonic()
                        log.info("backfill: %s", _progress_line(start, self.node.now_us, until_us,
                                                                last_line - began, pace.left_s(until_us)))
        finally:
            self.writer.condense = condense
        if mode == "lines" and until_us > start:
            log.info("backfill done: %.1f days of node time in %.0f s",
                     (until_us - start) / 86_400 / SECOND, time.monotonic() - began)
        with self.phases("condense: months"):
            self.condense_months()
        self.log_phases(mode)

    def log_phases(self, progress: bool | str) -> None:
        """The time per phase so far, at INFO with progress as log lines, else at DEBUG."""
        log.log(logging.INFO if _progress_mode(progress) == "lines" else logging.DEBUG,
                "backfill phases (wall/CPU s): %s", self.phases.line())

    def _checkpoint_when_stored(self, writer: WriterThread) -> None:
        """A checkpoint of the state now, written by the writer once the slices up to now are
        stored (never ahead of the database: a kill -9 resumes from what it holds)."""
        if not self.node_kind.checkpoints:
            return
        assert self.state and self.measmon and self.pipeline, "built first"
        with self.phases("checkpoint pickle"):
            data = checkpoint.dumps(self.state.epoch_us, self.node, self.measmon, self.pipeline)
        if data is not None:
            path = self._checkpoint_path()
            writer.when_stored(self.node.now_us, lambda: checkpoint.write(path, data))

    def finish_backfill(self, wait_s: float) -> None:
        """End of a backfill: the spool replayed, waiting up to wait_s for the database.
        Raises SpooledDataLeft (with what is left and where) when it did not come back."""
        if self.writer.drain(wait_s):
            return
        files = self.writer.spooled()
        until = int(files[-1].stem.split("-")[1]) if files else self.writer.durable_until_us
        raise SpooledDataLeft(
            f"the database did not answer within {wait_s:g} s: {len(files)} slices "
            f"({self.writer.spooled_bytes() / 2**20:.1f} MiB) of copies up to {_when(until)} are "
            f"still in the spool {self.writer.spool_dir}. Nothing is lost: they are written, in "
            "order, when the collector or `measuredb backfill` next runs with the database "
            "reachable (raise MEASUREDB_COLLECTOR_OUTAGE_WAIT_SECONDS to wait longer)")

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
        if self.mode == "backfill":
            detail["backfill_done"] = round(self.backfill_done, 4)
            if self.backfill_left_s is not None:
                detail["backfill_left_s"] = round(self.backfill_left_s)
        note = getattr(self.node, "queue_note", None)   # the host node: what its queue misses
        if note:
            detail["note"] = note
        assert self.state is not None, "registered first"
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
                     None if self.node is None else self.node.now_us, psycopg.types.json.Jsonb(detail)),
                )
        except psycopg.OperationalError:
            pass  # the writer is already spooling; the heartbeat resumes with the database

    # ------------------------------------------------------------------ checkpoints (collector/checkpoint.py)

    def _checkpoint_path(self) -> Path:
        return checkpoint.checkpoint_path(self.settings.data_dir, self.collector_id, self.settings.seed)

    def checkpoint(self) -> bool:
        """Save node + MEASMON at a slice boundary whose copies are all stored (not for a
        host node: it never resumes, a restart starts a fresh epoch)."""
        if not self.node_kind.checkpoints or self.writer.durable_until_us != self.node.now_us:
            return False
        assert self.state and self.measmon and self.pipeline, "built first"
        return checkpoint.save(self._checkpoint_path(), self.state.epoch_us, self.node, self.measmon,
                               self.pipeline)

    # ------------------------------------------------------------------ background work (collector/upkeep.py)

    def condense_months(self) -> int:
        """The month-level rows the slices written so far left; the hours done."""
        assert self.state is not None, "registered first"
        return upkeep.condense_months(self.url, self.state.system_id)

    def upkeep(self) -> dict[str, Any] | None:
        """One upkeep pass (pack, compress, retention once a day); None when the database
        cannot be reached."""
        return upkeep.upkeep(self.url, self.settings.compress_after_hours)

    def start_upkeep(self) -> threading.Event:
        """Upkeep every MEASUREDB_COLLECTOR_UPKEEP_SECONDS in a background thread."""
        return upkeep.start_upkeep(self.settings.upkeep_seconds, self.upkeep)

    def start_scheduler(self, every_s: float = 30.0) -> threading.Event:
        """Due scheduled reports every `every_s` seconds in a background thread."""
        return upkeep.start_scheduler(self.url, self.collector_id, every_s)

    def close(self) -> None:
        """The last heartbeat says the collector stopped (/health: degraded, not starting or
        live while no collector runs), then the writer closes."""
        if self.state is not None:
            self.mode = "stopped"
            self.heartbeat(force=True)
        self.writer.close()


def _when(us: int) -> str:
    return to_ts(max(us, 0)).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(us: int) -> str:
    s = us // SECOND
    return f"{s // 3600} h {s % 3600 // 60:02d} min" if s >= 3600 else f"{s // 60} min {s % 60:02d} s"


class Pace:
    """How fast node time goes by, over the last `window_s` seconds of wall time: a backfill's
    first chunks (a cold database, the first steps of each kind of entity) run slower than its
    steady pace, so an estimate from the start overstates what is left (6982 s were announced
    for a first start that took 261 s)."""

    def __init__(self, window_s: float = 60.0) -> None:
        self.window_s = window_s
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, wall_s: float, node_us: int) -> None:
        self.samples.append((wall_s, node_us))
        while len(self.samples) > 2 and self.samples[1][0] <= wall_s - self.window_s:
            self.samples.popleft()

    def left_s(self, until_us: int) -> float | None:
        """Seconds until node time reaches until_us at the recent pace; None while unknown."""
        if len(self.samples) < 3:  # the first chunk's pace is not the run's
            return None
        (t0, n0), (t1, n1) = self.samples[0], self.samples[-1]
        if t1 <= t0 or n1 <= n0:
            return None
        return (until_us - n1) / ((n1 - n0) / (t1 - t0))


def _progress_line(start: int, now: int, until: int, elapsed_s: float, left_s: float | None) -> str:
    done = (now - start) / max(1, until - start)
    left = "estimating what is left" if left_s is None else f"about {left_s:.0f} s left"
    return (f"{100 * done:5.1f} % (node time {_when(now)} of {_when(until)}), "
            f"{elapsed_s:.0f} s elapsed, {left}")


def _progress_mode(progress: bool | str) -> str:
    if progress is True:
        return "bar"
    if progress is False:
        return "off"
    if progress == "auto":
        return "bar" if os.isatty(2) else "lines"
    return progress


def _progress(enabled: bool) -> Any:
    if not enabled:
        return nullcontext(None)
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
            collector.heartbeat(force=True)  # "starting": building the node may take a while (numba)
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
        assert collector.pipeline is not None  # built above
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
