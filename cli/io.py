"""`measuredb import` and `measuredb export`: interval records in and out, tiers out.

    measuredb import FILE [--entity TYPE] [--measurement NAME] [--create-system --time-zone ZONE]
    measuredb export [--system S] [--entity TYPE|all] [--tier interval|hour|shift|month|year|all]
                     [--from T] [--to T] [--format csv|parquet] [--time-format iso|julian] [-o PATH]

File layout, rules and decisions: core/importer.py, core/exporter.py (the same code POST
/import and GET /export run) and schema/idempotent/055-import.sql; README "Bring your own data".
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo

import psycopg
import typer
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from cli.common import UserError, console, database, friendly, out
from core.configuration import CONFIGURATION_FILE, export_configuration
from core.errors import ServiceError
from core.exporter import ExportError, export, plan, systems_of
from core.importer import check_time_zone, csv_rows, parquet_rows
from core.transfer import (
    BatchFailed,
    BatchResult,
    Rows,
    Source,
    folder_files,
    import_batch,
    read_configuration_file,
)


def _progress_bar(enabled: bool) -> contextlib.AbstractContextManager[Progress | None]:
    if not enabled:
        return contextlib.nullcontext(None)
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
                    TextColumn("{task.fields[detail]}"), TimeRemainingColumn(), console=console)


@dataclass
class _Plan:
    sources: list[Source]
    configuration: Path | None = None
    skipped: list[Path] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)  # bytes of each file (none: stdin)
    # per file: [bytes read (CSV) or rows read (Parquet), rows in all (Parquet; 0 for CSV)]
    counters: dict[str, list[int]] = field(default_factory=dict)

    def done(self, where: str) -> int:
        """Bytes of the file read so far (Parquet: its share of rows read)."""
        read, total = self.counters[where]
        return read if not total else self.sizes.get(where, 0) * read // total


def _sources(paths: list[str], file_format: str | None) -> _Plan:
    """The files to import (a folder: its data files), the configuration file and the tiers a
    folder's export left beside them."""
    if "-" in paths and len(paths) > 1:
        raise UserError("- (stdin) is read alone: give it as the only FILE")
    fmt = file_format.lower() if file_format else None
    if fmt is not None and fmt not in ("csv", "parquet"):
        raise UserError(f"--format {file_format!r}: csv or parquet")
    if paths == ["-"]:
        if fmt == "parquet":
            raise UserError("Parquet is read from a file, not from stdin")

        plan = _Plan([], counters={"stdin": [0, 0]})

        @contextlib.contextmanager
        def stdin_rows() -> Iterator[Rows]:
            yield csv_rows(sys.stdin.buffer, plan.counters["stdin"])
        plan.sources.append(Source("stdin", stdin_rows))
        return plan
    files: list[Path] = []
    configuration: Path | None = None
    skipped: list[Path] = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            found = folder_files(path)
            if found.configuration is not None:
                if configuration is not None:
                    raise UserError(f"two configuration files: {configuration} and {found.configuration}; "
                                    "import one folder's at a time")
                configuration = found.configuration
            files += found.files
            skipped += found.skipped
            if not found.files and found.configuration is None:
                raise UserError(f"{path}: no {CONFIGURATION_FILE}, .csv or .parquet file of interval records here")
        elif path.is_file():
            if path.name == CONFIGURATION_FILE:
                configuration = path
            else:
                files.append(path)
        else:
            raise UserError(f"{text}: no such file or folder")
    if len(set(files)) < len(files):
        raise UserError("a file is given twice: give each once")

    plan = _Plan([], configuration, skipped)

    def reader(path: Path) -> Source:
        kind = fmt or ("parquet" if path.suffix.lower() in (".parquet", ".pq") else "csv")
        counter = plan.counters[str(path)] = [0, 0]
        plan.sizes[str(path)] = path.stat().st_size

        @contextlib.contextmanager
        def rows() -> Iterator[Rows]:
            if kind == "parquet":
                yield parquet_rows(str(path), counter)
            else:
                with path.open("rb") as stream:
                    yield csv_rows(stream, counter)
        return Source(str(path), rows)
    plan.sources = [reader(p) for p in files]
    return plan


