"""`measuredb report NAME`: run an ENFORM-style report (core/reports.py) and print it.

    measuredb report threshold --system '\\DEMO' --date 2024-03-09 --shift 3
    measuredb report cpu-trend --system '\\DEMO' --from 2024-01-01 --to 2024-04-02 --format csv
    measuredb report process-summary --system '\\DEMO' --from 2024-03-09T08:00 --to 2024-03-09T10:00
    measuredb report transaction-resource --system '\\RDS' --from 2024-03-04T08:10 --to 2024-03-04T09:10

A report of a range in which the system has no measured hour prints NO DATA (with the span
its data covers) instead of its empty line ("NO THRESHOLD VIOLATIONS"), and exits with status 1.

Scheduled reports (core/scheduler.py, the successors of the 1986 OBEY files):

    measuredb report schedule list                 the definitions, their last run and next slot
    measuredb report schedule runs [--failed] …    the latest runs
    measuredb report schedule show RUN_ID [--format text|csv|json]
    measuredb report schedule run-due [--now 2024-03-11T06:00:00+00:00]
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo

import psycopg
import typer
from rich.console import Console
from typer.core import TyperGroup

from cli.common import FORMATS, FormatOption, database, emit
from core import reports
from core import scheduler as _scheduler  # (importing it registers its reports)
from core.database import DatabaseError


class _ReportGroup(TyperGroup):
    """`measuredb report NAME …` runs a report; `measuredb report schedule …` is a subcommand
    group. A first argument naming a subcommand skips the report's own arguments."""

    def parse_args(self, ctx, args):
        if args and args[0] in self.commands:
            for param in self.params:
                if param.name is not None:
                    ctx.params.setdefault(param.name, None if param.required else param.get_default(ctx))
            ctx._protected_args, ctx.args = args[:1], args[1:]
            return ctx.args
        return super().parse_args(ctx, args)


report_app = typer.Typer(cls=_ReportGroup, help="Run an ENFORM-style report (threshold, cpu-trend, ...); "
                         "`schedule` lists and runs the scheduled ones.",
                         invoke_without_command=True, no_args_is_help=False,
                         context_settings={"allow_interspersed_args": True})
schedule_app = typer.Typer(no_args_is_help=True, help="Scheduled reports: definitions, runs, outputs.")
report_app.add_typer(schedule_app, name="schedule")
_err = Console(stderr=True, soft_wrap=True)


@report_app.callback()
def report_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="report name: " + ", ".join(sorted(reports.REPORTS)))],
    system: Annotated[str | None, typer.Option(help="system name, e.g. \\DEMO")] = None,
    day: Annotated[str | None, typer.Option("--date", help="the (shift) day, YYYY-MM-DD")] = None,
    date_from: Annotated[str | None, typer.Option("--from", help="first day or instant")] = None,
    date_to: Annotated[str | None, typer.Option("--to", help="last day (inclusive) or end instant")] = None,
    shift: Annotated[int | None, typer.Option(help="shift number (threshold report)")] = None,
    cpu: Annotated[int | None, typer.Option(help="CPU (process-disc-file-activity)")] = None,
    pin: Annotated[int | None, typer.Option(help="PIN (process-disc-file-activity)")] = None,
    measurement: Annotated[int | None, typer.Option(help="only this measurement_id")] = None,
    capacity: Annotated[float | None, typer.Option(help="available capacity %, capacity-forecast")] = None,
    transaction_process: Annotated[str | None, typer.Option(
        help="transaction-resource: count the MESSAGES-RECEIVED of the processes whose name matches "
             "this LIKE pattern (e.g. '$SRV%') as the transactions; default: terminal transactions")] = None,
    min_cpu_seconds: Annotated[float | None, typer.Option(help="busy-process: CPU seconds above which "
                                                          "a process is listed (600)")] = None,
    max_priority: Annotated[int | None, typer.Option(help="busy-process: priorities below this (200)")] = None,
    top: Annotated[int | None, typer.Option(min=1, help="sql-statements: how many statements (20)")] = None,
    severity: Annotated[str | None, typer.Option(help="exceptions: minor (all, the default) or major")] = None,
    output: Annotated[str, typer.Option("--format", help="text, csv or json")] = "text",
) -> None:
    """Run report NAME against the database and print it."""
    if ctx.invoked_subcommand is not None:
        return
    try:
        if output not in ("text", "csv", "json"):
            raise reports.ReportError(f"--format {output!r}: use text, csv or json")
        rep = reports.report(name)
        given = {"cpu": cpu, "pin": pin, "measurement": measurement, "capacity": capacity,
                 "transaction_process": transaction_process, "min_cpu_seconds": min_cpu_seconds,
                 "max_priority": max_priority, "top": top, "severity": severity}
        misplaced = [k for k, v in given.items() if v is not None and k not in rep.params]
        if misplaced:
            raise reports.ReportError(f"report {name} takes no --{misplaced[0].replace('_', '-')}")
        extra = {k: v for k, v in given.items() if k in rep.params}
        params = reports.build_params(name, system=system, day=day, date_from=date_from, date_to=date_to,
                              shift=shift, extra=extra)
        with database() as url, psycopg.connect(url) as conn:
            rows = reports.run_report(conn, name, **params)
            empty = None if rows else reports.no_data(conn, name, params)
            learned = None if rows or empty else reports.no_baseline(conn, name, params)
    except (reports.ReportError, DatabaseError) as exc:
        _err.print(f"measuredb report: {exc}", markup=False)
        raise typer.Exit(2) from None
    typer.echo(reports.render(name, rows, params, output, empty or learned), nl=False)
    if learned is not None and output != "text":
        _err.print(f"measuredb report: {learned}", markup=False)
    if empty is not None:  # no data is not "nothing found": say so, and exit 1
        if output != "text":
            _err.print(f"measuredb report: {empty}", markup=False)
        raise typer.Exit(1)


