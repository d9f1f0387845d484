"""A system's data and configuration together: ``measuredb export -o FOLDER`` writes the
interval records of each entity type and ``configuration.json`` (systems, calendars,
holidays, thresholds, the process-to-component map: core.configuration.export_configuration),
and ``measuredb import`` takes several files or that folder and loads them in one
transaction, so the target reports as the source did.

How an import of several files runs (:func:`import_batch`): the configuration first (systems
created before their rows), then each file as :func:`core.importer.import_rows` does, each in a
savepoint so that a bad file is reported and the next still checked, then, when every file is
good, the hours they wrote condensed once. One bad file or configuration: nothing is stored.

A folder (:func:`folder_files`) gives its ``configuration.json`` and its ``*.csv`` and
``*.parquet`` files in name order, leaving out the tiers an export writes beside the interval
records (``cpu-hour.csv`` …): the import condenses its own tiers from the records.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from core.catalog import TIERS, load_catalog
from core.configuration import (
    CONFIGURATION_FILE,
    CONFIGURATION_MAX_BYTES,
    import_configuration,
    read_configuration,
)
from core.importer import MAX_PROBLEMS, ImportFailed, ImportResult, condense_imported, import_rows

DATA_SUFFIXES = (".csv", ".parquet", ".pq")

Rows = Iterator[tuple[int, list[Any]]]


@dataclass(frozen=True)
class Source:
    """One file of interval records: its name in the problems and how to read its rows."""

    where: str
    rows: Callable[[], contextlib.AbstractContextManager[Rows]]


@dataclass
class FolderPlan:
    """What a folder gives an import: its configuration file, its data files, what it leaves out."""

    configuration: Path | None
    files: list[Path]
    skipped: list[Path] = field(default_factory=list)


def is_tier_file(path: Path) -> bool:
    """A tier written by export beside the interval records (ENTITY-TIER.csv)."""
    entity, _, kind = path.stem.lower().rpartition("-")
    return kind in TIERS and entity in {e.name for e in load_catalog()}


def folder_files(folder: Path) -> FolderPlan:
    """The files of a folder an import reads (see the module's description)."""
    plan = FolderPlan(configuration=None, files=[])
    for path in sorted(folder.iterdir()):
        if not path.is_file():
            continue
        if path.name == CONFIGURATION_FILE:
            plan.configuration = path
        elif path.suffix.lower() in DATA_SUFFIXES:
            (plan.skipped if is_tier_file(path) else plan.files).append(path)
    return plan


def read_configuration_file(path: Path) -> Any:
    """The document of a configuration file, reading at most one byte more than its limit."""
    with path.open("rb") as f:
        data = f.read(CONFIGURATION_MAX_BYTES + 1)
    return read_configuration(data, str(path))


class BatchFailed(Exception):
    """Some files had bad rows: each one's ImportFailed; nothing was stored."""

    def __init__(self, failures: list[ImportFailed], files: int) -> None:
        super().__init__(f"{len(failures)} of {files} files with bad rows")
        self.failures = failures
        self.files = files

    def summary(self) -> str:
        return (f"{len(self.failures)} of {self.files} file{'s' if self.files != 1 else ''} cannot be imported; "
                "nothing was stored")


@dataclass
class BatchResult:
    files: list[ImportResult]
    configuration: dict[str, Any] | None = None
    condensed: int = 0  # hours condensed, once for all files

    @property
    def stored(self) -> int:
        return sum(r.stored for r in self.files)

    @property
    def hours(self) -> int:
        return sum(r.hours for r in self.files)


def import_batch(conn: psycopg.Connection, sources: list[Source], *, configuration: Any = None,
                 entity: str | None = None, measurement: str | None = None, create_time_zone: str | None = None,
                 max_problems: int = MAX_PROBLEMS,
                 progress: Callable[[str, str, int], None] | None = None) -> BatchResult:
    """Import a configuration document (or None) and files in one transaction: the
    connection's own when one is open (a savepoint in it), else one begun and committed here;
    on an exception nothing of it stays. A bad configuration raises its
    core.errors.ServiceError; bad rows raise BatchFailed after every file was checked.
    `progress(where, phase, n)` as import_rows' progress, naming the file ('' while condensing)."""
    with conn.transaction():
        return _import_batch(conn, sources, configuration=configuration, entity=entity,
                             measurement=measurement, create_time_zone=create_time_zone,
                             max_problems=max_problems, progress=progress)


def _import_batch(conn: psycopg.Connection, sources: list[Source], *, configuration: Any,
                  entity: str | None, measurement: str | None, create_time_zone: str | None,
                  max_problems: int, progress: Callable[[str, str, int], None] | None) -> BatchResult:
    result = BatchResult(files=[])
    if configuration is not None:
        result.configuration = import_configuration(conn, configuration)
    failures: list[ImportFailed] = []
    for src in sources:
        def step(phase: str, n: int, where: str = src.where) -> None:
            if progress is not None:
                progress(where, phase, n)
        try:
            with conn.transaction(), src.rows() as rows:
                one = import_rows(conn, rows, where=src.where, entity=entity, measurement=measurement,
                                  create_time_zone=create_time_zone, max_problems=max_problems,
                                  condense=False, progress=step)
        except ImportFailed as exc:
            failures.append(exc)
            continue
        result.files.append(one)
    if failures:
        raise BatchFailed(failures, len(sources))
    if result.stored:
        result.condensed = condense_imported(
            conn, {sid for r in result.files for sid in r.system_ids},
            where=", ".join(s.where for s in sources),
            progress=None if progress is None else (lambda phase, n: progress("", phase, n)))
    return result
