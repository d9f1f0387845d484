"""What the MEASCOM interpreter (interpreter.py) and LIST (listing.py) share: the error every
command raises, the session's state, and a stored measurement as MEASCOM shows it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from collector.meascom import ast
from collector.meascom.parser import MeascomSyntaxError, printable
from collector.measure.contab import Contab, ContabBuilder

DEFAULT_SUBVOL = "$SYSTEM.SYSTEM"


class MeascomError(Exception):
    """A MEASCOM command was refused: where (file, 1-based line and column), the offending
    word, what would have been accepted, and why.

    ``syntax`` is True for parse errors (text that is not MEASCOM, or not text at all: NUL
    characters, bytes that are not UTF-8). ``bad_input`` is True for every error of the input
    itself, found before anything ran: syntax errors, and OBEY/OUT files that cannot be read,
    found or written (`meascom` exits 2 for these); False for a command refused by MEASURE
    semantics (a measurement already live, an unknown measurement …; exit 1)."""

    def __init__(self, message: str, line: int = 0, column: int = 0, *, word: str = "",
                 expected: list[str] | tuple[str, ...] = (), file: str | None = None,
                 syntax: bool = False, bad_input: bool = False):
        self.message, self.line, self.column = message, line, column
        self.word, self.expected, self.file, self.syntax = word, list(expected), file, syntax
        self.bad_input = bad_input or syntax
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"line {self.line}, column {self.column}" if self.line else ""
        if self.file:  # "day.obey: line 3, column 9: …", as `meascom --api` prints it
            where = f"{printable(self.file)}: {where}" if where else printable(self.file)
        return f"{where}: {self.message}" if where else self.message

    @classmethod
    def from_syntax(cls, exc: MeascomSyntaxError, file: str | None) -> MeascomError:
        return cls(exc.message, exc.line, exc.column, word=exc.word, expected=exc.expected,
                   file=file, syntax=True)


@dataclass
class ReportSettings:
    """SET REPORT attributes (MEASCOM defaults: FORMAT NORMAL, RATE ON)."""

    format: str = "NORMAL"
    rate: str = "ON"
    loadid: str | None = None
    totals: str = "EXCLUDE"
    zero_reports: str = "INCLUDE"
    style: str = "LEGACY"
    dots: str = "OFF"
    cr_name_qual: str = "UNQUALIFIED"
    from_: ast.DateTime | None = None
    to: ast.DateTime | None = None
    for_: ast.Duration | None = None


@dataclass
class SessionState:
    """What a session's commands change: the CONTAB being built, SET REPORT, the current
    measurement, OUT, EXIT (copied before a text runs, restored if it fails)."""

    builder: ContabBuilder = field(default_factory=lambda: ContabBuilder(default_subvol=DEFAULT_SUBVOL))
    config_sources: list[str] = field(default_factory=list)
    assumed: str | None = None
    current: int | None = None  # measurement_id made current by ADD MEASUREMENT / START
    report: ReportSettings = field(default_factory=ReportSettings)
    out: str | None = None
    exited: bool = False


@dataclass(frozen=True)
class Measurement:
    measurement_id: int
    name: str
    state: str
    start_at: datetime | None
    stop_at: datetime | None
    interval_us: int | None
    started_at: datetime | None
    stopped_at: datetime | None
    contab: Contab
    source: str | None
