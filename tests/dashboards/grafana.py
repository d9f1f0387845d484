"""What Grafana (11.6, grafana-postgresql-datasource) does to a panel's SQL before PostgreSQL sees
it, restated from /work/shared/docs/grafana-macros.md (read from grafana/grafana's
pkg/tsdb/grafana-postgresql-datasource/macros.go and sqleng/sql_engine.go):

1. browser side: template variables and the global variables ($__interval, $__interval_ms,
   ${__from}, ${__to} …) are replaced (:func:`interpolate_variables`);
2. backend: $__interval_ms, $__interval, $__unixEpochFrom(), $__unixEpochTo() by plain string
   replacement, then every function-style macro ``$name(args)`` (:func:`expand_macros`).

:func:`expand` does both. Errors are raised as :class:`MacroError` with Grafana's message.
"""

from __future__ import annotations

import calendar
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MACRO = re.compile(r"\$([_a-zA-Z0-9]+)\(([^\)]*)\)")
_DATE_UNIT = re.compile(r"^(\d+)([dwMy])$")
_GO_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 10**9,
             "m": 60 * 10**9, "h": 3600 * 10**9}


class MacroError(ValueError):
    """The query would fail in Grafana's backend before reaching PostgreSQL."""


@dataclass(frozen=True)
class TimeRange:
    start: datetime
    end: datetime


# ------------------------------------------------------------------ formatting helpers

def _ns_since_epoch(t: datetime) -> int:
    d = t.astimezone(UTC) - EPOCH
    return (d.days * 86400 + d.seconds) * 10**9 + d.microseconds * 1000


def rfc3339nano(t: datetime) -> str:
    """Go's time.RFC3339Nano of t in UTC: Z suffix, fraction only when non-zero, no trailing zeros."""
    u = t.astimezone(UTC)
    out = u.strftime("%Y-%m-%dT%H:%M:%S")
    if u.microsecond:
        out += "." + f"{u.microsecond:06d}".rstrip("0")
    return out + "Z"


def unix_seconds(t: datetime) -> int:
    """Go's t.Unix(): floor of the seconds since the epoch."""
    return _ns_since_epoch(t) // 10**9


def go_float(x: float) -> str:
    """Go's %v of a float64 (strconv 'g', shortest): exponent form when the decimal exponent is
    below -4 or at least 6 (so 1036800 -> 1.0368e+06), else plain digits."""
    if x == 0:
        return "0"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    sign = "-" if x < 0 else ""
    d = Decimal(repr(abs(x))).normalize()
    _, digits, exp = d.as_tuple()
    ds = "".join(map(str, digits))
    dp = len(ds) + exp  # position of the decimal point
    e10 = dp - 1
    if e10 < -4 or e10 >= 6:
        mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{sign}{mant}e{'-' if e10 < 0 else '+'}{abs(e10):02d}"
    if dp <= 0:
        return f"{sign}0.{'0' * -dp}{ds}"
    if dp >= len(ds):
        return f"{sign}{ds}{'0' * (dp - len(ds))}"
    return f"{sign}{ds[:dp]}.{ds[dp:]}"


def format_interval(ns: int) -> str:
    """gtime.FormatInterval: the largest whole unit only (y, d, h, m, s, ms), at least 1ms."""
    ms = 10**6
    for unit, size in (("y", 365 * 86400 * 10**9), ("d", 86400 * 10**9), ("h", 3600 * 10**9),
                       ("m", 60 * 10**9), ("s", 10**9), ("ms", ms)):
        if ns >= size:
            return f"{ns // size}{unit}"
    return "1ms"


def _add_date(t: datetime, years: int = 0, months: int = 0, days: int = 0) -> datetime:
    """Go's time.AddDate: normalises overflowing days (Jan 31 + 1 month = Mar 2/3)."""
    y, m = t.year + years, t.month - 1 + months
    y, m = y + m // 12, m % 12 + 1
    base = datetime(y, m, 1, t.hour, t.minute, t.second, t.microsecond, tzinfo=t.tzinfo)
    return base + timedelta(days=t.day - 1 + days)


