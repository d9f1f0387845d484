"""Reference computations for the dashboard tests, independent of the SQL under test (no tests here)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from tests.dashboards.simulated import SYSTEM as SYS


def shifts_of(conn) -> tuple[ZoneInfo, list[tuple[int, str, int, int]]]:
    tz = conn.execute("SELECT time_zone FROM measure.system WHERE system_name = %s", (SYS,)).fetchone()[0]
    rows = conn.execute("SELECT shift_no, name, extract(epoch FROM begin_time)::int, extract(epoch FROM end_time)::int "
                        "FROM measure.shift WHERE system_name = %s ORDER BY 1", (SYS,)).fetchall()
    return ZoneInfo(tz), rows


def shift_of(hour: datetime, tz: ZoneInfo, shifts) -> tuple[date, int, datetime, datetime]:
    """(shift day, shift, start, end) of the hour starting at `hour`, from the shift definitions."""
    local = hour.astimezone(tz)
    sec = local.hour * 3600 + local.minute * 60
    for no, _, begin, end in shifts:
        crosses = end <= begin
        if (sec >= begin or sec < end) if crosses else (begin <= sec < end):
            day = local.date() - timedelta(days=1) if crosses and sec < end else local.date()
            midnight = datetime(day.year, day.month, day.day, tzinfo=tz)
            start = (midnight + timedelta(seconds=begin)).astimezone(UTC)
            stop = datetime.combine(day + timedelta(days=1 if crosses else 0), datetime.min.time(), tz) \
                + timedelta(seconds=end)
            return day, no, start, stop.astimezone(UTC)
    raise AssertionError(f"no shift holds {local}")
