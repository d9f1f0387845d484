"""The cost of automatic analysis (issue 30, item 5; docs/analysis.md): condensing a day of the
16-CPU reference node `ref16` with and without the baselines and exceptions, and the latency of
the exceptions report and the health verdict for that day.

    .venv/bin/python bench/bench_analysis.py [--seed 7]

One `measuredb backfill --node ref16 --days 1` into the embedded PostgreSQL under
.data/bench-analysis-cost (BENCH_REUSE=1 reuses it with this checkout's schema). Four earlier weeks
of learned values are then stored for it (the day's values shifted back 1-4 weeks, scaled by
1.05, 0.9, 1.1 and 0.95: a steady system in its fifth week, up and down from week to week, so
no trend is learned), so that the analysis reads what it reads in
steady state. In the same run, alternately (off, on, off, on):
1. the whole day marked dirty and condensed (`_measure.condense`: hour tiers, record tiers,
   terminals, shifts, months, years) with `measuredb.analysis = off`, then on; the median of
   two each and their ratio. Target: ≤ 1.10.
2. the analysis alone (`_measure.condense_analysis` of the day's hours).
3. `measuredb report exceptions` and `measuredb report health-verdict` of the day (the queries of
   queries/, as measure_reader), median of 5 after one warm-up. Target: ≤ 50 ms each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import warnings
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore")

from core import reports, schema  # noqa: E402
from core.database import drop_database, ensure_database, start_embedded, with_dbname  # noqa: E402

DATA_DIR = REPO / ".data" / "bench-analysis-cost"  # bench_analysis_truth has .data/bench-analysis
REUSE = os.environ.get("BENCH_REUSE") == "1"
ROUNDS = 2

PRIOR_WEEKS = """
INSERT INTO _measure.hour_baseline (system_id, hour_at, entity, subject, item, value, holiday, weeks)
SELECT b.system_id, b.hour_at - k * INTERVAL '7 days', b.entity, b.subject, b.item,
       b.value * (ARRAY[1.05, 0.9, 1.1, 0.95]::float8[])[k],
       false, 0
  FROM _measure.hour_baseline b, generate_series(1, 4) k
 WHERE b.hour_at >= %(lo)s
