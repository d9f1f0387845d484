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
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from collector.measure.contab import ContabBuilder
from collector.measure.copies import IntervalBuilder
from collector.measure.measmon import Measmon, Measurement
from collector.node.host import SECOND, HostNode
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
    builder = IntervalBuilder(catalog)
    batches = []

    def sink(copy):
        b = builder.on_copy(copy)
        if b is not None and len(b):
            batches.append(b)

    mon = Measmon(node, sink, catalog=catalog)
    contab = ContabBuilder()
    contab.add("cpu", None)
    contab.add("disc", None)
    mon.add(Measurement(1, "CHECK", contab.build(), start_us=start, interval_us=interval_s * SECOND))
    mon.run_until(start + count * interval_s * SECOND)
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
