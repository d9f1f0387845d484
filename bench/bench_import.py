"""Benchmark: a small import on the demo database (issue 28, item 7: "returns in about a
second"), end to end as a user meets it.

    .venv/bin/python bench/bench_import.py [--days 1] [--repeat 5]

A `demo` history of --days days (`measuredb backfill --node demo --seed 1986`) in an embedded
server of its own, kept running as `make run` keeps it. Then, --repeat times each, median:

* `measuredb import cpu.csv` of the README's 3 CPU rows (each time on other days, so each
  stores its rows and condenses its 2 hours), as a subprocess: Python's start, the
  command line, the database, the import and its condensing;
* `measuredb system list`, the same way: what every command costs before it does anything;
* POST /import of the same kind of file through the API (in process, warm).

The ratio import / system list says how much of the import is the import itself.
Prints Markdown (bench/run.py appends it to RESULTS.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore")

import psycopg  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from api.main import create_app  # noqa: E402
from api.settings import ApiSettings  # noqa: E402
from core import tokens  # noqa: E402
from core.database import start_embedded  # noqa: E402

BIN = Path(sys.executable).parent
CSV = """SYSTEM,CPU,FROM-TIMESTAMP,TO-TIMESTAMP,DELTA-TIME,CPU-BUSY-TIME,CPU-QTIME,SWAPS
\\DEMO,0,{d}T09:00:00-05:00,{d}T09:15:00-05:00,900000000,450000000,900000000,90
\\DEMO,0,{d}T09:15:00-05:00,{d}T09:30:00-05:00,900000000,225000000,450000000,180
\\DEMO,1,{d}T10:00:00-05:00,{d}T10:15:00-05:00,900000000,90000000,0,0
"""


def timed(args: list[str], env: dict[str, str], cwd: Path) -> float:
    t = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - t
    if done.returncode:
        raise SystemExit(f"{' '.join(args)} failed: {done.stdout}{done.stderr}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        env["MEASUREDB_DATA_DIR"] = str(work / "data")
        server = start_embedded(work / "data")  # running, as under `make run`
        try:
            backfill = timed([str(BIN / "measuredb"), "backfill", "--node", "demo", "--days", str(a.days),
                              "--start", "2026-11-17", "--seed", "1986"], env, work)
            imports, lists, api = [], [], []
            for k in range(a.repeat):
                f = work / f"cpu{k}.csv"
                f.write_text(CSV.format(d=f"2026-03-{k + 2:02d}"))
                imports.append(timed([str(BIN / "measuredb"), "import", f.name], env, work))
                lists.append(timed([str(BIN / "measuredb"), "system", "list"], env, work))
            url = server.url()
            with server_token(url) as token, TestClient(create_app(ApiSettings(), database_url=url)) as c:
                for k in range(a.repeat):
                    body = CSV.format(d=f"2026-04-{k + 2:02d}").encode()
                    t = time.perf_counter()
                    r = c.post("/import", content=body, headers={"Authorization": f"Bearer {token}"})
                    api.append(time.perf_counter() - t)
                    assert r.status_code == 200 and r.json()["stored"] == 3, r.text
        finally:
            server.stop()
    imp, lst = statistics.median(imports), statistics.median(lists)
    print("### bench_import: a small import on the demo database\n")
    print(f"Demo history: {a.days} day(s), backfilled in {backfill:.0f} s; the embedded server kept running; "
          f"median of {a.repeat}.\n")
    print("| what | median | min | max |\n|---|---:|---:|---:|")
    for name, xs in (("`measuredb import` of 3 CPU rows (stores 3, condenses 2 hours)", imports),
                     ("`measuredb system list` (any command's fixed cost)", lists),
                     ("POST /import of 3 CPU rows (API, warm)", api)):
        print(f"| {name} | {statistics.median(xs):.2f} s | {min(xs):.2f} s | {max(xs):.2f} s |")
    print(f"\nimport / system list: {imp / lst:.2f} (target: a small import in about a second)")


@contextmanager
def server_token(url: str) -> Iterator[str]:
    """A write token for the bench's API calls, revoked afterwards."""
    with psycopg.connect(url) as conn:
        token = tokens.create(conn, "bench-import", "write")
    try:
        yield token
    finally:
        with psycopg.connect(url) as conn:
            tokens.revoke(conn, "bench-import")


if __name__ == "__main__":
    main()
