"""ENFORM-style reports: run queries/<name>.sql with parameters, render rows.

    rows = run_report(conn, "threshold", system="\\\\DEMO", day=date(2024, 3, 9), shift=3)
    print(render_text("threshold", rows, params))     # or render_csv / render_json

The SQL lives in queries/ (each file calls a measure.report_* function of
schema/idempotent/025-reports.sql); this module only knows each report's parameters, its
title block and its column headings, and lays the rows out like the 1986 figures: a centred
title, a title block (SYSTEM, DATE, SHIFT, OS VERSION), multi-line column headings and
F5.1 numbers. A threshold report without violations says so; a report of a range in which the
system has no condensed hour at all says that instead (:func:`no_data`), never "no violations".
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
from psycopg.rows import dict_row

QUERIES = Path(__file__).resolve().parents[1] / "queries"


class ReportError(ValueError):
    """A report cannot run with these parameters; the message says what to change."""


@dataclass(frozen=True)
class Column:
    key: str
    heading: str          # '/' separates heading lines, as in ENFORM's HEADING "MAX/CPU/QLEN"
    fmt: str = "s"        # 's' text, 'i' integer, 'f1' F5.1, 'f2', 'f4', 'n' thousands, 'yn' YES/no


@dataclass(frozen=True)
class Report:
    name: str
    title: str
    params: dict[str, Any]            # name -> default (REQUIRED = must be given)
    columns: tuple[Column, ...]
    window: str = "day"               # 'day' (one date), 'range' (from/to dates), 'time' (timestamps)
    empty: str = "NO ROWS"
    meta: tuple[str, ...] = field(default_factory=tuple)
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)  # parameter -> allowed values

    @property
    def sql(self) -> str:
        return (QUERIES / f"{self.name}.sql").read_text(encoding="utf-8")


REQUIRED = object()
F = "f1"
_WINDOW = {"system": REQUIRED, "from_at": REQUIRED, "to_at": REQUIRED}

REPORTS: dict[str, Report] = {r.name: r for r in [
    Report("threshold", "THRESHOLD REPORT", {"system": REQUIRED, "day": REQUIRED, "shift": None}, (
        Column("cpu", "CPU/#", "i"), Column("time_of_day", "TIME/OF/DAY"),
        Column("qlen_max", "MAX/CPU/QLEN", F), Column("qlen_delt", "DELT/CPU/QLEN", F),
        Column("swap_max", "MAX/CPU/SWAP", F), Column("busy_max", "MAX/CPU/BUSY", F),
        Column("busy_delt", "DELT/CPU/BUSY", F), Column("ibusy_max", "MAX/INTR/BUSY", F),
        Column("qlen_avg", "AVG/CPU/QLEN", F), Column("swap_avg", "AVG/CPU/SWAP", F),
        Column("busy_avg", "AVG/CPU/BUSY", F), Column("ibusy_avg", "AVG/CPU/INTR", F)),
        empty="NO THRESHOLD VIOLATIONS"),
    Report("cpu-trend", "CPU TREND REPORT", {"system": REQUIRED, "date_from": REQUIRED, "date_to": REQUIRED}, (
        Column("system_name", "SYSTEM/NAME"), Column("loadid", "LOADID/DTDDDHH"),
        Column("cpu", "CPU/NUM", "i"), Column("cpu_type", "CPU/TYPE"), Column("os_version", "OS/VERS"),
        Column("qlen_max", "MAX/CPU/QLEN", F), Column("qlen_delt", "DELT/CPU/QLEN", F),
        Column("swap_max", "MAX/CPU/SWAP", F), Column("busy_max", "MAX/CPU/BUSY", F),
        Column("busy_delt", "DELT/CPU/BUSY", F)), window="range"),
    Report("process-summary", "PROCESS SUMMARY REPORT", {**_WINDOW, "measurement": None}, (
        Column("program_file_name", "PROGRAM-FILE-NAME"), Column("process_count", "COUNT", "i"),
        Column("cpu_seconds", "CPU SEC", "f2"), Column("messages_received", "MESSAGES/RECEIVED", "n"),
        Column("messages_sent", "MESSAGES/SENT", "n")), window="time"),
    Report("busy-process", "BUSY PROCESS REPORT",
           {**_WINDOW, "min_cpu_seconds": 600, "max_priority": 200, "measurement": None}, (
        Column("program_file_name", "PROGRAM-FILE"), Column("process_name", "NAME"),
        Column("run_seconds", "RUN TIME/(SECONDS)", "f2"), Column("cpu_utilization_ratio", "CPU/UTILIZATION", "f2"),
        Column("io_per_second", "I.O. PER/SECOND", "f2"), Column("priority", "PRIORITY", "i")), window="time"),
    Report("process-activity", "PROCESS ACTIVITY BY PROGRAM", {**_WINDOW, "measurement": None}, (
        Column("program_file_name", "PROGRAM-FILE-NAME"), Column("process_name", "NAME"),
        Column("cpu_seconds_per_trans", "CPU PER/TRANS", "f4"), Column("io_per_trans", "I/O PER/TRANS", F),
        Column("cpu_seconds_per_io", "CPU PER/I/O", "f4")), window="time"),
    Report("process-disc-file-activity", "PROCESS DISC FILE ACTIVITY REPORT",
           {**_WINDOW, "cpu": REQUIRED, "pin": None}, (
        Column("file_name", "FILE-NAME"), Column("reads", "READS", "n"), Column("writes", "WRITES", "n"),
        Column("deletes_or_writereads", "DELETE OR/WRITEREAD", "n"), Column("info_calls", "INFO/CALLS", "n")),
        window="time"),
    Report("file-summary", "DISC FILE SUMMARY REPORT", {**_WINDOW, "measurement": None}, (
        Column("file_name", "FILE-NAME"), Column("open_count", "COUNT", "i"), Column("reads", "TOTAL/READS", "n"),
        Column("writes", "TOTAL/WRITES", "n"), Column("updates", "TOTAL/UPDATES", "n"),
        Column("deletes", "TOTAL/DELETES", "n"), Column("info_calls", "INFO/CALLS", "n")), window="time"),
    Report("discopen-summary", "DISCOPEN SUMMARY REPORT", {**_WINDOW, "measurement": None}, (
        Column("file_name", "FILE-NAME"), Column("open_count", "COUNT", "i"),
        Column("input_calls", "TOTAL/INPUT", "n"), Column("cache_hits", "CACHE/HITS", "n"),
        Column("output_calls", "TOTAL/WRITES", "n"), Column("block_splits", "TOTAL/BLOCK/SPLITS", "n"),
        Column("stalls", "TOTAL/STALLS", "n")), window="time"),
    Report("transaction-resource", "TRANSACTION RESOURCE REPORT", {**_WINDOW, "transaction_process": None}, (
        Column("component", "COMPONENT"), Column("cpu_ms_per_transaction", "CPU MS PER/TRANSACTION", F),
        Column("cpu_seconds", "CPU/SECONDS", "f2"), Column("transactions", "TRANS-/ACTIONS", "n"),
        Column("transactions_per_second_per_cpu", "TPS/PER CPU", "f2"),
        Column("cpu_utilization_percent", "CPU/BUSY", F), Column("response_seconds_avg", "AVG/RESP/SEC", "f2"),
        Column("response_seconds_p95", "95 %/RESP/SEC", "f2")),
        window="time"),
    Report("capacity-forecast", "CAPACITY FORECAST",
           {"system": REQUIRED, "date_from": REQUIRED, "date_to": REQUIRED, "capacity": 70}, (
        Column("entity", "ENTITY"), Column("subject", "CPU OR/VOLUME"), Column("days", "DAYS", "i"),
        Column("peak_busy_last", "PEAK/BUSY/LAST", F), Column("slope_per_day", "TREND/PER/DAY", "f2"),
        Column("crossing_date", "CROSSES/CAPACITY"), Column("crossing_early", "+15 %/CROSSES"),
        Column("crossing_late", "-15 %/CROSSES"), Column("month_peak", "MONTH/PEAK", F),
        Column("busy_if_one_halted", "BUSY IF/ONE CPU/HALTED", F)), window="range"),
    # The H-, J- and L-series catalogue (schema/idempotent/027-reports-later.sql)
    Report("ipu-balance", "IPU BALANCE REPORT", {**_WINDOW, "measurement": None}, (
        Column("cpu", "CPU/#", "i"), Column("ipus", "IPUS", "i"), Column("busy_percent", "CPU/BUSY", F),
        Column("busy_per_ipu_percent", "BUSY/PER/IPU", F), Column("ipu_busy_min", "MIN/IPU/BUSY", F),
        Column("ipu_busy_max", "MAX/IPU/BUSY", F), Column("ipu_busy_spread", "IPU/BUSY/SPREAD", F),
        Column("busiest_ipu", "BUSI-/EST/IPU", "i"), Column("ipu_busy_percent", "BUSY OF/EACH IPU/0 1 2 …", F)),
        window="time"),
    Report("sql-statements", "TOP SQL STATEMENTS", {**_WINDOW, "measurement": None, "top": 20}, (
        Column("program_file_name", "PROGRAM-FILE-NAME"), Column("module_name", "MODULE"),
        Column("statement_index", "STMT/INDEX", "i"), Column("processes", "PROC-/ESSES", "i"),
        Column("calls", "CALLS", "n"), Column("elapsed_ms_per_call", "ELAPSED/MS PER/CALL", "f2"),
        Column("elapsed_seconds", "ELAPSED/SECONDS", "f2"), Column("records_accessed", "RECORDS/ACCESSED", "n"),
        Column("disc_reads", "DISC/READS", "n"), Column("recompiles", "RECOM-/PILES", "n")), window="time"),
    Report("diskfile-activity", "DISKFILE ACTIVITY REPORT", {**_WINDOW, "measurement": None}, (
        Column("device_name", "VOLUME"), Column("file_name", "FILE-NAME"), Column("requests", "REQUESTS", "n"),
        Column("driver_input_calls", "TOTAL/INPUT", "n"), Column("driver_output_calls", "TOTAL/OUTPUT", "n"),
        Column("cache_read_hits", "CACHE/READ/HITS", "n"), Column("requests_blocked", "LOCK/WAITS", "n"),
        Column("lockwait_seconds", "LOCK/WAIT/SEC", "f2"), Column("max_lockwait_ms", "MAX/LOCK WAIT/MS", "f2"),
        Column("block_splits", "BLOCK/SPLITS", "n"), Column("sql_row_changes", "SQL ROWS/CHANGED", "n")),
        window="time"),
    Report("oss-cpu", "OSS CPU REPORT", {**_WINDOW, "measurement": None}, (
        Column("cpu", "CPU/#", "i"), Column("intervals", "INTER-/VALS", "i"),
        Column("oss_busy_percent", "OSS/BUSY", F), Column("pipe_messages_per_second", "PIPE/MSGS/PER SEC", "f2"),
        Column("oss_file_calls_per_second", "OSS FILE/CALLS/PER SEC", "f2"),
        Column("oss_processes_end", "OSS/PROC-/ESSES", "i")), window="time"),
    # Automatic analysis (schema/idempotent/060-analysis.sql, docs/analysis.md)
    Report("exceptions", "EXCEPTIONS AGAINST THE BASELINE", {**_WINDOW, "severity": None}, (
        Column("local_hour", "LOCAL/HOUR"), Column("entity", "ENTITY"), Column("subject", "SUBJECT"),
        Column("item", "ITEM"), Column("value", "VALUE", "f2"), Column("baseline", "BASE-/LINE", "f2"),
        Column("band_low", "BAND/LOW", "f2"), Column("band_high", "BAND/HIGH", "f2"),
        Column("deviation", "DEVI-/ATION", F), Column("severity", "SEVER-/ITY"), Column("direction", "DIREC-/TION"),
        Column("weeks", "WEEKS/LEARNED", "i")), window="time", empty="NO EXCEPTIONS",
        choices={"severity": ("minor", "major")}),
    Report("baseline-week", "THE WEEK AGAINST ITS BASELINE",
           {"system": REQUIRED, "date_from": REQUIRED, "date_to": REQUIRED}, (
        Column("entity", "ENTITY"), Column("subject", "SUBJECT"), Column("item", "ITEM"),
        Column("hours", "HOURS/JUDGED", "i"), Column("hours_above", "HOURS/ABOVE", "i"),
        Column("hours_below", "HOURS/BELOW", "i"), Column("major_hours", "MAJOR/HOURS", "i"),
        Column("largest_deviation", "LARGEST/DEVI-/ATION", F), Column("largest_at", "AT/(LOCAL)"),
        Column("largest_value", "ITS/VALUE", "f2"), Column("largest_baseline", "ITS/BASE-/LINE", "f2"),
        Column("weeks_min", "WEEKS/LEARNED/(FEWEST)", "i")), window="range", empty="NO EXCEPTIONS"),
    Report("health-verdict", "HEALTH VERDICT", {"system": REQUIRED, "day": REQUIRED}, (
        Column("indicator", "INDICATOR"), Column("verdict", "PROB-/LEM", "yn"), Column("subject", "SUBJECT"),
        Column("evidence", "EVIDENCE"), Column("action", "RECOMMENDATION")), empty="NO INDICATORS"),
    # Scheduled by default (core/scheduler.py): the daily condensation check and the
    # weekly shift summary.
    Report("condensation-check", "CONDENSATION CHECK", {"system": REQUIRED, "day": REQUIRED}, (
        Column("time_of_day", "TIME/OF/DAY"), Column("loadid", "LOADID"),
        Column("shift_no", "SHIFT", "i"), Column("measured", "ENTITIES/MEASURED", "i"),
        Column("condensed", "ENTITIES/IN HOUR/TIER", "i"), Column("coverage_min", "MIN CPU/COVER-/AGE", "f2"),
        Column("problems", "PROBLEMS")),
        empty="EVERY HOUR IS CONDENSED"),
    Report("shift-summary", "SHIFT SUMMARY REPORT", {"system": REQUIRED, "date_from": REQUIRED, "date_to": REQUIRED}, (
        Column("shift_day", "SHIFT/DAY"), Column("shift_no", "SHIFT", "i"), Column("cpu", "CPU/#", "i"),
        Column("hours", "HOURS", "i"), Column("coverage_ratio", "COVER-/AGE", "f2"),
        Column("qlen_avg", "AVG/CPU/QLEN", F), Column("qlen_max", "MAX/CPU/QLEN", F),
        Column("qlen_delt", "DELT/CPU/QLEN", F), Column("swap_avg", "AVG/CPU/SWAP", F),
        Column("swap_max", "MAX/CPU/SWAP", F), Column("busy_avg", "AVG/CPU/BUSY", F),
        Column("busy_max", "MAX/CPU/BUSY", F), Column("busy_delt", "DELT/CPU/BUSY", F),
        Column("ibusy_avg", "AVG/INTR/BUSY", F), Column("ibusy_max", "MAX/INTR/BUSY", F)),
        window="range"),
]}


def report(name: str) -> Report:
    try:
        return REPORTS[name]
    except KeyError:
        raise ReportError(f"unknown report {name!r}; reports: {', '.join(sorted(REPORTS))}") from None


def bind(name: str, **given: Any) -> dict[str, Any]:
    """The full parameter set of a report: defaults filled in, unknown or missing ones refused."""
    rep = report(name)
    unknown = set(given) - set(rep.params)
    if unknown:
        raise ReportError(f"report {name}: unknown parameter(s) {', '.join(sorted(unknown))}; "
                          f"it takes {', '.join(rep.params)}")
    out = {k: given.get(k, d) for k, d in rep.params.items()}
    missing = [k for k, v in out.items() if v is REQUIRED]
    if missing:
        raise ReportError(f"report {name}: missing parameter(s) {', '.join(missing)}")
    for key, allowed in rep.choices.items():
        if out[key] is not None and out[key] not in allowed:
            raise ReportError(f"report {name}: {key} {out[key]!r} is not one of its values; "
                              f"use {' or '.join(allowed)}")
    for lo, hi in (("date_from", "date_to"), ("from_at", "to_at")):
        if lo in out and out[lo] > out[hi]:
            raise ReportError(f"report {name}: {lo} {out[lo]} is after {hi} {out[hi]}")
    return out


def run_report(conn: psycopg.Connection, name: str, **given: Any) -> list[dict[str, Any]]:
    """Run queries/<name>.sql; an unknown system raises ReportError naming the known ones."""
    params = bind(name, **given)
    try:
        with conn.cursor(row_factory=dict_row) as cur:
            cur.execute(report(name).sql, params)
            return cur.fetchall()
    except psycopg.errors.NoDataFound as exc:
        conn.rollback()
        hint = exc.diag.message_hint or ""
        raise ReportError(f"{exc.diag.message_primary}; {hint}".rstrip("; ")) from None


def window(name: str, params: dict[str, Any], time_zone: str) -> tuple[datetime, datetime]:
    """The report's window [lo, hi) as instants: a (shift) day or a range of days in the
    system's time zone (a shift may run into the next day: the day after is included), or the
    instants given."""
    rep = report(name)
    tz = ZoneInfo(time_zone)
    if rep.window == "time":  # an instant without an offset is the system's local time
        lo, hi = params["from_at"], params["to_at"]
        return (lo if lo.tzinfo else lo.replace(tzinfo=tz)), (hi if hi.tzinfo else hi.replace(tzinfo=tz))
    first = params["day"] if rep.window == "day" else params["date_from"]
    last = params["day"] if rep.window == "day" else params["date_to"]
    lo = datetime.combine(first, time(0), tzinfo=tz)
    hi = datetime.combine(last + timedelta(days=2 if rep.window == "day" else 1), time(0), tzinfo=tz)
    return lo, hi


def no_data(conn: psycopg.Connection, name: str, params: dict[str, Any]) -> str | None:
    """The line to show instead of the report's empty message when the system has no condensed
    hour in the report's window (so an empty report never reads as "nothing broken"); None
    when it has data there."""
    row = conn.execute("SELECT time_zone, first_hour, last_hour FROM measure.config_system_info(%s)",
                       (params["system"],)).fetchone()
    if row is None:
        return None
    zone, first, last = row
    lo, hi = window(name, params, zone)
    if first is not None and first < hi and last + timedelta(hours=1) > lo:
        return None
    where = {"day": "on {day}", "range": "from {date_from} to {date_to}",
             "time": "from {from_at} to {to_at}"}[report(name).window].format(**params)
    held = ("it holds no condensed hour yet" if first is None else
            f"its data runs from {first.astimezone(UTC):%Y-%m-%d %H:00} to "
            f"{(last + timedelta(hours=1)).astimezone(UTC):%Y-%m-%d %H:00} UTC")
    return f"NO DATA: {params['system']} has no measured hour {where} ({held})"


def no_baseline(conn: psycopg.Connection, name: str, params: dict[str, Any]) -> str | None:
    """For the reports against the learned baseline (exceptions, baseline-week) without rows:
    the line that says how much was learned, so that "no exceptions" in a system's first week
    (nothing to learn from) is not read as "nothing unusual"; None for the other reports."""
    if name not in ("exceptions", "baseline-week"):
        return None
    row = conn.execute("SELECT time_zone FROM measure.config_system_info(%s)", (params["system"],)).fetchone()
    if row is None:
        return None
    lo, hi = window(name, params, row[0])
    if name == "baseline-week":  # its days exactly
        hi = datetime.combine(params["date_to"] + timedelta(days=1), time(0), tzinfo=ZoneInfo(row[0]))
    cov = conn.execute("SELECT hours, judged_hours, weeks_min, weeks_max, weeks_setting "
                       "FROM measure.baseline_coverage(%s, %s, %s)", (params["system"], lo, hi)).fetchone()
    if cov is None or not cov[0]:
        return None
    hours, judged, least, most, setting = cov
    if not judged:
        return (f"NO EXCEPTIONS: no hour has a baseline yet ({hours} hour(s) stored, none judged): "
                f"{params['system']} has no earlier week to learn from (the same local hour of up to "
                f"{setting} earlier weeks, holidays left out)")
    if least is not None and least < setting:
        return (f"NO EXCEPTIONS ({judged} hour(s) judged, baselines learned from {least} to {most} "
                f"of {setting} earlier weeks)")
    return None


# ---------------------------------------------------------------- rendering

def _plain(v: Any) -> Any:
    if isinstance(v, list):  # the busy % of each IPU
        return [_plain(x) for x in v]
    if isinstance(v, Decimal):
        exponent = v.as_tuple().exponent  # 'n', 'N' or 'F' for NaN and ±Infinity: a float
        return float(v) if isinstance(exponent, str) or v != v.to_integral_value() or exponent < 0 else int(v)
    if isinstance(v, (date, datetime)):
        return v.isoformat()
    return v


def render_json(rows: list[dict[str, Any]]) -> str:
    return json.dumps([{k: _plain(v) for k, v in r.items()} for r in rows], indent=1)


def render_csv(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    """CSV with a header line; with no rows, the header of `columns` (a report with nothing
    to report is still a well-formed file)."""
    buf = io.StringIO()
    fieldnames = list(rows[0]) if rows else list(columns or [])
    if fieldnames:
        w = csv.DictWriter(buf, fieldnames=fieldnames, lineterminator="\n")
        w.writeheader()
        for r in rows:  # a list (the limits an hour broke) is one cell: "busy_max > 70; qlen_max > 2"
            w.writerow({k: "; ".join(map(str, _plain(v))) if isinstance(v, list) else _plain(v)
                        for k, v in r.items()})
    return buf.getvalue()


def fmt(value: Any, kind: str) -> str:
    """ENFORM-like number formats: F5.1 prints .2 for 0.2, as Figure 1 does."""
    if value is None:
        return ""
    if isinstance(value, list):  # one figure per element (the busy % of each IPU)
        return " ".join(fmt(v, kind) for v in value)
    if kind == "yn":
        return "YES" if value else "no"
    if kind == "i":
        return str(int(value))
    if kind == "n":
        return f"{int(round(value)):,}"
    if kind.startswith("f"):
        text = f"{float(value):.{int(kind[1:])}f}"
        if text.startswith("0."):
            text = text[1:]
        elif text.startswith("-0."):
            text = "-" + text[2:]
        return text
    return str(value)


def _title_block(rep: Report, params: dict[str, Any], total: int) -> list[str]:
    lines = [rep.title.center(total).rstrip(), ""]
    block = {"system": "SYSTEM", "day": "DATE", "shift": "SHIFT", "date_from": "DATES",
             "from_at": "FROM", "to_at": "TO"}
    for key, label in block.items():
        if key not in params or (key == "shift" and params[key] is None):
            continue
        value = params[key]
        if key == "date_from":
            value = f"{params['date_from']} TO {params['date_to']}"
        lines.append(f"   {label + ':':<12}{value}")
    return lines


# Table 4 of the ATM article: the components in its order, then the lines below them.
TABLE4_COMPONENTS = (("total", "TOTAL"), ("system_overhead", "SYSTEM OVERHEAD"),
                     ("tmf_disc", "TMF/DISC PROCESSES"), ("line_handler", "LINE HANDLERS"),
                     ("tcp", "PATHWAY TCP"), ("hls", "HLS PROCESSES"),
                     ("server", "APPLICATION SERVERS"), ("other", "OTHER PROCESSES"))


def _render_table4(rows: list[dict[str, Any]], params: dict[str, Any], empty: str | None = None) -> str:
    """The transaction resource report laid out as Table 4: CPU ms per transaction and % of the
    total per component, then average and 95 % response, transactions per second per CPU and
    total CPU utilisation (the values repeated on every row are printed once)."""
    rep = report("transaction-resource")
    by = {r["component"]: r for r in rows}
    labels = dict(TABLE4_COMPONENTS)
    order = [c for c, _ in TABLE4_COMPONENTS if c in by] + sorted(set(by) - set(labels))
    total_ms = by.get("total", {}).get("cpu_ms_per_transaction")
    body = []
    for comp in order:
        r = by[comp]
        ms = r.get("cpu_ms_per_transaction")
        pct = 100 * ms / total_ms if ms is not None and total_ms else None
        body.append((labels.get(comp, comp.upper()), fmt(ms, F), fmt(pct, F), fmt(r.get("cpu_seconds"), "f2")))
    first = rows[0] if rows else {}
    source = first.get("response_source")
    per_sample = first.get("response_transactions_per_sample")
    basis = (f"({source.upper()} RECORDS, {fmt(per_sample, F)} TRANSACTIONS PER RECORD)"
             if source else "(NO RESPONSE TIMES MEASURED)")
    tail = [("AVERAGE RESPONSE (S)", fmt(first.get("response_seconds_avg"), "f2"), "", ""),
            ("95 % RESPONSE (S)", fmt(first.get("response_seconds_p95"), "f2"), "", basis),
            ("TRANSACTIONS", fmt(first.get("transactions"), "n"), "", ""),
            ("TRANSACTIONS/S PER CPU", fmt(first.get("transactions_per_second_per_cpu"), "f2"), "", ""),
            ("TOTAL CPU UTILISATION (%)", fmt(first.get("cpu_utilization_percent"), F), "", "")]
    heads = (("", "COMPONENT"), ("CPU MS PER", "TRANSACTION"), ("", "%"), ("CPU", "SECONDS"))
    widths = [max(len(h[0]), len(h[1]), *(len(b[i]) for b in body + (tail if i < 2 else [])))
              for i, h in enumerate(heads)]
    lines = _title_block(rep, params, sum(widths) + 6) + [""]
    for level in (0, 1):
        lines.append("  ".join(h[level].ljust(w) if i == 0 else h[level].rjust(w)
                               for i, (h, w) in enumerate(zip(heads, widths, strict=True))).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    if not rows:
        lines.append(empty or rep.empty)
    for b in body:
        lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                               for i, (v, w) in enumerate(zip(b, widths, strict=True))).rstrip())
    lines.append("")
    for label, value, _, note in tail:
        lines.append(f"{label.ljust(widths[0])}  {value.rjust(widths[1])}  {note}".rstrip())
    return "\n".join(lines) + "\n"


def render_text(name: str, rows: list[dict[str, Any]], params: dict[str, Any], empty: str | None = None) -> str:
    """The report as ENFORM laid it out; `empty` replaces the report's own line for no rows
    (the NO DATA line of :func:`no_data`)."""
    if name == "transaction-resource":
        return _render_table4(rows, params, empty)
    rep = report(name)
    cells = [[fmt(r.get(c.key), c.fmt) for c in rep.columns] for r in rows]
    heads = [c.heading.split("/") for c in rep.columns]
    depth = max(len(h) for h in heads)
    widths = [max([len(x) for x in h] + [len(row[i]) for row in cells] + [5]) for i, h in enumerate(heads)]
    total = sum(widths) + 2 * (len(widths) - 1)
    lines = _title_block(rep, params, total)
    if name == "threshold" and rows:
        lines.append(f"   {'OS VERSION:':<12}{rows[0].get('os_version') or ''}")
    if name == "health-verdict" and rows:  # docs/analysis.md: 100 - the weights of the problems present
        lines.append(f"   {'SCORE:':<12}{rows[0]['score']}/100, "
                     f"{sum(1 for r in rows if r['verdict'])} of {len(rows)} indicators show a problem")
    lines.append("")
    for level in range(depth):
        parts = []
        for h, w, c in zip(heads, widths, rep.columns, strict=True):
            pad = [""] * (depth - len(h)) + h  # headings sit on the bottom line, as in ENFORM
            parts.append(pad[level].ljust(w) if c.fmt == "s" else pad[level].rjust(w))
        lines.append("  ".join(parts).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    if not rows:
        lines.append(empty or rep.empty)
    for row in cells:
        lines.append("  ".join(v.ljust(w) if c.fmt == "s" else v.rjust(w)
                               for v, w, c in zip(row, widths, rep.columns, strict=True)).rstrip())
    if name == "process-disc-file-activity" and rows:
        sums = {k: sum(r[k] or 0 for r in rows) for k in ("reads", "writes", "deletes_or_writereads", "info_calls")}
        lines.append("  ".join(("TOTAL" if c.key == "file_name" else fmt(sums.get(c.key), c.fmt)).rjust(w)
                               if c.fmt != "s" else "TOTAL".ljust(w)
                               for c, w in zip(rep.columns, widths, strict=True)).rstrip())
    return "\n".join(lines) + "\n"


def render(name: str, rows: list[dict[str, Any]], params: dict[str, Any], fmt_name: str = "text",
           empty: str | None = None) -> str:
    if fmt_name == "json":
        return render_json(rows)
    if fmt_name == "csv":
        return render_csv(rows, [c.key for c in report(name).columns])
    if fmt_name == "text":
        return render_text(name, rows, params, empty)
    raise ReportError(f"unknown format {fmt_name!r}; use text, csv or json")


# ---------------------------------------------------------------- parameters from users


def _date(text: str | None, option: str) -> date | None:
    if text is None:
        return None
    try:
        return date.fromisoformat(text[:10]) if len(text) <= 10 else datetime.fromisoformat(text).date()
    except ValueError:
        raise ReportError(f"{option} {text!r} is not a date; write YYYY-MM-DD") from None


def _instant(text: str, option: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise ReportError(f"{option} {text!r} is not a date or time; write YYYY-MM-DD[THH:MM]") from None


def build_params(name: str, *, system: str | None, day: str | None, date_from: str | None,
                 date_to: str | None, shift: int | None, extra: dict[str, Any],
                 labels: dict[str, str] | None = None) -> dict[str, Any]:
    """Map user-given options onto a report's parameters (errors: ReportError naming the option
    as the caller calls it: `labels` maps date/from/to to e.g. --date/--from/--to)."""
    lab = {"date": "--date", "from": "--from", "to": "--to", **(labels or {})}
    rep = report(name)
    given: dict[str, Any] = {k: v for k, v in extra.items() if v is not None}
    if system is not None:
        given["system"] = system
    if rep.window == "day":
        if day is None and date_from is not None:
            day = date_from
        if day is None:
            raise ReportError(f"report {name} needs {lab['date']} YYYY-MM-DD")
        given["day"] = _date(day, lab["date"])
        if "shift" in rep.params or shift is not None:
            given["shift"] = shift
    elif rep.window == "range":
        lo, hi = _date(date_from or day, lab["from"]), _date(date_to or day, lab["to"])
        if lo is None or hi is None:
            raise ReportError(f"report {name} needs {lab['from']} and {lab['to']} (or {lab['date']})")
        given["date_from"], given["date_to"] = lo, hi
    else:  # a time window; a bare date means that whole day
        lo_text, hi_text = date_from or day, date_to or day
        if lo_text is None or hi_text is None:
            raise ReportError(f"report {name} needs {lab['from']} and {lab['to']} (or {lab['date']})")
        lo_at, hi_at = _instant(lo_text, lab["from"]), _instant(hi_text, lab["to"])
        if len(hi_text) <= 10:
            hi_at = hi_at + timedelta(days=1)
        given["from_at"], given["to_at"] = lo_at, hi_at
    return bind(name, **given)
