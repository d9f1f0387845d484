"""Benchmark: the host node (this Linux machine as a MEASURE node) side by side with sysstat,
and the node's own CPU use.

    .venv/bin/python bench/bench_host.py [--interval-s 10] [--count 12] [--overhead-min 3]
        [--queue-steps 5,60] [--queue-window-s 120]

1. Validation: the host node under MEASMON and `sar -u ALL -P ALL -q` / `iostat -x` over the
   same --count intervals of --interval-s, under a known load (a CPU burner pinned to one CPU, a
   dd writing a file with O_DIRECT). Targets: CPU busy % within 2 points per CPU, disc
   utilisation within 2 points, disc average queue within 10 % (collector/hostcheck.py).
   Skipped, saying so, where sysstat is missing (Debian: apt-get install sysstat).
2. The CPU queue: the node's CPU-QTIME at --queue-steps step lengths against an independent
   reading once a second over the same --queue-window-s (collector/hostcheck.py measure_queue:
   /proc/schedstat per CPU where the kernel has it, else every thread's run + wait and the
   taskstats exit reports), under a burner and a loop of short-lived processes on one CPU.
   Target: within 5 % (per CPU with /proc/schedstat, the machine without). Where the kernel has
   no /proc/schedstat the node is also run without the exit reports, to show what it would miss.
3. Overhead: the node, MEASMON measuring every entity (the collector's default measurement),
   interval records and the sink's encoding of the slices (everything but the database
   round trip) at 1-minute steps and intervals for --overhead-min minutes, no load: CPU time
   of that work / wall time. Target <= 1 % of one core.
4. For context, the whole collector process as deployed (`measuredb collector --node host`
   against a database: DATABASE_URL, or an embedded server under .data/bench-host) for
   --collector-min minutes: its CPU time (utime + stime of the process) / wall time. This adds
   what every collector does whatever its node: the control plane polled every second, the
   heartbeat, the slices written and condensed each minute. 0 skips it.

Prints Markdown (bench/run.py appends it to RESULTS.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore")

from collector.hostcheck import (  # noqa: E402
    ChurnLoad,
    Load,
    measure_queue,
    measure_side_by_side,
    sysstat_missing,
)
from collector.measure.measmon import Measmon, Measurement  # noqa: E402
from collector.node.host import SECOND, HostNode, host_topology  # noqa: E402
from collector.service import default_contab  # noqa: E402
from collector.sink import Pipeline  # noqa: E402
from core.catalog import load_catalog  # noqa: E402


def validation(interval_s: int, count: int) -> tuple[str, bool]:
    reason = sysstat_missing()
    if reason:
        return f"Validation against sysstat skipped: {reason}.\n", True
    with Load() as load:
        cmp = measure_side_by_side(interval_s, count, load=load)
    bad = cmp.failures()
    lines = [f"Validation: {count} intervals of {interval_s} s, a CPU burner on CPU {cmp.loaded_cpu} and dd "
             f"writing to {cmp.loaded_disc or '?'} (O_DIRECT), host node vs sysstat over the same window.",
             "", cmp.markdown(), "",
             "Result: " + ("all within limits" if not bad else "OUT OF LIMITS: " + "; ".join(bad)), ""]
    return "\n".join(lines), not bad


def queue(steps: list[int], window_s: int) -> tuple[str, bool]:
    """The node's CPU queue at each step length against a reading once a second, over the same
    window, under ChurnLoad (a burner and short-lived processes on one CPU); where the kernel
    has no /proc/schedstat, also the node without the exit reports (what it would miss)."""
    out, ok = [], True
    with ChurnLoad() as load:
        for step in steps:
            count = max(1, window_s // step)
            for exits in (True, False):
                cmp = measure_queue(step, count, load=load, exits=exits)
                if not exits and cmp.source == "schedstat":
                    break                      # the exit reports do not matter there
                bad = cmp.failures()
                ok = ok and (bad == [] or not exits)
                what = "with the exit reports" if exits else "without the exit reports (threads read only)"
                out += [f"CPU queue at {step}-s steps, {count} intervals, node {what}; burner and "
                        f"short-lived processes on CPU {load.cpu}.", "", cmp.markdown(), "",
                        "Result: " + ("within 5 %" if not bad else "OUT OF 5 %: " + "; ".join(bad)), ""]
                if cmp.note:
                    out += [f"The node's note (/health): {cmp.note}", ""]
    return "\n".join(out), ok


def overhead(minutes: int) -> tuple[str, bool]:
    catalog = load_catalog()
    topo = host_topology()
    step = 60 * SECOND
    now = time.time_ns() // 1000
    start = (now // step + 1) * step
    cpu0, wall0 = time.thread_time(), time.monotonic()
    node = HostNode(topo, step_us=step, catalog=catalog)
    pipeline = Pipeline(catalog, node.tables, system_id=1)
    mon = Measmon(node, pipeline.on_copy, catalog=catalog)
    mon.add(Measurement(1, "DEFAULT", default_contab(topo), start_us=start, interval_us=step))
    slice_bytes = 0
    busy_s = 0.0
    exits_cpu0 = node.exits.cpu_s() if node.exits is not None else 0.0
    forks0 = _forks()
    for k in range(minutes + 1):
        t = start + k * step
        # the wait for the minute is not the node's work: count CPU time of the work only
        wait = (t - time.time_ns() // 1000) / SECOND
        if wait > 0:
            time.sleep(wait)
        c0 = time.thread_time()
        mon.run_until(t)
        sl = pipeline.take(t)
        slice_bytes += sum(map(len, sl.runs)) + sum(map(len, sl.extras))
        busy_s += time.thread_time() - c0
    exits_cpu = (node.exits.cpu_s() if node.exits is not None else 0.0) - exits_cpu0
    forks = _forks() - forks0
    busy_s += exits_cpu                        # the thread draining the exit reports
    wall = time.monotonic() - wall0
    total_cpu = time.thread_time() - cpu0
    measured_wall = minutes * 60.0
    pct = 100 * busy_s / measured_wall
    P = node.tables["process"]
    threads = sum(len(os.listdir(f"/proc/{p}/task")) for p in os.listdir("/proc")
                  if p.isdigit() and os.path.isdir(f"/proc/{p}/task"))
    ok = pct <= 1.0
    lines = [
        f"Overhead: {minutes} min at 1-minute steps and intervals (every entity measured), no load.",
        "",
        "| figure | value |",
        "|---|---:|",
        f"| CPU time of node + MEASMON + interval records + sink encoding per minute | {1000 * busy_s / minutes:.1f} ms |",
        f"| **share of one core** (target <= 1 %) | **{pct:.3f} %** |",
        f"| /proc readings | {node.readings} |",
        f"| CPU time per /proc reading | {1000 * node.read_cpu_s / max(1, node.readings):.1f} ms |",
        f"| of which the thread draining the exit reports, per minute | {1000 * exits_cpu / minutes:.1f} ms "
        f"({forks / minutes:.0f} threads and processes created a minute, {1e6 * exits_cpu / max(1, forks):.0f} µs each) |",
        f"| entities: CPUs / discs / lines / processes seen | {node.tables['cpu'].n} / {node.tables['disc'].n} / "
        f"{node.tables['line'].n} / {P.n} |",
        f"| processes / threads on the machine at the end | {int(P.alive[: P.n].sum())} / {threads} |",
        f"| encoded slices (runs + copies) | {slice_bytes / 1024:.0f} KiB |",
        f"| wall time (incl. start-up and the wait for the first minute) | {wall:.0f} s (CPU {total_cpu:.2f} s) |",
        "",
        "Result: " + ("within the target" if ok else "ABOVE THE TARGET"),
        "",
    ]
    return "\n".join(lines), ok


def _forks() -> int:
    """Threads and processes created since boot (/proc/stat `processes`)."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("processes "):
            return int(line.split()[1])
    return 0