"""


def load(admin: str, seed: int) -> str:
    url = with_dbname(admin, "bench_analysis")
    with psycopg.connect(admin, autocommit=True) as c:
        exists = c.execute("SELECT 1 FROM pg_database WHERE datname = 'bench_analysis'").fetchone()
    if REUSE and exists:
        schema.apply(url, mode="off")
        return url
    drop_database(admin, "bench_analysis")
    ensure_database(admin, "bench_analysis")
    schema.apply(url, mode="off")
    env = dict(os.environ, DATABASE_URL=url, MEASUREDB_DATA_DIR=str(DATA_DIR / "collector"))
    subprocess.run([str(REPO / ".venv/bin/measuredb"), "backfill", "--node", "ref16", "--days", "1",
                    "--seed", str(seed)], env=env, check=True, capture_output=True)
    return url


def one(c: psycopg.Connection, sql: str, params: tuple = ()) -> tuple:
    row = c.execute(sql, params).fetchone()
    assert row is not None
    return row


def condense_day(url: str, sys_id: int, lo: datetime, hi: datetime, analysis: bool) -> float:
    with psycopg.connect(url) as c:
        c.execute(f"SET measuredb.analysis = {'on' if analysis else 'off'}")
        c.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)", (sys_id, lo, hi - timedelta(hours=1)))
        t = time.perf_counter()
        c.execute("SELECT _measure.condense(%s::smallint, 100000)", (sys_id,))
        c.commit()
        return time.perf_counter() - t


def analysis_alone(url: str, sys_id: int, lo: datetime, hi: datetime) -> tuple[float, int]:
    with psycopg.connect(url) as c:
        hours = [lo + timedelta(hours=h) for h in range(int((hi - lo) / timedelta(hours=1)))]
        t = time.perf_counter()
        rows = one(c, "SELECT _measure.condense_analysis(%s::smallint, %s)", (sys_id, hours))[0]
        c.commit()
        return time.perf_counter() - t, rows


def latency_ms(url: str, name: str, params: dict) -> tuple[float, int]:
    with psycopg.connect(url) as c:
        c.execute("SET ROLE measure_reader")
        sql = reports.report(name).sql
        bound = reports.bind(name, **params)
        c.execute(sql, bound).fetchall()
        times, n = [], 0
        for _ in range(5):
            t = time.perf_counter()
            n = len(c.execute(sql, bound).fetchall())
            times.append((time.perf_counter() - t) * 1000)
        return statistics.median(times), n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    server = start_embedded(DATA_DIR, dbname="postgres")
    try:
        t0 = time.perf_counter()
        url = load(server.admin_url(), args.seed)
        backfill_s = time.perf_counter() - t0
        with psycopg.connect(url) as c:
            sys_id, name, zone = one(c, "SELECT system_id, system_name, time_zone FROM _measure.system "
                                        "ORDER BY system_id LIMIT 1")
            first, last = one(c, "SELECT min(hour_at), max(hour_at) FROM _measure.cpu_hour WHERE system_id = %s",
                              (sys_id,))
            # the day: every hour the backfill condensed; the verdict's day: the local day of its middle
            tz = ZoneInfo(zone)
            lo, hi = first, last + timedelta(hours=1)
            day = (lo + (hi - lo) / 2).astimezone(tz).date()
            c.execute("DELETE FROM _measure.hour_baseline WHERE hour_at < %(lo)s", {"lo": first})  # a rerun
            c.execute(PRIOR_WEEKS, {"lo": first})
            c.commit()
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("VACUUM ANALYZE _measure.hour_baseline")
        off, on = [], []
        for _ in range(ROUNDS):
            off.append(condense_day(url, sys_id, lo, hi, analysis=False))
            on.append(condense_day(url, sys_id, lo, hi, analysis=True))
        alone, stored = analysis_alone(url, sys_id, lo, hi)
        exc_ms, exc_rows = latency_ms(url, "exceptions", {"system": name, "from_at": lo, "to_at": hi})
        ver_ms, ver_rows = latency_ms(url, "health-verdict", {"system": name, "day": day})
    finally:
        server.stop()
    m_off, m_on = statistics.median(off), statistics.median(on)
    print("### bench_analysis: automatic analysis on a ref16 day (issue 30)\n")
    print(f"`measuredb backfill --node ref16 --days 1 --seed {args.seed}`: {backfill_s:.0f} s "
          f"({'reused' if REUSE else 'fresh'}); {lo:%Y-%m-%d %H:%M} to {hi:%Y-%m-%d %H:%M} UTC, verdict of {day} ({zone}), 4 earlier weeks of learned values stored; "
          f"{stored:,} baseline rows for the day.\n")
    print("| measure | value | target |")
    print("|---|---:|---:|")
    print(f"| condense the day, analysis off (median of {ROUNDS}: {', '.join(f'{x:.2f}' for x in off)} s) "
          f"| {m_off:.2f} s | |")
    print(f"| condense the day, analysis on (median of {ROUNDS}: {', '.join(f'{x:.2f}' for x in on)} s) "
          f"| {m_on:.2f} s | |")
    print(f"| ratio on / off | {m_on / m_off:.3f} | ≤ 1.10 |")
    print(f"| the analysis alone (`_measure.condense_analysis` of the day's hours) | {alone:.2f} s | |")
    print(f"| `report exceptions` of the day ({exc_rows:,} rows), median of 5 | {exc_ms:.1f} ms | ≤ 50 ms |")
    print(f"| `report health-verdict` of the day ({ver_rows} rows), median of 5 | {ver_ms:.1f} ms | ≤ 50 ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
