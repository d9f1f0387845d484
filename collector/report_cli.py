"""`measuredb report NAME`: run an ENFORM-style report (collector/reports.py) and print it.

    measuredb report threshold --system '\\DEMO' --date 2024-03-09 --shift 3
    measuredb report cpu-trend --system '\\DEMO' --from 2024-01-01 --to 2024-04-02 --format csv
    measuredb report process-summary --system '\\DEMO' --from 2024-03-09T08:00 --to 2024-03-09T10:00
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Annotated, Any

import typer
from rich.console import Console

from collector import reports

report_app = typer.Typer(help="Run an ENFORM-style report (threshold, cpu-trend, ...).",
                         invoke_without_command=True, no_args_is_help=False,
                         context_settings={"allow_interspersed_args": True})
_err = Console(stderr=True, soft_wrap=True)


def _date(text: str | None, option: str) -> date | None:
    if text is None:
        return None
    try:
        return date.fromisoformat(text[:10]) if len(text) <= 10 else datetime.fromisoformat(text).date()
    except ValueError:
        raise reports.ReportError(f"{option} {text!r} is not a date; write YYYY-MM-DD") from None


def _instant(text: str | None, option: str) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise reports.ReportError(f"{option} {text!r} is not a date or time; write YYYY-MM-DD[THH:MM]") from None


def build_params(name: str, *, system: str | None, day: str | None, date_from: str | None,
                 date_to: str | None, shift: int | None, extra: dict[str, Any]) -> dict[str, Any]:
    """Map the command-line options onto the report's parameters (errors: ReportError)."""
    rep = reports.report(name)
    given: dict[str, Any] = {k: v for k, v in extra.items() if v is not None}
    if system is not None:
        given["system"] = system
    if rep.window == "day":
        if day is None and date_from is not None:
            day = date_from
        if day is None:
            raise reports.ReportError(f"report {name} needs --date YYYY-MM-DD")
        given["day"] = _date(day, "--date")
        given["shift"] = shift
    elif rep.window == "range":
        lo, hi = _date(date_from or day, "--from"), _date(date_to or day, "--to")
        if lo is None or hi is None:
            raise reports.ReportError(f"report {name} needs --from and --to (or --date)")
        given["date_from"], given["date_to"] = lo, hi
    else:  # a time window; a bare date means that whole day
        lo_text, hi_text = date_from or day, date_to or day
        if lo_text is None or hi_text is None:
            raise reports.ReportError(f"report {name} needs --from and --to (or --date)")
        lo, hi = _instant(lo_text, "--from"), _instant(hi_text, "--to")
        if len(hi_text) <= 10:
            hi = hi + timedelta(days=1)
        given["from_at"], given["to_at"] = lo, hi
    return reports.bind(name, **given)


@report_app.callback()
def report_command(
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
    output: Annotated[str, typer.Option("--format", help="text, csv or json")] = "text",
) -> None:
    """Run report NAME against the database and print it."""
    import psycopg

    from collector.config import DatabaseSettings
    from collector.database import DatabaseError, check_reachable, resolve

    try:
        if output not in ("text", "csv", "json"):
            raise reports.ReportError(f"--format {output!r}: use text, csv or json")
        rep = reports.report(name)
        extra = {k: v for k, v in {"cpu": cpu, "pin": pin, "measurement": measurement,
                                    "capacity": capacity}.items() if k in rep.params}
        params = build_params(name, system=system, day=day, date_from=date_from, date_to=date_to,
                              shift=shift, extra=extra)
        settings = DatabaseSettings()
        url, server = resolve(settings.database_url, settings.data_dir)
        try:
            check_reachable(url)
            with psycopg.connect(url) as conn:
                rows = reports.run_report(conn, name, **params)
        finally:
            if server:
                server.stop()
    except (reports.ReportError, DatabaseError) as exc:
        _err.print(f"measuredb report: {exc}", markup=False)
        raise typer.Exit(2) from None
    typer.echo(reports.render(name, rows, params, output), nl=False)