def go_parse_duration(s: str) -> int:
    """time.ParseDuration, in nanoseconds."""
    orig, sign = s, 1
    if s[:1] in "+-":
        sign, s = (-1 if s[0] == "-" else 1), s[1:]
    if s == "0":
        return 0
    if not s:
        raise MacroError(f'time: invalid duration "{orig}"')
    total = Decimal(0)
    for num, unit in re.findall(r"(\d*\.?\d*)([a-zµμ]+)", s):
        if num in ("", ".") or unit not in _GO_UNITS:
            raise MacroError(f'time: invalid duration "{orig}"')
        total += Decimal(num) * _GO_UNITS[unit]
    if re.sub(r"(\d*\.?\d*)([a-zµμ]+)", "", s):
        raise MacroError(f'time: invalid duration "{orig}"')
    return sign * int(total)


def parse_interval(s: str, now: datetime | None = None) -> int:
    """gtime.ParseInterval in nanoseconds: Go durations, plus d, w, M, y relative to now (UTC)."""
    if s == "":
        raise MacroError("empty input")
    m = _DATE_UNIT.match(s)
    if m:
        n, unit = int(m[1]), m[2]
        now = (now or datetime.now(UTC)).astimezone(UTC)
        later = {"d": lambda: _add_date(now, days=n), "w": lambda: _add_date(now, days=7 * n),
                 "M": lambda: _add_date(now, months=n), "y": lambda: _add_date(now, years=n)}[unit]()
        return _ns_since_epoch(later) - _ns_since_epoch(now)
    return go_parse_duration(s)


# ------------------------------------------------------------------ backend macros

def _time_group(args: list[str], timescaledb: bool, name: str, now: datetime | None) -> str:
    if len(args) < 2:
        raise MacroError(f"macro {name} needs time column and interval and optional fill value")
    try:
        ns = parse_interval(args[1].strip("'"), now)
    except MacroError as e:
        raise MacroError(f"error parsing interval {args[1]}") from e
    if ns <= 0:
        raise MacroError(f"error parsing interval {args[1]}: interval must be > 0")
    if len(args) == 3:
        fill = args[2]
        if fill not in ("NULL", "previous"):
            try:
                float(fill)
            except ValueError as e:
                raise MacroError(f"error parsing fill value {fill}") from e
    seconds = ns / 1e9
    if timescaledb:
        return f"time_bucket('{seconds:.3f}s',{args[0]})"
    return f"floor(extract(epoch from {args[0]})/{go_float(seconds)})*{go_float(seconds)}"


def _unix_group(args: list[str], name: str, now: datetime | None) -> str:
    if len(args) < 2:
        raise MacroError(f"macro {name} needs time column and interval and optional fill value")
    try:
        ns = parse_interval(args[1].strip("'"), now)
    except MacroError as e:
        raise MacroError(f"error parsing interval {args[1]}") from e
    seconds = ns / 1e9
    return f"floor(({args[0]})/{go_float(seconds)})*{go_float(seconds)}"


def evaluate_macro(name: str, args: list[str], tr: TimeRange, timescaledb: bool,
                   now: datetime | None = None) -> str:
    def need_column() -> None:
        if not args or args[0] == "":
            raise MacroError(f"missing time column argument for macro {name}")

    if name == "__time":
        need_column()
        return f'{args[0]} AS "time"'
    if name == "__timeEpoch":
        need_column()
        return f'extract(epoch from {args[0]}) as "time"'
    if name == "__timeFilter":
        need_column()
        return f"{args[0]} BETWEEN '{rfc3339nano(tr.start)}' AND '{rfc3339nano(tr.end)}'"
    if name == "__timeFrom":
        return f"'{rfc3339nano(tr.start)}'"
    if name == "__timeTo":
        return f"'{rfc3339nano(tr.end)}'"
    if name == "__timeGroup":
        return _time_group(args, timescaledb, name, now)
    if name == "__timeGroupAlias":
        return _time_group(args, timescaledb, name, now) + ' AS "time"'
    if name == "__unixEpochFilter":
        need_column()
        return f"{args[0]} >= {unix_seconds(tr.start)} AND {args[0]} <= {unix_seconds(tr.end)}"
    if name == "__unixEpochNanoFilter":
        need_column()
        return f"{args[0]} >= {_ns_since_epoch(tr.start)} AND {args[0]} <= {_ns_since_epoch(tr.end)}"
    if name == "__unixEpochNanoFrom":
        return str(_ns_since_epoch(tr.start))
    if name == "__unixEpochNanoTo":
        return str(_ns_since_epoch(tr.end))
    if name == "__unixEpochGroup":
        return _unix_group(args, name, now)
    if name == "__unixEpochGroupAlias":
        return _unix_group(args, name, now) + ' AS "time"'
    raise MacroError(f"unknown macro {name}")


