"""The host node side by side with sysstat: the same minutes, a known load, the figures compared.

Used by tests/collector/node/test_host_sysstat.py (short) and bench/bench_host.py (longer,
and the node's own CPU use at 1-minute intervals). Runs

* a known load: a CPU burner pinned to one core and a ``dd`` writing a file with O_DIRECT
  (steady disc traffic, not bursts of page-cache write-back), started a few seconds before;
* ``sar -u ALL -P ALL -q`` and ``iostat -x -y -d -o JSON`` for ``count`` intervals;
* the host node under MEASMON with one measurement of every CPU and DISC at the same
  interval, started on the same second, its interval records made by the copies code;

and compares per CPU busy % (sar: 100 − %idle − %iowait − %steal, the node: CPU-BUSY-TIME),
per disc utilisation (iostat %util, the node: DEVICE-QBUSY-TIME) and average request queue
(iostat aqu-sz, the node: REQUEST-QTIME / DELTA-TIME), averaged over the window.

The CPU queue (CPU-QTIME / DELTA-TIME, running and waiting tasks) has its own comparison,
``measure_queue``: the node against a reading once a second over the same window
(``QueueSampler``: /proc/schedstat per CPU, or every thread's run + wait and the exit reports
of the threads that end), under ``ChurnLoad`` (a burner and short-lived processes on one CPU);
used by tests/collector/node/test_host_queue.py and bench/bench_host.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from collector.measure.contab import ContabBuilder
from collector.measure.copies import IntervalBuilder
from collector.measure.measmon import Measmon, Measurement
from collector.node.host import SECOND, HostNode
from collector.node.taskstats import open_exit_watch
from core.catalog import load_catalog

CPU_POINTS = 2.0          # CPU busy %: within 2 points per CPU
UTIL_POINTS = 2.0         # disc utilisation %: within 2 points
QUEUE_RATIO = 0.10        # disc average queue: within 10 %
QUEUE_FLOOR = 0.02        # … or within this much of an idle disc's queue (≈ 0)


def sysstat_missing() -> str | None:
    """Why the comparison cannot run here, or None."""
    missing = [t for t in ("sar", "iostat") if shutil.which(t) is None]
    if missing:
        return (f"{' and '.join(missing)} not installed (Debian: apt-get install sysstat); "
                "the host node cannot be compared with sysstat here")
    return None


@dataclass
class Load:
    """A CPU burner pinned to `cpu` and a dd loop writing `mb` MiB files in `directory`
    (the processes are ended, by their process group, on exit)."""

    cpu: int = -1            # -1: the first CPU this process may run on
    disc: bool = True
    directory: Path | None = None
    mb: int = 256
    procs: list[subprocess.Popen] = field(default_factory=list)
    target: Path | None = None

    def __enter__(self) -> Load:
        if self.cpu < 0:
            self.cpu = min(os.sched_getaffinity(0))
        burner = f"import os\nos.sched_setaffinity(0, {{{self.cpu}}})\nwhile True:\n    pass\n"
        self.procs.append(subprocess.Popen([sys.executable, "-c", burner], start_new_session=True))
        if self.disc:
            d = Path(tempfile.mkdtemp(prefix="measuredb-dd-", dir=self.directory or "/var/tmp"))
            self.target = d / "load.bin"
            flags = "oflag=direct" if _direct_io_ok(d) else "conv=fdatasync"
            loop = (f"while :; do dd if=/dev/zero of={self.target} bs=1M count={self.mb} "
                    f"{flags} status=none || exit 1; done")
            self.procs.append(subprocess.Popen(["sh", "-c", loop], start_new_session=True))
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)   # the process group this Load started
            except ProcessLookupError:
                pass
            p.wait(timeout=10)
        if self.target is not None:
            shutil.rmtree(self.target.parent, ignore_errors=True)

    def disc_name(self) -> str | None:
        """The whole block device holding the dd target (`vda`, `nvme0n1`), if any."""
        return None if self.target is None else block_device_of(self.target.parent)


def _direct_io_ok(directory: Path) -> bool:
    probe = directory / "probe"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600)
        os.close(fd)
        return True
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)


def block_device_of(path: Path) -> str | None:
    dev = os.stat(path).st_dev
    sysdev = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    try:
        real = sysdev.resolve()
    except OSError:
        return None
    if not real.exists():
        return None
    # a partition's sysfs folder sits inside its disc's
    return real.parent.name if (real / "partition").exists() else real.name


@dataclass
class Comparison:
    interval_s: int
    count: int
    cpu: dict[int, tuple[float, float]]             # cpu → (node busy %, sar busy %)
    util: dict[str, tuple[float, float]]            # disc → (node %, iostat %util)
    queue: dict[str, tuple[float, float]]           # disc → (node avg queue, iostat aqu-sz)
    cpu_qlen: dict[int, float]                      # cpu → node CPU-QTIME / DELTA-TIME
    runq_sz: float | None                           # sar -q runq-sz average (system-wide)
    loaded_disc: str | None = None
    loaded_cpu: int | None = None
    readings: int = 0
    read_cpu_s: float = 0.0

    def failures(self, discs: list[str] | None = None) -> list[str]:
        out = []
        for cpu, (n, s) in sorted(self.cpu.items()):
            if abs(n - s) > CPU_POINTS:
                out.append(f"CPU {cpu}: busy {n:.2f} % (node) vs {s:.2f} % (sar)")
        for d in discs if discs is not None else sorted(self.util):
            if d not in self.util:
                out.append(f"disc {d}: not in both")
                continue
            n, s = self.util[d]
            if abs(n - s) > UTIL_POINTS:
                out.append(f"disc {d}: utilisation {n:.2f} % (node) vs {s:.2f} % (iostat)")
            n, s = self.queue[d]
            if abs(n - s) > max(QUEUE_RATIO * abs(s), QUEUE_FLOOR):
                out.append(f"disc {d}: average queue {n:.3f} (node) vs {s:.3f} (iostat aqu-sz)")
        return out

    def markdown(self) -> str:
        rows = ["| what | host node | sysstat | difference | limit |", "|---|---:|---:|---:|---|"]
        for cpu, (n, s) in sorted(self.cpu.items()):
            mark = " (burner)" if cpu == self.loaded_cpu else ""
            rows.append(f"| CPU {cpu}{mark} busy % | {n:.2f} | {s:.2f} (sar) | {n - s:+.2f} pt | ±{CPU_POINTS:g} pt |")
        for d in sorted(self.util):
            n, s = self.util[d]
            mark = " (dd)" if d == self.loaded_disc else ""
            rows.append(f"| disc {d}{mark} utilisation % | {n:.2f} | {s:.2f} (iostat) | {n - s:+.2f} pt | ±{UTIL_POINTS:g} pt |")
            n, s = self.queue[d]
            rel = f"{100 * (n - s) / s:+.1f} %" if s else f"{n - s:+.3f}"
            rows.append(f"| disc {d}{mark} average queue | {n:.3f} | {s:.3f} (aqu-sz) | {rel} | ±{100 * QUEUE_RATIO:g} % |")
        qlen = sum(self.cpu_qlen.values())
        busy = sum(n for n, _ in self.cpu.values()) / 100
        if self.runq_sz is not None:
            rows.append(f"| run queue (all CPUs: waiting + running) | {qlen + busy:.2f} | {self.runq_sz:.2f} (sar -q runq-sz, sampled) | — | not compared |")
        return "\n".join(rows)


def _sar_averages(text: str) -> tuple[dict[int, float], float | None]:
    """Per-CPU busy % (100 − idle − iowait − steal) and runq-sz from `sar`'s Average lines."""
    busy: dict[int, float] = {}
    runq = None
    header: list[str] = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0] != "Average:":
            continue
        if any(p.startswith("%") or p == "runq-sz" for p in parts[1:]):
            header = parts[1:]
            continue
        row = dict(zip(header, parts[1:], strict=False))
        if "CPU" in row and "%idle" in row and row["CPU"].isdigit():
            v = {k: float(x.replace(",", ".")) for k, x in row.items() if k.startswith("%")}
            busy[int(row["CPU"])] = 100.0 - v["%idle"] - v.get("%iowait", 0.0) - v.get("%steal", 0.0)
        elif "runq-sz" in row:
            runq = float(row["runq-sz"].replace(",", "."))
    return busy, runq


