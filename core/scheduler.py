"""Scheduled reports: the successors of the 1986 OBEY files that ran ENFORM every night.

    results = run_due(url)                 # run every report whose schedule slot has come
    results = run_due(url, now=datetime(2024, 3, 11, 6, 0, tzinfo=UTC), instance="test-a")

A definition (``_measure.report_definition``, schema/030-schedule.sql) names a report of
queries/, its parameters and a 5-field cron expression read in the system's local time; a
definition without a system applies to every system. Each pass of :func:`run_due`:

1. marks runs that were claimed but never finished (a scheduler that crashed mid-run) as
   failed with ``interrupted`` once they are older than ``stale_after``;
2. retries failed runs whose ``retry_after`` (the next schedule slot after the failure) has
   come, up to ``max_attempts`` tries per slot; a retry re-resolves the parameters from the
   (possibly corrected) definition against the run's own slot;
3. for every enabled definition and system, works out the slots due since the last run
   (at most ``catch_up`` of them; a definition that never ran starts with its latest slot),
   claims each one with ``INSERT … ON CONFLICT DO NOTHING RETURNING`` in its own committed
   transaction, and only then runs it. The UNIQUE (definition, system, slot) key makes a
   slot run once however many schedulers race for it, and across restarts.

A run stores its resolved parameters, the rows as JSON, the text / CSV renderings the
definition asks for, or its error. Failures are never silent: the run row keeps the error
and the attempt number, and the run is tried again at the next slot.

Relative dates are resolved against the slot in the system's time zone (see
:func:`resolve_parameters`): ``today``, ``yesterday``, ``N days ago``, ``this week``,
``last week`` (Monday to Sunday), ``this month``, ``last month``, ``last N days|weeks|months``
(whole days, weeks or months before the current one), ``this year``, ``last year``, or an
explicit ``YYYY-MM-DD``. A date key (``day``, ``date_from``) takes a period's first day,
``date_to`` its last day; ``from_at`` / ``to_at`` take the local midnights around it.
The shorthand ``"period": "last week"`` sets all the date keys of the report at once.

Cron slots are local wall-clock times: a slot that falls into a DST gap runs at the same
instant as the first time after the gap; a slot in the repeated hour of a fall-back runs
once, at its first occurrence.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import psycopg
from croniter import croniter
from psycopg.types.json import Jsonb

from core import reports
from core.reports import ReportError

log = logging.getLogger(__name__)

CATCH_UP = 3
MAX_ATTEMPTS = 3
STALE_AFTER = timedelta(minutes=30)
STATEMENT_TIMEOUT_MS = 10 * 60 * 1000



class ScheduleError(ValueError):
    """A definition cannot be scheduled as written (bad cron, bad relative date …)."""


@dataclass(frozen=True)
class RunResult:
    run_id: int | None
    definition: str
    system: str
    slot_at: datetime | None
    attempt: int
    status: str                 # 'succeeded' | 'failed'
    rows: int | None = None
    error: str | None = None


# ---------------------------------------------------------------- cron slots


def check_schedule(schedule: str) -> str:
    text = " ".join(schedule.split())
    if len(text.split(" ")) != 5 or not croniter.is_valid(text):
        raise ScheduleError(f"schedule {schedule!r} is not a 5-field cron expression "
                            "(minute hour day-of-month month day-of-week, e.g. '0 6 * * *')")
    return text


def _instant(naive: datetime, tz: ZoneInfo) -> datetime:
    # fold=0: a wall-clock time in a DST gap maps past the gap, a repeated one to its first time
    return naive.replace(tzinfo=tz).astimezone(UTC)


def due_slots(schedule: str, tz: ZoneInfo, now: datetime, since: datetime | None,
              *, catch_up: int = CATCH_UP) -> list[datetime]:
    """The slots (UTC instants) at or before now and after since, oldest first, at most
    catch_up of them; only the latest one when since is None (a definition that never ran)."""
    expr = check_schedule(schedule)
    local_now = now.astimezone(tz).replace(tzinfo=None)
    it = croniter(expr, local_now + timedelta(seconds=1))
    found: set[datetime] = set()
    for _ in range(catch_up + 2):
        found.add(_instant(it.get_prev(datetime), tz))
    slots = sorted(s for s in found if s <= now and (since is None or s > since))
    return slots[-1:] if since is None else slots[-catch_up:]


def next_slot(schedule: str, tz: ZoneInfo, after: datetime) -> datetime:
    """The first slot strictly after the instant `after`."""
    it = croniter(check_schedule(schedule), after.astimezone(tz).replace(tzinfo=None))
    for _ in range(8):
        slot = _instant(it.get_next(datetime), tz)
        if slot > after:
            return slot
    raise ScheduleError(f"schedule {schedule!r} has no slot after {after.isoformat()}")


# ---------------------------------------------------------------- relative dates

_N_AGO = re.compile(r"^(\d{1,4}) days? ago$")
_LAST_N = re.compile(r"^last (\d{1,4}) (day|week|month)s?$")
_DATE_KEYS_LO = ("day", "date_from")
_RELATIVE_HELP = ("write YYYY-MM-DD, today, yesterday, N days ago, this week, last week, this month, "
                  "last month, last N days|weeks|months, this year or last year")


def _month_start(d: date, back: int = 0) -> date:
    m = d.year * 12 + d.month - 1 - back
    return date(m // 12, m % 12 + 1, 1)


def resolve_period(text: Any, today: date) -> tuple[date, date]:
    """A date expression as (first day, last day), relative to `today` (the slot's local date)."""
    if isinstance(text, date):
        return text, text
    if not isinstance(text, str):
        raise ScheduleError(f"date {text!r}: {_RELATIVE_HELP}")
    t = " ".join(text.lower().split())
    monday = today - timedelta(days=today.weekday())
    if t == "today":
        return today, today
    if t == "yesterday":
        return today - timedelta(days=1), today - timedelta(days=1)
    if m := _N_AGO.match(t):
        d = today - timedelta(days=int(m[1]))
        return d, d
    if t == "this week":
        return monday, monday + timedelta(days=6)
    if t == "last week":
        return monday - timedelta(days=7), monday - timedelta(days=1)
    if t == "this month":
        return _month_start(today), _month_start(today, -1) - timedelta(days=1)
    if t == "last month":
        return _month_start(today, 1), _month_start(today) - timedelta(days=1)
    if t == "this year":
        return date(today.year, 1, 1), date(today.year, 12, 31)
    if t == "last year":
        return date(today.year - 1, 1, 1), date(today.year - 1, 12, 31)
    if m := _LAST_N.match(t):
        n, unit = int(m[1]), m[2]
        if n < 1:
            raise ScheduleError(f"date {text!r}: N must be at least 1")
        if unit == "day":
            return today - timedelta(days=n), today - timedelta(days=1)
        if unit == "week":
            return monday - timedelta(days=7 * n), monday - timedelta(days=1)
        return _month_start(today, n), _month_start(today) - timedelta(days=1)
    try:
        d = date.fromisoformat(t)
    except ValueError:
        raise ScheduleError(f"date {text!r}: {_RELATIVE_HELP}") from None
    return d, d


def _instant_param(value: Any, key: str, today: date, tz: ZoneInfo) -> datetime:
    if isinstance(value, str) and "T" in value.upper() and len(value) > 10:
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            raise ScheduleError(f"{key} {value!r} is not an instant; write YYYY-MM-DDTHH:MM[+HH:MM] "
                                f"or a date expression") from None
        return dt if dt.tzinfo is not None else dt.replace(tzinfo=tz)
    lo, hi = resolve_period(value, today)
    day = lo if key == "from_at" else hi + timedelta(days=1)
    return datetime.combine(day, time(0), tzinfo=tz)


def resolve_parameters(report_name: str, parameters: dict[str, Any], *, system: str,
                       slot_at: datetime, time_zone: str) -> dict[str, Any]:
    """The report's bound parameters for one slot: relative dates resolved against the slot's
    local date in time_zone, the system filled in, defaults added (raises ScheduleError or
    ReportError naming the parameter)."""
    rep = reports.report(report_name)
    tz = ZoneInfo(time_zone)
    today = slot_at.astimezone(tz).date()
    given = {k: v for k, v in parameters.items() if k not in ("period", "system")}
    period = parameters.get("period")
    if period is not None:
        keys = {"day": ("day",), "range": ("date_from", "date_to"), "time": ("from_at", "to_at")}[rep.window]
        if rep.window == "day":
            lo, hi = resolve_period(period, today)
            if lo != hi:
                raise ScheduleError(f"report {report_name} takes one day; period {period!r} is "
                                    f"{lo} to {hi}: use a one-day period such as yesterday")
        for k in keys:
            given.setdefault(k, period)
    out: dict[str, Any] = {}
    for key, value in given.items():
        if key in ("day", "date_from", "date_to") and value is not None:
            lo, hi = resolve_period(value, today)
            out[key] = lo if key in _DATE_KEYS_LO else hi
        elif key in ("from_at", "to_at") and value is not None:
            out[key] = _instant_param(value, key, today, tz)
        else:
            out[key] = value
    out["system"] = system
    return reports.bind(report_name, **out)


def _jsonable(params: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, (date, datetime)) else v) for k, v in params.items()}