def _cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def collector_process(minutes: int) -> str:
    import psycopg

    from core import schema
    from core.database import drop_database, ensure_database, start_embedded, with_dbname

    server = None
    admin = os.environ.get("DATABASE_URL")
    if admin:
        admin = with_dbname(admin, "postgres")
    else:
        server = start_embedded(REPO / ".data" / "bench-host", dbname="postgres")
        admin = server.admin_url()
    drop_database(admin, "bench_host")
    ensure_database(admin, "bench_host")
    url = with_dbname(admin, "bench_host")
    schema.apply(url, mode="off")
    with tempfile.TemporaryDirectory() as data:
        env = dict(os.environ, DATABASE_URL=url, MEASUREDB_DATA_DIR=data, MEASUREDB_COLLECTOR_PROGRESS="off")
        proc = subprocess.Popen([sys.executable, "-m", "cli", "collector", "--node", "host"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
        try:
            time.sleep(15)                         # started, registered, first reading taken
            c0, t0 = _cpu_s(proc.pid), time.monotonic()
            time.sleep(minutes * 60)
            c1, t1 = _cpu_s(proc.pid), time.monotonic()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    with psycopg.connect(url) as c:
        intervals = c.execute("SELECT count(*) FROM _measure.interval_record").fetchone()[0]
    drop_database(admin, "bench_host")
    if server:
        server.stop()
    pct = 100 * (c1 - c0) / (t1 - t0)
    return "\n".join([
        f"The whole collector process (`measuredb collector --node host`, 1-minute intervals, writing to "
        f"PostgreSQL) for {minutes} min: **{pct:.2f} % of one core** ({c1 - c0:.2f} s CPU in {t1 - t0:.0f} s; "
        f"{intervals:,} interval records stored). Besides the node this is the collector's own "
        "machinery, the same for every node: the control plane polled every second, the heartbeat, "
        "each minute's slice written and condensed.", ""])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--interval-s", type=int, default=10)
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--overhead-min", type=int, default=3)
    ap.add_argument("--collector-min", type=int, default=3)
    ap.add_argument("--queue-steps", default="5,60", help="step lengths (s) of the CPU queue check; '' skips it")
    ap.add_argument("--queue-window-s", type=int, default=120)
    args = ap.parse_args()
    print("### The host node against sysstat, its CPU queue, and its overhead (bench_host.py)\n")
    print(f"Load average at the start: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}\n")
    text, ok1 = validation(args.interval_s, args.count)
    print(text, flush=True)
    steps = [int(x) for x in args.queue_steps.split(",") if x.strip()]
    if steps:
        text, ok3 = queue(steps, args.queue_window_s)
        print(text, flush=True)
        ok1 = ok1 and ok3
    text, ok2 = overhead(args.overhead_min)
    print(text, flush=True)
    if args.collector_min > 0:
        print(collector_process(args.collector_min), flush=True)
    return 0 if ok1 and ok2 else 1


if __name__ == "__main__":
    sys.exit(main())
