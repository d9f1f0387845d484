"""`measuredb import` and `measuredb export`: interval records in and out, tiers out.

    measuredb import FILE [--entity TYPE] [--measurement NAME] [--create-system --time-zone ZONE]
    measuredb export [--system S] [--entity TYPE|all] [--tier interval|hour|shift|month|year|all]
                     [--from T] [--to T] [--format csv|parquet] [--time-format iso|julian] [-o PATH]

File layout, rules and decisions: core/importer.py, core/exporter.py (the same code POST
/import and GET /export run) and schema/idempotent/055-import.sql; README "Bring your own data".
"""

from __future__ import annotations

import contextlib
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo

import psycopg
import typer
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from cli.common import UserError, console, database, friendly, out
from core.exporter import ExportError, export, plan, systems_of
from core.importer import ImportFailed, check_time_zone, csv_rows, import_rows, parquet_rows


def _progress_bar(enabled: bool) -> contextlib.AbstractContextManager[Progress | None]:
    if not enabled:
        return contextlib.nullcontext(None)
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
                    TextColumn("{task.fields[detail]}"), TimeRemainingColumn(), console=console)


def import_command(
    file: Annotated[str, typer.Argument(metavar="FILE", help="CSV (or .parquet) file of interval records; - reads CSV from stdin")],
    entity: Annotated[str | None, typer.Option(help="entity type (CPU, DISC, PROCESS …); default: the one the header fits")] = None,
    measurement: Annotated[str | None, typer.Option(
        help="measurement (data file) of rows without a MEASUREMENT column; created (stopped) if missing")] = None,
    file_format: Annotated[str | None, typer.Option("--format", help="csv or parquet; default: by the file's extension")] = None,
    create_system: Annotated[bool, typer.Option("--create-system", help="create systems the file names that do not exist")] = False,
    time_zone: Annotated[str | None, typer.Option(help="time zone of systems --create-system creates (IANA name)")] = None,
    max_problems: Annotated[int, typer.Option(min=1, max=10_000, help="bad rows listed at most")] = 50,
) -> None:
    """Load interval records from a file (MEASURE's field names: SYSTEM, CPU, FROM-TIMESTAMP,
    TO-TIMESTAMP, DELTA-TIME, CPU-BUSY-TIME …) in one transaction, and condense the hours they
    touch so every tier is current when it returns. Importing the same file again changes
    nothing; a row that disagrees with stored data is reported, never overwritten. Any bad
    row: every one is listed as FILE:LINE: FIELD: problem, and nothing is stored."""
    def go() -> None:
        fmt = (file_format or ("parquet" if file.lower().endswith((".parquet", ".pq")) else "csv")).lower()
        if fmt not in ("csv", "parquet"):
            raise UserError(f"--format {file_format!r}: csv or parquet")
        if create_system and time_zone is None:
            raise UserError("--create-system needs --time-zone (the new systems' time zone, e.g. America/New_York)")
        if time_zone is not None:
            try:
                check_time_zone(time_zone)
            except ValueError as exc:
                raise UserError(str(exc)) from None
        if fmt == "parquet" and file == "-":
            raise UserError("Parquet is read from a file, not from stdin")
        where = "stdin" if file == "-" else file
        if file != "-" and not Path(file).is_file():
            raise UserError(f"{file}: no such file")
        size = 0 if file == "-" else Path(file).stat().st_size
        counter = [0, 0]
        bar_on = console.is_terminal
        try:
            with database() as url, _progress_bar(bar_on) as bar, psycopg.connect(url) as conn:
                task = bar.add_task("import", total=size or None, detail="") if bar else None

                def progress(phase: str, n: int) -> None:
                    if bar is None:
                        return
                    if phase == "rows":  # CSV: bytes read of the file; Parquet: rows of all
                        if fmt == "parquet":
                            bar.update(task, total=counter[1] or None, completed=counter[0], detail=f"{n:,} rows")
                        else:
                            bar.update(task, completed=counter[0], detail=f"{n:,} rows")
                    else:
                        bar.update(task, detail=f"condensing: {n:,} hours")

                stream = sys.stdin.buffer if file == "-" else None
                try:
                    if fmt == "parquet":
                        rows = parquet_rows(file, counter)
                    else:
                        stream = stream or open(file, "rb")  # noqa: SIM115 - closed below
                        rows = csv_rows(stream, counter)
                    result = import_rows(conn, rows, where=where, entity=entity, measurement=measurement,
                                         create_time_zone=time_zone if create_system else None,
                                         max_problems=max_problems, progress=progress)
                finally:
                    if stream is not None and stream is not sys.stdin.buffer:
                        stream.close()
                if bar is not None:
                    bar.update(task, total=1, completed=1, detail=f"{result.rows:,} rows, "
                                                                 f"{result.condensed:,} hours condensed")
        except ImportFailed as exc:
            for p in exc.problems:
                console.print(str(p), markup=False, highlight=False)
            raise UserError(exc.summary()) from None
        out.print(result.describe(), markup=False, highlight=False)
        if result.missing_counters and result.rows:
            shown = ", ".join(result.missing_counters[:6]) + (" …" if len(result.missing_counters) > 6 else "")
            out.print(f"  {len(result.missing_counters)} counters had no column and were stored as 0: {shown}",
                      markup=False, highlight=False)
        if result.ignored_columns:
            out.print(f"  ignored (not stored by measuredb): {', '.join(result.ignored_columns)}",
                      markup=False, highlight=False)

    friendly(go)()


