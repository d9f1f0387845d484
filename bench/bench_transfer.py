"""Benchmark: import and export at the speed of the database (issue 31, item 4).

    .venv/bin/python bench/bench_transfer.py [--hours 4] [--seed 7] [--url URL]

All in one run, on the embedded PostgreSQL (its own data in .data/bench-transfer) unless --url
names another server: a ref16 day (`measuredb backfill --node ref16 --days 1`, a fixed
window), then the first --hours hours of it (--hours 24: the whole day):

* export: `measuredb export --system '\\REF16' --tier interval --entity all -o FOLDER` as CSV
  and as Parquet (subprocesses), against a raw ``COPY (SELECT * FROM t) TO STDOUT (FORMAT
  csv)`` of the very same rows from bare tables;
* import: `measuredb import FOLDER` of the CSV export into an empty database (condensing
  every tier included), the same files one command each (configuration.json first), and the
  Parquet folder, against a raw ``COPY t FROM STDIN (FORMAT csv)`` of the same CSV files into
  bare tables (typed columns: text, bigint, timestamptz), with each import's peak RSS.

Ratios are rates against the raw COPY of the same run (raw seconds / seconds: 1.0 is the
database's own speed; the target is at least 0.5). :func:`transfer_ratios` measures them on a
server that already holds the data (bench_scale can call it after its own backfill);
:func:`markdown` prints them. Prints Markdown (bench/run.py appends it to RESULTS.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg import sql

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore")

from core import schema  # noqa: E402
from core.database import drop_database, ensure_database, start_embedded, with_dbname  # noqa: E402
from core.importer import layout_for  # noqa: E402

BIN = REPO / ".venv" / "bin"


@dataclass
class Timed:
    seconds: float
    peak_mb: float = 0.0


@dataclass
class Transfer:
    """What transfer_ratios measured (seconds; rows and bytes of the interval-record files)."""

    rows: int = 0
    files: int = 0
    csv_bytes: int = 0
    export: dict[str, Timed] = field(default_factory=dict)  # csv, parquet
    raw_copy_to: float = 0.0
    raw_copy_from: float = 0.0
    imports: dict[str, Timed] = field(default_factory=dict)  # csv folder, csv one by one, parquet folder

    def ratios(self) -> dict[str, float]:
        """Rate of each way ÷ the raw COPY's rate (≥ 0.5 is the target)."""
        out = {f"export {k}": self.raw_copy_to / v.seconds for k, v in self.export.items()}
        out |= {f"import {k}": self.raw_copy_from / v.seconds for k, v in self.imports.items()}
        return out