# ---------------------------------------------------------------- running


def default_instance() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, (ReportError, ScheduleError)):
        return str(exc)
    if isinstance(exc, psycopg.Error):
        diag = exc.diag
        text = diag.message_primary or str(exc).strip().splitlines()[0]
        if diag.message_hint:
            text += f"; {diag.message_hint}"
        return f"{type(exc).__name__}: {text}"
    return f"{type(exc).__name__}: {exc}"


class _Pass:
    """One scheduler pass: a control connection (autocommit: every claim and every result is
    committed at once) and a report connection (read-only work, rolled back after each run)."""

    def __init__(self, url: str, now: datetime, instance: str, *, catch_up: int, max_attempts: int,
                 stale_after: timedelta) -> None:
        self.url, self.now, self.instance = url, now, instance
        self.catch_up, self.max_attempts, self.stale_after = catch_up, max_attempts, stale_after
        self.ctl = psycopg.connect(url, autocommit=True, application_name="measuredb-scheduler")
        self._rep: psycopg.Connection | None = None
        self.results: list[RunResult] = []

    @property
    def rep(self) -> psycopg.Connection:
        if self._rep is None or self._rep.closed:
            self._rep = psycopg.connect(self.url, application_name="measuredb-scheduler-report")
            self._rep.execute(f"SET statement_timeout = {int(STATEMENT_TIMEOUT_MS)}")
            self._rep.execute("SET TimeZone = 'UTC'")
            self._rep.commit()
        return self._rep

    def close(self) -> None:
        for c in (self._rep, self.ctl):
            if c is not None and not c.closed:
                c.close()

    def _retry_after(self, schedule: str, tz: str, attempt: int) -> datetime | None:
        if attempt >= self.max_attempts:
            return None
        try:
            return next_slot(schedule, ZoneInfo(tz), self.now)
        except (ScheduleError, ZoneInfoNotFoundError):
            return None

    # -- 1. runs left behind by a crashed scheduler
    def mark_interrupted(self) -> None:
        stale = self.ctl.execute(
            """
            SELECT r.run_id, r.attempt, r.instance, r.started_at, d.schedule, s.time_zone
              FROM _measure.report_run r
              JOIN _measure.report_definition d USING (definition_id)
              JOIN _measure.system s ON s.system_id = r.system_id
             WHERE r.finished_at IS NULL AND r.started_at < clock_timestamp() - %s
             ORDER BY r.run_id
            """, (self.stale_after,)).fetchall()
        for run_id, attempt, instance, started_at, schedule, tz in stale:
            error = (f"interrupted: claimed by {instance} at {started_at.isoformat(timespec='seconds')} "
                     f"and not finished within {self.stale_after}")
            done = self.ctl.execute(
                """
                UPDATE _measure.report_run
                   SET finished_at = clock_timestamp(), error = %s, retry_after = %s
                 WHERE run_id = %s AND finished_at IS NULL AND started_at = %s AND attempt = %s
                RETURNING run_id
                """, (error, self._retry_after(schedule, tz, attempt), run_id, started_at, attempt)).fetchone()
            if done:
                log.warning("report run %s: %s", run_id, error)

    # -- 2. failed runs whose next slot has come
    def retry_failed(self) -> None:
        rows = self.ctl.execute(
            """
            SELECT r.run_id, r.attempt, r.slot_at, d.name, d.report, d.parameters, d.schedule, d.outputs,
                   s.system_name, s.time_zone
              FROM _measure.report_run r
              JOIN _measure.report_definition d USING (definition_id)
              JOIN _measure.system s ON s.system_id = r.system_id
             WHERE r.retry_after IS NOT NULL AND r.retry_after <= %s AND r.finished_at IS NOT NULL
               AND r.error IS NOT NULL AND d.enabled
             ORDER BY r.slot_at, r.run_id
            """, (self.now,)).fetchall()
        for run_id, attempt, slot_at, name, report, params, schedule, outputs, system, tz in rows:
            claimed = self.ctl.execute(
                """
                UPDATE _measure.report_run
                   SET attempt = attempt + 1, instance = %s, started_at = clock_timestamp(),
                       finished_at = NULL, error = NULL, retry_after = NULL, rows = NULL,
                       report = %s, output_text = NULL, output_csv = NULL, output_json = NULL
                 WHERE run_id = %s AND attempt = %s AND finished_at IS NOT NULL AND error IS NOT NULL
                RETURNING attempt
                """, (self.instance, report, run_id, attempt)).fetchone()
            if claimed:
                self.execute(run_id, claimed[0], name, report, params, schedule, outputs, system, tz, slot_at)

    # -- 3. new slots
    def run_new_slots(self) -> None:
        targets = self.ctl.execute(
            """
            SELECT d.definition_id, d.name, d.report, d.parameters, d.schedule, d.outputs,
                   s.system_id, s.system_name, s.time_zone,
                   (SELECT max(r.slot_at) FROM _measure.report_run r
                     WHERE r.definition_id = d.definition_id AND r.system_id = s.system_id)
              FROM _measure.report_definition d
              JOIN _measure.system s ON d.system_id IS NULL OR d.system_id = s.system_id
             WHERE d.enabled
             ORDER BY d.definition_id, s.system_id
            """).fetchall()
        for def_id, name, report, params, schedule, outputs, sys_id, system, tz, since in targets:
            wanted = params.get("system")
            if isinstance(wanted, str) and wanted.upper() != system.upper():
                continue
            try:
                slots = due_slots(schedule, ZoneInfo(tz), self.now, since, catch_up=self.catch_up)
            except (ScheduleError, ZoneInfoNotFoundError, ValueError) as exc:
                msg = f"definition {name}: {_error_text(exc)}"
                log.error("%s; nothing scheduled", msg)
                self.results.append(RunResult(None, name, system, None, 0, "failed", error=msg))
                continue
            for slot in slots:
                row = self.ctl.execute(
                    """
                    INSERT INTO _measure.report_run (definition_id, system_id, slot_at, report, instance)
                    VALUES (%s, %s, %s, %s, %s)
                    ON CONFLICT (definition_id, system_id, slot_at) DO NOTHING
                    RETURNING run_id
                    """, (def_id, sys_id, slot, report, self.instance)).fetchone()
                if row is None:
                    continue  # another scheduler has it
                self.execute(row[0], 1, name, report, params, schedule, outputs, system, tz, slot)

    def execute(self, run_id: int, attempt: int, name: str, report: str, params: dict[str, Any],
                schedule: str, outputs: list[str], system: str, tz: str, slot_at: datetime) -> None:
        resolved: dict[str, Any] | None = None
        try:
            resolved = resolve_parameters(report, params, system=system, slot_at=slot_at, time_zone=tz)
            rep = self.rep
            try:
                rows = reports.run_report(rep, report, **resolved)
                empty = None if rows else reports.no_data(rep, report, resolved)
            finally:
                try:
                    rep.rollback()  # reports only read: end the snapshot
                except psycopg.Error:
                    rep.close()     # a broken connection: the next run opens a new one
            out = {"json": reports.render_json(rows),
                   "text": reports.render(report, rows, resolved, "text", empty) if "text" in outputs else None,
                   "csv": reports.render(report, rows, resolved, "csv") if "csv" in outputs else None}
        except Exception as exc:
            error = _error_text(exc)
            if not isinstance(exc, (ReportError, ScheduleError, psycopg.Error)):
                log.exception("report run %s (%s, %s) failed", run_id, name, system)
            retry = self._retry_after(schedule, tz, attempt)
            self._finish(run_id, attempt, params=resolved, error=error, retry_after=retry)
            log.warning("report run %s (%s for %s, slot %s, attempt %s) failed: %s%s", run_id, name, system,
                        slot_at.isoformat(), attempt, error,
                        f"; retried at {retry.isoformat()}" if retry else "; no more attempts")
            self.results.append(RunResult(run_id, name, system, slot_at, attempt, "failed", error=error))
            return
        self._finish(run_id, attempt, params=resolved, rows=len(rows), out=out)
        self.results.append(RunResult(run_id, name, system, slot_at, attempt, "succeeded", rows=len(rows)))

    def _finish(self, run_id: int, attempt: int, *, params: dict[str, Any] | None, rows: int | None = None,
                out: dict[str, str | None] | None = None, error: str | None = None,
                retry_after: datetime | None = None) -> None:
        out = out or {}
        done = self.ctl.execute(
            """
            UPDATE _measure.report_run
               SET finished_at = clock_timestamp(), parameters = %s, rows = %s, output_json = %s,
                   output_text = %s, output_csv = %s, error = %s, retry_after = %s
             WHERE run_id = %s AND attempt = %s AND instance = %s AND finished_at IS NULL
            RETURNING run_id
            """, (Jsonb(_jsonable(params)) if params is not None else None, rows, out.get("json"),
                  out.get("text"), out.get("csv"), error, retry_after, run_id, attempt, self.instance)).fetchone()
        if done is None:
            log.warning("report run %s: its claim was taken over (marked interrupted?) before it "
                        "finished; this result is dropped", run_id)