def _iostat_averages(text: str) -> tuple[dict[str, float], dict[str, float]]:
    """Per device: mean %util and mean aqu-sz over iostat's JSON reports."""
    doc = json.loads(text)
    util: dict[str, list[float]] = {}
    queue: dict[str, list[float]] = {}
    for host in doc["sysstat"]["hosts"]:
        for stat in host["statistics"]:
            for d in stat.get("disk", []):
                name = d["disk_device"]
                util.setdefault(name, []).append(float(d["util"]))
                queue.setdefault(name, []).append(float(d.get("aqu-sz", d.get("avgqu-sz", 0.0))))
    return ({k: float(np.mean(v)) for k, v in util.items()},
            {k: float(np.mean(v)) for k, v in queue.items()})


class Recorder:
    """A node measured as the collector measures it: MEASMON with one measurement of every
    entity of `entities` from start_us at interval_us, its copies (``copies``) and the interval
    records made of them (``batches``), for the comparisons here and their tests."""

    def __init__(self, node: Any, catalog: Any, entities: tuple[str, ...], start_us: int,
                 interval_us: int) -> None:
        self.builder = IntervalBuilder(catalog)
        self.copies: list[Any] = []
        self.batches: list[Any] = []
        self.mon = Measmon(node, self._sink, catalog=catalog)
        contab = ContabBuilder()
        for entity in entities:
            contab.add(entity, None)
        self.mon.add(Measurement(1, "CHECK", contab.build(), start_us=start_us, interval_us=interval_us))

    def _sink(self, copy: Any) -> None:
        self.copies.append(copy)
        b = self.builder.on_copy(copy)
        if b is not None and len(b):
            self.batches.append(b)

    def run_until(self, t_us: int) -> None:
        self.mon.run_until(t_us)


