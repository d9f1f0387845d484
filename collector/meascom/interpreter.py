"""MEASCOM interpreter: a session that runs parsed MEASCOM commands against the database.

    with Session(url, system="\\\\DEMO") as s:
        print(s.execute(open("cplnday.obey").read()))

Rules a MEASCOM user should know (measure-reference §5):

* ``execute(text)`` parses the whole text first, OBEY files included (each file parsed fully,
  nested up to 8 deep), and checks every ADD/DELETE/COUNTER command against the CONTAB being
  built. A syntax error anywhere runs nothing. Then the commands run in one database
  transaction: a command that fails (a measurement name already live, an unknown
  measurement …) undoes the whole text — database rows, session state and OUT files alike —
  and raises :class:`MeascomError` naming file, line, column and what was wrong.
* Errors of the input itself (MeascomError ``bad_input``; `meascom` exits 2): text that is
  not MEASCOM, not UTF-8 or holds NUL (positioned in its file), an OBEY file that cannot be
  found or read (found before anything runs); an OUT name that cannot be a file (at its OUT
  command or ``/OUT/`` option); an OUT file that cannot be written (OUT output is written
  when all commands ran, still inside the transaction; position: the command whose output
  it was). Either way nothing of the text changes, as for a refusal by MEASURE semantics
  (the other MeascomErrors; exit 1).
* The CONTAB built by ADD / DELETE / ADD COUNTER belongs to the session and is uncommitted
  until START MEASUREMENT stores it (it stays in the session for the next START).
* Times are the system's local civil time (its ``time_zone``). START: FROM omitted = now;
  a date omitted = today (so ``FROM 00:05`` run at 10:00 means 00:05 today, already past:
  the measurement starts at once); FOR and TO are mutually exclusive; neither = until STOP.
* LIST/LISTALL times without a date mean the latest such time not after the measurement's
  end (or now, for a measurement without end), and not before its start: ``FROM 23:00``
  in a day's measurement file is that day's 23:00.
* A measurement's name is its data file's name: the last element of the file name
  (``$PERF.DATA.JUN04`` is measurement ``JUN04``), a letter and up to 7 letters or digits.
* Abbreviations are accepted only for interactive input (``Session(interactive=True)``),
  never in OBEY files.
"""

from __future__ import annotations

import copy
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from collector.meascom import ast, listing
from collector.meascom.configure import CONFIG_COMMANDS, ContabCommandError, apply_commands
from collector.meascom.parser import MeascomSyntaxError, parse_command, tokenize
from collector.meascom.state import (
    DEFAULT_SUBVOL,
    MeascomError,
    Measurement,
    ReportSettings,
    SessionState,
)
from collector.measure.contab import (
    CPU_SPEC_TYPES,
    FILE_SPEC_TYPES,
    PROCESS_SPEC_TYPES,
    Contab,
    ContabBuilder,
    EntityDescriptor,
    format_process_spec,
)
from core import control
from core.catalog import load_catalog

__all__ = ["HELP", "MAX_OBEY_DEPTH", "MeascomError", "ReportSettings", "Session", "render_config"]

MAX_OBEY_DEPTH = 8
MAX_OBEY_BYTES = 16 * 1024 * 1024  # a larger "OBEY file" is not one (or is /dev/zero)
HEARTBEAT_FRESH_S = 60.0
_NAME_RE = re.compile(r"[A-Z][A-Z0-9]{0,7}")


def _short(name: str, limit: int = 60) -> str:
    """A file name as quoted in a message (a 300-character name is cut)."""
    return repr(name if len(name) <= limit else name[:limit] + "…")


def file_error_reason(exc: BaseException) -> str:
    """What the file system said, without the file name (the message names it already)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _position(text: str) -> tuple[int, int]:
    """1-based line and column just after ``text`` (lines split as the tokenizer does)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return len(lines), len(lines[-1]) + 1


def read_obey_file(path: Path, name: str) -> str:
    """The text of an OBEY file. Raises OSError/ValueError when it cannot be opened or read
    (the caller says where it was named), MeascomError (``syntax``, positioned in the file
    ``name``) when it is not UTF-8 text, holds a NUL character or is too large."""
    with path.open("rb") as f:
        data = f.read(MAX_OBEY_BYTES + 1)
    data = data.removeprefix(b"\xef\xbb\xbf")  # a byte order mark (Windows editors) is no text
    if len(data) > MAX_OBEY_BYTES:
        raise MeascomError(f"larger than {MAX_OBEY_BYTES // (1024 * 1024)} MiB: not an OBEY file",
                           file=name, syntax=True)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _position(data[:exc.start].decode("utf-8"))
        raise MeascomError(f"not UTF-8 text: byte 0x{data[exc.start]:02X} (is this a binary "
                           "file?)", line, column, file=name, syntax=True) from None
    nul = text.find("\x00")
    if nul >= 0:
        line, column = _position(text[:nul])
        raise MeascomError("NUL character: an OBEY file is text (is this a binary file?)",
                           line, column, file=name, syntax=True)
    return text


# ------------------------------------------------------------------------------ help

