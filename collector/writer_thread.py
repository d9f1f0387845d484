"""A backfill's writer in a thread of its own: the database's work beside the simulation.

During a backfill the simulation of slice n+1 runs while slice n is written (binary COPY,
its transaction, the watermark) and the hours written are condensed: the node's kernels
run without the GIL (numba ``nogil``) and psycopg releases it while the server works, so
the two cores share the run instead of taking turns (bench/RESULTS.md, issue 31).

What stays as it was:

* Order: one thread takes the jobs one at a time, in the order they were given (slices,
  condensing, checkpoint files); the writer (collector/sink.py) spools a slice the database
  does not take and replays the spool in order, exactly as when the collector writes itself.
* Bounded memory: at most ``depth`` jobs wait; the simulation waits for the writer beyond.
* Nothing lost, nothing twice: the watermark still advances in each slice's transaction,
  and a checkpoint file is written only once the slice it follows is stored (a kill -9
  resumes from the newest checkpoint whose data the database holds).
* Condensing: a backfill's slices only mark the hours they bring (``_measure.tier_dirty``);
  a ``condense`` job after each hour's slice condenses the marked hours of the system once
  the slice has committed, after an ANALYZE of the run partitions holding them (of the
  columns condensing filters and joins on: ``_measure.analyze_dirty_runs``). Planned on the
  statistics of a partition that had none of its newest hours, a freshly written ref16 hour
  took 3-4 s to condense (DISCOPEN's join estimated at one row), after the ANALYZE (0.3 s)
  well under 1 s (bench/RESULTS.md, issue 31). The backfill ends with one, so it returns
  with every tier current. Hours marked but not condensed when a backfill dies stay marked
  and the next condensing pass takes them.

A failed job ends the thread; the error is raised in the collector's thread at its next
call. Leaving the ``with`` block waits for the jobs given so far.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

import psycopg

from collector.phases import Phases
from collector.sink import DATABASE_AWAY, Writer, rolled_back_by_conflict
from collector.slice import Slice

log = logging.getLogger(__name__)

STOP_WAIT_S = 10.0  # leaving on an error (a signal): how long the jobs given may take
# While the writer runs, the interpreter hands the GIL over every 0.5 ms instead of 5: the
# writer takes it back after each wait on the server (psycopg sends a COPY 128 KB at a time),
# and waiting 5 ms each time for the simulation's Python to let go held the COPY up (a demo
# day on the busy 2-core machine: 43 s and 66 s against 69 s and 88 s, alternated runs)
SWITCH_INTERVAL_S = 0.0005


class WriterThread:
    def __init__(self, writer: Writer, phases: Phases, *, depth: int = 1, threaded: bool = True) -> None:
        self.writer = writer
        self.threaded = threaded  # False: each job done at once in the caller's thread (the profile's baseline)
        self.phases = phases
        self._jobs: queue.Queue[tuple[str, Any] | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._conn: psycopg.Connection | None = None  # condensing's own connection
        self._thread = threading.Thread(target=self._run, name="backfill-writer", daemon=True)
        self._switch_interval = sys.getswitchinterval()

    def __enter__(self) -> WriterThread:
        if self.threaded:
            sys.setswitchinterval(min(self._switch_interval, SWITCH_INTERVAL_S))
            self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(wait_s=None if exc_type is None else STOP_WAIT_S)

    # ---------------------------------------------------------------- the collector's side

    def flush(self, sl: Slice) -> None:
        """Write (or spool) the slice after the jobs given before."""
        self._put(("slice", sl))

    def condense(self, system_id: int) -> None:
        """Condense every hour the slices so far marked (months and years later, as the
        collector's own slices do: _measure.condense_pending_months)."""
        self._put(("condense", system_id))

    def when_stored(self, until_us: int, then: Callable[[], object]) -> None:
        """Call `then` (in the writer's thread) once the slices up to until_us are stored,
        not when they went to the spool."""
        self._put(("then", (until_us, then)))

    def close(self, wait_s: float | None = None) -> None:
        """Wait for the jobs given (at most wait_s seconds), end the thread, raise its error."""
        if self._thread.is_alive():
            with self.phases("wait for the writer"):
                try:
                    self._put(None, check=False)
                finally:
                    self._thread.join(wait_s)
            if self._thread.is_alive():
                log.warning("the writer did not finish within %.0f s; slices not stored are written again "
                            "at the next start (from the newest checkpoint)", wait_s)
        if self._conn is not None and not (self.threaded and self._thread.is_alive()):
            self._conn.close()
            self._conn = None
        sys.setswitchinterval(self._switch_interval)
        self._raise()

    # ---------------------------------------------------------------- internals

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _put(self, job: tuple[str, Any] | None, *, check: bool = True) -> None:
        if check:
            self._raise()
        if not self.threaded:
            if job is not None:
                self._do(job)
            return
        with self.phases("wait for the writer"):
            while True:
                try:
                    self._jobs.put(job, timeout=0.5)
                    return
                except queue.Full:
                    if not self._thread.is_alive():  # ended by an error: nothing takes the job
                        if check:
                            self._raise()
                        return

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                self._do(job)
            except BaseException as exc:  # noqa: BLE001 - raised in the collector's thread
                self._error = exc
                return

    def _do(self, job: tuple[str, Any]) -> None:
        kind, arg = job
        if kind == "slice":
            with self.phases("write: slice (all)"):
                self.writer.flush(arg)
        elif kind == "condense":
            with self.phases("condense: hours marked"):
                self._condense(arg)
        else:
            until_us, then = arg
            if self.writer.durable_until_us >= until_us:
                with self.phases("checkpoint file"):
                    then()

    def _condense(self, system_id: int) -> None:
        if self.writer.down:  # the slices go to the spool: condensed after they replay
            return
        try:
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(self.writer.url, connect_timeout=3, autocommit=True)
            # the statistics of the partitions just written first (committed, so the plans
            # of the condensing below see them; 021-condense.sql, _measure.analyze_dirty_runs)
            with self.phases("condense: analyze"):
                self._conn.execute("SELECT _measure.analyze_dirty_runs(%s::smallint)", (system_id,))
            self._conn.execute("SELECT _measure.condense(%s::smallint, 1000000, false)", (system_id,))
        except psycopg.Error as exc:  # the next pass (or the end of the backfill) does them
            if not isinstance(exc, DATABASE_AWAY) and not rolled_back_by_conflict(exc):
                raise
            log.info("condensing deferred (%s)", str(exc).strip().splitlines()[0])
            if self._conn is not None:
                self._conn.close()
                self._conn = None
