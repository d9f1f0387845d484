"""USERDEF, PROCESSH and DEVICE entities of the simulated node (collector/node/extras.py)."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from pathlib import Path

import numpy as np
import pytest

from collector.meascom.configure import apply_commands
from collector.meascom.parser import parse_script
from collector.measure.contab import ContabBuilder
from collector.measure.copies import IntervalBuilder
from collector.measure.measmon import COPY_START, Measmon, Measurement
from collector.node import NodeFileError, load_node
from collector.node.engine import Node
from collector.node.extras import user_counter_specs
from collector.node.topology import NODES_DIR
from core.catalog import load_catalog

from .node_helpers import START_US, RecordingHooks

MIN = 60_000_000
CAT = load_catalog()


def local_us(hour: int, tz: str = "Europe/Amsterdam") -> int:
    """START_US's local day at ``hour``:00 (batch runs at night, DebitCredit peaks at noon)."""
    z = zoneinfo.ZoneInfo(tz)
    d = dt.datetime.fromtimestamp(START_US / 1e6, tz=z).replace(hour=hour, minute=0, second=0)
    return int(d.timestamp()) * 1_000_000


class Hooks(RecordingHooks):
    """Records every bump with its time."""

    def __init__(self) -> None:
        super().__init__(keep_events=True)
        self.log: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]] = []

    def xctr(self, entity, slots, xptr, acc, level, peak, at_us) -> None:
        super().xctr(entity, slots, xptr, acc, level, peak, at_us)
        if entity in ("userdef", "processh", "device"):
            self.log.append((entity, slots.copy(), acc.copy(), level.copy(), peak.copy(), at_us))


def run(workload="demo", hour=12, minutes=5, seed=7, node="demo", capture=False):
    n = Node(node, workload, seed=seed, start_us=local_us(hour))
    h = Hooks()
    h.attach(n)
    cap: list[tuple[int, np.ndarray, np.ndarray]] = []
    if capture:  # independent record of every completed transaction's sojourns
        orig = n._complete

        def spy(fi, t0, W, out):
            cap.append((t0, n.tx["server"][fi].copy(), n.sd_soj[fi].copy()))
            return orig(fi, t0, W, out)

        n._complete = spy
    n.advance(n.now_us + minutes * MIN)
    return n, h, cap


def server_span(node) -> tuple[int, int]:
    """DebitCredit: first and last stage of the server's part ($RECEIVE span)."""
    roles = [s.role for s in node.types[0].stages]
    srv = [k for k, r in enumerate(roles) if r == "server"]
    return srv[0], srv[-1]


