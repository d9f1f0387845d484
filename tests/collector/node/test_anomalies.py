"""Scheduled anomalies of the simulated node (collector/node/anomalies.py): each kind shows in
the counters it should, only in its window and on its subject; without anomalies nothing
changes; the schedule file, the generator, the ground truth and its scoring."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from collector.node.anomalies import (
    Anomaly,
    Schedule,
    batch_hours,
    generate,
    load_schedule,
    matches,
    per_day,
    score,
    truth,
    write_truth,
)
from collector.node.compiler import R
from collector.node.engine import Node
from collector.node.topology import NodeFileError, load_node
from collector.node.workload import load_workload

from .node_helpers import START_US, RecordingHooks

MIN = 60_000_000
T0 = START_US + 8 * 3600 * 1_000_000  # Thursday 2026-05-28 10:00 in Amsterdam (08:00 UTC)
PHASE = 20  # minutes before, in and after the window
WINDOW = dt.datetime.fromtimestamp((T0 + PHASE * MIN) / 1e6, tz=dt.UTC)
SEED = 5


def run(anomalies, phases=(PHASE, PHASE, PHASE)) -> tuple[Node, list[dict[str, np.ndarray]]]:
    """demo on 60-s steps from T0; every counter bumped in each phase, per entity slot."""
    node = Node("demo", "demo", seed=SEED, start_us=T0, step_us=MIN, anomalies=anomalies)
    h = RecordingHooks()
    h.attach(node)
    out, prev, t = [], {}, T0
    for minutes in phases:
        t += minutes * MIN
        node.advance(t)
        snap = {e: a.copy() for e, a in h.acc.items()}
        delta = {}
        for e, a in snap.items():
            p = np.zeros_like(a)
            if e in prev:
                p[: prev[e].shape[0]] = prev[e]
            delta[e] = a - p
        out.append(delta)
        prev = snap
    return node, out


def col(node: Node, phase: dict, entity: str, counter: str) -> np.ndarray:
    T = node.tables[entity]
    a = phase.get(entity, np.zeros((0, T.n_counters)))
    v = np.zeros(T.n)
    k = min(T.n, a.shape[0])
    v[:k] = a[:k, T.entity.index(counter)]
    return v


def slot(node: Node, entity: str, key: str, name: str) -> int:
    T = node.tables[entity]
    return int(np.flatnonzero(T.ids[key][: T.n] == name)[0])


def one(kind: str, subject: str | None = None, magnitude: float | None = None, **kw) -> list[Anomaly]:
    return [Anomaly(kind=kind, subject=subject, start=WINDOW, minutes=PHASE, magnitude=magnitude, **kw)]


@pytest.fixture(scope="module")
def base():
    return run(None)


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[e], b[e]) for e in a)


# ----------------------------------------------------------------------- nothing changes
def test_without_anomalies_nothing_changes(base):
    _, empty = run([])
    assert all(same(x, y) for x, y in zip(base[1], empty, strict=True))
    # every kind scheduled after the run: the node runs exactly as without them (the runaway
    # process's stream is compiled in but off)
    later = WINDOW + dt.timedelta(days=1)
    kinds = [Anomaly(kind="runaway_process", subject="$POLL", start=later, minutes=60),
             Anomaly(kind="disc_slow", subject="$DATA2", start=later, minutes=60),
             Anomaly(kind="line_down", subject="$X251", start=later, minutes=60),
             Anomaly(kind="dynamic_file_opens", start=later, minutes=60),
             Anomaly(kind="load_spike", start=later, minutes=60)]
    node, out = run(kinds)
    assert all(same(x, y) for x, y in zip(base[1], out, strict=True))
    assert node._anomalies is not None and node._anomalies.applied == []


def test_before_the_window_the_counters_are_the_same(base):
    for kind, subject in (("runaway_process", "$POLL"), ("disc_slow", "$DATA3"), ("line_down", "$X251"),
                          ("dynamic_file_opens", None), ("load_spike", None)):
        _, out = run(one(kind, subject))
        assert same(base[1][0], out[0]), kind


# ------------------------------------------------------------------------------- kinds
def test_runaway_process(base):
    node, (before, during, after) = run(one("runaway_process", "$POLL", 0.9))
    p = slot(node, "process", "process_name", "$POLL")
    busy = [col(node, ph, "process", "CPU-BUSY-TIME")[p] for ph in (before, during, after)]
    assert busy[0] == 0  # $POLL does nothing on demo before its window,
    assert 0 < busy[2] < 0.001 * PHASE * MIN  # and after it only finishes the bursts queued at its end
    assert busy[1] == pytest.approx(0.9 * PHASE * MIN, rel=0.02)  # 0.9 of the window's CPU time
    # in its CPU (2), at priority 190 during the window, its own 150 after
    cpu = node.tables["process"].cpu[p]
    assert cpu == 2 and node.tables["process"].ids["priority"][p] == 150
    up = col(node, during, "cpu", "CPU-BUSY-TIME") - col(node, base[1][1], "cpu", "CPU-BUSY-TIME")
    assert up[cpu] == pytest.approx(busy[1], rel=0.05)
    assert np.abs(np.delete(up, cpu)).max() < 0.02 * PHASE * MIN  # the other CPUs barely change
    on, off = node._anomalies.applied
    assert (on["on"], on["at_us"], off["on"], off["at_us"]) == (True, T0 + PHASE * MIN, False, T0 + 2 * PHASE * MIN)


def test_runaway_priority_in_window():
    node = Node("demo", "demo", seed=SEED, start_us=T0, step_us=MIN, anomalies=one("runaway_process", "$POLL"))
    p = slot(node, "process", "process_name", "$POLL")
    node.advance(T0 + (PHASE + 1) * MIN)
    assert node.tables["process"].ids["priority"][p] == 190


def test_disc_slow(base):
    node, (_, during, after) = run(one("disc_slow", "$DATA3", 3.0))
    vol = [v["name"] for v in node.topo.volumes].index("$DATA3")
    d = 2 * vol  # primary path's slot
    busy, busy0 = (col(node, ph, "disc", "DEVICE-QBUSY-TIME") for ph in (during, base[1][1]))
    q, q0 = (col(node, ph, "disc", "REQUEST-QTIME") for ph in (during, base[1][1]))
    # the same requests (same arrivals until the window), each 3 times as long
    assert col(node, during, "disc", "REQUESTS")[d] == pytest.approx(col(node, base[1][1], "disc", "REQUESTS")[d], rel=0.03)
    assert busy[d] / busy0[d] == pytest.approx(3.0, rel=0.05)
    assert q[d] / q0[d] > 3.0  # queueing: more than the service time's factor
    others = [2 * i for i in range(len(node.topo.volumes)) if i != vol and busy0[2 * i] > 0]
    assert np.allclose(busy[others], busy0[others], rtol=0.1)
    assert node.vol_service[vol] == node.topo.volumes[vol]["service_us"]  # back after the window


def test_line_down(base):
    node, (before, during, after) = run(one("line_down", "$X251"))
    names = [ln["name"] for ln in node.topo.lines]
    ln = names.index("$X251")
    other = names.index("$X252")
    for c in ("REQUESTS", "TRANSACTIONS"):
        v = col(node, during, "line", c)
        assert v[ln] == 0 and v[other] > 0
        assert col(node, before, "line", c)[ln] > 0 and col(node, after, "line", c)[ln] > 0
    # its terminals start nothing; the other line's terminals work as before
    T = node.tables["terminal"]
    on_line = T.ids["line_name"][: T.n] == "$X251"
    tx = col(node, during, "terminal", "TRANSACTIONS")
    assert tx[on_line].sum() == 0 and tx[~on_line].sum() > 0
    assert tx[~on_line].sum() == pytest.approx(col(node, base[1][1], "terminal", "TRANSACTIONS")[~on_line].sum(), rel=0.05)


def test_dynamic_file_opens(base):
    node, (before, during, after) = run(one("dynamic_file_opens"))
    servers = np.flatnonzero(node.p_role == R["server"])
    opens = [col(node, ph, "process", "FILE-OPEN-CALLS")[servers].sum() for ph in (before, during, after)]
    assert opens[0] == 0 and opens[2] == 0
    # one open a transaction: the servers' opens are the transactions the window began
    tx = col(node, during, "terminal", "TRANSACTIONS").sum()
    assert opens[1] == pytest.approx(tx, rel=0.01)
    assert col(node, base[1][1], "process", "FILE-OPEN-CALLS")[servers].sum() == 0


def test_load_spike(base):
    node, (before, during, after) = run(one("load_spike", magnitude=1.6))
    tx = col(node, during, "terminal", "TRANSACTIONS").sum()
    tx0 = col(node, base[1][1], "terminal", "TRANSACTIONS").sum()
    assert tx / tx0 == pytest.approx(1.6, rel=0.04)
    after0 = col(node, base[1][2], "terminal", "TRANSACTIONS").sum()
    assert col(node, after, "terminal", "TRANSACTIONS").sum() / after0 == pytest.approx(1.0, abs=0.06)
    assert [s.tps for s in node.streams] == [s.tps for s in base[0].streams]  # restored exactly


# --------------------------------------------------------------------- schedule and truth
def test_schedule_file_errors(tmp_path: Path):
    f = tmp_path / "s.yaml"
    f.write_text("anomalies:\n  - {kind: meltdown, start: 2026-11-02T10:00, minutes: 60}\n")
    with pytest.raises(NodeFileError, match=r"anomalies\.0\.kind"):
        load_schedule(f)
    f.write_text("anomalies:\n  - {kind: disc_slow, subject: $DATA9, start: 2026-11-02T10:00, minutes: 60}\n")
    with pytest.raises(NodeFileError, match=r"\$DATA9.* is not a volume of \\DEMO"):
        truth(load_schedule(f), load_node("demo"))
    with pytest.raises(NodeFileError, match="cannot read"):
        load_schedule(tmp_path / "missing.yaml")
    f.write_text("anomalies:\n  - {kind: line_down, subject: $X251, start: 2026-11-02T10:00, minutes: 90}\n")
    assert load_schedule(f).anomalies[0].minutes == 90


def test_truth_records():
    topo = load_node("demo")
    s = Schedule(anomalies=[Anomaly(kind="runaway_process", subject="$REPT",
                                    start=dt.datetime(2026, 11, 16, 10), minutes=90, magnitude=0.8)])
    (r,) = truth(s, topo)
    # 10:00 in Amsterdam (CET in November) is 09:00 UTC
    assert r == {"kind": "runaway_process", "entity": "process", "subject": "$REPT",
                 "from": "2026-11-16T09:00:00+00:00", "to": "2026-11-16T10:30:00+00:00", "magnitude": 0.8,
                 "targets": [["process", "$REPT"], ["cpu", "2"]],
                 "indicators": ["busy_high_priority_process", "cpu_over_utilised", "cpu_load_balance"]}


def test_generate_is_seeded_and_spread(tmp_path: Path):
    topo = load_node("demo")
    bh = batch_hours([load_workload("demo")])
    a = generate(topo, dt.date(2026, 11, 16), days=7, count=12, seed=3, batch_hours=bh)
    assert a == generate(topo, dt.date(2026, 11, 16), days=7, count=12, seed=3, batch_hours=bh)
    assert a != generate(topo, dt.date(2026, 11, 16), days=7, count=12, seed=4, batch_hours=bh)
    assert len(a.anomalies) == 12
    assert {x.kind for x in a.anomalies} == {"runaway_process", "disc_slow", "line_down",
                                             "dynamic_file_opens", "load_spike"}
    spans = sorted((x.start, x.start + dt.timedelta(minutes=x.minutes)) for x in a.anomalies)
    assert all(e0 < s1 for (_, e0), (s1, _) in zip(spans, spans[1:], strict=False))  # never two at once
    for x in a.anomalies:
        assert dt.date(2026, 11, 16) <= x.start.date() < dt.date(2026, 11, 23)
        # a runaway never hides in its process's own batch run ($REPT: Wednesdays 10-14)
        assert not (x.subject == "$REPT" and x.start.weekday() == 2)
    records = truth(a, topo)
    write_truth(records, tmp_path / "t.json")
    assert json.loads((tmp_path / "t.json").read_text())["anomalies"] == records


# ------------------------------------------------------------------------------- scoring
REC = [
    {"kind": "disc_slow", "entity": "disc", "subject": "$DATA3", "from": "2026-11-18T07:00:00+00:00",
     "to": "2026-11-18T08:00:00+00:00", "magnitude": 3.0, "targets": [["disc", "$DATA3"]],
     "indicators": ["disc_queuing"]},
    {"kind": "line_down", "entity": "line", "subject": "$X251", "from": "2026-11-18T15:00:00+00:00",
     "to": "2026-11-18T17:00:00+00:00", "magnitude": 0.0,
     "targets": [["line", "$X251"], ["terminal", "$X251*"]], "indicators": []},
    {"kind": "dynamic_file_opens", "entity": "process", "subject": "ET1-SRV", "from": "2026-11-19T09:00:00+00:00",
     "to": "2026-11-19T10:00:00+00:00", "magnitude": 1.0, "targets": [["process", "$S1"]],
     "indicators": ["dynamic_file_opens"]},
]


def exc(at: str, entity: str, subject: str, severity: str = "major") -> dict:
    return {"hour_at": dt.datetime.fromisoformat(at), "entity": entity, "subject": subject,
            "item": "busy", "severity": severity, "direction": "above"}


def test_matches_window_and_targets():
    r = REC[0]
    assert matches(r, exc("2026-11-18T07:00:00+00:00", "disc", "$DATA3"))
    assert not matches(r, exc("2026-11-18T08:00:00+00:00", "disc", "$DATA3"))  # the hour after
    assert matches(r, exc("2026-11-18T08:00:00+00:00", "disc", "$DATA3"), dt.timedelta(hours=1))
    assert not matches(r, exc("2026-11-18T07:00:00+00:00", "disc", "$DATA2"))
    assert not matches(r, exc("2026-11-18T07:00:00+00:00", "cpu", "$DATA3"))
    assert matches(REC[1], exc("2026-11-18T16:00:00+00:00", "terminal", "$X251.#T7"))
    assert not matches(REC[1], exc("2026-11-18T16:00:00+00:00", "terminal", "$X252.#T7"))


def test_score_crafted_rows():
    rows = [
        exc("2026-11-18T07:00:00+00:00", "disc", "$DATA3"),                # recalls REC[0]
        exc("2026-11-18T08:00:00+00:00", "disc", "$DATA3", "minor"),       # its backlog: explained
        exc("2026-11-18T16:00:00+00:00", "line", "$X251", "minor"),        # recalls REC[1]
        exc("2026-11-20T12:00:00+00:00", "cpu", "1"),                      # unexplained
    ]
    verdicts = [
        {"day": dt.date(2026, 11, 19), "indicator": "dynamic_file_opens", "verdict": True},   # recalls REC[2]
        {"day": dt.date(2026, 11, 19), "indicator": "cpu_queuing", "verdict": True},          # unexplained
        {"day": dt.date(2026, 11, 18), "indicator": "disc_queuing", "verdict": False},
    ]
    s = score(REC, rows, verdicts, "Europe/Amsterdam")
    assert (s.anomalies, s.by_exceptions, s.by_indicators, s.recalled) == (3, 2, 1, 3)
    assert (s.exceptions, s.explained, s.indicators_true, s.indicators_explained) == (4, 3, 2, 1)
    assert s.recall == 1.0 and s.precision == 0.75 and s.missed == []
    s = score(REC, rows[3:], verdicts[1:], "Europe/Amsterdam")
    assert (s.recalled, s.explained) == (0, 0) and len(s.missed) == 3 and s.recall == 0.0
    # majors per local day: the hour from 23:00 UTC on the 18th is the 19th in Amsterdam
    assert per_day(rows + [exc("2026-11-18T23:00:00+00:00", "cpu", "0")], "Europe/Amsterdam") == {
        dt.date(2026, 11, 18): 1, dt.date(2026, 11, 19): 1, dt.date(2026, 11, 20): 1}
