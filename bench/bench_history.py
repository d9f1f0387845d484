"""Condensing costs what arrived, not what is stored (issue 14): condensing one hour of the
16-CPU reference node `ref16` with 1 day and with 30 days of history before it.

    .venv/bin/python bench/bench_history.py [--days 30] [--seed 7]

Two databases of the embedded PostgreSQL under .data/bench-history, kept between runs
(BENCH_REUSE=1 reuses them with this checkout's schema): `measuredb backfill --node ref16`
of 1 day and of D days (D = 30: about 40 minutes on this machine). In each, the last complete
hour is condensed again as a collector's slice condenses it (_measure.note_intervals +
_measure.condense(system, 2000, false): its hour, record, DISCOPEN and terminal tiers, its
shift and day rows; months deferred), median of 5, each in a transaction rolled back; and the
month-level rows that slice leaves (_measure.condense_pending_months: month and year tiers,
monthly rollups, done once per backfill and per upkeep turn). Target: the hour within 1.5×
between 1 and D days.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore")

from core import schema  # noqa: E402
from core.database import drop_database, ensure_database, start_embedded, with_dbname  # noqa: E402

DATA_DIR = REPO / ".data" / "bench-history"
REUSE = os.environ.get("BENCH_REUSE") == "1"


def build(admin: str, name: str, days: int, seed: int) -> tuple[str, float]:
    url = with_dbname(admin, name)
    with psycopg.connect(admin, autocommit=True) as c:
        exists = c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    if REUSE and exists:
        schema.apply(url, mode="off")
        return url, 0.0
    drop_database(admin, name)
    ensure_database(admin, name)
    schema.apply(url, mode="off")
    env = dict(os.environ, DATABASE_URL=url, MEASUREDB_DATA_DIR=str(DATA_DIR / name))
    t = time.perf_counter()
    subprocess.run([str(REPO / ".venv/bin/measuredb"), "backfill", "--node", "ref16", "--days", str(days),
                    "--seed", str(seed)], env=env, check=True, capture_output=True)
    wall = time.perf_counter() - t
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("VACUUM ANALYZE")
    return url, wall


def measure(url: str, reps: int = 5) -> dict[str, float]:
    hour_ms, month_ms = [], []
    with psycopg.connect(url) as c:
        sid, last = c.execute("SELECT system_id, date_trunc('hour', durable_until) - INTERVAL '1 hour'"
                              " FROM _measure.collector_state").fetchone()
        stored = c.execute("SELECT count(*) FROM _measure.tier_shift").fetchone()[0]
        size = c.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        days_raw, values = c.execute(
            "SELECT count(DISTINCT _measure.hour_of(r.from_at)) / 24.0,"
            " coalesce(sum(r.n * k.k), 0)::bigint FROM _measure.interval_run r"
            " JOIN (SELECT type_code, count(*) AS k FROM _measure.counter_role GROUP BY 1) k USING (type_code)"
        ).fetchone()
        horizon = c.execute("SELECT extract(day FROM keep) FROM _measure.retention WHERE class = 'raw'").fetchone()
        for _ in range(reps):
            c.execute("SELECT _measure.note_intervals(%s::smallint, %s, %s)", (sid, last, last))
            t = time.perf_counter()
            c.execute("SELECT _measure.condense(%s::smallint, 2000, false)", (sid,))
            hour_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            c.execute("SELECT _measure.condense_pending_months(%s::smallint)", (sid,))
            month_ms.append((time.perf_counter() - t) * 1000)
            c.rollback()
    return {"hour": statistics.median(hour_ms), "months": statistics.median(month_ms), "shift_rows": stored,
            "size": size, "raw_days": float(days_raw), "values": values,
            "horizon_days": float(horizon[0]) if horizon and horizon[0] is not None else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    server = start_embedded(DATA_DIR, dbname="postgres")
    admin = server.admin_url()
    one, one_s = build(admin, "history_1", 1, args.seed)
    many, many_s = build(admin, f"history_{args.days}", args.days, args.seed)
    load0 = os.getloadavg()[0]
    a, b = measure(one), measure(many)
    load1 = os.getloadavg()[0]
    server.stop()
    built = "reused" if REUSE and not (one_s or many_s) else f"backfilled in {one_s:.0f} s and {many_s:.0f} s"
    print(f"### Condensing an hour with 1 and {args.days} days of history (bench_history.py)\n")
    print(f"\\REF16 at 1-minute intervals, every entity; databases {built}. The last complete hour condensed "
          f"again as a collector slice does (months deferred), median of 5; then the month-level rows it left. "
          f"Load average (1 min) before / after: {load0:.1f} / {load1:.1f} on {os.cpu_count()} cores.\n")
    print(f"| measure | 1 day | {args.days} days | ratio | target |\n|---|---:|---:|---:|---|")
    print(f"| condensing one hour (hour, record, DISCOPEN, terminal tiers; its shifts and days), ms | "
          f"{a['hour']:.0f} | {b['hour']:.0f} | **{b['hour'] / a['hour']:.2f}×** | ≤ 1.5× |")
    print(f"| its month-level rows (month, year tiers; monthly rollups), once per backfill / upkeep turn, ms | "
          f"{a['months']:.0f} | {b['months']:.0f} | {b['months'] / a['months']:.2f}× | |")
    print(f"| shift-tier rows stored | {a['shift_rows']:,} | {b['shift_rows']:,} | | |")
    print(f"| database size after the backfill, GiB (bytes per counter value) | {a['size'] / 2**30:.2f} "
          f"({a['size'] / max(1, a['values']):.2f}) | {b['size'] / 2**30:.2f} ({b['size'] / max(1, b['values']):.2f}) | | |")
    if b["horizon_days"]:
        per_day = (b["size"] - a["size"]) / max(1.0, b["raw_days"] - a["raw_days"])
        budget = a["size"] + per_day * (b["horizon_days"] - a["raw_days"])
        print(f"\nDisk budget of the raw horizon ({b['horizon_days']:.0f} days of raw data kept, then tiers only): "
              f"{per_day / 2**30:.2f} GiB per further day of ref16, so about **{budget / 2**30:.1f} GiB** for "
              f"{b['horizon_days']:.0f} days of one 16-CPU node; ten such nodes about {10 * budget / 2**30:.0f} GiB "
              f"(tiers beyond the horizon add kilobytes per hour).")


if __name__ == "__main__":
    main()
