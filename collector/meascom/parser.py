"""MEASCOM command parser: hand-written tokenizer + recursive descent.

Grammar: measure-reference §5 (OBEY-file compatible subset). Rules a MEASCOM user should know:

* Keywords are case-insensitive. Abbreviations are refused (as in OBEY files) unless
  ``interactive=True``, where a unique prefix among the words valid at that point is accepted.
* Comments: ``== …`` and ``! …`` run to the end of the line.
* A command ends at the end of its line unless the line (after any comment) ends with a comma,
  which continues the command on the next line (``&`` at the end of a line also continues and
  is dropped). Commas between START/LIST options are optional
  (Figure 3 prints ``FROM 00:05 FOR 24 HOURS``).
* ``parse_script`` parses the whole text or raises :class:`MeascomSyntaxError`; nothing is
  executed before the whole file parsed.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from collector.meascom import ast
from collector.measure.contab import (
    CPU_SPEC_TYPES,
    FILE_SPEC_TYPES,
    PROCESS_SPEC_TYPES,
    DescriptorError,
    check_file_pattern,
    normalize_fields,
)
from core.catalog import load_catalog

__all__ = [
    "COMMANDS",
    "ENTITY_TYPES",
    "MeascomSyntaxError",
    "Token",
    "continues",
    "parse_command",
    "parse_script",
    "printable",
    "tokenize",
]

COMMANDS = ("ADD", "DELETE", "INFO", "START", "STOP", "STATUS", "SET", "LIST", "LISTALL",
            "LISTACTIVE", "OBEY", "OUT", "VOLUME", "ASSUME", "EXIT", "HELP")
# the catalogue's entity types and their synonyms (DISK, CONTROLLER), in type-code order
ENTITY_TYPES = tuple(n for e in load_catalog() for n in (e.measure_name, *e.synonyms))
COUNTER_TYPES = ("ACCUM", "FACCUM", "BUSY", "QUEUE", "QBUSY", "TCELLBUSY", "TCELLQUEUE",
                 "TCELLQBUSY")
DURATION_UNITS: dict[str, Literal["SECONDS", "MINUTES", "HOURS"]] = {"SECOND": "SECONDS", "SECONDS": "SECONDS", "MINUTE": "MINUTES",
                  "MINUTES": "MINUTES", "HOUR": "HOURS", "HOURS": "HOURS"}
REPORT_ATTRS = {  # attribute -> allowed keyword values (None: special value syntax)
    "FORMAT": ("BRIEF", "NORMAL", "STRUCTURED"),
    "RATE": ("ON", "OFF"),
    "STYLE": ("LEGACY", "ZMS"),
    "DOTS": ("ON", "OFF"),
    "TOTALS": ("INCLUDE", "ONLY", "EXCLUDE"),
    "ZERO-REPORTS": ("INCLUDE", "EXCLUDE"),
    "CR-NAME-QUAL": ("UNQUALIFIED", "QUALIFIED"),
    "LOADID": None,
    "FROM": None,
    "TO": None,
    "FOR": None,
}
OPTIONAL_VALUE_ATTRS = {"TOTALS": "INCLUDE", "ZERO-REPORTS": "INCLUDE"}
START_OPTIONS = ("FROM", "FOR", "TO", "INTERVAL", "OSS", "NOOSS", "SQL", "NOSQL", "FILESIZE",
                 "NOCOUNTERS")
LIST_OPTIONS = ("FROM", "TO", "FOR", "LOADID", "BY", "IF", "FORMAT", "RATE", "STYLE", "DOTS",
                "TOTALS", "ZERO-REPORTS", "CR-NAME-QUAL")
RELOPS = ("=", "<>", "<", ">", "<=", ">=")
MIN_YEAR, MAX_YEAR = 1984, 2047


class MeascomSyntaxError(ValueError):
    """A MEASCOM syntax error at a 1-based line and column.

    ``word`` is the offending text ('' at the end of a line); ``expected`` lists what would have
    been accepted there.
    """

    def __init__(self, line: int, column: int, word: str, expected: Sequence[str] = (),
                 message: str | None = None):
        self.line = line
        self.column = column
        self.word = word
        self.expected = list(expected)
        if message is None:
            what = f"'{printable(word, 80)}'" if word else "end of line"
            message = f"unexpected {what}"
            if self.expected:
                message += f"; expected {_or_list(self.expected)}"
        self.message = message
        super().__init__(f"line {line}, column {column}: {message}")


def printable(text: str, limit: int | None = None) -> str:
    """``text`` fit for a one-line message: characters that are not printable (control
    characters, line separators, NUL, lone surrogates) as Python escapes (``\\x1b``); cut to
    ``limit`` characters with '…'."""
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def _or_list(items: Sequence[str]) -> str:
    items = list(dict.fromkeys(items))
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


# ----------------------------------------------------------------------------- tokens


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # WORD NAME NUMBER TIME STRING STAR COMMA LPAREN RPAREN SLASH OP EOL
    text: str  # as written (EOL: '')
    line: int
    column: int

    @property
    def upper(self) -> str:
        return self.text.upper()


_ATOM_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789$\\#.*_^:-")
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9_^-]*")
_TIME_RE = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?")
_NUM_RE = re.compile(r"\d+(?:\.\d+)?")


def _classify(atom: str) -> str:
    if atom == "*":
        return "STAR"
    if _NUM_RE.fullmatch(atom):
        return "NUMBER"
    if _TIME_RE.fullmatch(atom):
        return "TIME"
    if _WORD_RE.fullmatch(atom):
        return "WORD"
    return "NAME"


def tokenize(text: str) -> list[list[Token]]:
    """Split text into commands (lists of tokens, each ending with an EOL token)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    commands: list[list[Token]] = []
    current: list[Token] = []
    for ln, src in enumerate(lines, start=1):
        toks, cont = _lex_line(src, ln)
        current.extend(toks)
        if cont or (toks and toks[-1].kind == "COMMA") or (not toks and current):
            continue
        if current:
            current.append(Token("EOL", "", ln, len(src) + 1))
            commands.append(current)
            current = []
    if current:  # continued past the end of the input: end of the last token's line
        ln = current[-1].line
        current.append(Token("EOL", "", ln, len(lines[ln - 1]) + 1))
        commands.append(current)
    return commands


