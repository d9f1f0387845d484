"""The node of today's kind (collector/node/later.py, nodes/today.yaml): IPU counters and the
H-, J- and L-series entity types, checked against the engine's own counters step by step.

Twenty minutes of \\TODAY at its daily peak, seed 29, every entity measured, 60-s steps (the
collector's grid). The identities are exact (whole numbers, or the same floats added in another
order: a relative 1e-12)."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

import numpy as np
import pytest

from collector.node.engine import Node
from collector.node.later import wanted
from collector.node.topology import NodeFileError, load_node, node_names

STEP = 60_000_000
# 10:00 in London on 2026-05-28 (a Thursday): the daily peak of workloads/today.yaml
PEAK = int(datetime(2026, 5, 28, 9, 0, tzinfo=UTC).timestamp()) * 1_000_000


class StepHooks:
    """Every bump, by step end and entity: {entity: (slots, acc, level)} (copies)."""

    def __init__(self) -> None:
        self.steps: dict[int, dict[str, list]] = defaultdict(dict)
        self.node: Node | None = None

    def xctr(self, entity, slots, xptr, acc, level, peak, at_us) -> None:
        assert (xptr >= 0).all()
        d = self.steps[at_us]
        if entity in d:  # a second bump in the step (a launch): rows added
            s0, a0, l0 = d[entity]
            d[entity] = (np.concatenate([s0, slots]), np.vstack([a0, acc]), np.vstack([l0, level]))
        else:
            d[entity] = (slots.copy(), acc.copy(), level.copy())

    def entity_started(self, entity, slot, at_us) -> None:
        assert self.node is not None
        self.node.tables[entity].xptr[slot] = 10_000_000 + slot

    def entity_stopped(self, entity, slot, at_us) -> None:
        assert self.node is not None
        self.node.tables[entity].xptr[slot] = -1

    def cpu_failed(self, cpu, at_us) -> None:
        pass

    def cpu_reloaded(self, cpu, at_us) -> None:
        pass


def by_slot(step: dict, entity: str, n: int, col: int, level: bool = False) -> np.ndarray:
    """One counter of an entity's bump in a step, per slot (0 where not bumped)."""
    out = np.zeros(n)
    if entity in step:
        slots, acc, lev = step[entity]
        np.add.at(out, slots, (lev if level else acc)[:, col])
    return out


@pytest.fixture(scope="module")
def run() -> tuple[Node, StepHooks]:
    h = StepHooks()
    node = Node("today", "today", seed=29, start_us=PEAK, step_us=STEP, hooks=h)
    h.node = node
    node.measure_all()
    node.advance(PEAK + 20 * STEP)
    return node, h


def test_only_the_node_of_today_has_the_later_types() -> None:
    """The 1986 nodes build no Later: their counters and draws are as before (the kernel's
    reference digests in test_kernel.py check that)."""
    assert [n for n in node_names() if wanted(load_node(n))] == ["today"]
    t = load_node("today")
    assert (t.cpu_type, t.n_cpus, t.ipus) == ("NONSTOP-X", 4, 4)
    assert t.cpu_factor == pytest.approx(1 / 50 / 4)


def test_ipu_busy_sums_to_cpu_busy(run) -> None:
    node, h = run
    e = node.tables["cpu"].entity
    busy = [e.index(f"IPU-BUSY-TIME-{k}") for k in range(4)]
    disp = [e.index(f"IPU-DISPATCHES-{k}") for k in range(4)]
    q = [e.index(f"IPU-QTIME-{k}") for k in range(4)]
    spread = []
    for step in h.steps.values():
        slots, acc, lev = step["cpu"]
        assert sorted(slots.tolist()) == [0, 1, 2, 3]
        b = acc[:, e.index("CPU-BUSY-TIME")]
        np.testing.assert_allclose(acc[:, busy].sum(axis=1), b, rtol=1e-12)
        assert (acc[:, busy] <= STEP * (1 + 1e-12)).all()  # an IPU is busy at most the step
        assert (b <= 4 * STEP).all() and (b > STEP / 10).all()  # the sum over 4 IPUs; busy at peak
        np.testing.assert_array_equal(acc[:, disp].sum(axis=1), acc[:, e.index("DISPATCHES")])
        assert (acc[:, disp] == np.rint(acc[:, disp])).all()
        np.testing.assert_allclose(acc[:, q].sum(axis=1), acc[:, e.index("CPU-QTIME")], rtol=1e-12)
        assert (lev[:, e.index("IPUS")] == 4).all()
        pct = acc[:, busy] / STEP * 100
        spread.append(pct.max(axis=1) - pct.min(axis=1))
    # the IPUs of a CPU are not even in a minute (interrupts on IPU 0, a few heavy requesters)
    assert np.mean(spread) > 5


