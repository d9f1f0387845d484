"""`measuredb retention show|set|run|log`: how long each class of data is kept, and purges.

    measuredb retention show                    the policy, cut-offs and horizons
    measuredb retention set CLASS DURATION      raw | hour | day | month; 35d, 12w, 400 days, forever
    measuredb retention run [--dry-run]         purge now (the collector does it daily)
    measuredb retention log [--limit N]         the last purges: what each removed or held back

Through core/retention.py, the same as /admin/retention over the API.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Annotated

import typer

from cli.common import FormatOption, check_format, connection, emit, out, run
from core import retention

retention_app = typer.Typer(no_args_is_help=True,
                            help="Show or change how long data is kept; purge now.")
OPTIONS = {"class": "CLASS", "keep": "DURATION"}


def _fmt_keep(keep: timedelta | None) -> str:
    return "for ever" if keep is None else f"{keep.days} days"


@retention_app.command("show")
def show(output: FormatOption = "text") -> None:
    """The retention policy: how long each class is kept, its cut-off now, and what was purged."""
    def go() -> None:
        check_format(output)
        with connection() as conn:
            rows = [{**r, "keep_days": None if r["keep"] is None else r["keep"].days} for r in retention.show(conn)]
        emit(rows, [("class", "class"), ("keep_days", "kept"), ("cutoff", "cut-off now"),
                    ("purged_before", "purged before")], output,
             text=lambda r: [r["class"], _fmt_keep(r["keep"]),
                             r["cutoff"].isoformat(timespec="seconds") if r["cutoff"] else "-",
                             r["purged_before"].isoformat(timespec="seconds") if r["purged_before"] else "-"])
    run(go, options=OPTIONS)


@retention_app.command("set")
def set_(
    cls: Annotated[str, typer.Argument(metavar="CLASS", help="raw, hour, day or month")],
    duration: Annotated[str, typer.Argument(help="35d, 12w, 400 days, 2y, or forever")],
) -> None:
    """Keep CLASS for DURATION (each class at least as long as the one below it)."""
    def go() -> None:
        keep = retention.parse_keep(duration)
        with connection() as conn:
            retention.set_keep(conn, cls, keep)
        out.print(f"{cls} data kept {_fmt_keep(keep)}")
    run(go, options=OPTIONS)


@retention_app.command("run")
def run_(dry_run: Annotated[bool, typer.Option("--dry-run", help="report what would go, remove nothing")] = False,
         as_json: Annotated[bool, typer.Option("--json", help="the purge's record as JSON")] = False) -> None:
    """Apply the retention policy now (logged in _measure.purge_log)."""
    def go() -> None:
        with connection() as conn:
            result = retention.run(conn, dry_run=dry_run, requested_by="cli")
        if as_json:
            out.print_json(json.dumps(result))
        else:
            for line in retention.describe(result):
                out.print(line, markup=False)
    run(go, options=OPTIONS)


@retention_app.command("log")
def log(limit: Annotated[int, typer.Option(min=1, max=1000, help="purges to show")] = 10) -> None:
    """The last purges (also dry runs), newest first."""
    def go() -> None:
        with connection() as conn:
            rows = retention.log(conn, limit)
        for r in rows:
            out.print(f"#{r['purge_id']} {r['started_at'].isoformat(timespec='seconds')} by {r['requested_by']}"
                      f"{' (dry run)' if r['dry_run'] else ''}", markup=False)
            for line in retention.describe(r):
                out.print("  " + line, markup=False)
    run(go, options=OPTIONS)