_NOT_TEXT_RE = re.compile("[\x00\ud800-\udfff]")


def _not_text(src: str, ln: int) -> None:
    """Refuse a NUL character or a lone surrogate (a byte that was not UTF-8, decoded with
    surrogateescape: command-line arguments, stdin) anywhere in the line, comments included."""
    m = _NOT_TEXT_RE.search(src)
    if m is None:
        return
    c, col = m.group(), m.start() + 1
    if c == "\x00":
        raise MeascomSyntaxError(ln, col, c, message="NUL character: MEASCOM input is text "
                                                     "(is this a binary file?)")
    what = (f"byte 0x{ord(c) - 0xDC00:02X}" if "\udc80" <= c <= "\udcff"
            else f"lone surrogate U+{ord(c):04X}")
    raise MeascomSyntaxError(ln, col, c, message=f"not UTF-8 text: {what}")


def _lex_line(src: str, ln: int) -> tuple[list[Token], bool]:
    _not_text(src, ln)
    toks: list[Token] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        col = i + 1
        if c in " \t\f":
            i += 1
        elif c == "!" or src.startswith("==", i):
            break
        elif c == "&":
            rest = src[i + 1:].strip()
            if rest == "" or rest.startswith(("!", "==")):
                return toks, True
            raise MeascomSyntaxError(ln, col, "&", message="'&' continues a command only at the "
                                                           "end of a line")
        elif c in ",()/":
            kind = {",": "COMMA", "(": "LPAREN", ")": "RPAREN", "/": "SLASH"}[c]
            toks.append(Token(kind, c, ln, col))
            i += 1
        elif c == '"':
            j = src.find('"', i + 1)
            if j < 0:
                raise MeascomSyntaxError(ln, col, src[i:], message="unterminated string: "
                                                                    "missing closing '\"'")
            toks.append(Token("STRING", src[i + 1:j], ln, col))
            i = j + 1
        elif c in "<>":
            op = src[i:i + 2] if src[i:i + 2] in ("<>", "<=", ">=") else c
            toks.append(Token("OP", op, ln, col))
            i += len(op)
        elif c == "=":
            if i + 1 < n and (src[i + 1] == "_" or src[i + 1].isascii() and src[i + 1].isalpha()):
                j = i + 1
                while j < n and src[j] in _ATOM_CHARS:
                    j += 1
                toks.append(Token("NAME", src[i:j], ln, col))  # DEFINE name (=_myfile)
                i = j
            else:
                toks.append(Token("OP", "=", ln, col))
                i += 1
        elif c in _ATOM_CHARS:
            j = i
            while j < n and src[j] in _ATOM_CHARS:
                j += 1
            atom = src[i:j]
            toks.append(Token(_classify(atom), atom, ln, col))
            i = j
        else:
            raise MeascomSyntaxError(ln, col, c, message=f"unexpected character {c!r}")
    return toks, False


