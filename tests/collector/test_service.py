"""The collector end to end on the demo node: a crash and a database outage lose and
duplicate nothing compared with an uninterrupted run of the same seed."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from collector import checkpoint
from collector.service import Collector, Pace, SpooledDataLeft
from collector.settings import CollectorSettings
from core import control, schema
from core.database import start_embedded
from core.errors import ErrorKind
from core.times import to_ts
from tests.engine import MODE, TIMESCALEDB

MINUTE = 60_000_000
EPOCH = 1_767_254_400_000_000  # 2026-01-01 08:00 UTC (midnight at \DEMO, Pacific time)


def settings(tmp: Path) -> CollectorSettings:
    return CollectorSettings(node="demo", seed=7, interval_seconds=60, backfill_days=0,
                             data_dir=tmp, spool_dir=tmp / "spool")


def snapshot(url: str) -> list[tuple]:
    with psycopg.connect(url) as c:
        copies = c.execute(
            "SELECT e.key, r.type_code, r.copy_kind, _measure.timestamptz_to_us(r.record_at),"
            " _measure.timestamptz_to_us(r.copy_at), r.counters"
            " FROM measure.counter_copy r JOIN _measure.entity e USING (entity_id)"
            " ORDER BY 2, 1, 4, 5, 3").fetchall()
        intervals = c.execute(
            "SELECT e.key, r.type_code, _measure.timestamptz_to_us(r.from_at), r.delta_us, r.counters"
            " FROM _measure.interval_record r JOIN _measure.entity e USING (entity_id)"
            " ORDER BY 2, 1, 3").fetchall()
    return copies, intervals


def run(url: str, tmp: Path, until_min: int) -> Collector:
    c = Collector(settings(tmp), url)
    c.register(epoch_us=EPOCH)
    c.build()
    c.backfill(EPOCH + until_min * MINUTE, chunk_us=5 * MINUTE)
    return c


def reference_run(fresh_database, tmp_path_factory) -> tuple:
    """The uninterrupted 30 minutes every fault test is compared with."""
    url = fresh_database("_svc_ref")
    schema.apply(url, mode=MODE)
    run(url, tmp_path_factory.mktemp("ref"), 30).close()
    return snapshot(url)


@pytest.fixture(scope="module")
def reference(fresh_database, tmp_path_factory) -> tuple:
    return reference_run(fresh_database, tmp_path_factory)


def test_reference_run_has_every_kind_of_record(reference) -> None:
    copies, intervals = reference
    types = {t for _, t, *_ in copies}
    assert {1, 2, 7, 14} <= types            # CPU, PROCESS, DISC, TMF at least
    assert len({(k, t) for k, t, *_ in intervals}) > 50
    assert min(c[4] for c in copies if c[2] == 1) == EPOCH   # start copies at the origin
    assert max(c[4] for c in copies) == EPOCH + 30 * MINUTE


def test_crash_and_restart_loses_and_duplicates_nothing(reference, fresh_database, tmp_path: Path) -> None:
    url = fresh_database("_svc_crash")
    schema.apply(url, mode=MODE)
    c = run(url, tmp_path, 12)
    c.measmon.run_until(EPOCH + 14 * MINUTE)   # simulated past its last stored slice …
    c.writer.close()                           # … and killed: those copies never reached the database
    again = Collector(settings(tmp_path), url)
    again.register(epoch_us=EPOCH)
    again.build()
    again.backfill(EPOCH + 30 * MINUTE, chunk_us=5 * MINUTE)
    again.close()
    assert snapshot(url) == reference


def test_restart_from_a_checkpoint_file(reference, fresh_database, tmp_path: Path) -> None:
    url = fresh_database("_svc_ckpt")
    schema.apply(url, mode=MODE)
    c = run(url, tmp_path, 10)
    assert c.checkpoint()
    c.close()
    again = Collector(settings(tmp_path), url)
    again.register(epoch_us=EPOCH)
    again.build()
    assert again.node.now_us == EPOCH + 10 * MINUTE   # resumed, not replayed from the origin
    again.backfill(EPOCH + 30 * MINUTE, chunk_us=5 * MINUTE)
    again.close()
    assert snapshot(url) == reference


def test_a_checkpoint_others_could_write_is_not_unpickled(fresh_database, tmp_path: Path, caplog) -> None:
    """A checkpoint is a pickle: it is read only from the collector's own private folder, and
    only when no one else may write it; otherwise the collector replays from the origin."""
    url = fresh_database("_svc_ckpt_perm")
    schema.apply(url, mode=MODE)
    c = run(url, tmp_path, 10)
    assert c.checkpoint()
    c.close()
    folder = tmp_path / "checkpoints"
    assert folder.stat().st_mode & 0o777 == 0o700
    (ckpt,) = folder.glob("*.pickle")
    assert ckpt.stat().st_mode & 0o777 == 0o600
    ckpt.chmod(0o666)                                   # a file others may write: not loaded
    again = Collector(settings(tmp_path), url)
    again.register(epoch_us=EPOCH)
    again.build()
    assert again.node.now_us == EPOCH                   # replayed from the origin, not resumed
    again.close()
    assert "checkpoint not loaded" in caplog.text and "others may write it" in caplog.text


def test_database_outage_is_spooled_and_replayed(reference, tmp_path: Path) -> None:
    server = start_embedded(tmp_path / "outage", dbname="measuredb", timescaledb=TIMESCALEDB)
    url = server.url()
    try:
        schema.apply(url, mode=MODE)
        c = run(url, tmp_path, 10)
        server.stop()                                      # PostgreSQL goes away …
        c.backfill(EPOCH + 20 * MINUTE, chunk_us=5 * MINUTE)
        assert len(c.writer.spooled()) == 2                # … the collector keeps measuring
        with pytest.raises(SpooledDataLeft, match=r"did not answer within 0 s: 2 slices .* still in the spool"):
            c.finish_backfill(0)                           # `measuredb backfill` exits 3 with this
        server = start_embedded(tmp_path / "outage", dbname="measuredb", timescaledb=TIMESCALEDB)
        c.url = c.writer.url = url = server.url()
        c.backfill(EPOCH + 30 * MINUTE, chunk_us=5 * MINUTE)
        c.finish_backfill(30)                              # waits out the backoff, replays in order
        assert c.writer.spooled() == []
        c.close()
        assert snapshot(url) == reference
    finally:
        server.stop()


def test_live_steps_on_the_grid_reproduce_the_backfill(reference, fresh_database, tmp_path: Path) -> None:
    """Live mode advances to wall-clock times cut down to the step grid; whatever the times,
    the counters are those of a backfill, so a replay after a crash reproduces a live run."""
    import numpy as np

    url = fresh_database("_svc_live")
    schema.apply(url, mode=MODE)
    c = Collector(settings(tmp_path), url)
    c.register(epoch_us=EPOCH)
    c.build()
    rng = np.random.default_rng(3)
    t = EPOCH
    while t < EPOCH + 30 * MINUTE:
        t = min(EPOCH + 30 * MINUTE, t + int(rng.integers(1, 90)) * 1_000_000)
        c.advance(t - t % c.node.step_us if t < EPOCH + 30 * MINUTE else t)
    c.close()
    assert snapshot(url) == reference


def test_a_configured_system_keeps_its_time_zone_and_cpu_types(fresh_database, tmp_path: Path) -> None:
    """The collector registers its system from the node file once (CPU TYPE: the processor
    type); what `measuredb system set` changes afterwards stays across collector starts."""
    url = fresh_database("_svc_reg")
    schema.apply(url, mode=MODE)
    run(url, tmp_path, 60).close()
    with psycopg.connect(url) as c:
        assert c.execute("SELECT time_zone FROM _measure.system").fetchone() == ("Europe/Amsterdam",)
        assert c.execute("SELECT cpu, cpu_type FROM _measure.system_cpu_type").fetchall() == [(None, "VLX")]
        trend = c.execute("SELECT DISTINCT cpu_type FROM measure.report_cpu_trend('\\DEMO', '2026-01-01', '2026-01-01')"
                          ).fetchall()
        assert trend == [("VLX",)]                      # the CPU trend report's CPU TYPE column
        c.execute("""SELECT _measure.system_set('\\DEMO', '{"time_zone": "UTC", "cpu_types": [{"cpu": null, "cpu_type": "TXP"}]}')""")
    again = Collector(settings(tmp_path), url)
    again.register(epoch_us=EPOCH)
    again.close()
    with psycopg.connect(url) as c:
        assert c.execute("SELECT time_zone FROM _measure.system").fetchone() == ("UTC",)
        assert c.execute("SELECT cpu, cpu_type FROM _measure.system_cpu_type").fetchall() == [(None, "TXP")]


def test_control_requests_are_answered_with_typed_answers_and_errors(fresh_database, tmp_path: Path) -> None:
    """The collector's side of the protocol (collector/control.py, core/control.py): each kind
    gets its typed answer, each mistake its error code."""
    url = fresh_database("_svc_typed")
    schema.apply(url, mode=MODE)
    c = Collector(settings(tmp_path), url)
    c.register(epoch_us=EPOCH)
    c.build()
    c.backfill(EPOCH + 2 * MINUTE, chunk_us=MINUTE)
    mid = next(iter(c.measmon.measurements))
    ids = control.UserCounterIds(cpu=1, pin=300, name="REQUESTS")
    asked = {
        "status": control.Status(measurement_id=mid),
        "read": control.ReadActive(entity="cpu", descriptor={"cpu": 1}, measurement_id=mid),
        "init": control.BumpInit(ids=ids),
        "unknown measurement": control.Status(measurement_id=999),
        "not running": control.ReadActive(entity="cpu", measurement_id=999),
        "unknown entity": control.ReadActive(entity="nonsense"),
        "unmeasured": control.Bump(ids=control.UserCounterIds(cpu=0, pin=0, name="X"), op="INC"),
        "wrong offset": control.Bump(ids=ids, offset=99_999, op="INC"),   # created by "init"
    }
    with psycopg.connect(url, autocommit=True) as conn:
        rids = {what: control.submit(conn, c.state.system_id, r) for what, r in asked.items()}
        assert c.handle_requests() == len(asked)
        got = {what: control.outcome(conn, rids[what], r) for what, r in asked.items()}
    c.close()
    at = to_ts(EPOCH + 2 * MINUTE)
    assert got["status"].status.state == "running" and got["status"].at == at
    assert [r.ids for r in got["read"].records] == [{"cpu": 1}]
    assert got["read"].records[0].baseline_at == at           # the copy at 08:02
    assert got["init"] == control.BumpInitAnswer(offset=-1)   # no measurement has the counter
    assert got["unmeasured"] == control.BumpAnswer(bumped=False, at=at)
    codes = {what: (o.code, o.message) for what, o in got.items() if isinstance(o, control.Refusal)}
    assert codes == {
        "unknown measurement": (ErrorKind.NOT_FOUND, "measurement 999 is not known to the collector "
                                                     "(not started yet?)"),
        "not running": (ErrorKind.NOT_FOUND, "measurement 999 is not running"),
        "unknown entity": (ErrorKind.INVALID, codes["unknown entity"][1]),
        "wrong offset": (ErrorKind.CONFLICT, codes["wrong offset"][1]),
    }
    assert codes["unknown entity"][1].startswith("unknown entity type 'nonsense'")
    assert codes["wrong offset"][1].startswith("offset 99999 is not this counter's")


def test_the_backfill_estimate_follows_the_recent_pace() -> None:
    """A slow first minute (cold database, first steps) does not inflate what is left: the
    estimate is the node time left at the pace of the last minute of wall time."""
    hour = 3_600_000_000
    pace = Pace(window_s=60)
    pace.add(0.0, 0)
    assert pace.left_s(100 * hour) is None
    pace.add(100.0, hour)          # the first node hour took 100 s
    assert pace.left_s(100 * hour) is None  # one chunk says nothing of the pace
    for k in range(2, 40):         # then 2 s per node hour
        pace.add(100.0 + 2 * (k - 1), k * hour)
    assert pace.left_s(100 * hour) == (100 - 39) * 2.0
    assert pace.samples[0][0] >= 100.0 + 2 * 38 - 60 - 2  # only the last minute is kept


def test_a_pipelined_backfill_answers_as_one_written_slice_by_slice(fresh_database, tmp_path: Path) -> None:
    """A backfill writes in a thread of its own and condenses the hours it marked after
    each slice commits (collector/writer_thread.py): every tier, report and panel answers as
    when each slice is written and its hours condensed before the next is simulated (the
    way of release 130), nothing is left marked, and the checkpoint files follow stored
    slices only."""
    from datetime import date

    from tests.snapshot import differences
    from tests.snapshot import snapshot as everything

    until = EPOCH + 8 * 60 * MINUTE                    # checkpoint at 12:00 UTC
    snaps = []
    for pipelined in (True, False):
        url = fresh_database(f"_svc_pipelined_{pipelined}")
        schema.apply(url, mode=MODE)
        c = Collector(settings(tmp_path / str(pipelined)), url)
        c.register(epoch_us=EPOCH)
        c.build()
        c.backfill(until, pipelined=pipelined)
        assert c.writer.durable_until_us == until and c.writer.condense  # (marked only while it ran)
        # the partitions of the marked hours analysed before each pass (writer_thread.py)
        assert ("condense: analyze" in c.phases.seconds) is pipelined
        c.condense_months()
        c.close()
        (ckpt,) = (tmp_path / str(pipelined) / "checkpoints").glob("*.pickle")
        assert checkpoint.load(ckpt, EPOCH, until).node.now_us == EPOCH + 4 * 60 * MINUTE  # 12:00 UTC
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM _measure.tier_dirty").fetchone() == (0,)
            snaps.append(everything(conn, "\\DEMO", [date(2026, 1, 1)], [(to_ts(EPOCH), to_ts(until))]))
    assert len(snaps[0]["interval_record"]) > 1000 and snaps[0]["cpu_hour"] and snaps[0]["cpu_shift"]
    assert differences(*snaps) == []
