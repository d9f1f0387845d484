"""`make bench`: run every bench/bench_*.py and append its figures to bench/RESULTS.md.

Each benchmark prints Markdown (a heading and a table of medians and ratios measured in one
run). This runner adds the date and the machine and appends the lot to RESULTS.md.
Usage: python bench/run.py [NAME ...]   (NAME = bench_node, bench_ingest, …; default: all but
the slow ones, which run only by name: bench_history backfills 30 days of ref16, ~40 minutes;
bench_citus starts a Citus coordinator and workers and loads two ref16 systems three times,
1-8 minutes (the 8 were mostly entities registered one INSERT each, before 2026-11-27),
and needs Citus installed into the wheel, `make citus`; bench_transfer backfills a ref16 day and
exports and imports 4 hours of it three ways against raw COPY, about 10 minutes;
bench_analysis_truth backfills 35 days of demo with injected anomalies, ~30 minutes)
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
SLOW = {"bench_history", "bench_citus", "bench_transfer", "bench_analysis_truth"}


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{platform.node()}: {os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, "
            f"Python {platform.python_version()}, {platform.system()} {platform.release()}")


def main(names: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if not names:
        scripts = [s for s in scripts if s.stem not in SLOW]
    if names:
        scripts = [s for s in scripts if s.stem in names or s.name in names]
        if not scripts:
            print(f"no benchmark named {' '.join(names)}; have: "
                  f"{', '.join(s.stem for s in sorted(HERE.glob('bench_*.py')))}", file=sys.stderr)
            return 2
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    sections = [f"\n## Run of {stamp}\n\nMachine: {machine()}; load average at start {load}\n"]
    status = 0
    for script in scripts:
        print(f"== {script.name}", flush=True)
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              cwd=HERE.parent)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr[-4000:])
        if proc.returncode:
            status = 1
            sections.append(f"\n### {script.stem}: FAILED (exit {proc.returncode})\n")
        else:
            load = "/".join(f"{x:.1f}" for x in os.getloadavg())
            sections.append("\n" + proc.stdout.strip() + f"\n\n(load average after {script.stem}: {load})\n")
    with RESULTS.open("a") as f:
        if RESULTS.stat().st_size == 0 if RESULTS.exists() else True:
            f.write("# Benchmark results\n\nAppended by `make bench` (bench/run.py); newest last.\n")
        f.writelines(sections)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