def measure_side_by_side(interval_s: int, count: int, *, load: Load | None = None,
                         warmup_s: float = 3.0) -> Comparison:
    """Run the host node and sysstat over the same `count` intervals (see the module doc)."""
    reason = sysstat_missing()
    if reason:
        raise RuntimeError(reason)
    env = dict(os.environ, LC_ALL="C", S_TIME_FORMAT="ISO")
    # start on the interval grid (the node's step grid) at least warmup_s from now (the load
    # settles meanwhile): one reading per interval, at its end
    grid = interval_s * SECOND
    start = (time.time_ns() // 1000 + int(warmup_s * SECOND)) // grid * grid + grid
    time.sleep(max(0.0, (start - time.time_ns() // 1000) / SECOND))
    sar = subprocess.Popen(["sar", "-u", "ALL", "-P", "ALL", "-q", str(interval_s), str(count)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    iostat = subprocess.Popen(["iostat", "-x", "-y", "-d", "-o", "JSON", str(interval_s), str(count)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    catalog = load_catalog()
    node = HostNode(start_us=start, step_us=interval_s * SECOND, catalog=catalog)
    rec = Recorder(node, catalog, ("cpu", "disc"), start, interval_s * SECOND)
    rec.run_until(start + count * interval_s * SECOND)
    batches = rec.batches
    node.close()
    sar_out, sar_err = sar.communicate(timeout=interval_s + 30)
    io_out, io_err = iostat.communicate(timeout=interval_s + 30)
    if sar.returncode or iostat.returncode:
        raise RuntimeError(f"sysstat failed: sar {sar.returncode} {sar_err.strip()}; "
                           f"iostat {iostat.returncode} {io_err.strip()}")
    sar_busy, runq = _sar_averages(sar_out)
    io_util, io_queue = _iostat_averages(io_out)

    def totals(entity: str, counter: str) -> dict[int, tuple[float, float]]:
        col = catalog.entity(entity).index(counter)
        out: dict[int, list[float]] = {}
        for b in batches:
            if b.entity != entity:
                continue
            for i, slot in enumerate(b.slots.tolist()):
                acc = out.setdefault(slot, [0.0, 0.0])
                acc[0] += float(b.values[i, col])
                acc[1] += float(b.to_us - b.from_us[i])
        return {s: (v, dt) for s, (v, dt) in out.items()}

    cpus, discs = node.tables["cpu"], node.tables["disc"]
    busy = {int(cpus.cpu[s]): 100 * v / dt for s, (v, dt) in totals("cpu", "cpu_busy_time").items()}
    qlen = {int(cpus.cpu[s]): v / dt for s, (v, dt) in totals("cpu", "cpu_qtime").items()}
    name = {s: discs.id_of(s)["linux_name"] for s in range(discs.n)}
    util = {name[s]: 100 * v / dt for s, (v, dt) in totals("disc", "device_qbusy_time").items()}
    queue = {name[s]: v / dt for s, (v, dt) in totals("disc", "request_qtime").items()}
    return Comparison(
        interval_s=interval_s, count=count,
        cpu={c: (busy[c], sar_busy[c]) for c in sorted(busy) if c in sar_busy},
        util={d: (util[d], io_util[d]) for d in sorted(util) if d in io_util},
        queue={d: (queue[d], io_queue[d]) for d in sorted(queue) if d in io_queue},
        cpu_qlen=qlen, runq_sz=runq, loaded_disc=load.disc_name() if load else None,
        loaded_cpu=load.cpu if load else None,
        readings=node.readings, read_cpu_s=node.read_cpu_s)


# ---------------------------------------------------------------------------- the CPU queue

QLEN_RATIO = 0.05         # CPU queue (CPU-QTIME / DELTA-TIME): within 5 % of the 1-s reading
QLEN_FLOOR = 0.02         # … or within this much of an idle CPU's queue


def _per_cpu_schedstat(proc: Path) -> dict[int, float] | None:
    """Per CPU, ns run + ns waited on its run queue (/proc/schedstat fields 7 and 8)."""
    try:
        text = (proc / "schedstat").read_text()
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        p = line.split()
        if len(p) >= 10 and p[0].startswith("cpu") and p[0][3:].isdigit():
            out[int(p[0][3:])] = float(int(p[7]) + int(p[8]))
    return out or None


def _threads_now(proc: Path) -> dict[tuple[int, int], tuple[int, float]]:
    """Every thread (tid, start) → (CPU it last ran on, ns run + ns waited)."""
    out = {}
    for pid in os.listdir(proc):
        if not pid.isdigit():
            continue
        try:
            tids = os.listdir(proc / pid / "task")
        except OSError:
            continue
        for tid in tids:
            try:
                stat = (proc / pid / "task" / tid / "stat").read_text()
                sched = (proc / pid / "task" / tid / "schedstat").read_text().split()
            except OSError:
                continue
            f = stat[stat.rfind(")") + 2:].split()
            if len(f) < 37 or len(sched) < 2:
                continue
            out[(int(tid), int(f[19]))] = (int(f[36]), float(int(sched[0]) + int(sched[1])))
    return out


class QueueSampler:
    """An independent reading of the CPU queue once a second from `start_us` to `end_us`, in a
    thread: /proc/schedstat per CPU where the kernel has it; else every thread's run time + run
    delay (charged to the CPU it last ran on), once with the exit reports of the threads that
    end (taskstats, where available) and once without them."""

    def __init__(self, start_us: int, end_us: int, proc: Path = Path("/proc")) -> None:
        self.start_us, self.end_us, self.proc = start_us, end_us, proc
        self.schedstat = _per_cpu_schedstat(proc) is not None
        self.totals: dict[int, float] = {}         # cpu → µs × queue length over the window
        self.without_exits: dict[int, float] = {}  # (no /proc/schedstat) the threads read only
        self.exits_missing: str | None = None
        self._exits: Any = None
        if not self.schedstat:
            cpus = sorted(int(ln.split()[0][3:]) for ln in (proc / "stat").read_text().splitlines()
                          if ln.startswith("cpu") and ln[3].isdigit())
            self._exits, self.exits_missing = open_exit_watch(cpus)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> QueueSampler:
        self._thread.start()
        return self

    def join(self) -> None:
        self._thread.join()
        if self._exits is not None:
            self._exits.close()

    def _sleep_until(self, us: int) -> None:
        time.sleep(max(0.0, (us - time.time_ns() // 1000) / SECOND))

    def _run(self) -> None:
        self._sleep_until(self.start_us)
        if self.schedstat:
            first = _per_cpu_schedstat(self.proc) or {}
            t = self.start_us
            last = first
            while t < self.end_us:
                t = min(t + SECOND, self.end_us)
                self._sleep_until(t)
                last = _per_cpu_schedstat(self.proc) or last
            self.totals = {c: (last[c] - first[c]) / 1000 for c in first if c in last}
            return
        prev = _threads_now(self.proc)
        if self._exits is not None:
            self._exits.take()
        t = self.start_us
        while t < self.end_us:
            t = min(t + SECOND, self.end_us)
            self._sleep_until(t)
            now = _threads_now(self.proc)
            for key, (cpu, v) in now.items():
                old = prev.get(key)
                d = v - (old[1] if old else 0.0)
                self.without_exits[cpu] = self.without_exits.get(cpu, 0.0) + max(d, 0.0) / 1000
            if self._exits is not None:
                by_tid = {k[0]: k for k in (*now, *prev)}
                for ex in self._exits.take():
                    found = by_tid.get(ex.tid)
                    base = (now.get(found) or prev.get(found) or (0, 0.0))[1] if found else 0.0
                    fin = (ex.run_us + ex.delay_us) * 1000
                    self.totals[ex.cpu] = self.totals.get(ex.cpu, 0.0) + max(fin - base, 0.0) / 1000
                    if found is not None and found in now:
                        now[found] = (now[found][0], fin)
            prev = now
        if self._exits is not None:
            for cpu, v in self.without_exits.items():
                self.totals[cpu] = self.totals.get(cpu, 0.0) + v


@dataclass
class QueueComparison:
    interval_s: int
    count: int
    source: str                                   # what the 1-s reading read
    node: dict[int, float]                        # cpu → node CPU-QTIME / DELTA-TIME
    reading: dict[int, float]                     # cpu → the 1-s reading's queue
    without_exits: dict[int, float]               # cpu → the 1-s reading of live threads only
    busy: dict[int, float]                        # cpu → node CPU-BUSY-TIME / DELTA-TIME
    task_time_seen: float                         # node: share of the CPUs' task time its threads ran
    loadavg: str = ""
    loaded_cpu: int | None = None
    note: str | None = None

    def failures(self) -> list[str]:
        """Per CPU where /proc/schedstat gives each CPU's queue; else the machine's total (a
        thread's time is charged to the CPU it last ran on, which differs between a 1-s and a
        longer reading when threads move)."""
        pairs = ([(f"CPU {c}", self.node[c], self.reading[c]) for c in sorted(self.node) if c in self.reading]
                 if self.source == "schedstat" else
                 [("all CPUs", sum(self.node.values()), sum(self.reading.values()))])
        return [f"{what}: queue {n:.3f} (node) vs {r:.3f} (1-s reading)" for what, n, r in pairs
                if abs(n - r) > max(QLEN_RATIO * abs(r), QLEN_FLOOR)]

    def markdown(self) -> str:
        src = {"schedstat": "/proc/schedstat per CPU, run + wait",
               "threads+exits": "every thread's run + wait, and the exit reports (taskstats)",
               "threads": "every thread's run + wait (threads ending within a second missed)"}[self.source]
        rows = [f"1-s reading: {src}; load average {self.loadavg}", "",
                "| CPU | node queue | 1-s reading | difference | live threads only (1 s) | busy |",
                "|---|---:|---:|---:|---:|---:|"]
        for c in sorted(self.node):
            n, r = self.node[c], self.reading.get(c, 0.0)
            mark = " (burner)" if c == self.loaded_cpu else ""
            rel = f"{100 * (n - r) / r:+.1f} %" if r else f"{n - r:+.3f}"
            w = self.without_exits.get(c)
            rows.append(f"| {c}{mark} | {n:.3f} | {r:.3f} | {rel} | {'—' if w is None else f'{w:.3f}'} | {self.busy.get(c, 0):.3f} |")
        n, r = sum(self.node.values()), sum(self.reading.values())
        w = sum(self.without_exits.values()) if self.without_exits else None
        rel = f"{100 * (n - r) / r:+.1f} %" if r else "—"
        rows.append(f"| all | {n:.3f} | {r:.3f} | {rel} | {'—' if w is None else f'{w:.3f}'} | {sum(self.busy.values()):.3f} |")
        rows.append("")
        rows.append(f"Node: its threads and exit reports accounted for {100 * self.task_time_seen:.1f} % of the "
                    "CPUs' task time (/proc/stat user + nice + system) over its last readings.")
        return "\n".join(rows)


@dataclass
class ChurnLoad:
    """A CPU burner and a loop of short-lived processes (each a shell counting for a fraction
    of a second), both pinned to `cpu`: at least two tasks on its run queue all the time, and
    threads that end between any two readings."""

    cpu: int = -1
    procs: list[subprocess.Popen] = field(default_factory=list)

    def __enter__(self) -> ChurnLoad:
        if self.cpu < 0:
            self.cpu = min(os.sched_getaffinity(0))
        burner = f"import os\nos.sched_setaffinity(0, {{{self.cpu}}})\nwhile True:\n    pass\n"
        self.procs.append(subprocess.Popen([sys.executable, "-c", burner], start_new_session=True))
        child = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"
        churn = f"while :; do sh -c '{child}'; done"
        self.procs.append(subprocess.Popen(["taskset", "-c", str(self.cpu), "sh", "-c", churn],
                                           start_new_session=True))
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            p.wait(timeout=10)


def measure_queue(interval_s: int, count: int, *, load: ChurnLoad | None = None,
                  warmup_s: float = 3.0, exits: bool = True) -> QueueComparison:
    """The host node's CPU-QTIME (under MEASMON, `count` intervals of `interval_s`) and an
    independent reading of the queue once a second (QueueSampler) over the same window."""
    grid = interval_s * SECOND
    start = (time.time_ns() // 1000 + int(warmup_s * SECOND)) // grid * grid + grid
    end = start + count * grid
    catalog = load_catalog()
    node = HostNode(start_us=start, step_us=grid, catalog=catalog, exits="auto" if exits else None)
    sampler = QueueSampler(start, end).start()
    rec = Recorder(node, catalog, ("cpu",), start, grid)
    rec.run_until(end)
    batches = rec.batches
    node.close()
    sampler.join()
    cpus = node.tables["cpu"]
    entity = catalog.entity("cpu")
    q, b = entity.index("cpu_qtime"), entity.index("cpu_busy_time")
    qt: dict[int, float] = {}
    bt: dict[int, float] = {}
    for batch in batches:
        for i, slot in enumerate(batch.slots.tolist()):
            c = int(cpus.cpu[slot])
            qt[c] = qt.get(c, 0.0) + float(batch.values[i, q])
            bt[c] = bt.get(c, 0.0) + float(batch.values[i, b])
    span = end - start
    source = ("schedstat" if sampler.schedstat else
              "threads+exits" if sampler.exits_missing is None else "threads")
    return QueueComparison(
        interval_s=interval_s, count=count, source=source,
        node={c: v / span for c, v in qt.items()},
        reading={c: v / span for c, v in sampler.totals.items()} if sampler.totals or sampler.schedstat
        else {c: v / span for c, v in sampler.without_exits.items()},
        without_exits={c: v / span for c, v in sampler.without_exits.items()},
        busy={c: v / span for c, v in bt.items()}, task_time_seen=node.task_time_seen,
        loadavg=" ".join(Path("/proc/loadavg").read_text().split()[:3]),
        loaded_cpu=load.cpu if load else None, note=node.queue_note)