# ---------------------------------------------------------------------------- entities
def test_entities_exist_with_their_identifiers():
    node = Node("demo", "demo", seed=1, start_us=START_US)
    P, U, H, D = (node.tables[e] for e in ("process", "userdef", "processh", "device"))
    servers = [s for s in range(P.n) if str(P.ids["program_file_name"][s]) == "$PROGS.SERVER1.ET1SRV"]
    assert len(servers) == 12  # 3 static per CPU x 4 CPUs (the 4 dynamic ones not running)
    assert U.n == 2 * len(servers)
    assert set(U.entity.id_fields) <= {*U.ids, "cpu"}
    got = {(U.id_of(u)["process_name"], U.id_of(u)["name"]) for u in range(U.n)}
    assert got == {
        (str(P.ids["process_name"][s]), c) for s in servers for c in ("RESP-TIME", "THROUGHPUT")
    }
    for u in range(U.n):
        ids = U.id_of(u)
        s = servers[u // 2]
        assert ids["index"] == 0 and int(U.cpu[u]) == int(P.cpu[s])
        assert ids["pin"] == int(P.ids["pin"][s])
        assert ids["program_file_name"] == "$PROGS.SERVER1.ET1SRV"
    # PROCESSH: the default code ranges of every running process
    assert H.n == 5 * P.n
    assert set(H.entity.id_fields) <= {*H.ids, "cpu"}
    h0 = H.id_of(0)
    assert (h0["code_space"], h0["code_range"], h0["pin"]) == ("UC", "MAIN", int(P.ids["pin"][0]))
    assert {H.id_of(k)["code_space"] for k in range(5)} == {"UC", "SL", "SC"}
    # DEVICE: the demo's tape drive
    assert D.n == 1 and D.id_of(0) == {"device_name": "$TAPE1", "pin": 250} and D.cpu[0] == 3
    assert user_counter_specs(node.topo) == [
        ("RESP-TIME", "$PROGS.SERVER1.ET1SRV", "QUEUE"),
        ("THROUGHPUT", "$PROGS.SERVER1.ET1SRV", "ACCUM"),
    ]


# ---------------------------------------------------------------------------- USERDEF
def test_user_counters_follow_the_model():
    node, h, cap = run(minutes=5, capture=True)
    U, P = node.tables["userdef"], node.tables["process"]
    tv = U.entity.index("TIME-VALUE")
    first, last = server_span(node)
    # expected per (step end, server): requests and Σ response on the transaction's own clock
    exp: dict[tuple[int, int], list[float]] = {}
    for t0, srv, soj in cap:
        act = np.cumsum(soj, axis=1)
        resp = act[:, last] - act[:, first - 1]
        for s, r in zip(srv.tolist(), resp.tolist(), strict=True):
            if s >= 0:
                e = exp.setdefault((t0 + node.step_us, s), [0, 0.0])
                e[0] += 1
                e[1] += r
    seen = 0
    for _ent, slots, acc, lev, peak, at in (x for x in h.log if x[0] == "userdef"):
        for row, u in enumerate(slots.tolist()):
            s = int(node._extras.ud_proc[u])
            n_req, sum_resp = exp.get((at, s), (0, 0.0))
            if U.id_of(u)["name"] == "THROUGHPUT":
                assert acc[row, tv] == n_req and lev[row, tv] == 0
            else:
                assert acc[row, tv] == pytest.approx(sum_resp, rel=1e-12, abs=1e-6)
                assert peak[row, tv] >= lev[row, tv] >= 0
            seen += n_req
    assert seen == 2 * sum(v[0] for v in exp.values()) > 1000
    # RESP-TIME / THROUGHPUT = mean response of those requests, per server
    tp = h.total("userdef", "TIME-VALUE")[1::2]
    rt = h.total("userdef", "TIME-VALUE")[0::2]
    mean = {}
    for (_, s), (k, r) in exp.items():
        a = mean.setdefault(s, [0, 0.0])
        a[0] += k
        a[1] += r
    for i, s in enumerate(node._extras.ud_proc[0::2].tolist()):
        assert rt[i] / tp[i] == pytest.approx(mean[s][1] / mean[s][0], rel=1e-12)
        assert 10_000 < rt[i] / tp[i] < 2_000_000  # tens to hundreds of ms
    # every request the server received is counted or still in the node
    mr = h.total("process", "MESSAGES-RECEIVED")
    send = next(
        k
        for k, st in enumerate(node.types[0].stages)
        if any(e[1] == "server" and e[2] == "MESSAGES-RECEIVED" for e in st.effects)
    )
    pending = np.bincount(node.tx["server"][node.sd_done[:, send]], minlength=P.n)
    for i, s in enumerate(node._extras.ud_proc[1::2].tolist()):
        assert mr[s] == tp[i] + pending[s]


def test_in_flight_level_at_the_step_end():
    node, h, _ = run(minutes=2)
    first, last = server_span(node)
    last_call = [x for x in h.log if x[0] == "userdef"][-1]
    _, slots, _, lev, _, at = last_call
    assert at == node.now_us
    tv = node.tables["userdef"].entity.index("TIME-VALUE")
    done = node.sd_done
    fl = done[:, first - 1] & ~done[:, last]
    want = np.bincount(node.tx["server"][fl], minlength=node.tables["process"].n)
    got = lev[0::2, tv]
    assert got.tolist() == want[node._extras.ud_proc[slots[0::2]]].tolist()


def test_transient_servers_start_and_stop_their_user_counters():
    """Dynamic servers (PATHMON starts one every step in demo-problems) and a CPU failure
    (its servers stop, their backups start in the next CPU)."""
    node, h, _ = run(workload="demo-problems", minutes=2)
    node.fail_cpu(1, node.now_us + 7_000_000)
    node.advance(node.now_us + MIN)
    ev = h.events
    P, U = node.tables["process"], node.tables["userdef"]
    ud_start = [(s, t) for k, e, s, t in ev if k == "start" and e == "userdef"]
    ud_stop = [(s, t) for k, e, s, t in ev if k == "stop" and e == "userdef"]
    on_cpu1 = sum(1 for u in range(U.n) if U.cpu[u] == 1 and not U.transient[u])
    assert on_cpu1 == 6  # 3 static servers x 2 counters
    assert len(ud_start) >= 8 + on_cpu1 and len(ud_stop) >= on_cpu1
    proc_start = {s: (i, t) for i, (k, e, s, t) in enumerate(ev) if k == "start" and e == "process"}
    proc_stop = {s: (i, t) for i, (k, e, s, t) in enumerate(ev) if k == "stop" and e == "process"}
    index = {(k, e, s): i for i, (k, e, s, _) in enumerate(ev) if k in ("start", "stop")}
    step = node.step_us
    for u, t in ud_start:  # after its process, at the end of the step it started in
        p = int(node._extras.ud_proc[u])
        i, tp_ = proc_start[p]
        assert U.transient[u] and tp_ <= t <= tp_ + step and i < index[("start", "userdef", u)]
    for u, t in ud_stop:  # after its process, at the end of the step it stopped in
        p = int(node._extras.ud_proc[u])
        i, tp_ = proc_stop[p]
        assert not P.alive[p] and not U.alive[u] and tp_ <= t <= tp_ + step
        assert i < index[("stop", "userdef", u)]
    # bumps only while started: after the start event, never after the stop event
    for i, (k, e, s, _t) in enumerate(ev):
        if k == "bump" and e == "userdef":
            assert index.get(("start", "userdef", s), -1) < i
            assert index.get(("stop", "userdef", s), 10**9) > i
    # PROCESSH elements come and go with the same processes
    ph = [(k, s) for k, e, s, _ in ev if e == "processh" and k in ("start", "stop")]
    assert {k for k, _ in ph} == {"start", "stop"}


# ---------------------------------------------------------------------------- PROCESSH
def test_processh_samples_are_busy_times_rate():
    node, h, _ = run(hour=12, minutes=4)
    H, P = node.tables["processh"], node.tables["process"]
    ex = node._extras
    busy = h.total("process", "CPU-BUSY-TIME")
    crs = h.total("processh", "CODE-RANGE-BUSY-SAMPLES")
    per_proc = np.bincount(ex.ph_proc[: H.n], weights=crs, minlength=P.n)
    # 100 Hz: one sample per 10 ms of CPU-busy time, the remainder carried over
    assert per_proc.tolist() == np.floor(busy / 10_000).tolist()
    assert per_proc.sum() > 1000
    pbs = h.total("processh", "PROCESS-BUSY-SAMPLES")
    assert pbs.tolist() == per_proc[ex.ph_proc[: H.n]].tolist()
    assert h.total("processh", "TNS-BUSY-SAMPLES").tolist() == crs.tolist()
    assert not h.total("processh", "ACCEL-BUSY-SAMPLES").any()
    # code-space samples: Σ of the process's range samples in that space
    css = h.total("processh", "CODE-SPACE-BUSY-SAMPLES")
    space = np.array([H.id_of(k)["code_space"] for k in range(H.n)])
    for p in np.flatnonzero(per_proc > 50)[:10].tolist():
        k = np.flatnonzero(ex.ph_proc[: H.n] == p)
        for j in k:
            assert css[j] == crs[k][space[k] == space[j]].sum()
        # multinomial by weight: PROCESS^REQUEST (0.40) well above MAIN (0.10) with enough samples
        if per_proc[p] > 400:
            assert crs[k[1]] > crs[k[0]]


def test_processh_code_ranges_from_the_node_file(tmp_path: Path):
    src = (NODES_DIR / "demo.yaml").read_text()
    src += (
        "processh:\n  rate_hz: 50\n  programs:\n"
        "    $PROGS.SERVER1.ET1SRV: [{space: UC, range: DEBIT^CREDIT, weight: 3},"
        " {space: UL, range: SQL^LIB, weight: 1}]\n"
    )
    f = tmp_path / "demo-ph.yaml"
    f.write_text(src)
    node = Node(f, "demo", seed=3, start_us=local_us(12))
    h = Hooks()
    h.attach(node)
    node.advance(node.now_us + 2 * MIN)
    H, P = node.tables["processh"], node.tables["process"]
    srv = [k for k in range(H.n) if H.id_of(k)["program_file_name"] == "$PROGS.SERVER1.ET1SRV"]
    assert {H.id_of(k)["code_range"] for k in srv} == {"DEBIT^CREDIT", "SQL^LIB"}
    crs = h.total("processh", "CODE-RANGE-BUSY-SAMPLES")
    busy = h.total("process", "CPU-BUSY-TIME")
    per_proc = np.bincount(node._extras.ph_proc[: H.n], weights=crs, minlength=P.n)
    assert per_proc.tolist() == np.floor(busy / 20_000).tolist()  # 50 Hz


# ---------------------------------------------------------------------------- DEVICE
def test_tape_drive_counters_from_the_batch_blocks():
    node, h, cap = run(hour=2, minutes=3, capture=True)  # $COPY (22-6) and $SORT (1-5) run
    D = node.tables["device"]
    tot = {c.measure_name: h.total("device", c.measure_name)[0] for c in D.entity.counters}
    P = node.tables["process"]
    names = [str(P.ids["process_name"][s]) for _, srv, _ in cap for s in srv.tolist() if s >= 0]
    copies, sorts = names.count("$COPY"), names.count("$SORT")
    assert copies > 1000 and sorts > 500
    pend = node._extras.tape_pending[0]
    assert tot["REQUESTS"] == copies + sorts
    assert tot["WRITES"] + (pend[2] == 1).sum() == copies  # the copy writes each block to tape
    assert tot["READS"] + (pend[2] == 0).sum() == sorts  # the sort reads its runs
    assert tot["OUTPUT-BYTES"] == 4096 * tot["WRITES"] and tot["INPUT-BYTES"] == 4096 * tot["READS"]
    svc = 2_000 + 4096 / 512_000 * 1e6  # 2 ms + 4 KB at 500 KB/s
    assert tot["WRITE-BUSY-TIME"] + tot["READ-BUSY-TIME"] == pytest.approx(
        (copies + sorts - pend[0].size) * svc, abs=2 * svc
    )
    # one FCFS drive: queued implies busy, so qbusy = busy; queue time ≥ busy time
    assert tot["DEVICE-QBUSY-TIME"] == pytest.approx(tot["READ-BUSY-TIME"] + tot["WRITE-BUSY-TIME"])
    assert tot["WRITE-QTIME"] >= tot["WRITE-QBUSY-TIME"] >= tot["WRITE-BUSY-TIME"] > 0
    assert 0 < tot["DEVICE-QBUSY-TIME"] < 3 * MIN
    assert tot["DBIO-READS"] == tot["DBIO-WRITES"] == 0
    peaks = [x[4][0, D.entity.index("WRITE-QTIME")] for x in h.log if x[0] == "device"]
    assert max(peaks) >= 1


# ---------------------------------------------------------------------------- determinism
def test_same_seed_same_extras_bit_for_bit():
    _, a, _ = run(hour=2, minutes=2, seed=11)
    _, b, _ = run(hour=2, minutes=2, seed=11)
    _, c, _ = run(hour=2, minutes=2, seed=12)
    for e in ("userdef", "processh", "device"):
        np.testing.assert_array_equal(a.acc[e], b.acc[e])
    assert any(not np.array_equal(a.acc[e], c.acc[e]) for e in ("userdef", "processh"))


def test_extras_leave_the_other_counters_unchanged():
    """The PROCESSH draws come from a spawned child Generator: the node's stream is intact."""
    n1 = Node("demo", "demo", seed=5, start_us=START_US)
    n2 = Node("demo", "demo", seed=5, start_us=START_US)
    n2._extras.rng.random(1000)  # extra draws in the child stream only
    for n in (n1, n2):
        n.measure_all()
        n.hooks = RecordingHooks(n)
        n.advance(START_US + MIN)
    for e in ("cpu", "process", "disc"):
        np.testing.assert_array_equal(n1.hooks.acc[e], n2.hooks.acc[e])


# ---------------------------------------------------------------------------- node files
@pytest.mark.parametrize(
    ("patch", "where", "why"),
    [
        (
            "user_counters: [{name: RT, type: ACCUM, measures: response}]",
            "user_counters[0]",
            "needs type QUEUE",
        ),
        (
            "user_counters: [{name: RT, type: QUEUE}, {name: rt, type: ACCUM}]",
            "user_counters[1].name",
            "declared twice",
        ),
        ("user_counters: [{name: 9RT, type: QUEUE}]", "user_counters[0].name", "pattern"),
    ],
)
def test_bad_user_counters_name_the_place(tmp_path: Path, patch: str, where: str, why: str):
    src = (
        (NODES_DIR / "demo.yaml")
        .read_text()
        .replace(
            "opens: [ET1.ACCOUNT, ET1.HISTORY, ET1.TELLER, ET1.BRANCH]}",
            f"opens: [ET1.ACCOUNT, ET1.HISTORY, ET1.TELLER, ET1.BRANCH], {patch}}}",
        )
    )
    f = tmp_path / "bad.yaml"
    f.write_text(src)
    with pytest.raises(NodeFileError, match=why) as ei:
        load_node(f)
    assert where in ei.value.where


def test_tape_of_an_unknown_process_is_an_error(tmp_path: Path):
    src = (
        (NODES_DIR / "demo.yaml")
        .read_text()
        .replace("process: $SORT, op: read", "process: $NOPE, op: read")
    )
    f = tmp_path / "bad.yaml"
    f.write_text(src)
    with pytest.raises(NodeFileError, match=r"tapes\[0\]\.users\[1\]\.process.*\$NOPE"):
        load_node(f)


def test_user_counters_can_be_switched_off(tmp_path: Path):
    src = (
        (NODES_DIR / "demo.yaml")
        .read_text()
        .replace(
            "opens: [ET1.ACCOUNT, ET1.HISTORY, ET1.TELLER, ET1.BRANCH]}",
            "opens: [ET1.ACCOUNT, ET1.HISTORY, ET1.TELLER, ET1.BRANCH], user_counters: []}",
        )
    )
    f = tmp_path / "none.yaml"
    f.write_text(src)
    assert Node(f, "demo", seed=1, start_us=START_US).tables["userdef"].n == 0


# ---------------------------------------------------------------------------- MEASURE
# Figure 3 of "How to Set Up a Performance Data Base with MEASURE and ENFORM" (1986)
FIGURE_3 = """\
VOLUME $VOL.CPLNWEEK
ADD CPU *
ADD DISC *
ADD LINE *
ADD PROCESS SYSTEM-PROCESSES
ADD USERDEF $PROGS.SERVER1.*
ADD COUNTER RESP-TIME, PROCESS $PROGS.SERVER1.*, QUEUE
ADD COUNTER THROUGHPUT, PROCESS $PROGS.SERVER1.*, ACCUM
"""


def measure(node_src, obey: str, minutes: int = 6):
    node = Node(node_src, "demo", seed=21, start_us=local_us(12))
    contab = apply_commands(ContabBuilder(), parse_script(obey)).build()
    builder = IntervalBuilder(CAT)
    copies, intervals = [], []

    def sink(c):
        copies.append(c)
        b = builder.on_copy(c)
        if b is not None:
            intervals.append(b)

    mon = Measmon(node, sink, catalog=CAT)
    mon.add(Measurement(1, "CPLNDAY1", contab, start_us=node.now_us, interval_us=2 * MIN))
    mon.run_until(node.now_us + minutes * MIN)
    return node, copies, [b for b in intervals if b.entity == "userdef"]


def check_figure_3_records(node, copies, ud, program: str):
    U = node.tables["userdef"]
    started = [c for c in copies if c.entity == "userdef" and c.kind == COPY_START]
    assert sum(len(c) for c in started) == U.n == 24
    assert len(ud) == 3 and all(len(b) == U.n for b in ud)  # 3 two-minute intervals
    tv, mv = U.entity.index("TIME-VALUE"), U.entity.index("MAX-VALUE")
    rt_rows = [k for k, s in enumerate(ud[0].slots.tolist()) if U.id_of(s)["name"] == "RESP-TIME"]
    tp_rows = [k for k, s in enumerate(ud[0].slots.tolist()) if U.id_of(s)["name"] == "THROUGHPUT"]
    assert all(U.id_of(s)["program_file_name"] == program for s in ud[0].slots.tolist())
    for b in ud:
        rt, tp = b.values[rt_rows, tv], b.values[tp_rows, tv]
        assert tp.sum() > 100 and (b.values[tp_rows, mv] == 0).all()
        avg = rt.sum() / tp.sum()  # RATE OFF: RESP-TIME / THROUGHPUT = average response (µs)
        assert 20_000 < avg < 1_000_000
        assert (b.values[rt_rows, mv] >= 1).any()  # MAX-VALUE: most requests in flight at once
    # the interval records add up to the model's own totals (copies round to whole µs)
    ex = node._extras
    slots = ud[0].slots
    tot = sum(b.values[:, tv] for b in ud)
    for k, s in enumerate(slots.tolist()):
        p = int(ex.ud_proc[s])
        want = ex.response_us[p] if U.id_of(s)["name"] == "RESP-TIME" else ex.served[p]
        assert abs(tot[k] - want) <= 3


def test_figure_3_verbatim_on_the_demo_node():
    """The demo's servers run $PROGS.SERVER1.ET1SRV, so Figure 3's OBEY file measures them as
    printed (ADD USERDEF $PROGS.SERVER1.*)."""
    node, copies, ud = measure("demo", FIGURE_3)
    check_figure_3_records(node, copies, ud, "$PROGS.SERVER1.ET1SRV")


def test_figure_3_on_another_program_with_the_volume_renamed(tmp_path: Path):
    """A node whose servers run another program: Figure 3 with $PROGS.SERVER1 read as that
    program's volume and subvolume ($APPL.ET1 on et1-txp and ref16)."""
    src = (NODES_DIR / "demo.yaml").read_text().replace("$PROGS.SERVER1.ET1SRV", "$APPL.ET1.SERVER")
    f = tmp_path / "demo-appl.yaml"
    f.write_text(src)
    node, copies, ud = measure(f, FIGURE_3.replace("$PROGS.SERVER1", "$APPL.ET1"))
    check_figure_3_records(node, copies, ud, "$APPL.ET1.SERVER")