# ---------------------------------------------------------------- scheduled reports


def _with_database(func: Callable[[str], Any]) -> Any:
    """Run func(url) against the configured database; user errors become one line, status 2."""
    try:
        with database() as url:
            return func(url)
    except (reports.ReportError, _scheduler.ScheduleError, DatabaseError) as exc:
        _err.print(f"measuredb report schedule: {exc}", markup=False)
        raise typer.Exit(2) from None


def _local(ts: datetime | None, tz: str | None = None) -> str:
    if ts is None:
        return ""
    return (ts.astimezone(ZoneInfo(tz)) if tz else ts).strftime("%Y-%m-%d %H:%M %Z").strip()


@schedule_app.command("list")
def schedule_list(output: FormatOption = "text") -> None:
    """The report definitions: report, parameters, schedule (local time), last run, next slot."""
    if output not in FORMATS:
        _err.print(f"measuredb report schedule list: --format {output!r}: use text, csv or json", markup=False)
        raise typer.Exit(2)
    def work(url: str) -> None:
        with psycopg.connect(url) as conn:
            rows = conn.execute(
                """
                SELECT d.name, d.report, coalesce(s.system_name, '(every)'), d.parameters, d.schedule,
                       array_to_string(d.outputs, ','), d.enabled, ss.system_name, ss.time_zone,
                       (SELECT r.status || ' ' || r.slot_at::text FROM measure.report_run r
                         WHERE r.definition_id = d.definition_id AND r.system_id = ss.system_id
                         ORDER BY r.slot_at DESC LIMIT 1)
                  FROM _measure.report_definition d
                  LEFT JOIN _measure.system s ON s.system_id = d.system_id
                  LEFT JOIN _measure.system ss ON d.system_id IS NULL OR ss.system_id = d.system_id
                 ORDER BY d.definition_id, ss.system_id
                """).fetchall()
        now = datetime.now().astimezone()
        listed = []
        for name, rep, system, params, cron, outputs, enabled, target, tz, last in rows:
            nxt = ""
            if tz and enabled:
                try:
                    nxt = _local(_scheduler.next_slot(cron, ZoneInfo(tz), now), tz)
                except _scheduler.ScheduleError as exc:
                    nxt = f"bad schedule: {exc}"
            listed.append({"definition": name, "report": rep, "system": target or system,
                           "parameters": json.dumps(params), "schedule": cron, "outputs": outputs,
                           "enabled": "yes" if enabled else "no", "last_run": last or "", "next_slot": nxt})
        emit(listed, [("definition", "definition"), ("report", "report"), ("system", "system"),
                      ("parameters", "parameters"), ("schedule", "schedule"), ("outputs", "outputs"),
                      ("enabled", "enabled"), ("last_run", "last run"), ("next_slot", "next slot")], output)

    _with_database(work)