HELP: dict[str, str] = {
    "ADD": "ADD entity-type spec [, spec]...   add entities to the configuration (CONTAB)\n"
           "ADD USERDEF process-spec           measure a process's user counters\n"
           "ADD COUNTER name, PROCESS spec, {ACCUM|FACCUM|BUSY|QUEUE|QBUSY} [, ARRAY n]\n"
           "ADD MEASUREMENT name               make a measurement current for LIST",
    "DELETE": "DELETE entity-type spec [, spec]...  remove an ADD, or exclude entities after a\n"
              "                                     wildcard ADD (ADD CPU * then DELETE CPU 6)\n"
              "DELETE COUNTER {name|*} [, PROCESS spec]",
    "START": "START MEASUREMENT name [, FROM [date,] hh:mm[:ss]] [, FOR n {SECONDS|MINUTES|HOURS}\n"
             "      | , TO [date,] hh:mm[:ss]] [, INTERVAL n {SECONDS|MINUTES|HOURS}]\n"
             "  schedules the configuration built so far (system local time; date omitted = today)",
    "STOP": "STOP MEASUREMENT name        stop a measurement now",
    "INFO": "INFO [/OUT file/] [MEASUREMENT] name [, name]...\n"
            "  prints the configuration as ADD/DELETE/ADD COUNTER/START commands (an OBEY file)",
    "STATUS": "STATUS [MEASSUBSYS]          the collector and the live measurements\n"
              "STATUS MEASUREMENT name      state, entities per type, counter space",
    "SET": "SET REPORT attr [, attr]...  FORMAT {BRIEF|NORMAL|STRUCTURED}, RATE {ON|OFF},\n"
           "  LOADID name, TOTALS {INCLUDE|ONLY|EXCLUDE}, ZERO-REPORTS {INCLUDE|EXCLUDE},\n"
           "  FROM [date,] time, TO [date,] time, FOR duration",
    "LIST": "LIST entity-type spec [, FROM ...] [, TO ... | , FOR d] [, LOADID id]\n"
            "     [, BY counter] [, IF counter {=|<>|<|>|<=|>=} value]\n"
            "  one summary per entity over the report window of the current measurement",
    "LISTALL": "LISTALL entity-type spec [options as LIST]   every interval record in the window",
    "LISTACTIVE": "LISTACTIVE entity-type spec [, FOR d]   live counters from the running collector\n"
                  "  (since measurement start, or the change over the next d)",
    "OBEY": "OBEY file     run the commands of a file (relative to the current directory, or\n"
            "              a quoted path); OBEY files nest up to 8 deep",
    "OUT": "OUT [file]    send the output of later commands to a file (OUT alone: back to the terminal)",
    "VOLUME": "VOLUME [$vol.]subvol     default volume/subvolume for partial file names",
    "ASSUME": "ASSUME MEASUREMENT name  later START/STOP/INFO/STATUS may omit the name",
    "EXIT": "EXIT          end the session",
    "HELP": "HELP [command]  this help",
}


def _help(topic: tuple[str, ...]) -> str:
    if not topic:
        return ("MEASCOM commands (HELP command for details):\n  "
                + "  ".join(HELP) + "\nComments: == or ! to the end of the line; a line ending "
                "with ',' or '&' continues the command.")
    key = topic[0]
    if key not in HELP:
        raise MeascomError(f"no help for {key!r}; topics: {', '.join(HELP)}")
    return HELP[key]


# ------------------------------------------------------------------------------ state


@dataclass(frozen=True)
class _Item:
    cmd: ast.Command
    source: str  # the command's text as written (its lines)
    file: str | None


