"""`measuredb retention show|set|run|log`: how long each class of data is kept, and purges.

    measuredb retention show                    the policy, cut-offs and horizons
    measuredb retention set CLASS DURATION      raw | hour | day | month; 35d, 12w, 400 days, forever
    measuredb retention run [--dry-run]         purge now (the collector does it daily)
    measuredb retention log [--limit N]         the last purges: what each removed or held back

The policy is data (_measure.retention, schema/idempotent/026-retention.sql); the same is
served over the API to admin tokens (/admin/retention).
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Annotated, Any

import typer

retention_app = typer.Typer(no_args_is_help=True,
                            help="Show or change how long data is kept; purge now.")

CLASSES = ("raw", "hour", "day", "month")
_UNITS = {"d": 1, "day": 1, "days": 1, "w": 7, "week": 7, "weeks": 7, "y": 365, "year": 365, "years": 365}


def parse_keep(text: str) -> timedelta | None:
    """'35d', '12 weeks', '400 days', '2y' → a duration; 'forever' (or 'never') → None."""
    t = text.strip().lower()
    if t in ("forever", "never", "none"):
        return None
    m = re.fullmatch(r"(\d+)\s*([a-z]+)?", t)
    if not m or (m.group(2) or "d") not in _UNITS:
        raise ValueError(f"duration {text!r} is not one of: N days (35d, 35 days), N weeks (12w), "
                         "N years (2y), or forever")
    return timedelta(days=int(m.group(1)) * _UNITS[m.group(2) or "d"])


def _session():
    from cli.main import _database
    from core.settings import DatabaseSettings

    return _database(DatabaseSettings())


def _run(func):
    from cli.main import friendly

    return friendly(func)()


def _fmt_keep(keep: timedelta | None) -> str:
    return "for ever" if keep is None else f"{keep.days} days"


def show_rows(url: str) -> list[dict[str, Any]]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT class, keep, cutoff, purged_before FROM _measure.retention_show()").fetchall()
    return [{"class": c, "keep": k, "cutoff": cut, "purged_before": p} for c, k, cut, p in rows]


@retention_app.command("show")
def show() -> None:
    """The retention policy: how long each class is kept, its cut-off now, and what was purged."""
    from rich.table import Table

    from cli.main import out

    def go() -> None:
        url, server = _session()
        try:
            rows = show_rows(url)
        finally:
            if server:
                server.stop()
        table = Table("class", "kept", "cut-off now", "purged before")
        for r in rows:
            table.add_row(r["class"], _fmt_keep(r["keep"]),
                          r["cutoff"].isoformat(timespec="seconds") if r["cutoff"] else "-",
                          r["purged_before"].isoformat(timespec="seconds") if r["purged_before"] else "-")
        out.print(table)
    _run(go)


@retention_app.command("set")
def set_(
    cls: Annotated[str, typer.Argument(metavar="CLASS", help="raw, hour, day or month")],
    duration: Annotated[str, typer.Argument(help="35d, 12w, 400 days, 2y, or forever")],
) -> None:
    """Keep CLASS for DURATION (each class at least as long as the one below it)."""
    import psycopg

    from cli.main import UserError, out

    def go() -> None:
        if cls not in CLASSES:
            raise UserError(f"unknown retention class {cls!r}: one of {', '.join(CLASSES)}")
        try:
            keep = parse_keep(duration)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        url, server = _session()
        try:
            with psycopg.connect(url) as conn:
                try:
                    conn.execute("SELECT _measure.retention_set(%s, %s)", (cls, keep))
                except psycopg.errors.InvalidParameterValue as exc:
                    raise UserError(exc.diag.message_primary or str(exc)) from None
        finally:
            if server:
                server.stop()
        out.print(f"{cls} data kept {_fmt_keep(keep)}")
    _run(go)


def describe(result: dict[str, Any]) -> list[str]:
    """One line per thing a purge removed (or would remove) and per hold-back."""
    verb = "would remove" if result.get("dry_run") else "removed"
    lines = []
    for r in result.get("removed", []):
        extra = f", {r['intervals']:,} intervals, {r['counter_values']:,} counter values" if "intervals" in r else ""
        lines.append(f"{r['class']}: {verb} {r['object']}: {r['rows']:,} rows{extra}")
    for h in result.get("held_back", []):
        hours = h.get("hours") or []
        lines.append(f"{h['class']}: held back at {h['first_hour']}: {h['reason']} "
                     f"({len(hours)} hour(s){', e.g. ' + ', '.join(hours[:3]) if hours else ''})")
    if not lines:
        lines.append("nothing to purge")
    return lines


@retention_app.command("run")
def run(dry_run: Annotated[bool, typer.Option("--dry-run", help="report what would go, remove nothing")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="the purge's record as JSON")] = False) -> None:
    """Apply the retention policy now (logged in _measure.purge_log)."""
    import psycopg

    from cli.main import out

    def go() -> None:
        url, server = _session()
        try:
            with psycopg.connect(url) as conn:
                result = conn.execute("SELECT _measure.retention_run(%s, now(), 'cli')", (dry_run,)).fetchone()[0]
        finally:
            if server:
                server.stop()
        if as_json:
            out.print_json(json.dumps(result))
        else:
            for line in describe(result):
                out.print(line, markup=False)
    _run(go)


@retention_app.command("log")
def log(limit: Annotated[int, typer.Option(min=1, max=1000, help="purges to show")] = 10) -> None:
    """The last purges (also dry runs), newest first."""
    import psycopg

    from cli.main import out

    def go() -> None:
        url, server = _session()
        try:
            with psycopg.connect(url) as conn:
                rows = conn.execute(
                    "SELECT purge_id, started_at, dry_run, requested_by, removed, held_back FROM _measure.purge_log"
                    " ORDER BY purge_id DESC LIMIT %s", (limit,)).fetchall()
        finally:
            if server:
                server.stop()
        for pid, started, dry, by, removed, held in rows:
            out.print(f"#{pid} {started.isoformat(timespec='seconds')} by {by}{' (dry run)' if dry else ''}",
                      markup=False)
            for line in describe({"dry_run": dry, "removed": removed, "held_back": held}):
                out.print("  " + line, markup=False)
    _run(go)