# ----------------------------------------------------------------------------- parser


class _Parser:
    def __init__(self, toks: list[Token], interactive: bool):
        self.toks = toks
        self.pos = 0
        self.interactive = interactive

    # -- token helpers ---------------------------------------------------------------

    def peek(self, k: int = 0) -> Token:
        return self.toks[min(self.pos + k, len(self.toks) - 1)]

    def next(self) -> Token:
        t = self.peek()
        if t.kind != "EOL":
            self.pos += 1
        return t

    def error(self, tok: Token, expected: Sequence[str] = (), message: str | None = None):
        word = f'"{tok.text}"' if tok.kind == "STRING" else tok.text  # "" is no end of line
        return MeascomSyntaxError(tok.line, tok.column, word, expected, message)

    def match_kw(self, tok: Token, choices: Sequence[str]) -> str | None:
        if tok.kind != "WORD":
            return None
        u = tok.upper
        if u in choices:
            return u
        if self.interactive:
            hits = [c for c in choices if c.startswith(u)]
            if len(hits) == 1:
                return hits[0]
        return None

    def accept_kw(self, *choices: str) -> str | None:
        kw = self.match_kw(self.peek(), choices)
        if kw is not None:
            self.pos += 1
        return kw

    def expect_kw(self, *choices: str) -> str:
        kw = self.accept_kw(*choices)
        if kw is None:
            raise self.error(self.peek(), choices)
        return kw

    def accept(self, kind: str) -> Token | None:
        if self.peek().kind == kind:
            return self.next()
        return None

    def expect(self, kind: str, what: str) -> Token:
        t = self.peek()
        if t.kind != kind:
            raise self.error(t, [what])
        return self.next()

    def expect_eol(self, expected: Sequence[str] = ()) -> None:
        t = self.peek()
        if t.kind != "EOL":
            raise self.error(t, [*expected, "end of line"] if expected else ["end of line"])

    # -- values ----------------------------------------------------------------------

    def number(self, what: str, lo: int, hi: int) -> int:
        t = self.peek()
        if t.kind != "NUMBER" or "." in t.text:
            raise self.error(t, [what])
        v = int(t.text) if len(t.text) <= 12 else hi + 1
        if not lo <= v <= hi:
            raise self.error(t, [what], message=f"{printable(t.text, 20)} is out of range; "
                                                f"expected {what}")
        self.next()
        return v

    def file_name(self, what: str = "a file name", *, partial: bool = True) -> str:
        t = self.peek()
        if t.kind not in ("WORD", "NAME"):
            raise self.error(t, [what])
        if t.text.startswith("="):  # DEFINE name
            self.next()
            return t.upper
        try:
            check_file_pattern(t.text, allow_partial=partial)
        except ValueError as exc:
            raise self.error(t, message=str(exc)) from None
        self.next()
        return t.upper

    def duration(self) -> ast.Duration:
        t = self.peek()
        n = self.number("a duration count 1-9999", 1, 9999)
        u = self.peek()
        unit = self.match_kw(u, tuple(DURATION_UNITS)) or self.match_kw(
            u, ("SECONDS", "MINUTES", "HOURS"))  # interactive: SEC, MIN, HOUR …
        if unit is None:
            raise self.error(u, ["SECONDS", "MINUTES", "HOURS"])
        self.next()
        return ast.Duration(value=n, unit=DURATION_UNITS[unit], line=t.line, column=t.column)

    def time_of_day(self) -> ast.TimeOfDay:
        t = self.peek()
        if t.kind != "TIME":
            raise self.error(t, ["a time hh:mm[:ss]"])
        parts = [int(x) for x in t.text.split(":")]
        h, m, s = (parts + [0])[:3]
        if h > 23 or m > 59 or s > 59:
            raise self.error(t, message=f"invalid time {t.text!r}: hours 0-23, minutes and "
                                        "seconds 0-59")
        self.next()
        return ast.TimeOfDay(hour=h, minute=m, second=s, line=t.line, column=t.column)

    def month(self, t: Token) -> int | None:
        m = self.match_kw(t, ast.MONTHS)
        return ast.MONTHS.index(m) + 1 if m else None

    def date_time(self) -> ast.DateTime:
        """``[date ,] time`` where date is ``[d]d mmm [yyyy]`` or ``mmm [d]d [yyyy]``."""
        first = self.peek()
        if first.kind == "TIME":
            return ast.DateTime(date=None, time=self.time_of_day(), line=first.line,
                                column=first.column)
        if first.kind == "NUMBER":
            day_tok = first
            day = self.number("a day 1-31", 1, 31)
            mt = self.peek()
            month = self.month(mt)
            if month is None:
                raise self.error(mt, ["a month name (JAN … DEC)"])
            self.next()
        elif (first_month := self.month(first)) is not None:
            month = first_month
            self.next()
            day_tok = self.peek()
            day = self.number("a day 1-31", 1, 31)
        else:
            raise self.error(first, ["a time hh:mm[:ss]", "a date"])
        year = None
        if self.peek().kind == "NUMBER":
            year = self.number(f"a year {MIN_YEAR}-{MAX_YEAR}", MIN_YEAR, MAX_YEAR)
        leap = 2000 if year is None else year  # day 29 FEB is valid without a year
        if day > calendar.monthrange(leap, month)[1]:
            raise self.error(day_tok, message=f"invalid date: {ast.MONTHS[month - 1]} has no "
                                              f"day {day}")
        date = ast.Date(day=day, month=month, year=year, line=first.line, column=first.column)
        if not self.accept("COMMA") and self.peek().kind != "TIME":
            raise self.error(self.peek(), [","])
        return ast.DateTime(date=date, time=self.time_of_day(), line=first.line,
                            column=first.column)

    def out_clause(self) -> str | None:
        if not self.accept("SLASH"):
            return None
        self.expect_kw("OUT")
        f = self.out_target()
        self.expect("SLASH", "'/'")
        return f

    def out_target(self) -> str:
        """A file, device or spooler location (``$S.#LIST``): any name, not validated here."""
        t = self.peek()
        if t.kind not in ("WORD", "NAME"):
            raise self.error(t, ["a file or device name"])
        self.next()
        return t.upper

    # -- entity specs ----------------------------------------------------------------

    def entity_type(self) -> str:
        t = self.peek()
        kw = self.match_kw(t, ENTITY_TYPES)
        if kw is None:
            raise self.error(t, ["an entity type (" + ", ".join(ENTITY_TYPES[:-1]) + f" or {ENTITY_TYPES[-1]})"])
        self.next()
        return load_catalog().entity(kw).measure_name

    def specs(self, entity: str, *, stop: Sequence[str] = (), optional: bool = False
              ) -> tuple[ast.EntitySpec, ...]:
        t = self.peek()
        if optional and (t.kind == "EOL" or (t.kind == "COMMA"
                                             and self.match_kw(self.peek(1), stop))):
            return (ast.EntitySpec(entity=entity, form="all", fields={}, text="",
                                   line=t.line, column=t.column),)
        out = [self.spec(entity)]
        while self.peek().kind == "COMMA":
            if self.match_kw(self.peek(1), stop):
                break
            self.next()
            out.append(self.spec(entity))
        return tuple(out)

    def spec(self, entity: str) -> ast.EntitySpec:
        t = self.peek()
        start = self.pos
        fields: dict[str, str | int] = {}
        if entity in PROCESS_SPEC_TYPES:
            form = self._process_spec(fields)
        elif entity in CPU_SPEC_TYPES:
            if self.accept("STAR"):
                form = "all"
            else:
                fields["cpu"] = self.number("a CPU number 0-15 or *", 0, 15)
                form = "cpu"
        elif entity in FILE_SPEC_TYPES:
            if self.accept("STAR"):
                form = "all"
            else:
                fields["file_name"] = self.file_name("a file name or *")
                form = "file"
        elif entity in ("DISC", "DEVICE", "LINE", "NETLINE"):
            if self.accept("STAR"):
                form = "all"
            else:
                fields["device_name"] = self._name(t, "a device name $NAME, $* or *")
                form = "device"
                if self.accept("LPAREN"):
                    fields["cpu"] = self._num_or_star("a CPU number 0-15 or *", 0, 15)
                    self.expect("RPAREN", "')'")
        elif entity == "TERMINAL":
            if self.accept("STAR"):
                form = "all"
            else:
                tok = self.peek()
                text = self._name(tok, "a terminal $LINE[.#SUBDEV] or *")
                line, _, sub = text.partition(".")
                fields["line_name"] = line
                if sub:
                    fields["subdev_name"] = "*" if sub == "*" else sub
                form = "terminal"
        elif entity in ("SYSTEM", "CLUSTER"):
            if self.accept("STAR"):
                form = "all"
            elif entity == "SYSTEM" and self.peek().kind == "NUMBER":
                fields["remote_system"] = self.number("a node number 0-254", 0, 254)
                form = "remote_system"
            else:
                fields["remote_system_name"] = self._name(t, "a node name \\NAME or *")
                form = "remote_system"
        else:  # pragma: no cover - every catalogue entity is handled above
            raise self.error(t, message=f"entity type {entity} has no spec syntax")
        self._check_fields(entity, fields, t)
        text = " ".join(x.text for x in self.toks[start:self.pos])
        return ast.EntitySpec(entity=entity, form=form, fields=fields, text=text,
                              line=t.line, column=t.column)

    def _name(self, t: Token, what: str) -> str:
        if t.kind not in ("NAME", "WORD"):
            raise self.error(t, [what])
        self.next()
        return t.upper

    def _num_or_star(self, what: str, lo: int, hi: int) -> str | int:
        if self.accept("STAR"):
            return "*"
        return self.number(what, lo, hi)

    def _cpu_pin(self, fields: dict) -> None:
        fields["cpu"] = self._num_or_star("a CPU number 0-15 or *", 0, 15)
        self.expect("COMMA", "','")
        fields["pin"] = self._num_or_star("a PIN 0-65535 or *", 0, 65535)

    def _process_spec(self, fields: dict) -> str:
        t = self.peek()
        if t.kind in ("STAR", "NUMBER"):
            nxt, after = self.peek(1), self.peek(2)
            if t.kind == "STAR" and not (nxt.kind == "COMMA" and after.kind in ("STAR", "NUMBER")):
                self.next()
                return "all"
            self._cpu_pin(fields)
            return "cpu_pin"
        if self.match_kw(t, ("SYSTEM-PROCESSES",)):
            self.next()
            fields["pin"] = "SYSTEM"
            return "system_processes"
        if t.kind == "STRING":
            if not t.text.startswith("/"):
                raise self.error(t, message=f"OSS path {t.text!r} must be absolute (start with /)")
            self.next()
            fields["oss_path"] = t.text
            form = "oss_path"
        elif t.kind == "NAME" and t.text.startswith("$") and "." not in t.text:
            self.next()
            fields["process_name"] = t.upper
            form = "process_name"
        elif t.kind in ("NAME", "WORD"):
            fields["program_file_name"] = self.file_name(
                "a process spec (*, cpu,pin, SYSTEM-PROCESSES, $name or program file)")
            form = "program_file"
        else:
            raise self.error(t, ["*", "cpu,pin", "SYSTEM-PROCESSES", "$name", "a program file"])
        if self.accept("LPAREN"):
            self._cpu_pin(fields)
            self.expect("RPAREN", "')'")
        return form

    def _check_fields(self, entity: str, fields: dict, t: Token) -> None:
        plain = {k: v for k, v in fields.items() if k not in ("program_file_name", "file_name")}
        try:
            normalize_fields(entity, plain)
        except DescriptorError as exc:
            raise self.error(t, message=f"{entity}: {exc.message}") from None

    # -- commands --------------------------------------------------------------------

    def command(self) -> ast.Command:
        t = self.peek()
        verb = self.match_kw(t, COMMANDS)
        if verb is None:
            raise self.error(t, list(COMMANDS))
        self.next()
        method = getattr(self, "cmd_" + verb.lower())
        cmd = method(t)
        self.expect_eol()
        return cmd

    def cmd_add(self, t: Token) -> ast.Command:
        what = self.peek()
        kw = self.match_kw(what, ("COUNTER", "MEASUREMENT", *ENTITY_TYPES))
        if kw is None:
            raise self.error(what, ["an entity type", "COUNTER", "MEASUREMENT"])
        if kw == "MEASUREMENT":
            self.next()
            return ast.AddMeasurement(file=self.file_name(), line=t.line, column=t.column)
        if kw == "COUNTER":
            self.next()
            return self._add_counter(t)
        entity = self.entity_type()
        return ast.AddEntity(entity=entity, specs=self.specs(entity), line=t.line,
                             column=t.column)

    def _item_name(self) -> str:
        """A counter or identifier name in BY / IF (any MEASURE name, e.g. DEVICE-QBUSY-TIME)."""
        t = self.peek()
        if t.kind != "WORD":
            raise self.error(t, ["a counter name"])
        self.next()
        return t.upper

    def _counter_name(self) -> str:
        t = self.peek()
        if t.kind != "WORD" or len(t.text) > 16:
            raise self.error(t, [("a counter name (1-16 characters: a letter, then letters, "
                                 "digits, - or _)")])
        self.next()
        return t.upper

    def _add_counter(self, t: Token) -> ast.AddCounter:
        name = self._counter_name()
        self.expect("COMMA", "','")
        self.expect_kw("PROCESS")
        proc = self.spec("PROCESS")
        self.expect("COMMA", "','")
        ctype = self.expect_kw(*COUNTER_TYPES)
        array = None
        if self.peek().kind == "COMMA":
            self.next()
            self.expect_kw("ARRAY")
            array = self.number("an ARRAY size 1-127", 1, 127)
        return ast.AddCounter(name=name, process=proc, type=ctype, array=array,  # type: ignore[arg-type]  # one of COUNTER_TYPES
                              line=t.line, column=t.column)

    def cmd_delete(self, t: Token) -> ast.Command:
        what = self.peek()
        kw = self.match_kw(what, ("COUNTER", *ENTITY_TYPES))
        if kw is None:
            raise self.error(what, ["an entity type", "COUNTER"])
        if kw == "COUNTER":
            self.next()
            name = "*" if self.accept("STAR") else self._counter_name()
            proc = None
            if self.accept("COMMA"):
                self.expect_kw("PROCESS")
                proc = self.spec("PROCESS")
            return ast.DeleteCounter(name=name, process=proc, line=t.line, column=t.column)
        entity = self.entity_type()
        return ast.DeleteEntity(entity=entity, specs=self.specs(entity), line=t.line,
                                column=t.column)

    def _measurement_file(self, optional: bool = False, *, keyword: bool = True) -> str | None:
        if keyword:
            self.accept_kw("MEASUREMENT")
        if optional and self.peek().kind in ("EOL", "COMMA"):
            return None
        return self.file_name("a measurement data file")

    def cmd_start(self, t: Token) -> ast.Command:
        if self.accept_kw("MEASSUBSYS", "MEASUREMENT") == "MEASSUBSYS":
            return ast.MeasSubsys(action="START", line=t.line, column=t.column)
        file = self._measurement_file(optional=True, keyword=False)
        seen: dict[str, object] = {}
        times: dict[str, ast.DateTime] = {}
        durations: dict[str, ast.Duration] = {}
        filesize: tuple[int, str] | None = None
        options: list[str] = []
        while self.peek().kind != "EOL":
            comma = self.accept("COMMA")
            o = self.peek()
            kw = self.match_kw(o, START_OPTIONS)
            if kw is None:
                # the common options only; OSS/NOOSS/SQL/NOSQL/FILESIZE/NOCOUNTERS are accepted
                avail = [x for x in ("FROM", "FOR", "TO", "INTERVAL") if x not in seen
                         and not (x in ("FOR", "TO") and ("FOR" in seen or "TO" in seen))]
                raise self.error(o, avail if comma else [*avail, "end of line"])
            if kw in seen:
                raise self.error(o, message=f"{kw} given twice")
            if (kw == "FOR" and "TO" in seen) or (kw == "TO" and "FOR" in seen):
                raise self.error(o, message="FOR and TO are mutually exclusive")
            if kw in ("OSS", "NOOSS", "SQL", "NOSQL") and (
                    {"OSS": "NOOSS", "NOOSS": "OSS", "SQL": "NOSQL", "NOSQL": "SQL"}[kw] in seen):
                raise self.error(o, message=f"{kw} contradicts an earlier option")
            self.next()
            if kw in ("FROM", "TO"):
                seen[kw] = times[kw] = self.date_time()
            elif kw in ("FOR", "INTERVAL"):
                seen[kw] = durations[kw] = self.duration()
            elif kw == "FILESIZE":
                n = self.number("a file size", 1, 1_048_576)
                unit = self.accept_kw("MB", "GB") or "MB"
                seen[kw] = filesize = (n, unit)
            else:
                seen[kw] = True
                options.append(kw)
        return ast.StartMeasurement(
            file=file, start=times.get("FROM"), for_=durations.get("FOR"), to=times.get("TO"),
            interval=durations.get("INTERVAL"), options=tuple(options),
            filesize=filesize, line=t.line, column=t.column)

    def cmd_stop(self, t: Token) -> ast.Command:
        if self.accept_kw("MEASSUBSYS", "MEASUREMENT") == "MEASSUBSYS":
            return ast.MeasSubsys(action="STOP", line=t.line, column=t.column)
        return ast.StopMeasurement(file=self._measurement_file(optional=True, keyword=False),
                                   line=t.line, column=t.column)

    def cmd_info(self, t: Token) -> ast.Command:
        out = self.out_clause()
        self.accept_kw("MEASUREMENT")
        files: list[str] = []
        if self.peek().kind != "EOL":
            files.append(self.file_name("a measurement data file"))
            while self.accept("COMMA"):
                files.append(self.file_name("a measurement data file"))
        return ast.InfoMeasurement(files=tuple(files), out=out, line=t.line, column=t.column)

    def cmd_status(self, t: Token) -> ast.Command:
        out = self.out_clause()
        kw = self.accept_kw("MEASSUBSYS", "MEASUREMENT")
        if kw == "MEASUREMENT":
            file = None if self.peek().kind == "EOL" else self.file_name("a measurement data file")
            return ast.Status(target="MEASUREMENT", file=file, out=out, line=t.line,
                              column=t.column)
        if kw is None and self.peek().kind != "EOL":
            raise self.error(self.peek(), ["MEASSUBSYS", "MEASUREMENT", "end of line"])
        return ast.Status(target="MEASSUBSYS", out=out, line=t.line, column=t.column)

    def report_attr(self, names: Sequence[str]) -> ast.ReportAttr:
        t = self.peek()
        kw = self.match_kw(t, names)
        if kw is None:
            raise self.error(t, list(names))
        self.next()
        allowed = REPORT_ATTRS[kw]
        value: str | ast.DateTime | ast.Duration | None
        if kw in ("FROM", "TO"):
            value = self.date_time()
        elif kw == "FOR":
            value = self.duration()
        elif kw == "LOADID":
            v = self.peek()
            if v.kind not in ("WORD", "NUMBER", "NAME") or len(v.text) > 8:
                raise self.error(v, ["a load id (up to 8 characters)"])
            self.next()
            value = v.upper
        else:
            assert allowed is not None
            value = self.accept_kw(*allowed)
            if value is None:
                if kw in OPTIONAL_VALUE_ATTRS and self.peek().kind in ("COMMA", "EOL"):
                    value = OPTIONAL_VALUE_ATTRS[kw]
                else:
                    raise self.error(self.peek(), allowed)
        return ast.ReportAttr(name=kw, value=value, line=t.line, column=t.column)

    def cmd_set(self, t: Token) -> ast.Command:
        self.expect_kw("REPORT")
        attrs = [self.report_attr(tuple(REPORT_ATTRS))]
        while self.peek().kind != "EOL":
            comma = self.accept("COMMA")
            if self.match_kw(self.peek(), tuple(REPORT_ATTRS)) is None:
                raise self.error(self.peek(),
                                 [*REPORT_ATTRS, *([] if comma else ["end of line"])])
            attrs.append(self.report_attr(tuple(REPORT_ATTRS)))
        names = [a.name for a in attrs]
        for a in attrs:
            if names.count(a.name) > 1:
                dup = [x for x in attrs if x.name == a.name][1]
                raise MeascomSyntaxError(dup.line, dup.column, dup.name,
                                         message=f"{dup.name} given twice")
        return ast.SetReport(attrs=tuple(attrs), line=t.line, column=t.column)

    def _list(self, t: Token, verb: Literal["LIST", "LISTALL", "LISTACTIVE"]) -> ast.Command:
        out = self.out_clause()
        entity = self.entity_type()
        specs = self.specs(entity, stop=LIST_OPTIONS, optional=True)
        opts: dict[str, object] = {}
        by: str | None = None
        condition: ast.Condition | None = None
        attrs: list[ast.ReportAttr] = []
        while self.peek().kind != "EOL":
            comma = self.accept("COMMA")
            o = self.peek()
            kw = self.match_kw(o, LIST_OPTIONS)
            if kw is None:
                avail = [x for x in LIST_OPTIONS if x not in opts]
                raise self.error(o, avail if comma else [*avail, "end of line"])
            if kw in opts:
                raise self.error(o, message=f"{kw} given twice")
            if (kw == "FOR" and "TO" in opts) or (kw == "TO" and "FOR" in opts):
                raise self.error(o, message="FOR and TO are mutually exclusive")
            if kw == "BY":
                self.next()
                opts[kw] = by = self._item_name()
            elif kw == "IF":
                ct = self.next()
                counter = self._item_name()
                op = self.peek()
                if op.kind != "OP":
                    raise self.error(op, list(RELOPS))
                self.next()
                v = self.peek()
                if v.kind != "NUMBER":
                    raise self.error(v, ["a number"])
                self.next()
                if len(v.text) > 30:
                    raise self.error(v, message=f"number {v.text[:12]}… is too long")
                value: float | int = float(v.text) if "." in v.text else int(v.text)
                opts[kw] = condition = ast.Condition(
                    counter=counter, op=op.text, value=value,  # type: ignore[arg-type]  # an OP token is a relop
                    line=ct.line, column=ct.column)
            else:
                a = self.report_attr((kw,))
                opts[kw] = a
                if kw not in ("FROM", "TO", "FOR", "LOADID"):
                    attrs.append(a)
        if verb == "LISTACTIVE" and ("FROM" in opts or "TO" in opts):
            given = opts.get("FROM") or opts.get("TO")
            assert isinstance(given, ast.ReportAttr)  # (FROM and TO are report attributes)
            raise MeascomSyntaxError(given.line, given.column, given.name,
                                     message="LISTACTIVE takes FOR, not FROM or TO")

        def val(k: str):
            a = opts.get(k)
            return a.value if isinstance(a, ast.ReportAttr) else a

        return ast.ListCommand(
            verb=verb, entity=entity, specs=specs, start=val("FROM"), to=val("TO"),
            for_=val("FOR"), loadid=val("LOADID"), by=by, if_=condition,
            attrs=tuple(attrs), out=out, line=t.line, column=t.column)

    def cmd_list(self, t: Token) -> ast.Command:
        return self._list(t, "LIST")

    def cmd_listall(self, t: Token) -> ast.Command:
        return self._list(t, "LISTALL")

    def cmd_listactive(self, t: Token) -> ast.Command:
        return self._list(t, "LISTACTIVE")

    def cmd_obey(self, t: Token) -> ast.Command:
        """``OBEY file``: a Guardian-style name (kept as written: on this platform it names a
        file relative to the current directory) or a quoted path ``"../obey/day.txt"``."""
        f = self.peek()
        if f.kind == "STRING":
            if not f.text.strip():
                raise self.error(f, ["an OBEY file name"])
            self.next()
            return ast.Obey(file=f.text, line=t.line, column=t.column)
        self.file_name("an OBEY file name")
        return ast.Obey(file=f.text, line=t.line, column=t.column)

    def cmd_out(self, t: Token) -> ast.Command:
        f = None if self.peek().kind == "EOL" else self.out_target()
        return ast.Out(file=f, line=t.line, column=t.column)

    def cmd_volume(self, t: Token) -> ast.Command:
        v = self.peek()
        if v.kind == "EOL":
            return ast.Volume(volume=None, subvol=None, line=t.line, column=t.column)
        if v.kind not in ("WORD", "NAME"):
            raise self.error(v, ["[$vol.]subvol", "$vol"])
        parts = v.upper.split(".")
        node = parts.pop(0) if parts[0].startswith("\\") else None
        vol = parts.pop(0) if parts and parts[0].startswith("$") else None
        sub = parts.pop(0) if parts else None
        ok = (not parts and (vol or sub)
              and (node is None or re.fullmatch(r"\\[A-Z][A-Z0-9]{0,6}", node))
              and (vol is None or re.fullmatch(r"\$[A-Z][A-Z0-9]{0,6}", vol))
              and (sub is None or re.fullmatch(r"[A-Z][A-Z0-9]{0,7}", sub)))
        if not ok:
            raise self.error(v, message=f"invalid subvolume {v.text!r}: use [\\node.]$vol[.subvol] "
                                        "or subvol")
        self.next()
        return ast.Volume(volume=vol, subvol=sub, node=node, line=t.line, column=t.column)

    def cmd_assume(self, t: Token) -> ast.Command:
        self.expect_kw("MEASUREMENT")
        return ast.Assume(file=self.file_name("a measurement data file"), line=t.line,
                          column=t.column)

    def cmd_exit(self, t: Token) -> ast.Command:
        return ast.Exit(line=t.line, column=t.column)

    def cmd_help(self, t: Token) -> ast.Command:
        topic = []
        while self.peek().kind != "EOL":
            topic.append(self.next().upper)
        return ast.Help(topic=tuple(topic), line=t.line, column=t.column)


def continues(line: str) -> bool:
    """Does this input line continue on the next one (ends with ',' or '&', comments aside)?
    For an interactive prompt collecting a multi-line command."""
    try:
        toks, cont = _lex_line(line, 1)
    except MeascomSyntaxError:
        return False
    return cont or bool(toks and toks[-1].kind == "COMMA")


def parse_command(tokens: list[Token], *, interactive: bool = False) -> ast.Command:
    """Parse one tokenized command (a list ending with an EOL token)."""
    return _Parser(tokens, interactive).command()


def parse_script(text: str, *, interactive: bool = False) -> list[ast.Command]:
    """Parse a whole OBEY file (or one interactive line). Raises MeascomSyntaxError."""
    return [parse_command(toks, interactive=interactive) for toks in tokenize(text)]