class Session:
    """One MEASCOM session on one system.

    ``target`` is a database URL (the session opens its own connection) or an open psycopg
    connection (used as is; the caller owns it). ``system`` is the node name (``\\DEMO`` or
    ``DEMO``); None = the only system in the database. ``clock`` returns the current time
    (aware); ``sleep`` waits (LISTACTIVE FOR); both exist for tests. ``answer_timeout`` is how
    long STATUS/LISTACTIVE wait for the collector.
    """

    def __init__(self, target: str | psycopg.Connection, *, system: str | None = None,
                 cwd: str | Path | None = None, interactive: bool = False,
                 clock: Callable[[], datetime] | None = None,
                 sleep: Callable[[float], None] = time.sleep, answer_timeout: float = 3.0):
        if isinstance(target, str):
            self.url: str | None = target
            self.conn = psycopg.connect(target, autocommit=True)
            self._own = True
        else:
            self.url = None
            self.conn = target
            self._own = False
        self.cwd = Path(cwd) if cwd is not None else Path.cwd()
        self.interactive = interactive
        self.clock = clock or (lambda: datetime.now(UTC))
        self.sleep = sleep
        self.answer_timeout = answer_timeout
        self.catalog = load_catalog()
        self.state = SessionState()
        self._pending_files: list[tuple[Path, str, str, _Item]] = []  # path, name, text, by
        self._item: _Item | None = None  # the command running
        self.system_id, self.system_name, self.tz = self._find_system(system)

    # -- life cycle --------------------------------------------------------------------

    def close(self) -> None:
        if self._own:
            self.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def exited(self) -> bool:
        return self.state.exited

    @property
    def contab(self) -> Contab:
        """The configuration built so far in this session (not yet stored)."""
        return self.state.builder.build()

    def now(self) -> datetime:
        return self.clock().astimezone(self.tz)

    # -- database helpers --------------------------------------------------------------

    def q(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        with self.conn.cursor(row_factory=dict_row) as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def q1(self, sql: str, params: Any = None) -> dict[str, Any] | None:
        rows = self.q(sql, params)
        return rows[0] if rows else None

    def _find_system(self, system: str | None) -> tuple[int, str, ZoneInfo]:
        rows = self.q("SELECT system_id, system_name, time_zone FROM measure.system ORDER BY system_name")
        names = ", ".join(r["system_name"] for r in rows) or "none"
        row: dict[str, Any] | None
        if system is None:
            if len(rows) != 1:
                raise MeascomError(
                    f"the database holds {len(rows)} systems ({names}); name one with --system"
                    if rows else "the database holds no system yet: start the collector "
                                 "(measuredb run) first")
            row = rows[0]
        else:
            want = system.strip().upper()
            want = want if want.startswith("\\") else "\\" + want
            row = next((r for r in rows if r["system_name"] == want), None)
            if row is None:
                raise MeascomError(f"unknown system {system!r}; systems in the database: {names}")
        try:
            tz = ZoneInfo(row["time_zone"])
        except (ZoneInfoNotFoundError, ValueError):
            raise MeascomError(f"system {row['system_name']} has an unknown time zone "
                               f"{row['time_zone']!r}") from None
        return row["system_id"], row["system_name"], tz

    # -- running text ------------------------------------------------------------------

    def run_file(self, path: str | Path) -> str:
        """``OBEY path`` as a top-level command: the file's commands (never abbreviated)."""
        name = str(path)
        try:
            p = Path(path)
            if not p.is_absolute():
                p = self.cwd / p
            text = read_obey_file(p, name)
        except (OSError, ValueError) as exc:  # not found, a directory, name too long, NUL …
            raise MeascomError(f"cannot read OBEY file: {file_error_reason(exc)}", file=name,
                               bad_input=True) from None
        return self.execute(text, file=name, interactive=False)

    def execute(self, text: str, *, file: str | None = None,
                interactive: bool | None = None) -> str:
        """Parse all of ``text`` (and the OBEY files it names), check the configuration
        commands, then run everything in one transaction; returns the output text.
        Raises MeascomError (nothing changed) on any error."""
        interactive = self.interactive if interactive is None else interactive
        items = self._load(text, file, 0, interactive)
        self._check_config(items)
        saved = copy.deepcopy(self.state)
        self._pending_files = []
        out: list[str] = []
        try:
            with self.conn.transaction():
                for item in items:
                    if self.state.exited:
                        break
                    self._item = item
                    try:
                        text_out = self._run(item)
                        if text_out and self.state.out and not isinstance(item.cmd, ast.Out):
                            self._queue_out(self.state.out, text_out)
                            text_out = ""
                    except MeascomError as exc:
                        if not exc.line:
                            exc = MeascomError(exc.message, item.cmd.line, item.cmd.column,
                                               word=exc.word, expected=exc.expected,
                                               file=item.file, syntax=exc.syntax,
                                               bad_input=exc.bad_input)
                        elif exc.file is None:
                            exc.file = item.file
                        raise exc from None
                    except psycopg.Error as exc:
                        msg = (exc.diag.message_primary if getattr(exc, "diag", None)
                               and exc.diag.message_primary else str(exc))
                        raise MeascomError(f"database: {msg}", item.cmd.line, item.cmd.column,
                                           file=item.file) from None
                    if text_out:
                        out.append(text_out)
                self._item = None
                self._write_out_files()  # a file that cannot be written undoes the text
        except BaseException:
            self.state = saved
            raise
        finally:
            self._pending_files = []
            self._item = None
        return "\n".join(out)

    def _queue_out(self, name: str, text: str) -> None:
        """Output of the running command for the OUT file ``name``, written once all ran."""
        assert self._item is not None
        self._pending_files.append((self._out_path(name), name, text + "\n", self._item))

    def _write_out_files(self) -> None:
        """Append the queued output to its files. Any file-system error is a MeascomError at
        the command whose output it was, and the files are as before: those this call created
        are removed, the others cut back to their old length."""
        handles: dict[Path, tuple[Any, str, _Item]] = {}
        undo: list[tuple[Path, int | None]] = []  # (file, old size; None: created here)
        name, item = "", None
        try:
            for path, name, chunk, item in self._pending_files:
                if path not in handles:
                    try:
                        size: int | None = path.stat().st_size
                    except FileNotFoundError:
                        size = None
                    handles[path] = (path.open("a", encoding="utf-8"), name, item)
                    undo.append((path, size))
                handles[path][0].write(chunk)
            for path, (f, _name, _item) in list(handles.items()):
                del handles[path]
                f.close()  # flushes: a full disc shows here
        except (OSError, ValueError) as exc:
            for f, _, _ in handles.values():
                try:
                    f.close()
                except (OSError, ValueError):
                    pass
            for path, size in undo:
                try:
                    if size is None:
                        path.unlink()
                    else:
                        os.truncate(path, size)
                except OSError:
                    pass
            assert item is not None
            raise MeascomError(f"cannot write OUT file {_short(name)}: {file_error_reason(exc)}",
                               item.cmd.line, item.cmd.column, word=name, file=item.file,
                               bad_input=True) from None

    def _load(self, text: str, file: str | None, depth: int, interactive: bool) -> list[_Item]:
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        try:
            groups = tokenize(text)
        except MeascomSyntaxError as exc:
            raise MeascomError.from_syntax(exc, file) from None
        items: list[_Item] = []
        for toks in groups:
            try:
                cmd = parse_command(toks, interactive=interactive)
            except MeascomSyntaxError as exc:
                raise MeascomError.from_syntax(exc, file) from None
            source = "\n".join(lines[toks[0].line - 1:toks[-1].line])
            if isinstance(cmd, ast.Obey):
                if depth + 1 > MAX_OBEY_DEPTH:
                    raise MeascomError(f"OBEY files nest at most {MAX_OBEY_DEPTH} deep "
                                       "(does an OBEY file call itself?)", cmd.line, cmd.column,
                                       word=cmd.file, file=file, bad_input=True)
                path = self._obey_path(cmd, file)
                try:
                    sub = read_obey_file(path, cmd.file)
                except (OSError, ValueError) as exc:
                    raise MeascomError(f"cannot read OBEY file {_short(cmd.file)}: "
                                       f"{file_error_reason(exc)}", cmd.line, cmd.column,
                                       word=cmd.file, file=file, bad_input=True) from None
                items.extend(self._load(sub, cmd.file, depth + 1, False))
            else:
                items.append(_Item(cmd, source, file))
        return items

    def _obey_path(self, cmd: ast.Obey, file: str | None) -> Path:
        try:
            p = self._existing(cmd.file)
        except (OSError, ValueError) as exc:
            raise MeascomError(f"cannot read OBEY file {_short(cmd.file)}: "
                               f"{file_error_reason(exc)}", cmd.line, cmd.column,
                               word=cmd.file, file=file, bad_input=True) from None
        if p is None:
            raise MeascomError(f"OBEY file {_short(cmd.file)} not found (looked in "
                               f"{_short(str(self._path(cmd.file).parent), 200)})",
                               cmd.line, cmd.column, word=cmd.file, file=file, bad_input=True)
        return p

    def _path(self, name: str) -> Path:
        p = Path(name)
        return p if p.is_absolute() else self.cwd / p

    def _existing(self, name: str) -> Path | None:
        """The file ``name`` names, matched case-insensitively (Guardian names are), or None.
        Raises OSError/ValueError for a name the file system refuses (too long, NUL …)."""
        p = self._path(name)
        try:
            p.stat()
            return p
        except FileNotFoundError:
            pass
        try:
            for cand in p.parent.iterdir():
                if cand.name.upper() == p.name.upper():
                    return cand
        except (FileNotFoundError, NotADirectoryError):
            pass
        return None

    def _out_path(self, name: str) -> Path:
        """The file an OUT name writes to; a MeascomError (bad input) when it cannot be one."""
        try:
            p = self._existing(name)
            if p is None:
                p = self._path(name)
                if not p.parent.is_dir():
                    raise MeascomError(f"cannot write OUT file {_short(name)}: no directory "
                                       f"{_short(str(p.parent), 200)}", word=name, bad_input=True)
            elif p.is_dir():
                raise MeascomError(f"cannot write OUT file {_short(name)}: it is a directory",
                                   word=name, bad_input=True)
        except (OSError, ValueError) as exc:
            raise MeascomError(f"cannot write OUT file {_short(name)}: "
                               f"{file_error_reason(exc)}", word=name, bad_input=True) from None
        return p

    def _check_config(self, items: list[_Item]) -> None:
        """Apply the configuration commands to a scratch copy: refuse before anything runs."""
        scratch = copy.deepcopy(self.state.builder)
        for item in items:
            if isinstance(item.cmd, CONFIG_COMMANDS):
                self._apply_config(scratch, item)

    @staticmethod
    def _apply_config(builder: ContabBuilder, item: _Item) -> None:
        cmd = item.cmd
        if isinstance(cmd, ast.Volume) and cmd.volume is None and cmd.subvol is None:
            builder.default_subvol = DEFAULT_SUBVOL
            return
        try:
            apply_commands(builder, [cmd])
        except ContabCommandError as exc:
            raise MeascomError(exc.message, exc.line, exc.column, file=item.file) from None

    def _run(self, item: _Item) -> str:
        cmd = item.cmd
        if isinstance(cmd, CONFIG_COMMANDS):
            self._apply_config(self.state.builder, item)
            self.state.config_sources.append(item.source)
            return ""
        handler = getattr(self, "_cmd_" + type(cmd).__name__)
        return handler(cmd, item)

    # -- measurements ------------------------------------------------------------------

    def _name(self, file: str | None, cmd: ast.Command) -> str:
        if file is None:
            if self.state.assumed is None:
                raise MeascomError("no measurement named: give one, or ASSUME MEASUREMENT name "
                                   "first")
            return self.state.assumed
        if file.startswith("="):
            raise MeascomError(f"DEFINE names ({file}) are not supported for measurements; "
                               "give the data file name")
        name = file.rsplit(".", 1)[-1].upper()
        if not _NAME_RE.fullmatch(name):
            raise MeascomError(f"measurement name {name!r} must be a file name: a letter, then "
                               "up to 7 letters or digits", word=file)
        return name

    def _measurement(self, *, name: str | None = None, measurement_id: int | None = None,
                     live_only: bool = False) -> Measurement | None:
        cond, params = ("measurement_id = %s", [measurement_id]) if measurement_id else (
            "upper(name) = %s", [name])
        row = self.q1(
            f"""SELECT measurement_id, name, state, start_at, stop_at, started_at, stopped_at,
                       (interval_seconds * 1000000)::bigint AS interval_us, contab, source
                  FROM measure.measurement
                 WHERE system_name = %s AND {cond}
                   {"AND state NOT IN ('stopped', 'failed')" if live_only else ""}
                 ORDER BY (state NOT IN ('stopped', 'failed')) DESC, measurement_id DESC
                 LIMIT 1""",
            [self.system_name, *params])
        if row is None:
            return None
        return Measurement(row["measurement_id"], row["name"], row["state"], row["start_at"],
                           row["stop_at"], row["interval_us"], row["started_at"],
                           row["stopped_at"], Contab.model_validate(row["contab"]), row["source"])

    def _known(self, name: str) -> Measurement:
        m = self._measurement(name=name)
        if m is None:
            raise MeascomError(f"no measurement {name} on {self.system_name}", word=name)
        return m

    def current_measurement(self) -> Measurement:
        """The measurement LIST reads: ADD MEASUREMENT / START, else the ASSUMEd one."""
        if self.state.current is not None:
            m = self._measurement(measurement_id=self.state.current)
            if m is not None:
                return m
        if self.state.assumed is not None:
            m = self._measurement(name=self.state.assumed)
            if m is not None:
                return m
        raise MeascomError("no current measurement: ADD MEASUREMENT name (or START one) first")

    def local_datetime(self, dt: ast.DateTime, today: datetime) -> datetime:
        try:
            d = dt.date.resolve(today.date()) if dt.date is not None else today.date()
        except ValueError:  # 29 FEB without a year, in a year that has none
            assert dt.date is not None
            year = dt.date.year or today.year
            raise MeascomError(f"{dt.date.day} {ast.MONTHS[dt.date.month - 1]} {year} does not "
                               "exist", dt.date.line, dt.date.column) from None
        return datetime.combine(d, dt.time.time, tzinfo=self.tz)

    def _cmd_StartMeasurement(self, cmd: ast.StartMeasurement, item: _Item) -> str:
        name = self._name(cmd.file, cmd)
        contab = self.state.builder.build()
        if not contab.descriptors and not contab.counters:
            raise MeascomError("nothing to measure: ADD entities (ADD CPU * …) before START")
        live = self._measurement(name=name, live_only=True)
        if live is not None:
            raise MeascomError(
                f"measurement {name} is already {live.state} (id {live.measurement_id}); "
                f"STOP MEASUREMENT {name} first or choose another name", word=name)
        now = self.now()
        start = now if cmd.start is None else self.local_datetime(cmd.start, now)
        stop = None
        if cmd.for_ is not None:
            stop = start + timedelta(seconds=cmd.for_.seconds)
        elif cmd.to is not None:
            stop = self.local_datetime(cmd.to, now)
            if stop <= start:
                raise MeascomError(
                    f"TO {_fmt(stop)} is not after the start {_fmt(start)}; give TO a date "
                    "(TO 15 NOV, 06:00) or use FOR", cmd.to.line, cmd.to.column)
        if stop is not None and stop <= now:
            pos = cmd.to or cmd.for_
            assert pos is not None  # (a stop comes from TO or FOR)
            raise MeascomError(f"the measurement would end at {_fmt(stop)}, which is already "
                               "past", pos.line, pos.column)
        interval_us = cmd.interval.us if cmd.interval else None
        source = "\n".join([*self.state.config_sources, item.source])
        contab_json = contab.model_dump(mode="json")
        mid = self.q("SELECT measure.create_measurement(%s, %s, %s, %s, %s, %s, %s) AS id",
                     (self.system_name, name, Jsonb(contab_json), source, start, stop,
                      interval_us))[0]["id"]
        self.state.current = mid  # implicit ADD MEASUREMENT
        lines = [f"Measurement {name} (id {mid}) scheduled on {self.system_name}: "
                 f"from {_fmt(start)} " + (f"to {_fmt(stop)}" if stop else "until STOP MEASUREMENT")
                 + f" ({self.tz.key}), "
                 + (f"interval {_fmt_duration(interval_us)}" if interval_us
                    else "no interval (records at start and stop only)") + "; "
                 + _count_types(contab)]
        if cmd.options or cmd.filesize:
            ignored = [*cmd.options, *(["FILESIZE"] if cmd.filesize else [])]
            lines.append(f"({', '.join(ignored)} accepted; no effect on this platform)")
        return "\n".join(lines)

    def _cmd_StopMeasurement(self, cmd: ast.StopMeasurement, item: _Item) -> str:
        name = self._name(cmd.file, cmd)
        m = self._measurement(name=name, live_only=True)
        if m is None:
            known = self._measurement(name=name)
            raise MeascomError(
                f"measurement {name} is not live (it is {known.state})" if known
                else f"no measurement {name} on {self.system_name}", word=name)
        now = self.now()
        # a measurement that has not started by now is stopped at once (it never runs)
        self.q("SELECT measure.stop_measurement(%s, %s)", (m.measurement_id, now))
        return f"Measurement {name} (id {m.measurement_id}) stops at {_fmt(now)}"

    def _cmd_AddMeasurement(self, cmd: ast.AddMeasurement, item: _Item) -> str:
        m = self._known(self._name(cmd.file, cmd))
        self.state.current = m.measurement_id
        return f"Measurement {m.name} (id {m.measurement_id}, {m.state}) is current for reports"

    def _cmd_Assume(self, cmd: ast.Assume, item: _Item) -> str:
        self.state.assumed = self._name(cmd.file, cmd)
        return ""

    def _cmd_InfoMeasurement(self, cmd: ast.InfoMeasurement, item: _Item) -> str:
        names = [self._name(f, cmd) for f in cmd.files] or [self._name(None, cmd)]
        parts = []
        for name in names:
            m = self._known(name)
            counts = self.q(
                """SELECT t.measure_name, count(DISTINCT r.entity_id) AS n
                     FROM measure.interval_run r JOIN measure.entity_type t USING (type_code)
                    WHERE r.measurement_id = %s GROUP BY t.measure_name, t.type_code
                    ORDER BY t.type_code""", (m.measurement_id,))
            parts.append(render_config(m, self.system_name, self.tz, counts))
        text = "\n\n".join(parts)
        if cmd.out:
            self._queue_out(cmd.out, text)
            return f"INFO written to {cmd.out}"
        return text

    # -- status ------------------------------------------------------------------------

    def _heartbeat(self) -> dict[str, Any] | None:
        return self.q1(
            """SELECT collector_id, mode, beat_at, simulated_at,
                      extract(epoch FROM clock_timestamp() - beat_at)::float8 AS age
                 FROM measure.collector_heartbeat WHERE system_name = %s
                ORDER BY beat_at DESC LIMIT 1""", (self.system_name,))

    def ask_collector(self, request: control.Request) -> tuple[control.Answer | None, str | None]:
        """Hand a control request to the collector (core/control.py); (answer, None) or (None,
        why not).

        Skips the wait when the system has no fresh heartbeat (no collector is running)."""
        hb = self._heartbeat()
        if hb is None or hb["age"] > HEARTBEAT_FRESH_S:
            last = f"last heartbeat {hb['age']:.0f} s ago" if hb else "no heartbeat ever"
            return None, f"the collector of {self.system_name} is not answering ({last})"
        with self._side_connection() as side:
            rid = control.submit(side, self.system_id, request)
            deadline = time.monotonic() + self.answer_timeout
            while True:
                try:
                    result = control.outcome(side, rid, request)
                except control.MalformedAnswer as exc:
                    side.execute("SELECT measure.forget_request(%s)", (rid,))
                    return None, str(exc)
                if result is not None or time.monotonic() >= deadline:
                    side.execute("SELECT measure.forget_request(%s)", (rid,))  # tidy up
                    if isinstance(result, control.Refusal):
                        return None, f"the collector says: {result.message}"
                    if result is not None:
                        return result, None
                    return None, (f"the collector of {self.system_name} is not answering "
                                  f"(no answer within {self.answer_timeout:g} s)")
                time.sleep(0.05)

    def _side_connection(self) -> psycopg.Connection:
        """An autocommit connection: the collector must see a request before we commit."""
        if self.url is not None:
            return psycopg.connect(self.url, autocommit=True)
        info = self.conn.info
        return psycopg.connect(info.dsn, password=info.password, autocommit=True)

    def _cmd_Status(self, cmd: ast.Status, item: _Item) -> str:
        text = (self._status_measurement(self._name(cmd.file, cmd)) if cmd.target == "MEASUREMENT"
                else self._status_subsys())
        if cmd.out:
            self._queue_out(cmd.out, text)
            return f"STATUS written to {cmd.out}"
        return text

    def _status_subsys(self) -> str:
        lines = [f"MEASSUBSYS on {self.system_name} (time zone {self.tz.key})"]
        hb = self._heartbeat()
        if hb is None:
            lines.append("  collector: none has run for this system")
        else:
            sim = f", simulated time {_fmt(hb['simulated_at'].astimezone(self.tz))}" if hb[
                "simulated_at"] else ""
            lines.append(f"  collector {hb['collector_id']}: {hb['mode']}, last heartbeat "
                         f"{hb['age']:.1f} s ago{sim}")
        rows = self.q("""SELECT measurement_id, name, state, start_at, stop_at,
                                (interval_seconds * 1000000)::bigint AS interval_us
                           FROM measure.measurement WHERE system_name = %s
                            AND state NOT IN ('stopped', 'failed') ORDER BY measurement_id""",
                      (self.system_name,))
        lines.append(f"  live measurements: {len(rows)}")
        for r in rows:
            lines.append(
                f"    {r['measurement_id']:>5} {r['name']:<8} {r['state']:<10} from "
                f"{_fmt(r['start_at'].astimezone(self.tz)) if r['start_at'] else '-'} to "
                f"{_fmt(r['stop_at'].astimezone(self.tz)) if r['stop_at'] else 'STOP'}, "
                + (f"interval {_fmt_duration(r['interval_us'])}" if r["interval_us"]
                   else "no interval"))
        running = [r for r in rows if r["state"] == "running"]
        if running:
            resp, why = self.ask_collector(control.Status(measurement_id=running[0]["measurement_id"]))
            if not isinstance(resp, control.StatusAnswer):  # None: why not
                lines.append(f"  counter space: {why}")
            else:
                lines.append("  counter space per CPU (CIDs used/limit, words used/limit):")
                for cpu, c in sorted(resp.cpus.items(), key=lambda kv: int(kv[0])):
                    lines.append(f"    CPU {int(cpu):>2}: {c.cids}/{c.cid_limit} CIDs, "
                                 f"{c.words}/{c.words_limit} words")
        return "\n".join(lines)

    def _status_measurement(self, name: str) -> str:
        m = self._known(name)
        lines = [f"MEASUREMENT {m.name} (id {m.measurement_id}) on {self.system_name}: {m.state}",
                 f"  window: from {_fmt_opt(m.start_at, self.tz)} to "
                 f"{_fmt_opt(m.stop_at, self.tz, 'STOP MEASUREMENT')}, "
                 + (f"interval {_fmt_duration(m.interval_us)}" if m.interval_us else "no interval"),
                 (f"  started {_fmt_opt(m.started_at, self.tz, '-')}, stopped "
                  f"{_fmt_opt(m.stopped_at, self.tz, '-')}"),
                 f"  configuration: {_count_types(m.contab)}"]
        stored = self.q(
            """SELECT t.measure_name, count(DISTINCT r.entity_id) AS entities, sum(r.n) AS records,
                      max(r.to_at) AS last_to
                 FROM measure.interval_run r JOIN measure.entity_type t USING (type_code)
                WHERE r.measurement_id = %s GROUP BY t.measure_name, t.type_code
                ORDER BY t.type_code""", (m.measurement_id,))
        if stored:
            lines.append("  stored interval records:")
            for r in stored:
                lines.append(f"    {r['measure_name']:<10} {r['entities']:>6} entities "
                             f"{r['records']:>8} records, last to {_fmt(r['last_to'].astimezone(self.tz))}")
        else:
            lines.append("  stored interval records: none")
        if m.state in ("running", "stopped", "scheduled"):
            resp, why = self.ask_collector(control.Status(measurement_id=m.measurement_id))
            if not isinstance(resp, control.StatusAnswer):  # None: why not
                lines.append(f"  collector: {why}")
            else:
                st = resp.status
                lines.append(f"  collector ({resp.at.isoformat()}): {st.state}, "
                             f"{st.cids} CIDs, {st.counter_space_words} words "
                             f"of counter space, {st.copies_written} copies")
                for e, n in sorted(st.entities.items()):
                    lines.append(f"    {self.catalog.entity(e).measure_name:<10} {n:>6} entities")
                for k, n in sorted(st.not_allocated.items()):
                    lines.append(f"    not allocated {k}: {n}")
        return "\n".join(lines)

    # -- reports -----------------------------------------------------------------------

    def _cmd_SetReport(self, cmd: ast.SetReport, item: _Item) -> str:
        r = self.state.report
        for a in cmd.attrs:
            # (the parser's values: FROM and TO a date and time, FOR a duration)
            if a.name == "FROM":
                assert isinstance(a.value, ast.DateTime)
                r.from_ = a.value
            elif a.name == "TO":
                assert isinstance(a.value, ast.DateTime)
                r.to, r.for_ = a.value, None
            elif a.name == "FOR":
                assert isinstance(a.value, ast.Duration)
                r.for_, r.to = a.value, None
            else:
                setattr(r, a.name.lower().replace("-", "_"), a.value)
        return ""

    def _cmd_ListCommand(self, cmd: ast.ListCommand, item: _Item) -> str:
        text = (listing.list_active(self, cmd) if cmd.verb == "LISTACTIVE"
                else listing.list_stored(self, cmd))
        if cmd.out:
            self._queue_out(cmd.out, text)
            return f"{cmd.verb} written to {cmd.out}"
        return text

    # -- the rest ----------------------------------------------------------------------

    def _cmd_Out(self, cmd: ast.Out, item: _Item) -> str:
        if cmd.file is not None:
            self._out_path(cmd.file)  # a name that cannot be a file is refused here
        self.state.out = cmd.file
        return ""

    def _cmd_Exit(self, cmd: ast.Exit, item: _Item) -> str:
        self.state.exited = True
        return ""

    def _cmd_Help(self, cmd: ast.Help, item: _Item) -> str:
        return _help(cmd.topic)

    def _cmd_MeasSubsys(self, cmd: ast.MeasSubsys, item: _Item) -> str:
        raise MeascomError(f"{cmd.action} MEASSUBSYS: here the measurement subsystem is the "
                           "collector; start or stop it with `measuredb collector` / `measuredb run`")


# ------------------------------------------------------------------------------ rendering


def _fmt(dt: datetime) -> str:
    return f"{dt:%d %b %Y, %H:%M:%S}".upper()


def _fmt_opt(dt: datetime | None, tz: ZoneInfo, none: str = "now") -> str:
    return none if dt is None else _fmt(dt.astimezone(tz))


def _fmt_duration(us: int) -> str:
    s = us // 1_000_000
    for unit, n in (("HOURS", 3600), ("MINUTES", 60)):
        if s % n == 0 and s // n <= 9999:
            return f"{s // n} {unit}"
    return f"{s} SECONDS"


def _count_types(contab: Contab) -> str:
    per: dict[str, list[int]] = {}
    for d in contab.descriptors:
        per.setdefault(d.type, [0, 0])[1 if d.exclude else 0] += 1
    parts = [f"{t} {n}" + (f" (-{x} excluded)" if x else "") for t, (n, x) in per.items()]
    return ("descriptors: " + ", ".join(parts) if parts else "no entity descriptors") + (
        f"; {len(contab.counters)} user counters" if contab.counters else "")


_PROCESS_KEYS = {"cpu", "pin", "process_name", "program_file_name", "oss_path"}


def format_spec(d: EntityDescriptor) -> str | None:
    """The MEASCOM entity spec of a descriptor, or None when MEASCOM cannot express it."""
    f = dict(d.fields)
    if not f:
        return "*"
    t = d.type
    if t in PROCESS_SPEC_TYPES:
        if not set(f) <= _PROCESS_KEYS:
            return None
        if f.get("pin") == "SYSTEM" and len(f) > 1:
            return None
        return format_process_spec(f)
    if t in CPU_SPEC_TYPES:
        return str(f["cpu"]) if set(f) == {"cpu"} else None
    if t in FILE_SPEC_TYPES:
        return str(f["file_name"]) if set(f) == {"file_name"} else None
    if t in ("DISC", "DEVICE", "LINE", "NETLINE"):
        if not set(f) <= {"device_name", "cpu"}:
            return None
        base = str(f.get("device_name", "$*"))
        return f"{base}({f['cpu']})" if "cpu" in f else base
    if t == "TERMINAL":
        if not set(f) <= {"line_name", "subdev_name"}:
            return None
        line = str(f.get("line_name", "$*"))
        return f"{line}.{f['subdev_name']}" if "subdev_name" in f else line
    if t == "SYSTEM":
        if set(f) == {"remote_system"}:
            return str(f["remote_system"])
        return str(f["remote_system_name"]) if set(f) == {"remote_system_name"} else None
    if t == "CLUSTER":
        return str(f["remote_system_name"]) if set(f) == {"remote_system_name"} else None
    return None


def render_config(m: Measurement, system_name: str, tz: ZoneInfo,
                  entity_counts: Sequence[dict[str, Any]] = ()) -> str:
    """INFO MEASUREMENT: the configuration as runnable MEASCOM commands, with the time window,
    interval and state as comments (an OBEY file that recreates the measurement)."""
    lines = [f"== INFO MEASUREMENT {m.name} (id {m.measurement_id}) on {system_name}: {m.state}",
             f"== window: from {_fmt_opt(m.start_at, tz)} to "
             f"{_fmt_opt(m.stop_at, tz, 'STOP MEASUREMENT')} ({tz.key}); "
             + (f"interval {_fmt_duration(m.interval_us)}" if m.interval_us else "no interval")]
    if m.started_at or m.stopped_at:
        lines.append(f"== collector: started {_fmt_opt(m.started_at, tz, '-')}, stopped "
                     f"{_fmt_opt(m.stopped_at, tz, '-')}")
    if entity_counts:
        lines.append("== entities measured: " + ", ".join(
            f"{r['measure_name']} {r['n']}" for r in entity_counts))
    for d in m.contab.descriptors:
        spec = format_spec(d)
        verb = "DELETE" if d.exclude else "ADD"
        if spec is None:
            lines.append(f"== (not expressible in MEASCOM) {verb} {d.type} "
                         f"{json.dumps(d.fields, sort_keys=True)}")
        else:
            lines.append(f"{verb} {d.type} {spec}")
    for c in m.contab.counters:
        lines.append(f"ADD COUNTER {c.name}, PROCESS {c.process_spec}, {c.type}"
                     + (f", ARRAY {c.array}" if c.array is not None else ""))
    start = [f"START MEASUREMENT {m.name}"]
    if m.start_at:
        start.append(f"FROM {_fmt(m.start_at.astimezone(tz))}")
    if m.stop_at:
        start.append(f"TO {_fmt(m.stop_at.astimezone(tz))}")
    if m.interval_us:
        start.append(f"INTERVAL {_fmt_duration(m.interval_us)}")
    lines.append(", ".join(start))
    return "\n".join(lines)
