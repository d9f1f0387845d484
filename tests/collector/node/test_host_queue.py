"""The host node's CPU queue against an independent reading once a second, on this machine,
over the same window, under a known load (ChurnLoad in collector/hostcheck.py: a CPU burner and a
loop of short-lived processes pinned to one CPU: two tasks or more on its run queue all the
time, threads ending between any two readings); and a short-lived process's first and last
intervals. Real time: about 35 s per queue comparison; no timing is asserted.

CPU-QTIME counts the running task and the waiting ones (docs/host-node.md). Where the kernel
has /proc/schedstat the 1-s reading is its per-CPU run + wait time and the node must agree per
CPU within 5 %; where it has not, the 1-s reading is every thread's run + wait with the exit
reports of the threads that end (taskstats), and the node must agree for the machine within 5 %
(threads move between CPUs: a thread's time goes to the CPU it last ran on, which differs
between a 1-s and a 5-s reading)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collector.hostcheck import ChurnLoad, Recorder, measure_queue
from collector.measure.measmon import COPY_ENTITY_STOP, COPY_START
from collector.node.host import SECOND, HostNode
from collector.node.taskstats import open_exit_watch
from core.catalog import load_catalog

pytestmark = pytest.mark.slow


def _cpus() -> list[int]:
    return sorted(int(ln.split()[0][3:]) for ln in Path("/proc/stat").read_text().splitlines()
                  if ln.startswith("cpu") and ln[3].isdigit())


def _taskstats_missing() -> str | None:
    watch, why = open_exit_watch(_cpus())
    if watch is None:
        return why
    watch.close()
    return None


@pytest.fixture(autouse=True)
def _linux() -> None:
    if not Path("/proc/stat").exists():
        pytest.skip("no /proc on this system")


def test_queue_agrees_with_schedstat_per_cpu() -> None:
    if not Path("/proc/schedstat").exists():
        pytest.skip("this kernel has no /proc/schedstat (CONFIG_SCHEDSTATS off): "
                    "test_queue_without_schedstat_counts_ended_threads covers it")
    with ChurnLoad() as load:
        cmp = measure_queue(5, 6, load=load)
    print("\n" + cmp.markdown())
    assert cmp.source == "schedstat" and set(cmp.node) == set(_cpus())
    assert cmp.node[load.cpu] > 1.5, "the burner and the churn queue on their CPU"
    assert not cmp.failures(), "\n".join(cmp.failures()) + "\n" + cmp.markdown()


def test_queue_without_schedstat_counts_ended_threads() -> None:
    if Path("/proc/schedstat").exists():
        pytest.skip("this kernel has /proc/schedstat: the node reads the queue from it")
    reason = _taskstats_missing()
    if reason:
        pytest.skip(f"{reason}: the node's queue misses threads that end between readings "
                    "(its queue_note says how much)")
    with ChurnLoad() as load:
        cmp = measure_queue(5, 6, load=load)
    print("\n" + cmp.markdown())
    assert cmp.source == "threads+exits" and set(cmp.node) == set(_cpus())
    assert cmp.node[load.cpu] > 1.5, "the burner and the churn queue on their CPU"
    assert not cmp.failures(), "\n".join(cmp.failures()) + "\n" + cmp.markdown()
    assert cmp.note is None


BURN = "import time\nt = time.time() + {s}\nwhile time.time() < t:\n    pass\n"


def test_a_short_lived_process_has_its_first_and_last_step() -> None:
    """A child born in the middle of a 1-s step, burning 1.6 s of CPU: its record starts at its
    birth (not at the step's start), it stops at its exit, and its busy time over its
    intervals is the CPU time the kernel gave it (rusage), its last step included."""
    reason = _taskstats_missing()
    if reason:
        pytest.skip(f"{reason}: a process's last step is lost without the exit reports")
    catalog = load_catalog()
    start = (time.time_ns() // 1000 // SECOND + 2) * SECOND
    node = HostNode(start_us=start, step_us=SECOND, catalog=catalog)
    mon = Recorder(node, catalog, ("process",), start, SECOND)
    copies, batches = mon.copies, mon.batches
    mon.run_until(start + SECOND)
    time.sleep(max(0.0, (start + SECOND + 400_000 - time.time_ns() // 1000) / SECOND))
    born = time.time_ns() // 1000
    child = subprocess.Popen([sys.executable, "-c", BURN.format(s=1.6)])
    mon.run_until(start + 5 * SECOND)
    _, status, usage = os.wait4(child.pid, 0)
    node.close()
    assert status == 0
    table = node.tables["process"]
    slots = [s for s in range(table.n) if table.id_of(s)["pin"] == child.pid]
    assert len(slots) == 1, "the child is one process entity"
    slot = slots[0]
    first = [c.at_us for c in copies if c.kind == COPY_START and slot in c.slots.tolist()]
    last = [c.at_us for c in copies if c.kind == COPY_ENTITY_STOP and slot in c.slots.tolist()]
    assert len(first) == 1 and len(last) == 1
    # its start time in clock ticks: up to one tick (10 ms) before Popen's time, never earlier
    assert born - 20_000 <= first[0] <= born + 500_000
    assert first[0] > start + SECOND, "not the start of the step it was born in"
    assert first[0] < last[0] <= start + 5 * SECOND
    col = catalog.entity("process").index("cpu_busy_time")
    busy = sum(float(b.values[i, col]) for b in batches for i, s in enumerate(b.slots.tolist()) if s == slot)
    cpu_us = (usage.ru_utime + usage.ru_stime) * SECOND
    assert abs(busy - cpu_us) <= 0.05 * cpu_us + 30_000, f"busy {busy:.0f} µs vs rusage {cpu_us:.0f} µs"
