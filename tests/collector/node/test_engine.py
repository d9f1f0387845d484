"""Engine behaviour: determinism, transient entities, CPU failure and reload, problems."""

from __future__ import annotations

import numpy as np
import pytest

from collector.node import NullHooks, RealtimeClock, SimulatedClock
from collector.node.engine import Node
from collector.node.hooks import NodeHooks

from .node_helpers import START_US, RecordingHooks

TEN_MIN = 600_000_000


def run(node_name, workload, seed, minutes=10, step_us=1_000_000, start=START_US, **kw):
    node = Node(node_name, workload, seed=seed, start_us=start, step_us=step_us, **kw)
    h = RecordingHooks(keep_events=kw.pop("keep_events", False))
    h.attach(node)
    node.advance(start + minutes * 60_000_000)
    return node, h


def test_same_seed_same_counters_bit_for_bit():
    _, a = run("demo", "demo", seed=42, minutes=5)
    _, b = run("demo", "demo", seed=42, minutes=5)
    _, c = run("demo", "demo", seed=43, minutes=5)
    assert a.acc.keys() == b.acc.keys()
    for e in a.acc:
        np.testing.assert_array_equal(a.acc[e], b.acc[e])
    assert any(not np.array_equal(a.acc[e], c.acc[e]) for e in a.acc)


def test_null_hooks_is_a_node_hooks():
    assert isinstance(NullHooks(), NodeHooks)
    node = Node("demo", "demo", seed=1, start_us=START_US)
    node.advance(START_US + 5_000_000)  # nothing measured: no bumps at all
    assert node.hooks.calls == 0
    assert node.stats.arrived > 0


def test_unmeasured_slots_are_never_bumped():
    node = Node("demo", "demo", seed=1, start_us=START_US)
    h = RecordingHooks()
    h.node = node
    node.hooks = h
    node.tables["cpu"].xptr[1] = 7  # measure only CPU 1
    h.keep_calls = True
    node.advance(START_US + 3_000_000)
    assert {c[0] for c in h.calls} == {"cpu"}
    assert all(c[1].tolist() == [1] for c in h.calls)


def test_counters_add_up_across_entities():
    node, h = run("demo", "demo", seed=5, minutes=10)
    # CPU busy = Σ process busy + unattributed system overhead (never less than processes)
    cpu = h.total("cpu", "CPU-BUSY-TIME").sum()
    proc = h.total("process", "CPU-BUSY-TIME").sum()
    assert 0 < proc < cpu
    # each disc request of a server shows up on its FILE open and DISCOPEN record
    assert h.total("disc", "REQUESTS").sum() >= h.total("file", "READS").sum() > 0
    assert h.total("discopen", "REQUESTS").sum() == h.total("disc", "REQUESTS").sum()
    # terminals: one transaction per response, bytes in both directions
    assert h.total("terminal", "TRANSACTIONS").sum() == node.stats.responses
    assert h.total("terminal", "INPUT-BYTES").sum() > 0
    assert h.total("tmf", "HOME-TRANS").sum() >= node.stats.responses


def test_transient_entities_start_before_bumps_and_stop_after():
    node = Node("demo", "demo-problems", seed=3, start_us=START_US)
    h = RecordingHooks(keep_events=True)
    h.attach(node)
    node.advance(START_US + 120_000_000)
    starts = [(e, s) for k, e, s, _ in h.events if k == "start"]
    stops = [(e, s) for k, e, s, _ in h.events if k == "stop"]
    assert ("process",) and any(e == "process" for e, _ in starts)
    assert any(e == "file" for e, _ in starts) and any(e == "discopen" for e, _ in starts)
    assert stops, "the churning dynamic servers must also stop"
    pos = {}
    for i, (k, e, s, _) in enumerate(h.events):
        pos.setdefault((k, e, s), []).append(i)
    for e, s in starts:
        bumps = pos.get(("bump", e, s), [])
        assert all(b > pos[("start", e, s)][0] for b in bumps)
    for e, s in stops:
        bumps = pos.get(("bump", e, s), [])
        assert all(b < pos[("stop", e, s)][0] for b in bumps)
    # process creation is charged: PATHMON launches, CPU process overhead
    assert h.total("process", "LAUNCHES").sum() >= len([1 for e, _ in starts if e == "process"])
    assert h.total("cpu", "PROCESS-OVHD").sum() > 0


def test_staged_problems_show_in_counters():
    node, h = run("demo", "demo-problems", seed=9, minutes=5)
    P = node.tables["process"]
    names = list(P.ids["process_name"][: P.n])
    busy = h.total("process", "CPU-BUSY-TIME")
    poll = names.index("$POLL")
    assert busy[poll] / 300e6 == pytest.approx(0.4, rel=0.1)  # the polling process burns 40 %
    assert P.ids["priority"][names.index("$COPY")] == 190  # batch at the wrong priority
    assert h.total("disc", "BLOCK-SPLITS").sum() > 0
    assert h.total("process", "FILE-OPEN-CALLS").sum() > 0  # dynamic file opens
    F = node.tables["file"]
    scratch = F.ids["file_name"][: F.n] == "$DATA1.TEMP.SCRATCH"  # on the first application volume
    assert scratch.any() and not F.alive[: F.n][scratch].any()
    d = node.tables["disc"]
    req = h.total("disc", "READS")  # physical reads: the account file, partitioned over $DATA1-4
    hot = next(
        i for i in range(d.n) if d.ids["device_name"][i] == "$DATA2" and d.ids["path"][i] == "P"
    )
    others = [
        i
        for i in range(d.n)
        if str(d.ids["device_name"][i]).startswith("$DATA") and i != hot and d.ids["path"][i] == "P"
    ]
    assert req[hot] > 2 * max(req[others])