@schedule_app.command("runs")
def schedule_runs(
    definition: Annotated[str | None, typer.Option(help="only this definition")] = None,
    system: Annotated[str | None, typer.Option(help="only this system, e.g. \\DEMO")] = None,
    status: Annotated[str | None, typer.Option(help="running, failed or succeeded")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 20,
    output: FormatOption = "text",
) -> None:
    """The latest report runs, newest first."""
    if output not in FORMATS:
        _err.print(f"measuredb report schedule runs: --format {output!r}: use text, csv or json", markup=False)
        raise typer.Exit(2)
    if status not in (None, "running", "failed", "succeeded"):
        _err.print(f"measuredb report schedule runs: --status {status!r}: use running, failed or succeeded",
                   markup=False)
        raise typer.Exit(2)

    def work(url: str) -> None:
        with psycopg.connect(url) as conn:
            rows = conn.execute(
                """
                SELECT r.run_id, r.definition, r.system_name, r.slot_at, s.time_zone, r.status, r.attempt,
                       r.rows, r.error, r.finished_at - r.started_at
                  FROM measure.report_run r JOIN measure.system s USING (system_id)
                 WHERE (%(d)s::text IS NULL OR r.definition = %(d)s)
                   AND (%(s)s::text IS NULL OR upper(r.system_name) = upper(%(s)s))
                   AND (%(st)s::text IS NULL OR r.status = %(st)s)
                 ORDER BY r.run_id DESC LIMIT %(n)s
                """, {"d": definition, "s": system, "st": status, "n": limit}).fetchall()
        listed = [{"run": run_id, "definition": d, "system": sysname, "slot": _local(slot, tz), "status": st,
                   "attempt": attempt, "rows": nrows, "seconds": None if took is None else round(took.total_seconds(), 1),
                   "error": error} for run_id, d, sysname, slot, tz, st, attempt, nrows, error, took in rows]
        emit(listed, [("run", "run"), ("definition", "definition"), ("system", "system"), ("slot", "slot (local)"),
                      ("status", "status"), ("attempt", "try"), ("rows", "rows"), ("seconds", "took (s)"),
                      ("error", "error")], output)

    _with_database(work)


@schedule_app.command("show")
def schedule_show(
    run_id: Annotated[int, typer.Argument(help="a run id from `measuredb report schedule runs`", min=1)],
    output: Annotated[str, typer.Option("--format", help="text, csv or json")] = "text",
) -> None:
    """Print the stored output of one run (or its error)."""
    if output not in ("text", "csv", "json"):
        _err.print(f"measuredb report schedule show: --format {output!r}: use text, csv or json", markup=False)
        raise typer.Exit(2)

    def work(url: str) -> None:
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT status, error, output_text, output_csv, output_json, report, parameters "
                "FROM measure.report_run WHERE run_id = %s", (run_id,)).fetchone()
        if row is None:
            raise reports.ReportError(f"no report run {run_id}; list them with `measuredb report schedule runs`")
        status, error, text, csv_, json_, rep, params = row
        if status != "succeeded":
            raise reports.ReportError(f"run {run_id} is {status}" + (f": {error}" if error else ""))
        body = {"text": text, "csv": csv_, "json": json_}[output]
        if body is None:
            body = render_stored(rep, json_, params, output)
        typer.echo(body, nl=not body.endswith("\n"))

    _with_database(work)


def render_stored(report_name: str, rows_json: str, params: dict[str, Any] | None, fmt: str) -> str:
    """A format the run did not store, rendered from its stored rows (JSON)."""
    return reports.render(report_name, json.loads(rows_json), params or {}, fmt)


@schedule_app.command("run-due")
def schedule_run_due(
    now: Annotated[str | None, typer.Option(help="pretend it is this instant (ISO 8601 with offset)")] = None,
) -> None:
    """Run every scheduled report whose slot has come (what the collector does every 30 s)."""
    at = None
    if now is not None:
        try:
            at = datetime.fromisoformat(now)
        except ValueError:
            at = None
        if at is None or at.tzinfo is None:
            _err.print(f"measuredb report schedule run-due: --now {now!r}: write an ISO instant with an "
                       "offset, e.g. 2024-03-11T06:00:00+01:00", markup=False)
            raise typer.Exit(2)

    def work(url: str) -> None:
        results = _scheduler.run_due(url, at)
        if not results:
            typer.echo("nothing due")
        for r in results:
            what = f"{r.rows} rows" if r.status == "succeeded" else f"FAILED: {r.error}"
            slot = r.slot_at.isoformat() if r.slot_at else "-"
            typer.echo(f"run {r.run_id}: {r.definition} for {r.system}, slot {slot}, attempt {r.attempt}: {what}")

    _with_database(work)
