"""The host node: the Linux machine the collector runs on, measured as a MEASURE node.

:class:`HostNode` has the interface MEASMON needs of a node (``tables``, ``now_us``,
``step_us``, ``hooks``, ``advance``), like the simulated :class:`collector.node.Node`, but its
counters come from the kernel (docs/host-node.md has the mapping of every counter):

* CPU per logical CPU: ``/proc/stat`` (busy, interrupt time), ``/proc/schedstat`` (run time +
  run delay = CPU-QTIME: the running task is on the ready list, as in the simulated node;
  timeslices = DISPATCHES) or, where the kernel has no ``/proc/schedstat`` (CONFIG_SCHEDSTATS
  off), the run time, run delay and timeslices of every thread
  (``/proc/<pid>/task/<tid>/schedstat``) charged to the CPU the thread last ran on, and of
  every thread that ended, from the kernel's exit report (collector/node/taskstats.py),
  charged to the CPU it ended on;
* DISC per block device (``/proc/diskstats``): DEVICE-QBUSY-TIME from io_ticks, REQUEST-QTIME
  from the weighted time in queue, reads, writes, bytes;
* LINE per network interface (``/proc/net/dev``): bytes, packets, errors;
* PROCESS per process (``/proc/<pid>/stat``, ``io``, threads' ``schedstat``): transient
  entities that start and stop as processes come and go;
* USERDEF stays open to applications over REST (the collector creates the elements).

Host time is real time. ``advance(until_us)`` waits for ``until_us`` when it is in the future,
reads /proc at most once per step (when the step ends after the latest reading) and bumps the
counters by their value at the step's end, interpolated linearly between the two readings
that bracket it: a reading taken a little late (the collector wakes up after the step) or one
reading for several steps (the collector was held up) leaves totals exact and moves at most
the activity between the step's end and the reading. Kernel counters are cumulative; the node
keeps a monotone copy per entity (a counter that goes backwards, e.g. after a wrap, adds 0),
so busy counters are µs busy and queue counters µs × queue length, as MEASURE's.

Entities appear at the start of the step after the reading that first shows them and stop at
the end of that step (an ENTITY-STOP copy), as the simulated node's transients do; a process
starts at its birth instead (in the step it was born in) and counts from it, and one whose
exit the kernel reported stops at its exit with its final counters (its last reading's and
its threads' increase since); without exit reports it loses its activity since its last
reading. A CPU that goes offline is a CPU failure to MEASMON and one that comes back a reload.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import time
import zlib
import zoneinfo
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from collector.node.hooks import EntityTable, NodeHooks, NullHooks
from collector.node.taskstats import open_exit_watch
from core.catalog import Catalog, load_catalog

__all__ = ["HOST_NODE", "HostNode", "HostTopology", "host_topology", "is_host_node",
           "system_name_for"]

HOST_NODE = "host"
SECOND = 1_000_000
SECTOR = 512               # /proc/diskstats counts 512-byte sectors whatever the device
PF_KTHREAD = 0x00200000    # /proc/<pid>/stat flags: a kernel thread
# The counters a host node bumps, per entity type (docs/host-node.md maps each to its Linux
# source); the node keeps state for these columns only, the others stay 0.
COUNTERS: dict[str, tuple[str, ...]] = {
    "cpu": ("cpu_busy_time", "intr_busy_time", "cpu_qtime", "dispatches"),
    "disc": ("requests", "reads", "writes", "input_bytes", "output_bytes", "device_qbusy_time",
             "request_qtime", "read_qtime", "write_qtime"),
    "line": ("requests", "reads", "writes", "retries", "input_bytes", "output_bytes",
             "input_data_bytes", "output_data_bytes"),
    "process": ("cpu_busy_time", "ready_time", "dispatches", "page_faults", "messages_sent",
                "sent_bytes", "returned_bytes"),
}
ENTITY_TYPES = tuple(COUNTERS)


def is_host_node(node: str) -> bool:
    """`host` (or `host:NAME`, naming the system): this machine, not a simulated node."""
    return node == HOST_NODE or node.startswith(HOST_NODE + ":")


def system_name_for(hostname: str) -> str:
    r"""MEASURE's system name for a host name: ``\`` and 1-7 letters or digits, upper case,
    starting with a letter (the schema's rule). The first label of the name, without other
    characters; a longer one keeps its first 5 and last 2 characters (``db-prod-01`` gives
    ``\DBPRO01``), one starting with a digit gets an ``H`` in front."""
    label = hostname.split(".", 1)[0]
    name = re.sub(r"[^A-Z0-9]", "", label.upper()) or "HOST"
    if not name[0].isalpha():
        name = "H" + name
    if len(name) > 7:
        name = name[:5] + name[-2:]
    return "\\" + name


@dataclass
class HostTopology:
    """What the collector needs of a node's topology, read from the host itself."""

    system_name: str
    system_number: int
    time_zone: str
    cpu_type: str
    n_cpus: int
    os_version: str
    hostname: str
    source: str = HOST_NODE
    # the simulated topology's lists the collector reads (none on a host)
    server_classes: list[dict[str, Any]] = field(default_factory=list)
    processes: list[Any] = field(default_factory=list)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _time_zone(etc: Path, env: dict[str, str]) -> str:
    """TZ of the environment, else /etc/timezone, else the /etc/localtime link, else UTC."""
    candidates = [env.get("TZ", "").lstrip(":")]
    candidates.append((_read(etc / "timezone") or "").strip())
    try:
        target = os.readlink(etc / "localtime")
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    for tz in candidates:
        if not tz:
            continue
        try:
            zoneinfo.ZoneInfo(tz)
            return tz
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            continue
    return "UTC"


def _cpu_type(proc: Path) -> str:
    text = _read(proc / "cpuinfo") or ""
    for key in ("model name", "Hardware", "cpu model", "Processor", "cpu"):
        for line in text.splitlines():
            k, _, v = line.partition(":")
            if k.strip() == key and v.strip():
                return v.strip()
    return platform.machine() or "unknown"


def host_topology(node: str = HOST_NODE, *, proc: str | Path = "/proc", etc: str | Path = "/etc",
                  hostname: str | None = None, env: dict[str, str] | None = None) -> HostTopology:
    r"""The host as a node: system name from the host name (or ``host:NAME``), a system
    number from /etc/machine-id (stable per machine, 0-254), time zone, CPU type
    (/proc/cpuinfo), logical CPUs (/proc/stat), OS version (kernel release)."""
    proc, etc = Path(proc), Path(etc)
    hostname = hostname or socket.gethostname()
    given = node.split(":", 1)[1] if ":" in node else ""
    name = system_name_for(given.lstrip("\\") or hostname)
    ident = (_read(etc / "machine-id") or hostname).strip()
    cpus = _read_cpu_times(proc, 100)
    return HostTopology(
        system_name=name, system_number=zlib.crc32(ident.encode()) % 255,
        time_zone=_time_zone(etc, dict(os.environ) if env is None else env),
        cpu_type=_cpu_type(proc), n_cpus=len(cpus), os_version=platform.release() or "linux",
        hostname=hostname)


# ---------------------------------------------------------------------------- /proc readers

def _read_cpu_times(proc: Path, clk_tck: int) -> dict[int, tuple[float, float]]:
    """Per logical CPU from /proc/stat: (busy µs, interrupt µs). Busy is user + nice +
    system + irq + softirq (guest time is inside user); idle, iowait and steal are not."""
    out: dict[int, tuple[float, float]] = {}
    us = SECOND / clk_tck
    for line in (_read(proc / "stat") or "").splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        parts = line.split()
        try:
            cpu = int(parts[0][3:])
            v = [int(x) for x in parts[1:]] + [0] * 10
        except ValueError:
            continue
        user, nice, system, _idle, _iowait, irq, softirq = v[:7]
        out[cpu] = ((user + nice + system + irq + softirq) * us, (irq + softirq) * us)
    return out


def _read_schedstat(proc: Path) -> dict[int, tuple[float, float]] | None:
    """Per CPU from /proc/schedstat (version 15 and later): (time tasks ran + time they waited
    on the run queue, µs; timeslices), or None when the kernel has no schedstats. Fields after
    ``cpuN``: 7 rq_cpu_time (ns run by tasks on this CPU, the idle task not counted), 8
    run_delay (ns tasks waited on its run queue), 9 pcount (timeslices)."""
    text = _read(proc / "schedstat")
    if text is None:
        return None
    out: dict[int, tuple[float, float]] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts or not parts[0].startswith("cpu") or len(parts) < 10:
            continue
        try:
            out[int(parts[0][3:])] = ((int(parts[7]) + int(parts[8])) / 1000.0, float(int(parts[9])))
        except ValueError:
            continue
    return out or None


def _read_diskstats(proc: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for line in (_read(proc / "diskstats") or "").splitlines():
        parts = line.split()
        if len(parts) < 14:
            continue
        try:
            out[parts[2]] = [int(x) for x in parts[3:]] + [0] * 6
        except ValueError:
            continue
    return out


def _read_netdev(proc: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for line in (_read(proc / "net" / "dev") or "").splitlines()[2:]:
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        try:
            v = [int(x) for x in rest.split()]
        except ValueError:
            continue
        if len(v) >= 16:
            out[name.strip()] = v
    return out


def _stat_fields(text: str) -> tuple[str, list[str]] | None:
    """(comm, fields from field 3 on) of a /proc/<pid>/stat line."""
    open_, close = text.find("("), text.rfind(")")
    if open_ < 0 or close < 0:
        return None
    return text[open_ + 1 : close], text[close + 2 :].split()


@dataclass
class _Proc:
    pid: int
    start: int            # starttime (clock ticks after boot): with pid, one incarnation
    comm: str
    fields: list[str]
    io: dict[str, int]
    # (tid, start, cpu, run µs, run delay µs, timeslices, page faults)
    threads: list[tuple[int, int, int, float, float, float, float]]


def _read_processes(proc: Path, threads: bool) -> list[_Proc]:
    out: list[_Proc] = []
    try:
        names = os.listdir(proc)
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        base = proc / name
        stat = _read(base / "stat")
        parsed = _stat_fields(stat) if stat else None
        if parsed is None or len(parsed[1]) < 37:
            continue   # gone, or a zombie without fields
        comm, f = parsed
        io: dict[str, int] = {}
        for line in (_read(base / "io") or "").splitlines():
            k, _, v = line.partition(":")
            if v.strip().isdigit():
                io[k.strip()] = int(v)
        tl: list[tuple[int, int, int, float, float, float, float]] = []
        if threads:
            try:
                tids = os.listdir(base / "task")
            except OSError:
                tids = []
            for tid in tids:
                tdir = base / "task" / tid
                tstat, sched = _read(tdir / "stat"), _read(tdir / "schedstat")
                tp = _stat_fields(tstat) if tstat else None
                if tp is None or sched is None or len(tp[1]) < 37:
                    continue
                s = sched.split()
                if len(s) < 3:
                    continue
                t = tp[1]
                tl.append((int(tid), int(t[19]), int(t[36]), int(s[0]) / 1000.0, int(s[1]) / 1000.0,
                           float(s[2]), float(int(t[7]) + int(t[9]))))
        out.append(_Proc(int(name), int(f[19]), comm, f, io, tl))
    return out


# ---------------------------------------------------------------------------- the node

@dataclass
class _Item:
    """One entity in one reading: identifying fields, home CPU, counters in catalogue order
    (cumulative kernel values ``raw``; increments since the previous reading ``inc``)."""

    ids: dict[str, Any]
    cpu: int
    raw: np.ndarray
    inc: np.ndarray | None = None
    peak: np.ndarray | None = None
    begin: float = 0.0     # wall-clock µs it began (a process born since the previous reading)


class _TypeState:
    """Per entity type: the slot of each live key, and for each live entity a row (rows are
    reused, so the node's memory follows the live entities, not every process ever seen) with,
    for the COUNTERS columns only, the kernel values of the latest reading, the monotone
    counters at the previous and the latest reading, what has been bumped so far, the latest
    peaks, and when the entity began (a process born after the previous reading: its counters
    grew from then) and ended (a process whose exit the kernel reported: its final counters
    are those at its exit)."""

    def __init__(self, entity: Any, names: tuple[str, ...]) -> None:
        self.cols = np.array([entity.index(n) for n in names], dtype=np.int64)
        self.col = {n: i for i, n in enumerate(names)}
        self.width = len(entity.counters)
        self.n_counters = len(names)
        self.slot_of: dict[Any, int] = {}        # key → slot, live entities
        self.row_of: dict[int, int] = {}         # slot → row, until the entity has stopped
        self.cap = 0
        self.slot_of_row = np.zeros(0, dtype=np.int64)
        self.raw = self.cum_prev = self.cum_cur = self.emitted = self.peak = np.zeros((0, self.n_counters))
        self.begin = np.zeros(0)
        self.end = np.zeros(0)
        self._free: list[int] = []
        self.to_start: list[int] = []
        self.to_stop: list[int] = []

    def new_row(self, slot: int) -> int:
        if not self._free:
            cap = max(16, 2 * self.cap)
            for name in ("raw", "cum_prev", "cum_cur", "emitted", "peak"):
                new = np.zeros((cap, self.n_counters))
                new[: self.cap] = getattr(self, name)
                setattr(self, name, new)
            rows = np.full(cap, -1, dtype=np.int64)
            rows[: self.cap] = self.slot_of_row
            self.slot_of_row = rows
            for name in ("begin", "end"):
                new1 = np.zeros(cap)
                new1[: self.cap] = getattr(self, name)
                setattr(self, name, new1)
            self._free = list(range(cap - 1, self.cap - 1, -1))
            self.cap = cap
        row = self._free.pop()
        for a in (self.raw, self.cum_prev, self.cum_cur, self.emitted, self.peak):
            a[row] = 0.0
        self.begin[row], self.end[row] = 0.0, np.inf
        self.slot_of_row[row] = slot
        self.row_of[slot] = row
        return row

    def free(self, slot: int) -> None:
        row = self.row_of.pop(slot)
        self.slot_of_row[row] = -1
        self._free.append(row)


class HostNode:
    """This Linux host as a MEASURE node (see the module docstring).

    ``proc``/``sys``: where procfs and sysfs are (tests give a fixture directory);
    ``clock``: wall-clock µs; ``sleep``: seconds; ``threads``: read every thread's schedstat
    (process READY-TIME and DISPATCHES, and the CPU queue where /proc/schedstat is missing);
    ``exits``: where the final counters of threads that end come from (an object with
    ``take()`` returning :class:`collector.node.taskstats.ThreadExit` records and ``lost``):
    ``"auto"`` opens the kernel's taskstats exit notifications on the real /proc (None where
    they are unavailable, ``exits_missing`` says why), None reads none.
    """

    def __init__(
        self,
        topology: HostTopology | None = None,
        *,
        proc: str | Path = "/proc",
        sys: str | Path = "/sys",
        start_us: int | None = None,
        step_us: int = 60 * SECOND,
        hooks: NodeHooks | None = None,
        catalog: Catalog | None = None,
        clock: Callable[[], int] | None = None,
        sleep: Callable[[float], None] | None = None,
        clk_tck: int | None = None,
        threads: bool = True,
        exits: Any = "auto",
    ) -> None:
        self.proc, self.sys = Path(proc), Path(sys)
        self.topo = topology or host_topology(proc=self.proc)
        self.catalog = catalog or load_catalog()
        self.step_us = int(step_us)
        self.hooks: NodeHooks = hooks if hooks is not None else NullHooks()
        self.clock = clock or (lambda: time.time_ns() // 1000)
        self.sleep = sleep or time.sleep
        self.clk_tck = clk_tck or os.sysconf("SC_CLK_TCK")
        self.threads = threads
        self.tables: dict[str, EntityTable] = {e.name: EntityTable(e) for e in self.catalog}
        self._state = {e: _TypeState(self.tables[e].entity, COUNTERS[e]) for e in ENTITY_TYPES}
        # per live thread (tid, start): its process and its counters at the latest reading
        self._threads: dict[tuple[int, int], tuple[Any, np.ndarray]] = {}
        self._pending: dict[Any, np.ndarray] = {}   # see _apply_exits
        self._ended: dict[Any, float] = {}          # processes that ended: when
        self._done: set[Any] = set()                # … and are stopped, while /proc lists them
        self.exits_missing: str | None = None
        if exits == "auto":
            exits = None
            if self.threads and self.proc == Path("/proc"):
                exits, self.exits_missing = open_exit_watch(sorted(_read_cpu_times(self.proc, 100)))
        elif exits is None:
            self.exits_missing = "exit reports not asked for"
        self.exits = exits
        self._task_time = 0.0      # Σ CPUs' user + nice + system µs at the latest reading
        self.task_time_seen = 1.0  # share of it the threads' run time accounted for (last 10 readings)
        self._seen: deque[tuple[float, float]] = deque(maxlen=10)
        self._boot_us = 0.0
        self._reading_at = 0
        self._cpu_down: list[int] = []     # CPU slots gone offline / back online, for the next step
        self._cpu_up: list[int] = []
        self.readings = 0
        self.read_cpu_s = 0.0      # CPU time spent reading /proc (overhead figures)
        self._prev_at = self._cur_at = self.clock()
        self.now_us = int(start_us) if start_us is not None else self._cur_at
        self._read(first=True)

    def close(self) -> None:
        """Stop listening for thread exits (the node reads nothing more)."""
        if self.exits is not None and hasattr(self.exits, "close"):
            self.exits.close()

    @property
    def queue_note(self) -> str | None:
        """What the CPU queue misses on this host, in words (None: nothing): where the kernel
        has no /proc/schedstat and no taskstats exit reports reach the node, the run time and
        run delay of threads that end between two readings."""
        if getattr(self, "_has_schedstat", True) or self.exits is not None:
            lost = getattr(self.exits, "lost", 0)
            return None if not lost else (
                f"CPU-QTIME: {lost} batches of thread exit reports were dropped by the kernel "
                "(socket buffer full); their threads' last run time and run delay are missing")
        seen = min(1.0, max(0.0, self.task_time_seen))
        return ("CPU-QTIME and process READY-TIME miss threads that end between two readings "
                f"(no /proc/schedstat; {self.exits_missing}): the threads read accounted for "
                f"{100 * seen:.0f} % of the CPUs' task time over the latest readings, so the queue "
                f"is up to about {100 * (1 - seen):.0f} % low; processes lose their last step")

    # ------------------------------------------------------------------ time

    def advance(self, until_us: int) -> None:
        """Bring the node to until_us (waiting for it when it is in the future), a step at a
        time on the step grid."""
        until_us = int(until_us)
        if self.readings == 1 and self._cur_at < self.now_us < until_us:
            # made before its start: what happens until then is not the first step's
            wait = self.now_us - self.clock()
            if wait > 0:
                self.sleep(wait / SECOND)
            self._read(first=False)
            for st in self._state.values():
                st.emitted[:] = st.cum_cur
            self._prev_at = self._cur_at
        while self.now_us < until_us:
            t = min((self.now_us // self.step_us + 1) * self.step_us, until_us)
            if t > self._cur_at:
                wait = t - self.clock()
                if wait > 0:
                    self.sleep(wait / SECOND)
                self._read(first=False)
            self._step(t)

    def _step(self, t: int) -> None:
        t0 = self.now_us
        cpus = self.tables["cpu"]
        for slot in self._cpu_up:
            cpus.alive[slot] = True
            self.hooks.cpu_reloaded(int(cpus.cpu[slot]), t0)
        self._cpu_up.clear()
        for e, st in self._state.items():
            table = self.tables[e]
            # an entity starts in the step it began in (a process at its birth), not before
            waiting = []
            for slot in st.to_start:
                begin = st.begin[st.row_of[slot]]
                if begin >= t:
                    waiting.append(slot)
                    continue
                table.alive[slot] = True
                self.hooks.entity_started(e, slot, max(t0, int(begin)))
            st.to_start[:] = waiting
            # ... and stops at its end when the kernel told it (else at this step's end)
            stopping: dict[int, int] = {}
            later = []
            for slot in st.to_stop:
                if slot in waiting:                # began and ended at this step's end
                    waiting.remove(slot)
                end = st.end[st.row_of[slot]]
                if end > t and np.isfinite(end):
                    later.append(slot)
                else:
                    stopping[slot] = t if not np.isfinite(end) else max(t0, int(end))
            rows = np.flatnonzero(st.slot_of_row >= 0)
            if rows.size:
                slots = st.slot_of_row[rows]
                alive = table.alive[slots]
                rows, slots = rows[alive], slots[alive]
            if rows.size:
                # the value at t, interpolated between the two readings that bracket it (or the
                # entity's birth and exit, when they fall between them)
                a = np.maximum(float(self._prev_at), st.begin[rows])
                b = np.minimum(float(self._cur_at), st.end[rows])
                span = b - a
                frac = np.where(span > 0, np.clip((t - a) / np.where(span > 0, span, 1.0), 0.0, 1.0), 1.0)
                value = st.cum_prev[rows] + (st.cum_cur[rows] - st.cum_prev[rows]) * frac[:, None]
                inc = value - st.emitted[rows]
                if e == "cpu":
                    # a CPU is busy at most the time measured: what /proc/stat's ticks give
                    # beyond it at a reading (a tick or so) is carried to the next step
                    for c in ("cpu_busy_time", "intr_busy_time"):
                        inc[:, st.col[c]] = np.minimum(inc[:, st.col[c]], float(t - t0))
                measured = table.xptr[slots] >= 0
                if measured.any():
                    m_rows, m_slots = rows[measured], slots[measured]
                    acc = np.zeros((m_rows.size, st.width))
                    acc[:, st.cols] = inc[measured]
                    peak = np.zeros_like(acc)
                    peak[:, st.cols] = st.peak[m_rows]
                    at = np.array([stopping.get(int(x), t) for x in m_slots], dtype=np.int64)
                    for when in np.unique(at).tolist():   # a stopping entity: at its end
                        sel = np.flatnonzero(at == when)
                        order = sel[np.argsort(m_slots[sel], kind="stable")]  # ascending slots, as a node reports
                        self.hooks.xctr(e, m_slots[order], table.xptr[m_slots[order]], acc[order],
                                        np.zeros_like(acc[order]), peak[order], int(when))
                st.emitted[rows] += inc
            for slot, when in stopping.items():
                table.alive[slot] = False
                self.hooks.entity_stopped(e, slot, when)
                st.free(slot)
            st.to_stop[:] = later
        for slot in self._cpu_down:
            cpus.alive[slot] = False
            self.hooks.cpu_failed(int(cpus.cpu[slot]), t)
            self._state["cpu"].free(slot)
        self._cpu_down.clear()
        self.now_us = t

    # ------------------------------------------------------------------ readings

    def _read(self, *, first: bool) -> None:
        cpu0 = time.thread_time()
        at = self.clock()
        self._boot_us = self._boot_time(at)
        self._reading_at = at
        self._ended = {}
        items = self._scan(first)
        self._prev_at, self._cur_at = (at, at) if first else (self._cur_at, at)
        for e, st in self._state.items():
            self._apply(e, st, items[e], first)
        self.readings += 1
        self.read_cpu_s += time.thread_time() - cpu0

    def _apply(self, e: str, st: _TypeState, items: dict[Any, _Item], first: bool) -> None:
        """One reading of one entity type: new entities (to start at the next step), the
        monotone counters at this reading, entities gone (to stop at the next step's end)."""
        table = self.tables[e]
        st.cum_prev[:] = st.cum_cur
        gone = set(st.slot_of) - set(items)
        ended = self._ended if e == "process" else {}
        for key, it in items.items():
            slot = st.slot_of.get(key)
            if slot is None:
                slot = table.add(cpu=it.cpu, at_us=self.now_us, transient=not first, **it.ids)
                st.slot_of[key] = slot
                row = st.new_row(slot)
                # after the first reading an entity counts from its birth (a process, a new
                # device or interface); the first reading and a CPU back online are baselines
                if first or e == "cpu":
                    st.raw[row] = it.raw
                else:
                    st.begin[row] = it.begin
                if not first:
                    table.alive[slot] = False      # it starts at the next step
                    if e == "cpu":
                        self._cpu_up.append(slot)
                    else:
                        st.to_start.append(slot)
            else:
                row = st.row_of[slot]
            delta = np.maximum(it.raw - st.raw[row], 0.0)
            st.raw[row] = it.raw
            st.cum_cur[row] = st.cum_prev[row] + delta + (0.0 if it.inc is None else it.inc)
            if it.peak is not None:
                st.peak[row] = it.peak
        for key, end in ended.items():      # the kernel reported its exit: it stops at it
            self._done.add(key)
            slot = st.slot_of.pop(key, None)
            if slot is not None:
                st.end[st.row_of[slot]] = end
                st.to_stop.append(slot)
        for key in gone:
            slot = st.slot_of.pop(key)
            if e == "cpu":
                if slot in self._cpu_up:
                    self._cpu_up.remove(slot)
                    st.free(slot)
                else:
                    self._cpu_down.append(slot)
            elif slot in st.to_start:          # seen by one reading only: never started
                st.to_start.remove(slot)
                st.free(slot)
            else:
                st.to_stop.append(slot)

    def _scan(self, first: bool) -> dict[str, dict[Any, _Item]]:
        items: dict[str, dict[Any, _Item]] = {e: {} for e in ENTITY_TYPES}
        self._scan_cpus(items["cpu"])
        self._scan_discs(items["disc"])
        self._scan_lines(items["line"])
        self._scan_processes(items["process"], items["cpu"], first)
        return items

    def _boot_time(self, at: int) -> float:
        """Wall-clock µs of the boot (process start times count clock ticks from it): the
        reading's time less /proc/uptime; 0 where it cannot be read."""
        text = _read(self.proc / "uptime")
        try:
            return at - float(text.split()[0]) * SECOND if text else 0.0
        except (ValueError, IndexError):
            return 0.0

    def _vec(self, e: str, values: dict[str, float]) -> np.ndarray:
        v = np.zeros(self._state[e].n_counters)
        col = self._state[e].col
        for name, x in values.items():
            v[col[name]] = x
        return v

    def _scan_cpus(self, out: dict[Any, _Item]) -> None:
        sched = _read_schedstat(self.proc)
        self._has_schedstat = sched is not None
        for cpu, (busy, intr) in _read_cpu_times(self.proc, self.clk_tck).items():
            values = {"cpu_busy_time": busy, "intr_busy_time": intr}
            if sched is not None and cpu in sched:
                values["cpu_qtime"], values["dispatches"] = sched[cpu]
            out[cpu] = _Item({"cpu_type": self.topo.cpu_type}, cpu, self._vec("cpu", values))

    def _block_devices(self) -> set[str] | None:
        try:
            return set(os.listdir(self.sys / "block"))
        except OSError:
            return None

    def _scan_discs(self, out: dict[Any, _Item]) -> None:
        whole = self._block_devices()
        known = self._state["disc"].slot_of
        for name, v in _read_diskstats(self.proc).items():
            if whole is not None and name not in whole:
                continue   # a partition: its I/O is its disc's
            reads, rsect, rms, writes, wsect, wms, inflight, ticks, weighted = (
                v[0], v[2], v[3], v[4], v[6], v[7], v[8], v[9], v[10])
            discards = v[11]
            if name not in known and reads + writes + discards == 0:
                continue   # never used (spare loop or ram devices): not a DISC until it is
            it = _Item({"device_name": "$" + name.upper(), "pin": 0, "path": "P", "linux_name": name},
                       -1, self._vec("disc", {
                           "requests": reads + writes + discards, "reads": reads, "writes": writes,
                           "input_bytes": rsect * SECTOR, "output_bytes": wsect * SECTOR,
                           "device_qbusy_time": ticks * 1000.0, "request_qtime": weighted * 1000.0,
                           "read_qtime": rms * 1000.0, "write_qtime": wms * 1000.0}))
            it.peak = self._vec("disc", {"request_qtime": inflight})
            out[name] = it

    def _scan_lines(self, out: dict[Any, _Item]) -> None:
        known = self._state["line"].slot_of
        for name, v in _read_netdev(self.proc).items():
            rx_bytes, rx_packets, rx_errs = v[0], v[1], v[2]
            tx_bytes, tx_packets, tx_errs = v[8], v[9], v[10]
            if name not in known and rx_packets + tx_packets == 0:
                continue   # never carried a packet
            out[name] = _Item({"device_name": "$" + name.upper(), "pin": 0, "linux_name": name}, -1,
                              self._vec("line", {
                                  "requests": rx_packets + tx_packets, "reads": rx_packets,
                                  "writes": tx_packets, "retries": rx_errs + tx_errs,
                                  "input_bytes": rx_bytes, "output_bytes": tx_bytes,
                                  "input_data_bytes": rx_bytes, "output_data_bytes": tx_bytes}))

    def _scan_processes(self, out: dict[Any, _Item], cpus: dict[Any, _Item], first: bool) -> None:
        """Every process, and its threads' increase since the previous reading: run delay and
        timeslices (process READY-TIME and DISPATCHES), and run time + run delay charged to
        the CPU a thread last ran on where /proc/schedstat is missing. Then the threads that
        ended (_apply_exits)."""
        us = SECOND / self.clk_tck
        known = self._state["process"].slot_of
        pcol = self._state["process"].col
        col_ready, col_disp = pcol["ready_time"], pcol["dispatches"]
        cpu_q, cpu_d = (self._state["cpu"].col[c] for c in ("cpu_qtime", "dispatches"))
        per_cpu = not self._has_schedstat
        if per_cpu:
            for it in cpus.values():
                it.inc = np.zeros_like(it.raw)
        old = self._threads
        threads: dict[tuple[int, int], tuple[Any, np.ndarray]] = {}
        ran = 0.0
        done, self._done = self._done, set()
        for p in _read_processes(self.proc, self.threads):
            f = p.fields
            key = (p.pid, p.start)
            if key in done or (f[0] == "Z" and key not in known):
                self._done.add(key)     # ended (a zombie until its parent reaps it): stopped
                continue
            busy = (int(f[11]) + int(f[12])) * us
            io = p.io
            ios = (io.get("syscr", 0) + io.get("syscw", 0), io.get("wchar", 0), io.get("rchar", 0))
            it = _Item({}, -1, self._vec("process", {
                "cpu_busy_time": busy, "ready_time": busy,
                "page_faults": int(f[7]) + int(f[9]),
                "messages_sent": ios[0], "sent_bytes": ios[1], "returned_bytes": ios[2]}))
            it.inc = np.zeros_like(it.raw)
            # a thread's I/O is its process's when it is the only one (else unknown: NaN)
            tio = ios if len(p.threads) == 1 else (np.nan,) * 3
            for tid, tstart, tcpu, run, delay, slices, faults in p.threads:
                tkey = (tid, tstart)
                vals = np.array([run, delay, slices, faults, *tio], dtype=float)
                threads[tkey] = (key, vals)
                prev = old.get(tkey)
                if prev is not None:
                    d = np.maximum(vals[:3] - prev[1][:3], 0.0)
                elif first:
                    continue     # the baseline
                else:            # a thread born since the previous reading counts from birth
                    d = vals[:3]
                ran += d[0]
                it.inc[col_ready] += d[1]
                it.inc[col_disp] += d[2]
                if per_cpu and tcpu in cpus:
                    cpu_inc = cpus[tcpu].inc
                    assert cpu_inc is not None  # (per_cpu: set above)
                    cpu_inc[cpu_q] += d[0] + d[1]
                    cpu_inc[cpu_d] += d[2]
            if key not in known:
                it.ids = self._process_ids(p)
                it.cpu = int(f[36])
                it.begin = self._boot_us + p.start * us if self._boot_us else 0.0
            out[key] = it
        if self.exits is not None:
            ran += self._apply_exits(out, cpus, threads, old, first)
        self._threads = threads
        task_time = sum(float(it.raw[0] - it.raw[1]) for it in cpus.values())  # busy − interrupts
        if not first and self.threads and task_time > self._task_time:
            self._seen.append((ran, task_time - self._task_time))
            self.task_time_seen = sum(r for r, _ in self._seen) / sum(t for _, t in self._seen)
        self._task_time = task_time

    def _apply_exits(self, out: dict[Any, _Item], cpus: dict[Any, _Item],
                     threads: dict[tuple[int, int], tuple[Any, np.ndarray]],
                     old: dict[tuple[int, int], tuple[Any, np.ndarray]], first: bool) -> float:
        """The threads that ended since the previous reading, with their final counters (taken
        after the scan: a thread gone from /proc has its exit report queued already). Each
        adds its increase since it was last read (since birth when it never was): run time +
        run delay to the queue of the CPU it ended on (where /proc/schedstat is missing), run
        delay and timeslices to its process. A process that ended takes its final counters:
        its last reading's plus its threads' increase since (run time, faults, I/O: what
        /proc/<pid>/stat and io no longer show), and stops at its exit. Returns the run time
        added."""
        exits = self.exits.take()
        if first:
            return 0.0
        us = SECOND / self.clk_tck
        pst = self._state["process"]
        pcol = pst.col
        cols = [pcol[c] for c in ("cpu_busy_time", "ready_time", "dispatches", "page_faults",
                                  "messages_sent", "sent_bytes", "returned_bytes")]
        cpu_q, cpu_d = (self._state["cpu"].col[c] for c in ("cpu_qtime", "dispatches"))
        per_cpu = not self._has_schedstat
        by_tid: dict[int, list[tuple[int, int]]] = {}
        for tkey in (*threads, *old):
            by_tid.setdefault(tkey[0], []).append(tkey)
        by_pid = {key[0]: key for key in (*pst.slot_of, *out)}
        gone_inc: dict[Any, np.ndarray] = {}
        late: dict[Any, np.ndarray] = {}
        ran = 0.0
        for ex in exits:
            match: tuple[int, int] | None = None  # the thread this exit report is of
            for cand in by_tid.get(ex.tid, ()):
                born_s = (self._boot_us + cand[1] * us) / SECOND
                if not self._boot_us or abs(born_s - ex.start_s) <= 2.0:
                    match = cand
                    break
            in_scan = match is not None and match in threads
            base_of = (None if match is None else threads.get(match) if in_scan else old.get(match))
            base = base_of[1] if base_of is not None else np.zeros(7)
            final = np.array([ex.run_us, ex.delay_us, ex.slices, ex.faults, ex.syscalls, ex.wchar,
                              ex.rchar])
            d = np.nan_to_num(np.maximum(final - base, 0.0))
            ran += d[0]
            if per_cpu and ex.cpu in cpus:
                cpu_inc = cpus[ex.cpu].inc
                assert cpu_inc is not None  # (per_cpu: set when the CPUs were read)
                cpu_inc[cpu_q] += d[0] + d[1]
                cpu_inc[cpu_d] += d[2]
            pkey = base_of[0] if base_of is not None else by_pid.get(ex.tgid or ex.tid)
            if in_scan:
                assert match is not None
                threads[match] = (pkey, final)      # read again while a zombie: nothing more
            if pkey is None:
                continue                            # a process born and gone between readings
            v = np.zeros(7)
            v[0], v[1], v[2], v[3], v[4:] = d[0], d[0] + d[1], d[2], d[3], d[4:]
            if pkey in out:
                p_inc = out[pkey].inc
                assert p_inc is not None  # (set when the process was read)
                p_inc[cols[1]] += d[1]
                p_inc[cols[2]] += d[2]
                if in_scan:     # ended after its process was read: the rest shows at the next
                    rest = v.copy()                                # reading, unless the
                    rest[1], rest[2] = d[0], 0.0                   # process ended too
                    late[pkey] = late.get(pkey, np.zeros(7)) + rest
            else:
                gone_inc[pkey] = gone_inc.get(pkey, np.zeros(7)) + v
            if ex.last_of_process:
                at = (self._boot_us + match[1] * us + ex.elapsed_us) if match and self._boot_us else ex.seen_us
                self._ended[pkey] = float(min(at, self._reading_at))
        for pkey in self._ended:
            if pkey in out:                     # read, then ended: its threads' rest
                leftover = late.pop(pkey, None)
                p_inc = out[pkey].inc
                if leftover is not None and p_inc is not None:
                    p_inc[cols] += leftover
            elif pkey in pst.slot_of:           # ended before the scan: since its last reading
                row = pst.row_of[pst.slot_of[pkey]]
                it = _Item({}, -1, pst.raw[row].copy())
                it.inc = np.zeros_like(it.raw)
                extra = gone_inc.get(pkey, np.zeros(7)) + self._pending.get(pkey, np.zeros(7))
                it.inc[cols] += extra
                out[pkey] = it
        self._pending = late
        return ran

    def _process_ids(self, p: _Proc) -> dict[str, Any]:
        f = p.fields
        prio, rt = int(f[15]), int(f[37])
        priority = 40 + rt if prio < 0 else max(1, 40 - prio)  # MEASURE: higher = more urgent
        kernel = int(f[6]) & PF_KTHREAD or p.pid == 2 or int(f[1]) == 2
        program = ""
        if not kernel:
            try:
                program = os.readlink(self.proc / str(p.pid) / "exe").removesuffix(" (deleted)")
            except OSError:
                program = ""
        return {"pin": p.pid, "process_name": p.comm,
                "program_file_name": program or f"[{p.comm}]", "priority": priority}