def test_cpu_failure_and_reload():
    node = Node("demo", "demo", seed=2, start_us=START_US)
    h = RecordingHooks(keep_events=True)
    h.attach(node)
    t_fail, t_reload = START_US + 30_000_000, START_US + 60_000_000
    node.advance(START_US + 10_000_000)
    P = node.tables["process"]
    in2 = set(np.flatnonzero(P.alive[: P.n] & (P.cpu[: P.n] == 2)).tolist())
    node.fail_cpu(2, t_fail)
    kinds = [(k, e, s) for k, e, s, t in h.events if t == t_fail]
    assert ("cpu_failed", "cpu", 2) in kinds
    stopped = {s for k, e, s in kinds if k == "stop" and e == "process"}
    assert stopped == in2
    assert not node.tables["cpu"].alive[2]
    h.keep_calls = True
    node.advance(START_US + 45_000_000)
    cpu_rows = [c for c in h.calls if c[0] == "cpu"]
    assert cpu_rows and all(2 not in c[1].tolist() for c in cpu_rows)
    proc_rows = np.concatenate([c[1] for c in h.calls if c[0] == "process"])
    assert not (set(proc_rows.tolist()) & in2)
    # the other CPUs carried the work
    assert node.stats.completed > 0
    h.calls.clear()
    node.reload_cpu(2, t_reload)
    assert ("cpu_reloaded", "cpu", 2, t_reload) in h.events
    node.advance(START_US + 70_000_000)
    assert any(2 in c[1].tolist() for c in h.calls if c[0] == "cpu")
    with pytest.raises(ValueError, match="CPU 9 does not exist"):
        node.fail_cpu(9, START_US + 80_000_000)


def test_daily_profile_and_growth():
    # 03:00 local vs 14:00 local on \DEMO (Europe/Amsterdam): the peak hour is far busier
    import datetime as dt
    import zoneinfo

    tz = zoneinfo.ZoneInfo("Europe/Amsterdam")
    night = int(dt.datetime(2026, 6, 2, 3, 0, tzinfo=tz).timestamp() * 1e6)
    noon = int(dt.datetime(2026, 6, 2, 14, 0, tzinfo=tz).timestamp() * 1e6)
    a, _ = run("demo", "demo", seed=1, minutes=5, start=night)
    b, _ = run("demo", "demo", seed=1, minutes=5, start=noon)
    assert b.stats.responses > 5 * a.stats.responses  # profile 0.06 at 03:00, 1.0 at 14:00
    assert a.stats.completed > a.stats.responses  # the night batch runs at 03:00 only
    # growth compounds monthly; the weekday factor applies on top
    from collector.node.workload import ShapeSpec, rate_multiplier

    shape = ShapeSpec(growth_per_month=0.1, weekday=[1, 1, 1, 1, 1, 0.5, 0.5])
    t0 = dt.datetime(2026, 1, 1, 14, 0)
    t1 = t0 + dt.timedelta(days=91)  # 13 weeks later: same weekday and hour, ~3 months
    assert rate_multiplier(shape, t1) / rate_multiplier(shape, t0) == pytest.approx(
        1.1 ** (91 / 30.4375)
    )
    sat = dt.datetime(2026, 1, 3, 14, 0)
    assert rate_multiplier(shape, sat) < 0.51 * rate_multiplier(shape, t0) * 1.01


def test_clocks():
    c = SimulatedClock(0)
    c.wait_until(5_000_000)
    assert c.now_us == 5_000_000
    now = [100.0]
    slept = []
    rc = RealtimeClock(0, factor=10.0, _sleep=slept.append, _mono=lambda: now[0])
    rc.wait_until(10_000_000)  # 10 simulated s = 1 real s ahead: sleeps
    assert slept == [pytest.approx(1.0)]
    now[0] = 110.0  # 10 real s later, only 20 simulated s are due at 2 s
    rc.wait_until(20_000_000)
    assert len(rc.overruns) == 1 and rc.overruns[0].behind_s == pytest.approx(8.0)
    strict = RealtimeClock(0, factor=1.0, strict=True, _sleep=slept.append, _mono=lambda: now[0])
    strict.wait_until(0)
    now[0] = 200.0
    with pytest.raises(RuntimeError, match="behind real time"):
        strict.wait_until(1_000_000)


def test_file_opens_name_the_primary_partition_as_a_file_descriptor_names_it():
    """FILE entities carry $VOL.SUBVOL.FILE (the primary partition), so an ADD FILE
    descriptor selects them; DISCOPEN has one entity per partition."""
    from collector.measure.contab import Contab, EntityDescriptor

    node = Node("demo", "demo", seed=1, start_us=START_US)
    F, D = node.tables["file"], node.tables["discopen"]
    names = {str(F.ids["file_name"][s]) for s in range(F.n)}
    assert "$DATA1.ET1.ACCOUNT" in names and "$DATA3.ET1.HISTORY" in names
    c = Contab(descriptors=[EntityDescriptor(type="FILE", fields={"file_name": "$DATA1.ET1.*"})])
    chosen = {str(F.ids["file_name"][s]) for s in range(F.n) if c.matches("FILE", F.id_of(s))}
    assert chosen == {"$DATA1.ET1.ACCOUNT", "$DATA1.ET1.TELLER"}
    assert {str(D.ids["file_name"][s]) for s in range(D.n)} >= {f"$DATA{i}.ET1.ACCOUNT" for i in range(1, 5)}
