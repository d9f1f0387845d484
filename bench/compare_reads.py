"""One read path before and after a change, in one run on the same data (not a bench_* script:
it needs a revision; this machine's speed varies between sessions by 2x, so compare within a run,
not across RESULTS.md entries).

    .venv/bin/python bench/compare_reads.py REV [--drop-index NAME ...] [--drop-function SIGNATURE ...]

On the database bench_reads.py keeps (.data/bench-reads, 7 days of ref16): the idempotent schema
files of git revision REV (before) are run inside a transaction that is rolled back, after
dropping the indexes and functions named (those the change added), alternating with the
checked-out definitions (after); each read's median of 5, and whether both give the same rows
(count and md5 of every row as text).
"""

from __future__ import annotations

import argparse
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

from core.database import start_embedded, with_dbname  # noqa: E402

S, F, T = "'\\REF16'", "(SELECT max(durable_until) - INTERVAL '7 days' FROM _measure.collector_state)", \
    "(SELECT max(durable_until) FROM _measure.collector_state)"
LINES = ("(SELECT array_agg(DISTINCT ids->>'line_name') FROM _measure.entity e JOIN _measure.entity_type t "
         "USING (type_code) WHERE t.entity = 'terminal')")
DAY = "(SELECT (max(durable_until) AT TIME ZONE 'UTC')::date - 1 FROM _measure.collector_state)"
READS = {
    "slowest terminals (terminal_series, top 5)": f"measure.terminal_series({S}, {F}, {T}, NULL, {LINES}, 5)",
    "terminals table (terminal_summary, top 25)": f"measure.terminal_summary({S}, {F}, {T}, NULL, {LINES}, 25)",
    "terminal spread": f"measure.terminal_spread({S}, {F}, {T}, NULL, {LINES})",
    "user counters (userdef_series)": f"measure.userdef_series({S}, {F}, {T}, NULL, ARRAY['value'])",
    "processes (process_series)": f"measure.process_series({S}, {F}, {T}, NULL, ARRAY['busy'])",
    "condensation check, a day": f"measure.report_condensation_check({S}, {DAY})",
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rev", help="git revision whose schema/idempotent files are 'before'")
    ap.add_argument("--drop-index", action="append", default=[], help="an index the change added")
    ap.add_argument("--drop-function", action="append", default=[], help="a function the change added")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{args.rev}:schema/idempotent"], cwd=REPO,
                           check=True, capture_output=True, text=True).stdout.split()
    before = [subprocess.run(["git", "show", f"{args.rev}:schema/idempotent/{n}"], cwd=REPO, check=True,
                             capture_output=True, text=True).stdout
              for n in sorted(names) if n.endswith(".sql") and ".citus." not in n]
    server = start_embedded(REPO / ".data" / "bench-reads", dbname="postgres")
    url = with_dbname(server.admin_url(), "bench_reads")
    res: dict[str, dict[str, list]] = {k: {"after": [], "before": []} for k in READS}
    with psycopg.connect(url) as c:
        for _ in range(args.rounds):
            for variant in ("after", "before"):
                if variant == "before":
                    for ix in args.drop_index:
                        c.execute(f"DROP INDEX {ix}")
                    for fn in args.drop_function:
                        c.execute(f"DROP FUNCTION {fn}")
                    for sql in before:
                        c.execute(sql)
                for k, fn in READS.items():
                    q = f"SELECT count(*), md5(string_agg(x::text, ',')) FROM {fn} x"
                    c.execute(q).fetchall()
                    t = time.perf_counter()
                    answer = c.execute(q).fetchall()
                    res[k][variant].append((time.perf_counter() - t) * 1000)
                    res[k].setdefault("answer_" + variant, answer)
                c.rollback()
    server.stop()
    print(f"### Before and after {args.rev} (compare_reads.py), 7 days of \\REF16, median of {args.rounds}\n")
    print("| read | before ms | after ms | after / before | same rows |\n|---|---:|---:|---:|---|")
    for k, r in res.items():
        b, a = statistics.median(r["before"]), statistics.median(r["after"])
        same = "yes" if r["answer_before"] == r["answer_after"] else "**no**"
        print(f"| {k} | {b:.1f} | {a:.1f} | {a / b:.2f} | {same} |")


if __name__ == "__main__":
    main()