def expand_macros(sql: str, tr: TimeRange, *, interval_ns: int = 60 * 10**9, timescaledb: bool = False,
                  now: datetime | None = None) -> str:
    """The backend (sqleng Interpolate + postgres macro engine), in Grafana's order."""
    sql = sql.replace("$__interval_ms", str(interval_ns // 10**6))
    sql = sql.replace("$__interval", format_interval(interval_ns))
    sql = sql.replace("$__unixEpochFrom()", str(unix_seconds(tr.start)))
    sql = sql.replace("$__unixEpochTo()", str(unix_seconds(tr.end)))
    original = sql

    def repl(m: re.Match[str]) -> str:
        name, whole = m[1], m[0]
        if name == "__timeGroup":
            # pre-5.3 compatibility: a comma right after the *first occurrence* of this exact
            # macro text turns it into $__timeGroupAlias (for every occurrence).
            i = original.find(whole)
            if i >= 0 and len(original) > i + len(whole) and original[i + len(whole)] == ",":
                name = "__timeGroupAlias"
        args = [a.strip(" ") for a in m[2].split(",")]
        return evaluate_macro(name, args, tr, timescaledb, now)

    return MACRO.sub(repl, sql)


# ------------------------------------------------------------------ browser side

def seconds_to_hms(seconds: float) -> str:
    """@grafana/data rangeutil.secondsToHms: the largest unit only (y, d, h, m, s, ms)."""
    rest = seconds
    for unit, size in (("y", 31536000), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n = math.floor(rest / size)
        if n:
            return f"{n}{unit}"
        rest = rest % size
    ms = math.floor(seconds * 1000.0)
    return f"{ms}ms" if ms else "less than a millisecond"


def _quote(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"


Value = str | Sequence[str]


def interpolate_variables(sql: str, variables: Mapping[str, Value], *, multi: Sequence[str] = (),
                          tr: TimeRange | None = None, interval_ns: int | None = None) -> str:
    """Template variables as the SQL data sources format them: a multi-value or Include-All
    variable (named in `multi`, or given a list) becomes 'a','b' (quotes doubled); a single value
    is inserted with embedded quotes doubled and no surrounding quotes. ${v:csv} and ${v:raw},
    ${v}, [[v]] and $v are recognised; ${__from}/${__to} are epoch milliseconds."""
    values: dict[str, Value] = dict(variables)
    if tr is not None:
        values.setdefault("__from", str(_ns_since_epoch(tr.start) // 10**6))
        values.setdefault("__to", str(_ns_since_epoch(tr.end) // 10**6))
    if interval_ns is not None:
        values.setdefault("__interval_ms", str(interval_ns // 10**6))
        values.setdefault("__interval", seconds_to_hms(interval_ns / 1e9))

    def render(name: str, fmt: str | None) -> str | None:
        if name not in values:
            return None
        v = values[name]
        many = not isinstance(v, str) or name in multi
        items = [v] if isinstance(v, str) else list(v)
        if fmt == "csv":
            return ",".join(items)
        if fmt == "raw":
            return ",".join(items)
        if fmt == "sqlstring" or many:
            return ",".join(_quote(i) for i in items)
        return items[0].replace("'", "''")

    pattern = re.compile(r"\$(\w+)|\[\[(\w+)(?::(\w+))?\]\]|\$\{(\w+)(?::(\w+))?\}")

    def repl(m: re.Match[str]) -> str:
        name = m[1] or m[2] or m[4]
        fmt = m[3] or m[5]
        if m[1] and name not in values:
            # longest known prefix wins ($__interval_ms vs $__interval is handled by \w+ greed)
            return m[0]
        out = render(name, fmt)
        return m[0] if out is None else out

    return pattern.sub(repl, sql)


def expand(sql: str, tr: TimeRange, *, variables: Mapping[str, Value] | None = None,
           multi: Sequence[str] = (), interval_ns: int = 3600 * 10**9, timescaledb: bool = False,
           now: datetime | None = None) -> str:
    """Browser interpolation, then the backend: the SQL PostgreSQL receives."""
    sql = interpolate_variables(sql, variables or {}, multi=multi, tr=tr, interval_ns=interval_ns)
    return expand_macros(sql, tr, interval_ns=interval_ns, timescaledb=timescaledb, now=now)


def month_length_ns(now: datetime) -> int:
    """How long '1M' is when Grafana evaluates it at `now` (28-31 days): why we reject it."""
    now = now.astimezone(UTC)
    return calendar.monthrange(now.year, now.month)[1] * 86400 * 10**9
