"""A simulated week for the dashboard tests (no tests here; conftest.py builds it once per session).

The real collector path fills the database: the node of week-node.yaml running the workload of
week-workload.yaml (collector/node), MEASURE's default measurement of every entity with a
15-minute interval (collector/measure), the writer with its per-slice condensing
(collector/sink.py), exactly as `measuredb backfill` does (collector/service.py
`Collector.backfill`). A week at 15-minute steps takes ~15 s: DebitCredit events are the cost,
hence a small node at a few transactions per second.

In a database of its own (the other tests here read \\DASH as the only system),
:func:`populate_today`: two night hours of the shipped node ``today`` (\\TODAY,
collector/node/later.py) at the end of the week, the IPU counters and the H-, J- and L-series
entity types the sql-ipu dashboard reads (a few seconds).

What the simulation gives by itself: every entity type the panels read, and CPU 0 past the
default busy and queue limits in the busiest afternoon hours. What is staged afterwards, as an
analyst would (system thresholds of \\DASH, _measure.threshold): a DISC busy_max and a LINE
write_busy_max limit at the 90th percentile of the week's hourly values, and a lower limit on
LINE requests_per_second at the 10th percentile ("line idle"), so that every threshold panel and
alert has breaches, lower limits are exercised, and the thresholds trigger re-resolves the
stored violations of a condensed week.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

from collector.service import Collector
from collector.settings import CollectorSettings
from core.times import SECOND, to_us

HERE = Path(__file__).resolve().parent
NODE = HERE / "week-node.yaml"
WORKLOAD = HERE / "week-workload.yaml"
SYSTEM = "\\DASH"
START = datetime(2024, 5, 6, 0, 0, tzinfo=UTC)  # a Monday (02:00 in Amsterdam)
DAYS = 7
STEP_S = 900
SEED = 1986
TODAY_START = START + timedelta(days=DAYS - 1, hours=2)  # \TODAY: two night hours
TODAY_HOURS = 2

# (entity, item, operator, percentile of the week's hourly values)
STAGED = (("disc", "busy_max", ">", 0.9), ("line", "write_busy_max", ">", 0.9),
          ("line", "requests_per_second", "<", 0.1))


def populate(url: str, data_dir: Path) -> int:
    """Simulate the week into the database at url (schema applied); returns the system_id."""
    settings = CollectorSettings(node=str(NODE), workload=str(WORKLOAD), seed=SEED, interval_seconds=STEP_S,
                                 step_seconds=STEP_S, backfill_days=0, data_dir=data_dir,
                                 spool_dir=data_dir / "spool")
    c = Collector(settings, url)
    state = c.register(epoch_us=to_us(START))
    c.build()
    c.backfill(to_us(START + timedelta(days=DAYS)))
    c.close()
    assert c.writer.durable_until_us == to_us(START) + DAYS * 86400 * SECOND, "the week was not stored"
    with psycopg.connect(url) as conn:
        for entity, item, op, pct in STAGED:
            conn.execute(
                f"INSERT INTO _measure.threshold (system_id, entity, item, operator, limit_value, help) "
                f"SELECT %s, %s, %s, %s, round(percentile_cont(%s) WITHIN GROUP (ORDER BY {item})::numeric, 3), "
                f"'staged by tests/dashboards/simulated.py' FROM measure.{entity}_hour WHERE system_id = %s",
                (state.system_id, entity, item, op, pct, state.system_id))
    return state.system_id


def populate_today(url: str, data_dir: Path) -> None:
    """Two night hours of the node today (\\TODAY) into the database at url (schema applied)."""
    settings = CollectorSettings(node="today", seed=SEED, interval_seconds=STEP_S, step_seconds=STEP_S,
                                 backfill_days=0, data_dir=data_dir, spool_dir=data_dir / "spool")
    c = Collector(settings, url)
    c.register(epoch_us=to_us(TODAY_START))
    c.build()
    c.backfill(to_us(TODAY_START + timedelta(hours=TODAY_HOURS)))
    c.close()