def run_due(url: str, now: datetime | None = None, *, instance: str | None = None,
            catch_up: int = CATCH_UP, max_attempts: int = MAX_ATTEMPTS,
            stale_after: timedelta = STALE_AFTER) -> list[RunResult]:
    """Run every scheduled report that is due at `now` (default: the current time); returns
    what this call ran. Safe to call from several processes at once: each slot runs once.
    Database errors of the scheduler's own bookkeeping (e.g. the database is unreachable)
    propagate; report failures are recorded on their runs."""
    now = now or datetime.now(UTC)
    if now.tzinfo is None:
        raise ValueError("run_due: now must be timezone-aware")
    p = _Pass(url, now, instance or default_instance(), catch_up=catch_up, max_attempts=max_attempts,
              stale_after=stale_after)
    try:
        p.mark_interrupted()
        p.retry_failed()
        p.run_new_slots()
    finally:
        p.close()
    return p.results


def run_due_quietly(url: str, now: datetime | None = None, **kwargs: Any) -> list[RunResult]:
    """run_due for the collector's live loop: an unreachable database is logged, not raised
    (the next pass catches up)."""
    try:
        return run_due(url, now, **kwargs)
    except psycopg.OperationalError as exc:
        log.warning("scheduled reports skipped this pass: %s", str(exc).strip().splitlines()[0])
        return []
