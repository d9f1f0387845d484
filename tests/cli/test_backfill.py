"""`measuredb backfill --node NAME --days N --seed S`."""

from __future__ import annotations

import psycopg
from typer.testing import CliRunner

from cli.main import app
from core import schema
from tests.engine import MODE


def test_backfill_fills_the_database(fresh_database, monkeypatch, tmp_path) -> None:
    url = fresh_database("_backfill")
    schema.apply(url, mode=MODE)
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MEASUREDB_COLLECTOR_STEP_SECONDS", "300")  # a coarse grid keeps it quick
    monkeypatch.setenv("MEASUREDB_COLLECTOR_INTERVAL_SECONDS", "300")
    result = CliRunner().invoke(app, ["backfill", "--node", "demo", "--days", "1", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "\\DEMO: 1.0 days simulated" in result.output
    with psycopg.connect(url) as c:
        hours = c.execute("SELECT count(DISTINCT hour_at) FROM measure.cpu_hour").fetchone()[0]
        node, seed = c.execute("SELECT node, seed FROM _measure.collector_state").fetchone()
        mode = c.execute("SELECT collector_mode FROM measure.schema_info()").fetchone()[0]
    assert hours >= 24 and (node, seed) == ("demo", 3)
    assert mode == "stopped"  # its last heartbeat: /health says no collector runs, not "starting"


def test_backfill_of_an_unknown_node_is_one_line(fresh_database, monkeypatch, tmp_path) -> None:
    url = fresh_database("_backfill_bad")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    result = CliRunner().invoke(app, ["backfill", "--node", "nosuch", "--days", "1"])
    assert result.exit_code == 2
    assert result.output.startswith("measuredb: nosuch: no such node; shipped nodes: demo,")


def test_backfill_that_ends_with_the_database_away_exits_3(monkeypatch, tmp_path) -> None:
    """PostgreSQL stops during `measuredb backfill`: the run measures on into the spool, waits
    MEASUREDB_COLLECTOR_OUTAGE_WAIT_SECONDS, then says what is left and exits 3; the next
    run with the database back writes it all."""
    import threading
    import time

    from core.database import start_embedded
    from tests.engine import TIMESCALEDB

    server = start_embedded(tmp_path / "pg", dbname="measuredb", timescaledb=TIMESCALEDB)
    url = server.url()
    schema.apply(url, mode=MODE)
    for name, value in {"DATABASE_URL": url, "MEASUREDB_DATA_DIR": str(tmp_path),
                        "MEASUREDB_COLLECTOR_STEP_SECONDS": "300", "MEASUREDB_COLLECTOR_INTERVAL_SECONDS": "300",
                        "MEASUREDB_COLLECTOR_OUTAGE_WAIT_SECONDS": "1"}.items():
        monkeypatch.setenv(name, value)

    def stop_midway() -> None:
        while True:
            with psycopg.connect(url) as c:
                row = c.execute("SELECT durable_until - epoch_at FROM _measure.collector_state").fetchone()
            if row is not None and row[0] is not None and row[0].total_seconds() >= 4 * 3600:
                server.stop()
                return
            time.sleep(0.05)

    stopper = threading.Thread(target=stop_midway)
    stopper.start()
    try:
        result = CliRunner().invoke(app, ["backfill", "--node", "demo", "--days", "1", "--seed", "3"])
        stopper.join()
        assert result.exit_code == 3, result.output
        assert "the database did not answer within 1 s:" in result.output
        assert "still in the spool" in result.output and "Nothing is lost" in result.output
        spooled = list((tmp_path / "spool").glob("*.slice"))
        assert spooled
        server = start_embedded(tmp_path / "pg", dbname="measuredb", timescaledb=TIMESCALEDB)
        monkeypatch.setenv("DATABASE_URL", server.url())
        result = CliRunner().invoke(app, ["backfill", "--node", "demo", "--days", "1", "--seed", "3"])
        assert result.exit_code == 0, result.output
        assert list((tmp_path / "spool").glob("*.slice")) == []
        with psycopg.connect(server.url()) as c:
            hours = c.execute("SELECT count(DISTINCT hour_at) FROM measure.cpu_hour").fetchone()[0]
            gaps = c.execute(
                "SELECT count(*) FROM (SELECT hour_at - lag(hour_at) OVER (ORDER BY hour_at) AS d"
                " FROM (SELECT DISTINCT hour_at FROM measure.cpu_hour) h) x WHERE d > interval '1 hour'"
            ).fetchone()[0]
        assert hours >= 24 and gaps == 0
    finally:
        server.stop()


def _backfill_into(url: str, monkeypatch, tmp_path, *args: str):
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("MEASUREDB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MEASUREDB_COLLECTOR_STEP_SECONDS", "300")
    monkeypatch.setenv("MEASUREDB_COLLECTOR_INTERVAL_SECONDS", "300")
    return CliRunner().invoke(app, ["backfill", "--node", "demo", "--seed", "5", *args])


def test_a_fixed_window_stores_the_same_data_in_any_database(fresh_database, monkeypatch, tmp_path) -> None:
    """--start fixes the window: the same node, seed and window give the same stored data,
    tiers and reports in two databases (a run without --start ends at "now" and cannot)."""
    from datetime import date, datetime, timedelta
    from zoneinfo import ZoneInfo

    from tests.snapshot import differences, snapshot

    snaps = []
    ams = ZoneInfo("Europe/Amsterdam")               # the demo node's time zone: --start is its local time
    day = date.today() - timedelta(days=10)          # inside the 35-day raw horizon
    midnight = datetime(day.year, day.month, day.day, tzinfo=ams)
    for i in range(2):
        url = fresh_database(f"_window{i}")
        result = _backfill_into(url, monkeypatch, tmp_path / str(i), "--days", "1", "--start", day.isoformat())
        assert result.exit_code == 0, result.output
        assert "\\DEMO: 1.0 days simulated" in result.output
        with psycopg.connect(url) as c:
            first, last = c.execute("SELECT min(from_at), max(to_at) FROM measure.interval_record").fetchone()
            assert (first, last) == (midnight, midnight + timedelta(days=1))
            snaps.append(snapshot(c, "\\DEMO", [day], [(midnight, midnight + timedelta(days=1))]))
    assert len(snaps[0]["interval_record"]) > 1000 and snaps[0]["cpu_hour"]
    assert differences(snaps[0], snaps[1]) == []


def test_backfill_window_errors_name_the_option(fresh_database, monkeypatch, tmp_path) -> None:
    url = fresh_database("_window_bad")
    cases = [
        (("--start", "2026-03-07", "--end", "2026-03-08"), "give --start or --end, not both"),
        (("--start", "yesterday"), "--start 'yesterday' is not a date or time: write 2026-03-01"),
        (("--start", "2026-03-07T08:02"), "--start 2026-03-07T08:02 is not on the node's 300 s grid"),
        (("--end", "2999-01-01"), "ends in the future; a backfill simulates the past"),
    ]
    for args, message in cases:
        result = _backfill_into(url, monkeypatch, tmp_path, "--days", "1", *args)
        assert result.exit_code == 2 and message in result.output, (args, result.output)
    assert _backfill_into(url, monkeypatch, tmp_path, "--days", "1", "--end", "2026-03-02").exit_code == 0
    result = _backfill_into(url, monkeypatch, tmp_path, "--days", "1", "--start", "2026-03-05")
    assert result.exit_code == 2
    assert "already holds \\DEMO simulated from 2026-02-28T23:00:00+00:00; a backfill continues" in result.output
    result = _backfill_into(url, monkeypatch, tmp_path, "--days", "1", "--start", "2026-03-01")
    assert result.exit_code == 0 and "nothing to do, copies are stored up to 2026-03-01T23:00:00+00:00" in result.output


def test_backfill_with_anomalies_writes_the_truth(fresh_database, monkeypatch, tmp_path) -> None:
    """`measuredb node anomalies` makes a schedule; `measuredb backfill --anomalies --truth`
    injects it and records it: the line that is down carries nothing in its hours."""
    import json

    url = fresh_database("_backfill_anomalies")
    schema.apply(url, mode=MODE)
    for name, value in {"DATABASE_URL": url, "MEASUREDB_DATA_DIR": str(tmp_path),
                        "MEASUREDB_COLLECTOR_STEP_SECONDS": "300",
                        "MEASUREDB_COLLECTOR_INTERVAL_SECONDS": "300"}.items():
        monkeypatch.setenv(name, value)
    made = CliRunner().invoke(app, ["node", "anomalies", "--start", "2026-11-02", "--days", "2", "--count", "5",
                                    "--seed", "2", "--out", str(tmp_path / "gen.yaml")])
    assert made.exit_code == 0 and "5 anomalies from 2026-11-02 over 2 days" in made.output, made.output
    sched = tmp_path / "s.yaml"
    sched.write_text("anomalies:\n  - {kind: line_down, subject: $X251, start: 2026-11-02T10:00, minutes: 120}\n")
    truth = tmp_path / "truth.json"
    result = CliRunner().invoke(app, ["backfill", "--node", "demo", "--days", "1", "--seed", "3",
                                      "--start", "2026-11-02", "--anomalies", str(sched), "--truth", str(truth)])
    assert result.exit_code == 0, result.output
    (rec,) = json.loads(truth.read_text())["anomalies"]
    assert (rec["kind"], rec["entity"], rec["subject"], rec["from"], rec["to"]) == (
        "line_down", "line", "$X251", "2026-11-02T09:00:00+00:00", "2026-11-02T11:00:00+00:00")
    with psycopg.connect(url) as c:
        rows = c.execute("SELECT line, extract(hour FROM hour_at)::int, requests_per_second FROM measure.line_hour "
                         "WHERE hour_at >= '2026-11-02T08:00Z' AND hour_at < '2026-11-02T12:00Z' "
                         "ORDER BY line, hour_at").fetchall()
    down = {h: r for line, h, r in rows if line == "$X251"}
    up = {h: r for line, h, r in rows if line == "$X252"}
    assert down[9] == 0 and down[10] == 0 and down[8] > 0 and down[11] > 0
    assert min(up.values()) > 0


def test_backfill_with_a_bad_schedule_is_one_line(monkeypatch, tmp_path) -> None:
    sched = tmp_path / "s.yaml"
    sched.write_text("anomalies:\n  - {kind: disc_slow, subject: $NOPE, start: 2026-11-02T10:00, minutes: 60}\n")
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/measuredb")
    result = CliRunner().invoke(app, ["backfill", "--node", "demo", "--days", "1", "--anomalies", str(sched)])
    assert result.exit_code == 2
    assert " ".join(result.output.split()) == (f"measuredb: {sched}: anomaly disc_slow at 2026-11-02T10:00:00: subject "
                                     "'$NOPE' is not a volume of \\DEMO ($SYSTEM, $AUDIT, $DATA1, $DATA2, $DATA3, "
                                     "$DATA4, $BATCH)")
    result = CliRunner().invoke(app, ["backfill", "--node", "demo", "--truth", str(tmp_path / "t.json")])
    assert result.exit_code == 2 and "give --anomalies SCHEDULE too" in result.output