def test_process_ipus(run) -> None:
    node, h = run
    P = node.tables["process"]
    e = P.entity
    switches = 0.0
    for step in h.steps.values():
        slots, acc, lev = step["process"]
        num, prev = lev[:, e.index("IPU-NUM")], lev[:, e.index("IPU-NUM-PREV")]
        assert ((num >= 0) & (num < 4)).all() and ((prev >= 0) & (prev < 4)).all()
        sw = acc[:, e.index("IPU-SWITCHES")]
        assert (num[sw > 0] != prev[sw > 0]).all()  # a process that moved names where from
        switches += sw.sum()
        # Σ process CPU time (per IPU, scaled like the CPU's) is within its CPU's busy time
        cpu = P.cpu[slots]
        pb = np.bincount(cpu, weights=acc[:, e.index("CPU-BUSY-TIME")], minlength=4)
        cb = by_slot(step, "cpu", 4, node.tables["cpu"].entity.index("CPU-BUSY-TIME"))
        assert (pb <= cb + 4 * STEP * 0.05).all()
    assert switches > 20


def test_sql_statements_follow_the_server_requests(run) -> None:
    node, h = run
    SS, U = node.tables["sqlstmt"], node.tables["userdef"]
    se, ue = SS.entity, U.entity
    stmts = {s["index"]: s for s in node.topo.server_classes[0]["sql"]["statements"]}
    proc_of = node._later.ss_proc
    idx = SS.ids["statement_index"][: SS.n].astype(int)
    u_proc = node._extras.ud_proc[: U.n]
    u_name = U.ids["name"][: U.n]
    calls_by_index = defaultdict(float)
    for step in h.steps.values():
        n = node.tables["process"].n
        calls = by_slot(step, "sqlstmt", SS.n, se.index("CALLS"))
        el = by_slot(step, "sqlstmt", SS.n, se.index("ELAPSED-BUSY-TIME"))
        tv = by_slot(step, "userdef", U.n, ue.index("TIME-VALUE"))
        thr = np.bincount(u_proc[u_name == "THROUGHPUT"], weights=tv[u_name == "THROUGHPUT"], minlength=n)
        resp = np.bincount(u_proc[u_name == "RESP-TIME"], weights=tv[u_name == "RESP-TIME"], minlength=n)
        for k, st in stmts.items():
            sel = idx == k
            calls_by_index[k] += calls[sel].sum()
            per_proc = np.bincount(proc_of[sel], weights=calls[sel], minlength=n)
            if st["prob"] == 1.0:  # run by every request: CALLS = the server's requests
                np.testing.assert_array_equal(per_proc, thr)
            else:
                assert (per_proc <= thr).all()
        # the statements a request ran share its response time: Σ elapsed = RESP-TIME
        np.testing.assert_array_equal(np.bincount(proc_of, weights=el, minlength=n), resp)
        acc_rows = by_slot(step, "sqlstmt", SS.n, se.index("RECORDS-ACCESSED"))
        rows = np.array([stmts[k]["rows"] for k in idx])
        np.testing.assert_array_equal(acc_rows, calls * rows)
    n_req = calls_by_index[1]
    assert n_req > 50_000
    # statement 6 runs in 10 % of the requests, 7 in 4 % (binomial, 4 sd)
    for k, p in ((6, 0.10), (7, 0.04)):
        assert abs(calls_by_index[k] - p * n_req) < 4 * np.sqrt(n_req * p * (1 - p))


def test_sql_disc_reads_are_the_files(run) -> None:
    node, h = run
    SS, F = node.tables["sqlstmt"], node.tables["file"]
    later = node._later
    total_stmt: dict[tuple[int, int], float] = defaultdict(float)
    total_file: dict[tuple[int, int], float] = defaultdict(float)
    files = later.ss_spec[:, 4].astype(int)  # each statement element's table
    c_s, c_f = SS.entity.index("DISC-READS"), F.entity.index("DISC-READS")
    for step in h.steps.values():
        r = by_slot(step, "sqlstmt", SS.n, c_s)
        fr = by_slot(step, "file", F.n, c_f)
        for sl in range(SS.n):
            p, f = int(later.ss_proc[sl]), int(files[sl])
            total_stmt[(p, f)] += r[sl]
        for p, f in {(int(later.ss_proc[s]), int(files[s])) for s in range(SS.n)}:
            total_file[(p, f)] += fr[node.fo[p, f]]
    carry = later.read_carry
    for key, v in total_file.items():
        assert total_stmt[key] + carry.get(key, 0.0) == v, key
    stock = node.file_index["SHOP.STOCK"]
    assert sum(v for (p, f), v in total_stmt.items() if f == stock) > 10_000  # the uncached reads


def test_diskfile_is_the_sum_of_its_opens(run) -> None:
    node, h = run
    DF, D = node.tables["diskfile"], node.tables["discopen"]
    part = np.array([later_part(node, x) for x in D.ids["file_name"][: D.n]])
    for step in h.steps.values():
        for dst, src in (("REQUESTS", "REQUESTS"), ("DRIVER-INPUT-CALLS", "DRIVER-INPUT-CALLS"),
                         ("CACHE-READ-HITS", "CACHE-HITS")):  # fmt: skip
            got = by_slot(step, "diskfile", DF.n, DF.entity.index(dst))
            opens = by_slot(step, "discopen", D.n, D.entity.index(src))
            want = np.bincount(part, weights=opens, minlength=DF.n)
            np.testing.assert_array_equal(got, want)
    got = by_slot(step, "diskfile", DF.n, DF.entity.index("OPEN-QTIME"), level=True)
    np.testing.assert_array_equal(got, np.bincount(part[D.alive[: D.n]], minlength=DF.n))