def import_command(
    files: Annotated[list[str], typer.Argument(
        metavar="FILE...", help="CSV or Parquet files of interval records, the configuration.json of an export, "
                                "or a folder `export -o` wrote (all in one transaction); - reads CSV from stdin")],
    entity: Annotated[str | None, typer.Option(help="entity type (CPU, DISC, PROCESS …); default: the one each "
                                                    "file's header fits")] = None,
    measurement: Annotated[str | None, typer.Option(
        help="measurement (data file) of rows without a MEASUREMENT column; created (stopped) if missing")] = None,
    file_format: Annotated[str | None, typer.Option("--format", help="csv or parquet; default: by each file's "
                                                                     "extension")] = None,
    create_system: Annotated[bool, typer.Option("--create-system", help="create systems the files name that do not "
                                                                        "exist (a configuration.json creates its own)")] = False,
    time_zone: Annotated[str | None, typer.Option(help="time zone of systems --create-system creates (IANA name)")] = None,
    max_problems: Annotated[int, typer.Option(min=1, max=10_000, help="bad rows listed at most, per file")] = 50,
) -> None:
    """Load interval records and configuration from files or an export's folder, in one transaction.

    Interval records under MEASURE's field names (SYSTEM, CPU, FROM-TIMESTAMP, TO-TIMESTAMP,
    DELTA-TIME, CPU-BUSY-TIME …) and a system's configuration (the configuration.json export
    writes: systems, calendars, holidays, thresholds, component map); the hours they touch are
    condensed once, so every tier is current when it returns. Importing the same files again changes nothing; a row that disagrees with stored
    data is reported, never overwritten. Any bad row: every one is listed as FILE:LINE: FIELD:
    problem, every file is checked, and nothing is stored."""
    def go() -> None:
        if create_system and time_zone is None:
            raise UserError("--create-system needs --time-zone (the new systems' time zone, e.g. America/New_York)")
        if time_zone is not None:
            try:
                check_time_zone(time_zone)
            except ValueError as exc:
                raise UserError(str(exc)) from None
        plan = _sources(files, file_format)
        config_path, sources = plan.configuration, plan.sources
        try:
            configuration = read_configuration_file(config_path) if config_path is not None else None
        except ServiceError as exc:
            raise UserError(str(exc)) from None
        if plan.skipped:
            names = ", ".join(p.name for p in plan.skipped[:3]) + (" …" if len(plan.skipped) > 3 else "")
            console.print(f"left out {len(plan.skipped)} tier file{'s' if len(plan.skipped) != 1 else ''} ({names}): "
                          "the import condenses its own tiers from the interval records", markup=False, highlight=False)
        bar_on = console.is_terminal
        try:
            with database() as url, _progress_bar(bar_on) as bar, psycopg.connect(url) as conn:
                total = sum(plan.sizes.values())
                task = bar.add_task("import", total=total or None, detail="") if bar else None
                order = [s.where for s in sources]

                def progress(where: str, phase: str, n: int) -> None:
                    if bar is None or task is None:  # (both or neither)
                        return
                    if phase == "rows":  # the files before this one are read
                        before = sum(plan.sizes.get(w, 0) for w in order[:order.index(where)])
                        bar.update(task, completed=before + plan.done(where), detail=f"{where}: {n:,} rows")
                    else:
                        bar.update(task, detail=f"condensing: {n:,} hours")

                try:
                    result = import_batch(conn, sources, configuration=configuration, entity=entity,
                                          measurement=measurement,
                                          create_time_zone=time_zone if create_system else None,
                                          max_problems=max_problems, progress=progress)
                except ServiceError as exc:
                    raise UserError(f"{config_path}: {exc}") from None
                if bar is not None and task is not None:
                    bar.update(task, total=1, completed=1, detail=f"{result.stored:,} stored, "
                                                                 f"{result.condensed:,} hours condensed")
        except BatchFailed as exc:
            raise _failed(exc, len(sources)) from None
        _print_imported(result, config_path)

    friendly(go)()


def _failed(exc: BatchFailed, n_sources: int) -> UserError:
    """Print every bad row (and each file's summary when there are several); the error to raise."""
    for failure in exc.failures:
        for p in failure.problems:
            console.print(str(p), markup=False, highlight=False)
        if n_sources > 1:  # one file's summary is the error itself
            console.print(failure.summary(), markup=False, highlight=False)
    return UserError(exc.summary() if n_sources > 1 else exc.failures[0].summary())


def _print_imported(result: BatchResult, config_path: Path | None) -> None:
    if result.configuration is not None:
        for s in result.configuration["systems"]:
            out.print(f"{config_path}: {s['name']} {'created' if s['created'] else 'exists'}; "
                      f"{s['calendars']} calendar versions, {s['holidays']} holidays, {s['thresholds']} "
                      f"thresholds, {s['components']} component rows of its own", markup=False, highlight=False)
        for note in result.configuration["notes"]:
            out.print(f"  {note}", markup=False, highlight=False)
    for one in result.files:
        out.print(one.describe(), markup=False, highlight=False)
        if one.missing_counters and one.rows:
            shown = ", ".join(one.missing_counters[:6]) + (" …" if len(one.missing_counters) > 6 else "")
            out.print(f"  {len(one.missing_counters)} counters had no column and were stored as 0: {shown}",
                      markup=False, highlight=False)
        if one.ignored_columns:
            out.print(f"  ignored (not stored by measuredb): {', '.join(one.ignored_columns)}",
                      markup=False, highlight=False)
    if result.stored:
        out.print(f"{result.hours:,} hour{'s' if result.hours != 1 else ''} written, "
                  f"{result.condensed:,} condensed into every tier", markup=False, highlight=False)


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
    configuration: Annotated[bool, typer.Option(
        "--configuration/--no-configuration",
        help=f"into a folder, also {CONFIGURATION_FILE}: the systems' calendars, holidays, thresholds and "
             "component map, which `measuredb import FOLDER` loads with the data")] = True,
) -> None:
    """Write interval records or tiers as CSV or Parquet, by system, entity type and time range.

    Interval records under the header `measuredb import` reads, tiers with the columns of
    measure.<entity>_<tier>; into a folder with the systems' configuration, so that
    `measuredb import FOLDER` gives another database the same reports."""
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
            if folder is not None and configuration:
                doc = export_configuration(conn, [s[1] for s in systems])
                (folder / CONFIGURATION_FILE).write_text(json.dumps(doc, indent=1, default=str) + "\n")
                console.print(f"{folder / CONFIGURATION_FILE}: {len(doc['systems'])} system"
                              f"{'s' if len(doc['systems']) != 1 else ''} ({', '.join(s[1] for s in systems)}): "
                              "calendars, holidays, thresholds, component map", markup=False, highlight=False)

    friendly(go)()