def _when(text: str | None, option: str, zone: str) -> datetime | None:
    if text is None:
        return None
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UserError(f"{option} {text!r} is not a date or time: write 2026-03-01, 2026-03-01T08:00 "
                        "(local to the system) or 2026-03-01T08:00+00:00") from None
    return at if at.tzinfo is not None else at.replace(tzinfo=ZoneInfo(zone))


def export_command(
    system: Annotated[str | None, typer.Option(help="system (\\DEMO); default: every system")] = None,
    entity: Annotated[str, typer.Option(help="entity type (CPU, DISC, PROCESS …) or all")] = "all",
    tier: Annotated[str, typer.Option(help="interval (interval records), hour, shift, month, year or all")] = "interval",
    from_: Annotated[str | None, typer.Option("--from", help="from this time (ISO 8601; without offset: the "
                                                             "system's local time, UTC for every system)")] = None,
    to: Annotated[str | None, typer.Option(help="up to (not including) this time")] = None,
    file_format: Annotated[str, typer.Option("--format", help="csv or parquet")] = "csv",
    time_format: Annotated[str, typer.Option(help="interval records' FROM/TO-TIMESTAMP: iso (local time with "
                                                  "UTC offset) or julian (MEASURE Julian µs, local civil time)")] = "iso",
    output: Annotated[str | None, typer.Option("--output", "-o", help="file (one export) or folder (several: "
                                                                      "ENTITY-TIER.csv each); default: stdout")] = None,
) -> None:
    """Write interval records (the header `measuredb import` reads) or tiers (the columns of
    measure.<entity>_<tier>) as CSV or Parquet, by system, entity type and time range."""
    def go() -> None:
        fmt = file_format.lower()
        if fmt not in ("csv", "parquet"):
            raise UserError(f"--format {file_format!r}: csv or parquet")
        if time_format not in ("iso", "julian"):
            raise UserError(f"--time-format {time_format!r}: iso or julian")
        try:
            specs = plan(entity, tier)
        except ExportError as exc:
            raise UserError(str(exc)) from None
        if len(specs) > 1 and output is None:
            raise UserError(f"{len(specs)} exports ({', '.join(s.filename(fmt) for s in specs[:3])} …): "
                            "give --output FOLDER")
        if output is None and fmt == "parquet" and sys.stdout.isatty():
            raise UserError("Parquet is binary: give --output FILE")
        with database() as url, psycopg.connect(url) as conn:
            try:
                systems = systems_of(conn, system)
            except ExportError as exc:
                raise UserError(str(exc)) from None
            zone = systems[0][2] if system is not None and systems else "UTC"
            lo, hi = _when(from_, "--from", zone), _when(to, "--to", zone)
            if lo is not None and hi is not None and hi <= lo:
                raise UserError("--to must be after --from")
            ids = [s[0] for s in systems]
            folder = Path(output) if output is not None and len(specs) > 1 else None
            if folder is not None:
                folder.mkdir(parents=True, exist_ok=True)
            total = 0
            for spec in specs:
                if output is None:
                    target = sys.stdout.buffer
                else:
                    target = open(folder / spec.filename(fmt) if folder else Path(output), "wb")  # noqa: SIM115
                try:
                    n = export(conn, spec, target, system_ids=ids, lo=lo, hi=hi, fmt=fmt, time_format=time_format)
                finally:
                    if target is not sys.stdout.buffer:
                        target.close()
                    else:
                        target.flush()
                total += n
                if output is not None:
                    name = folder / spec.filename(fmt) if folder else Path(output)
                    console.print(f"{name}: {n:,} rows ({spec.entity.measure_name} {spec.kind})",
                                  markup=False, highlight=False)

    friendly(go)()