def later_part(node: Node, file_name: str) -> int:
    return next(i for i, p in enumerate(node.topo.partitions) if p["name"] == file_name)


def test_servernet_carries_the_disc_ios(run) -> None:
    node, h = run
    SN, D = node.tables["servernet"], node.tables["disc"]
    assert SN.n == 8 and sorted(set(SN.ids["adapter_name"][: SN.n])) == ["X", "Y"]
    for step in h.steps.values():
        for sn_name, d_name in (("READ-REQUESTS", "READS"), ("WRITE-REQUESTS", "WRITES"),
                                ("READ-BYTES", "INPUT-BYTES"), ("WRITE-BYTES", "OUTPUT-BYTES")):  # fmt: skip
            got = np.bincount(SN.cpu[: SN.n], by_slot(step, "servernet", SN.n, SN.entity.index(sn_name)),
                              minlength=4)  # fmt: skip
            d = by_slot(step, "disc", D.n, D.entity.index(d_name))
            want = np.bincount(D.cpu[0 : D.n : 2], d[0::2], minlength=4)  # primary paths
            np.testing.assert_array_equal(got, want)
            x = by_slot(step, "servernet", SN.n, SN.entity.index(sn_name))
            assert (np.abs(x[0::2] - x[1::2]) <= 1 + 2048 * (sn_name.endswith("BYTES"))).all()


def test_oss_cpu_and_name_server(run) -> None:
    node, h = run
    P, OC, ON = node.tables["process"], node.tables["osscpu"], node.tables["ossns"]
    oss = np.array([str(x).startswith("/") for x in P.ids["program_file_name"][: P.n]])
    assert oss.sum() == 8  # the Pathsend requesters (nodes/today.yaml tcps)
    assert ON.n == 1 and ON.ids["process_name"][0] == "$ZPNS"
    for step in h.steps.values():
        pb = by_slot(step, "process", P.n, P.entity.index("CPU-BUSY-TIME"))
        want = np.bincount(P.cpu[: P.n][oss], pb[oss], minlength=4)
        got = by_slot(step, "osscpu", OC.n, OC.entity.index("OSS-BUSY-TIME"))
        np.testing.assert_array_equal(got[OC.cpu[: OC.n]], want)
        calls = by_slot(step, "osscpu", OC.n, OC.entity.index("OSS-FILE-CALLS")).sum()
        rr = by_slot(step, "ossns", ON.n, ON.entity.index("RR-PROCESSED")).sum()
        assert rr == calls > 0
        lc = by_slot(step, "ossns", ON.n, ON.entity.index("LC-HITS")).sum()
        ic = by_slot(step, "ossns", ON.n, ON.entity.index("IC-LOOKUPS")).sum()
        assert lc + ic == rr
        procs = by_slot(step, "osscpu", OC.n, OC.entity.index("OSS-PROCESSES-END"), level=True)
        assert procs.sum() == 8


def test_same_seed_same_counters() -> None:
    runs = []
    for _ in range(2):
        h = StepHooks()
        node = Node("today", "today", seed=7, start_us=PEAK, step_us=STEP, hooks=h)
        h.node = node
        node.measure_all()
        node.advance(PEAK + 3 * STEP)
        runs.append(h.steps)
    for at, step in runs[0].items():
        for e, (slots, acc, lev) in step.items():
            s2, a2, l2 = runs[1][at][e]
            np.testing.assert_array_equal(slots, s2)
            np.testing.assert_array_equal(acc, a2)
            np.testing.assert_array_equal(lev, l2)


@pytest.mark.parametrize(
    "patch, where, why",
    [
        ({"processor": {"type": "VLX", "cpus": 4, "ipus": 4}}, "processor",
         "a VLX CPU has one IPU"),
        ({"oss": {"name_servers": ["$NOPE"]}}, "oss.name_servers[0]", "process $NOPE is not defined"),
    ],
)  # fmt: skip
def test_node_file_errors(tmp_path, patch, where, why) -> None:
    import yaml

    from collector.node.topology import NODES_DIR

    raw = yaml.safe_load((NODES_DIR / "today.yaml").read_text())
    raw.update(patch)
    p = tmp_path / "n.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(NodeFileError) as exc:
        load_node(p)
    assert exc.value.where == where and why in exc.value.why


def test_sql_statement_on_a_file_the_class_does_not_open(tmp_path) -> None:
    import yaml

    from collector.node.topology import NODES_DIR

    raw = yaml.safe_load((NODES_DIR / "today.yaml").read_text())
    raw["pathway"]["server_classes"][0]["sql"]["statements"][0]["table"] = "TMF.AUDIT"
    p = tmp_path / "n.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(NodeFileError) as exc:
        load_node(p)
    assert exc.value.where == "pathway.server_classes[0].sql.statements[0].table"
    assert "does not open TMF.AUDIT" in exc.value.why