def run_timed(args: list[str], env: dict[str, str]) -> Timed:
    """Run a command; its wall time and peak RSS (VmHWM, read while it runs)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    status = Path(f"/proc/{proc.pid}/status")
    hwm = 0

    def watch() -> None:
        nonlocal hwm
        while proc.poll() is None:
            try:
                for line in status.read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        hwm = max(hwm, int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.2)

    with ThreadPoolExecutor(1) as pool:
        pool.submit(watch)
        out, err = proc.communicate()
    took = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {out[-2000:]}{err[-2000:]}")
    return Timed(took, hwm / 1024)


def fresh(admin: str, name: str) -> str:
    drop_database(admin, name)
    ensure_database(admin, name)
    url = with_dbname(admin, name)
    schema.apply(url, mode="off")
    return url


def _bare_columns(path: Path) -> list[tuple[str, str]]:
    """(column, type) of a bare table for an interval-record CSV file."""
    with path.open(encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split(",")
    lay = layout_for(header, None, str(path))
    ints = set(lay.counter_col) | {c for _, c, rng in lay.ids if rng is not None}
    ints |= {c for c in (lay.delta, lay.error, lay.cpu) if c is not None}
    times = {lay.from_, lay.to}
    return [(h, "timestamptz" if i in times else "bigint" if i in ints else "text") for i, h in enumerate(header)]


def raw_copy(admin: str, files: list[Path], out: Path) -> tuple[float, float, int]:
    """COPY the CSV files into bare tables of an empty database, then COPY the rows out again
    as CSV: (seconds in, seconds out, rows)."""
    url = with_dbname(admin, "bench_transfer_raw")
    drop_database(admin, "bench_transfer_raw")
    ensure_database(admin, "bench_transfer_raw")
    rows = 0
    with psycopg.connect(url, autocommit=True) as c:
        tables = []
        for k, path in enumerate(files):
            t = sql.Identifier(f"t{k}")
            c.execute(sql.SQL("CREATE TABLE {} ({})").format(t, sql.SQL(", ").join(
                sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(typ)) for n, typ in _bare_columns(path))))
            tables.append(t)
        t0 = time.perf_counter()
        for t, path in zip(tables, files, strict=True):
            with c.cursor() as cur, path.open("rb") as f:
                with cur.copy(sql.SQL("COPY {} FROM STDIN (FORMAT csv, HEADER)").format(t)) as cp:
                    while data := f.read(1 << 20):
                        cp.write(data)
                rows += cur.rowcount
        copy_in = time.perf_counter() - t0
        t0 = time.perf_counter()
        with out.open("wb") as sink:
            for t in tables:
                with c.cursor() as cur, cur.copy(
                        sql.SQL("COPY (SELECT * FROM {}) TO STDOUT (FORMAT csv, HEADER)").format(t)) as cp:
                    for chunk in cp:
                        sink.write(chunk)
        copy_out = time.perf_counter() - t0
    drop_database(admin, "bench_transfer_raw")
    return copy_in, copy_out, rows


def transfer_ratios(admin: str, source_url: str, work: Path, *, system: str = "\\REF16",
                    lo: str | None = None, hi: str | None = None, imports: bool = True) -> Transfer:
    """Export the interval records of `system` in [lo, hi) from source_url (CSV and Parquet),
    import them into empty databases of the same server (`admin`: its maintenance database's
    URL; not with imports=False) and COPY the same rows into and out of bare tables; work
    holds the files."""
    r = Transfer()
    env = {k: v for k, v in os.environ.items() if k != "MEASUREDB_DATA_DIR"}
    window = [*(["--from", lo] if lo else []), *(["--to", hi] if hi else [])]
    for fmt in ("csv", "parquet"):
        env["DATABASE_URL"] = source_url
        r.export[fmt] = run_timed([str(BIN / "measuredb"), "export", "--system", system, "--tier", "interval",
                                   "--entity", "all", *window, "--format", fmt, "-o", str(work / fmt)], env)
    csvs = sorted(p for p in (work / "csv").glob("*.csv"))
    r.files, r.csv_bytes = len(csvs), sum(p.stat().st_size for p in csvs)
    r.raw_copy_from, r.raw_copy_to, r.rows = raw_copy(admin, csvs, work / "raw-out.csv")
    if not imports:
        return r
    for name, args in (("CSV, the folder", [[str(work / "csv")]]),
                       ("CSV, one file at a time",
                        [[str(work / "csv" / "configuration.json")], *([str(p)] for p in csvs)]),
                       ("Parquet, the folder", [[str(work / "parquet")]])):
        env["DATABASE_URL"] = fresh(admin, "bench_transfer_target")
        steps = [run_timed([str(BIN / "measuredb"), "import", *a], env) for a in args]
        r.imports[name] = Timed(sum(s.seconds for s in steps), max(s.peak_mb for s in steps))
    drop_database(admin, "bench_transfer_target")
    return r


def markdown(r: Transfer, what: str) -> str:
    lines = [f"{what}: {r.rows:,} interval records in {r.files} CSV files ({r.csv_bytes / 1e9:.2f} GB).\n",
             "| way | seconds | rows/s | ÷ raw COPY rate | peak RSS |", "|---|---:|---:|---:|---:|",
             f"| raw COPY FROM (CSV into bare tables) | {r.raw_copy_from:.1f} | {r.rows / r.raw_copy_from:,.0f} "
             "| 1.00 | |",
             f"| raw COPY TO (CSV from bare tables) | {r.raw_copy_to:.1f} | {r.rows / r.raw_copy_to:,.0f} | 1.00 | |"]
    ratios = r.ratios()
    for k, v in r.export.items():
        lines.append(f"| `measuredb export` {k} | {v.seconds:.1f} | {r.rows / v.seconds:,.0f} "
                     f"| {ratios[f'export {k}']:.2f} | {v.peak_mb:.0f} MB |")
    for k, v in r.imports.items():
        lines.append(f"| `measuredb import` {k} (condensing included) | {v.seconds:.1f} | {r.rows / v.seconds:,.0f} "
                     f"| {ratios[f'import {k}']:.2f} | {v.peak_mb:.0f} MB |")
    folder, one = r.imports.get("CSV, the folder"), r.imports.get("CSV, one file at a time")
    if folder and one:
        lines.append(f"\nfolder ÷ one by one (time): {folder.seconds / one.seconds:.2f} (target ≤ 1)")
    lines.append("\nTargets: every ratio ≥ 0.5 (issue 31, item 4).")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=int, default=4, help="hours of the ref16 day exported and imported (24: all)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--url", help="admin URL of a server to use instead of the embedded one")
    ap.add_argument("--source", help="database on that server already holding the ref16 day from --start "
                                     "(no backfill)")
    ap.add_argument("--start", help="first local day of the ref16 data (default: two days ago)")
    ap.add_argument("--no-import", action="store_true", help="exports and the raw COPY only")
    a = ap.parse_args()
    server = None
    if a.url:
        admin = a.url
    else:
        server = start_embedded(REPO / ".data" / "bench-transfer")
        admin = server.admin_url()
    try:
        day = date.fromisoformat(a.start) if a.start else date.today() - timedelta(days=2)  # within raw retention
        lo = datetime.combine(day, datetime.min.time())
        source = a.source
        backfill = None
        if source is None:
            source = fresh(admin, "bench_transfer_source")
            env = {k: v for k, v in os.environ.items() if k != "MEASUREDB_DATA_DIR"} | {"DATABASE_URL": source}
            backfill = run_timed([str(BIN / "measuredb"), "backfill", "--node", "ref16", "--days", "1",
                                  "--start", lo.date().isoformat(), "--seed", str(a.seed)], env)
        hi = lo + timedelta(hours=a.hours)
        with tempfile.TemporaryDirectory(prefix="bench-transfer-") as tmp:
            r = transfer_ratios(admin, source, Path(tmp), lo=lo.isoformat(), hi=hi.isoformat(),
                                imports=not a.no_import)
        if a.source is None:
            drop_database(admin, "bench_transfer_source")
    finally:
        if server is not None:
            server.stop()
    print("### bench_transfer: import and export against raw COPY (issue 31, item 4)\n")
    what = (f"ref16 (seed {a.seed}), {'the whole day' if a.hours >= 24 else f'the first {a.hours} hour' + ('s' if a.hours != 1 else '') + ' of a day'} "
            f"from {lo.date()}" + (f" (backfilled in {backfill.seconds:.0f} s)" if backfill else ""))
    print(markdown(r, what))


if __name__ == "__main__":
    main()
