"""Typed syntax tree of MEASCOM commands (one class per command).

Every node carries the 1-based ``line`` and ``column`` of its first token. Names (files,
processes, devices, counters) are upper case; OSS paths keep their case. Entity specs carry
their identifying fields in the vocabulary of :mod:`collector.measure.contab` descriptors
(snake id-field names; ``'*'`` or absent = wildcard), so a spec becomes a descriptor with
``ContabBuilder.add_spec(spec)``.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "MONTHS",
    "AddCounter",
    "AddEntity",
    "AddMeasurement",
    "Assume",
    "Command",
    "Condition",
    "Date",
    "DateTime",
    "DeleteCounter",
    "DeleteEntity",
    "Duration",
    "EntitySpec",
    "Exit",
    "Help",
    "InfoMeasurement",
    "ListCommand",
    "MeasSubsys",
    "Node",
    "Obey",
    "Out",
    "ReportAttr",
    "SetReport",
    "StartMeasurement",
    "Status",
    "StopMeasurement",
    "TimeOfDay",
    "Volume",
]

MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")


@dataclass(frozen=True, kw_only=True)
class Node:
    line: int
    column: int


@dataclass(frozen=True, kw_only=True)
class Duration(Node):
    """``n SECONDS|MINUTES|HOURS`` (n = 1..9999)."""

    value: int
    unit: Literal["SECONDS", "MINUTES", "HOURS"]

    @property
    def seconds(self) -> int:
        return self.value * {"SECONDS": 1, "MINUTES": 60, "HOURS": 3600}[self.unit]

    @property
    def us(self) -> int:
        return self.seconds * 1_000_000


@dataclass(frozen=True, kw_only=True)
class Date(Node):
    day: int
    month: int  # 1..12
    year: int | None = None  # None = the current year

    def resolve(self, today: _dt.date) -> _dt.date:
        return _dt.date(self.year or today.year, self.month, self.day)


@dataclass(frozen=True, kw_only=True)
class TimeOfDay(Node):
    hour: int
    minute: int
    second: int = 0

    @property
    def time(self) -> _dt.time:
        return _dt.time(self.hour, self.minute, self.second)


@dataclass(frozen=True, kw_only=True)
class DateTime(Node):
    """``[date ,] time``; a missing date means today."""

    date: Date | None
    time: TimeOfDay


@dataclass(frozen=True, kw_only=True)
class EntitySpec(Node):
    """One entity spec of an ADD/DELETE/LIST command, e.g. ``$PROGS.SERVER1.*``.

    ``form`` says which MEASCOM form was written: all, cpu, cpu_pin, system_processes,
    process_name, program_file, oss_path, device, file, terminal, remote_system.
    Partial program/file names (``BILLING``) are kept as written; ContabBuilder qualifies them.
    """

    entity: str  # catalogue MEASURE name: CPU, PROCESS, DISC (DISK accepted) …
    form: str
    fields: dict[str, str | int] = field(default_factory=dict)
    text: str = ""


@dataclass(frozen=True, kw_only=True)
class Condition(Node):
    """``IF counter relop value``."""

    counter: str
    op: Literal["=", "<>", "<", ">", "<=", ">="]
    value: float | int


@dataclass(frozen=True, kw_only=True)
class ReportAttr(Node):
    """One SET REPORT / LIST attribute. ``value`` is a keyword, a name, a DateTime or Duration."""

    name: str  # FORMAT, RATE, LOADID, TOTALS, ZERO-REPORTS, STYLE, DOTS, CR-NAME-QUAL, FROM, TO, FOR
    value: str | DateTime | Duration | None = None


@dataclass(frozen=True, kw_only=True)
class Command(Node):
    pass


@dataclass(frozen=True, kw_only=True)
class AddEntity(Command):
    entity: str
    specs: tuple[EntitySpec, ...]


@dataclass(frozen=True, kw_only=True)
class DeleteEntity(Command):
    """``DELETE type spec``: removes an identical ADD, otherwise excludes (after a wildcard ADD)."""

    entity: str
    specs: tuple[EntitySpec, ...]


@dataclass(frozen=True, kw_only=True)
class AddCounter(Command):
    name: str
    process: EntitySpec
    type: Literal["ACCUM", "FACCUM", "BUSY", "QUEUE", "QBUSY", "TCELLBUSY", "TCELLQUEUE",
                  "TCELLQBUSY"]
    array: int | None = None  # ARRAY n gives n+1 elements

    @property
    def elements(self) -> int:
        return 1 if self.array is None else self.array + 1


@dataclass(frozen=True, kw_only=True)
class DeleteCounter(Command):
    name: str  # '*' = all counters
    process: EntitySpec | None = None


@dataclass(frozen=True, kw_only=True)
class AddMeasurement(Command):
    file: str


@dataclass(frozen=True, kw_only=True)
class StartMeasurement(Command):
    file: str | None  # None: the ASSUMEd measurement
    start: DateTime | None = None  # FROM
    for_: Duration | None = None
    to: DateTime | None = None
    interval: Duration | None = None
    options: tuple[str, ...] = ()  # OSS, NOOSS, SQL, NOSQL, NOCOUNTERS
    filesize: tuple[int, str] | None = None  # (n, 'MB'|'GB')


@dataclass(frozen=True, kw_only=True)
class StopMeasurement(Command):
    file: str | None


@dataclass(frozen=True, kw_only=True)
class InfoMeasurement(Command):
    files: tuple[str, ...]  # empty: the ASSUMEd measurement
    out: str | None = None


@dataclass(frozen=True, kw_only=True)
class Status(Command):
    target: Literal["MEASSUBSYS", "MEASUREMENT"]
    file: str | None = None
    out: str | None = None


@dataclass(frozen=True, kw_only=True)
class SetReport(Command):
    attrs: tuple[ReportAttr, ...]


@dataclass(frozen=True, kw_only=True)
class ListCommand(Command):
    verb: Literal["LIST", "LISTALL", "LISTACTIVE"]
    entity: str
    specs: tuple[EntitySpec, ...]
    start: DateTime | None = None  # FROM
    to: DateTime | None = None
    for_: Duration | None = None
    loadid: str | None = None
    by: str | None = None
    if_: Condition | None = None
    attrs: tuple[ReportAttr, ...] = ()  # other report attributes given on the command
    out: str | None = None


@dataclass(frozen=True, kw_only=True)
class MeasSubsys(Command):
    """``START MEASSUBSYS`` / ``STOP MEASSUBSYS`` (super-group only on a real system)."""

    action: Literal["START", "STOP"]


@dataclass(frozen=True, kw_only=True)
class Obey(Command):
    file: str


@dataclass(frozen=True, kw_only=True)
class Out(Command):
    file: str | None


@dataclass(frozen=True, kw_only=True)
class Volume(Command):
    """``VOLUME [\\node.][$vol][.subvol]``: default volume/subvolume for partial names."""

    volume: str | None
    subvol: str | None
    node: str | None = None


@dataclass(frozen=True, kw_only=True)
class Assume(Command):
    file: str


@dataclass(frozen=True, kw_only=True)
class Exit(Command):
    pass


@dataclass(frozen=True, kw_only=True)
class Help(Command):
    topic: tuple[str, ...] = ()
