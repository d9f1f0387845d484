"""The simulated NonStop node: a vectorised queueing network that bumps MEASURE counters.

Per step (``step_us``, default 1 s) the node

1. draws Poisson arrivals for every stream (rate x daily profile x weekday x growth);
2. expands every active transaction's remaining stages into one flat job table; a stage
   arrives at its nominal time (its predecessor's arrival plus service; waits are not
   propagated: the classic decomposition of a queueing network into independent stations,
   each visit's sojourn adding to the transaction's own clock);
3. schedules all jobs at once: CPUs (preemptive-resume priority classes from the process
   priority, :mod:`sched`), discs, lines and Expand links (FCFS), delays;
4. marks completed visits done; an unfinished visit carries its remaining work and its
   arrival time into the next step (so busy and queue integrals split at the boundary);
5. turns the visits into counter contributions through a compiled effect plan (a bincount
   and a small matrix product per selector) and reports them through ``hooks.xctr`` for
   measured slots only. Transactions whose last visit is done bump their response time and
   TMF lifetime, computed on the transaction's own clock.

Approximations: waits at one station do not delay the arrival at the next (decomposition);
$RECEIVE waits (RECV-QTIME) come from treating each server process as a FCFS server of whole
server visits and do not delay the transaction; TMF lifetimes and responses are bumped whole
in the step the transaction completes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import zoneinfo
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from collector.catalog import (
    KIND_BUSY,
    KIND_MAXQ,
    KIND_QBUSY,
    KIND_SNAPSHOT,
    load_catalog,
)
from collector.node import workload as wl
from collector.node.hooks import EntityTable, NodeHooks, NullHooks
from collector.node.sched import schedule
from collector.node.topology import CPU_TYPE_CODES, Topology, load_node, proc_class
from collector.node.workload import Stage, Stream, TxnType, WorkloadSpec, load_workload

__all__ = ["Node"]

K_CPU, K_DISC, K_LIN, K_LOUT, K_NOUT, K_NIN, K_DELAY = range(7)
KIND_CODE = {
    "cpu": K_CPU,
    "disc": K_DISC,
    "line_in": K_LIN,
    "line_out": K_LOUT,
    "net_out": K_NOUT,
    "net_in": K_NIN,
    "delay": K_DELAY,
}
ROLES = [
    "none",
    "tcp",
    "server",
    "linehandler",
    "hls",
    "tmp",
    "pathmon",
    "cmon",
    "dp2",
    "self",
    "other",
]
R = {r: i for i, r in enumerate(ROLES)}
SELECTORS = [
    "proc",
    "cpu",
    "opener",
    "dp2cpu",
    "disc",
    "file",
    "discopen",
    "terminal",
    "line",
    "netline",
    "system",
    "cluster",
    "tmf",
    "tcp",
    "server",
    "linehandler",
    "hls",
    "tcpcpu",
    "x25line",
]
S = {s: i for i, s in enumerate(SELECTORS)}
M_DONE, M_SKIP, M_SVC, M_SYS, M_RESP = range(5)
MODE = {"done": M_DONE, "skipped": M_SKIP, "svc": M_SVC, "sys": M_SYS, "resp": M_RESP}
N_CLASSES = 3
ENTITIES = (
    "cpu",
    "process",
    "file",
    "discopen",
    "disc",
    "line",
    "netline",
    "system",
    "cluster",
    "terminal",
    "tmf",
)


@dataclass
class Stats:
    """Run totals for tests and benchmarks (not MEASURE counters)."""

    completed: int = 0
    response_us: float = 0.0
    sys_time_us: float = 0.0  # Σ time in system of completed transactions
    arrived: int = 0
    aborted: int = 0
    responses: int = 0


class Node:
    """A simulated NonStop node. See the module docstring for the model."""

    def __init__(
        self,
        spec: Topology | str | Path,
        workload: WorkloadSpec | str | Path | dict | list,
        *,
        seed: int,
        start_us: int,
        hooks: NodeHooks | None = None,
        step_us: int = 1_000_000,
        peaks: bool = True,
        catalog=None,
    ) -> None:
        self.topo = spec if isinstance(spec, Topology) else load_node(spec)
        wls = workload if isinstance(workload, list) else [workload]
        self.workloads = [w if isinstance(w, WorkloadSpec) else load_workload(w) for w in wls]
        self.rng = np.random.default_rng(seed)
        self.now_us = int(start_us)
        self.hooks: NodeHooks = hooks if hooks is not None else NullHooks()
        self.step_us = int(step_us)
        self.peaks = bool(peaks)
        self.catalog = catalog or load_catalog()
        self.tz = zoneinfo.ZoneInfo(self.topo.time_zone)
        self.stats = Stats()
        self.cpu_up = np.ones(self.topo.n_cpus, dtype=bool)
        self._build_tables()
        self._compile()
        self._init_txns()

    # ------------------------------------------------------------------------------ tables
    def _build_tables(self) -> None:
        t = self.topo
        cat = self.catalog
        self.tables: dict[str, EntityTable] = {e.name: EntityTable(e) for e in cat}
        T = self.tables
        at = self.now_us
        for c in range(t.n_cpus):
            T["cpu"].add(cpu=c, at_us=at)
            T["tmf"].add(cpu=c, at_us=at)
        self._pin = np.zeros(t.n_cpus, dtype=np.int64)
        # processes
        n0 = len(t.processes)
        self.p_class = np.zeros(0, dtype=np.int64)
        self.p_role = np.zeros(0, dtype=np.int64)
        self.p_topo = np.zeros(0, dtype=np.int64)
        self.topo_slot = np.full(n0, -1, dtype=np.int64)
        for i, p in enumerate(t.processes):
            if not p.dynamic:
                self._add_process(i, at, notify=False)
        # discs: 2 paths per volume
        self.vol_dp2 = np.array([self.topo_slot[v["dp2"]] for v in t.volumes], dtype=np.int64)
        self.vol_service = np.array([v["service_us"] for v in t.volumes])
        for v in t.volumes:
            for path, c, pi in (
                ("P", v["primary_cpu"], v["dp2"]),
                ("B", v["backup_cpu"], v["dp2_backup"]),
            ):
                T["disc"].add(
                    cpu=c,
                    at_us=at,
                    device_name=v["name"],
                    pin=int(T["process"].ids["pin"][self.topo_slot[pi]]),
                    path=path,
                )
        for ln in t.lines:
            T["line"].add(
                cpu=ln["cpu"],
                at_us=at,
                device_name=ln["name"],
                pin=int(T["process"].ids["pin"][self.topo_slot[ln["handler"]]]),
            )
        self.line_speed = np.array([ln["speed_bps"] for ln in t.lines] or [1], dtype=float)
        self.line_x25 = np.array([ln["protocol"] == "X25" for ln in t.lines] or [False])
        for tm in t.terminals:
            T["terminal"].add(
                cpu=t.lines[tm["line"]]["cpu"],
                at_us=at,
                line_name=tm["line_name"],
                subdev_name=tm["subdev_name"],
            )
        for nl in t.netlines:
            T["netline"].add(
                cpu=nl["cpu"],
                at_us=at,
                device_name=nl["name"],
                pin=int(T["process"].ids["pin"][self.topo_slot[nl["handler"]]]),
            )
        self.net_speed = np.array([nl["speed_bps"] for nl in t.netlines] or [1], dtype=float)
        self.remote_cluster = np.full(max(len(t.remotes), 1), -1, dtype=np.int64)
        for ri, r in enumerate(t.remotes):
            T["system"].add(at_us=at, remote_system=r["number"], remote_system_name=r["name"])
            if r["fox"]:
                self.remote_cluster[ri] = T["cluster"].add(at_us=at, remote_system_name=r["name"])
        # file opens: dense lookups [process slot, file] and [process slot, partition]
        self.file_index = {f["name"]: i for i, f in enumerate(t.files)}
        self.part_vol = np.array([p["volume"] for p in t.partitions] or [0], dtype=np.int64)
        self.fo = np.full((T["process"].n + 64, max(len(t.files), 1)), -1, dtype=np.int64)
        self.dop = np.full((T["process"].n + 64, max(len(t.partitions), 1)), -1, dtype=np.int64)
        for s in range(T["process"].n):
            self._open_files(s, at, notify=False)
        # snapshots (static levels)
        self.snap = {name: None for name in T}
        d = T["disc"]
        sn = np.zeros((d.n, d.n_counters))
        ent = d.entity
        for col in ("STARTING-FREE-SPACE", "ENDING-FREE-SPACE"):
            if col in ent:
                sn[0::2, ent.index(col)] = [v["capacity_bytes"] * 0.4 for v in t.volumes]
        self.snap["disc"] = sn

    def _add_process(self, topo_idx: int, at: int, notify: bool = True) -> int:
        p = self.topo.processes[topo_idx]
        T = self.tables["process"]
        self._pin[p.cpu] += 1
        slot = T.add(
            cpu=p.cpu,
            at_us=at,
            transient=p.dynamic or notify,
            pin=int(self._pin[p.cpu]),
            process_name=p.name,
            program_file_name=p.program,
            priority=p.priority,
        )
        self.p_class = np.append(self.p_class, proc_class(p.priority))
        self.p_role = np.append(self.p_role, R.get(p.role, 0))
        self.p_topo = np.append(self.p_topo, topo_idx)
        self.topo_slot[topo_idx] = slot
        if notify:
            self.hooks.entity_started("process", slot, at)
        return slot

    def _open_files(self, slot: int, at: int, notify: bool) -> None:
        t = self.topo
        p = t.processes[int(self.p_topo[slot])]
        if slot >= self.fo.shape[0]:
            grow = slot + 64 - self.fo.shape[0]
            self.fo = np.vstack([self.fo, np.full((grow, self.fo.shape[1]), -1, dtype=np.int64)])
            self.dop = np.vstack([self.dop, np.full((grow, self.dop.shape[1]), -1, dtype=np.int64)])
        P = self.tables["process"]
        cpu, pin = int(P.cpu[slot]), int(P.ids["pin"][slot])
        for fnum, fname in enumerate(p.opens):
            fi = self.file_index[fname]
            s = self.tables["file"].add(
                cpu=cpu,
                at_us=at,
                transient=notify,
                opener_cpu=cpu,
                opener_pin=pin,
                file_number=fnum + 1,
                file_name=fname,
                device_type=3,
            )
            self.fo[slot, fi] = s
            if notify:
                self.hooks.entity_started("file", s, at)
            for ocb, pi in enumerate(t.files[fi]["partitions"]):
                part = t.partitions[pi]
                vol = t.volumes[part["volume"]]
                s2 = self.tables["discopen"].add(
                    cpu=vol["primary_cpu"],
                    at_us=at,
                    transient=notify,
                    opener_cpu=cpu,
                    opener_pin=pin,
                    ocb_number=int(slot * 64 + ocb),
                    opener_system_name=t.system_name,
                    file_name=part["name"],
                )
                self.dop[slot, pi] = s2
                if notify:
                    self.hooks.entity_started("discopen", s2, at)

    def _stop_process(self, slot: int, at: int) -> None:
        T = self.tables
        if not T["process"].alive[slot]:
            return
        for fi in range(self.fo.shape[1]):
            s = self.fo[slot, fi]
            if s >= 0:
                T["file"].alive[s] = False
                self.hooks.entity_stopped("file", int(s), at)
                self.fo[slot, fi] = -1
        for pi in range(self.dop.shape[1]):
            s = self.dop[slot, pi]
            if s >= 0:
                T["discopen"].alive[s] = False
                self.hooks.entity_stopped("discopen", int(s), at)
                self.dop[slot, pi] = -1
        T["process"].alive[slot] = False
        self.hooks.entity_stopped("process", slot, at)

    # ----------------------------------------------------------------------------- compile
    def _compile(self) -> None:
        t = self.topo
        cat = self.catalog
        self.streams: list[Stream] = []
        problems = [w.problems for w in self.workloads]
        scaled_types: set[int] = set()
        types: list[TxnType] = []
        for w in self.workloads:
            if w.kind == "debitcredit":
                tt = wl.build_debitcredit(w)
                src = f"terminals:{w.terminals}"
            elif w.kind == "rds":
                tt, scaled = wl.build_rds(w, t.cpu_type)
                if scaled:
                    scaled_types.update(range(len(types), len(types) + len(tt)))
                src = f"terminals:{w.terminals}"
            else:
                tt = wl.build_custom(w)
                src = f"process:{w.process}" if w.process else f"terminals:{w.terminals}"
            self.streams.append(
                Stream(w.name, tt, w.tps, src, w.server_class, w.shape.profile, w.shape.weekday)
            )
            types += tt
            for b in w.batch:
                bt = wl.batch_types(b)
                self.streams.append(
                    Stream(
                        f"batch:{b.process}",
                        [bt],
                        b.blocks_per_s,
                        f"process:{b.process}",
                        None,
                        [1.0] * 24,
                        [1.0] * 7,
                        hours=b.hours,
                    )
                )
                types.append(bt)
            pp = w.problems.polling_process
            if pp is not None:
                pt = wl.polling_type()
                self.streams.append(
                    Stream(
                        f"polling:{pp.process}",
                        [pt],
                        pp.busy / 0.005 / t.cpu_factor,
                        f"process:{pp.process}",
                        None,
                        [1.0] * 24,
                        [1.0] * 7,
                    )
                )
                types.append(pt)
        self.shapes = {w.name: w.shape for w in self.workloads}
        self.problems = problems
        # batch at the wrong priority
        for w in self.workloads:
            if w.problems.batch_priority is not None:
                for b in w.batch:
                    s = self._proc_by_name(b.process)
                    self.tables["process"].ids["priority"][s] = w.problems.batch_priority
                    self.p_class[s] = proc_class(w.problems.batch_priority)
        self.dyn_opens = any(p.dynamic_file_opens for p in problems)
        self._quiet_us = 0
        self.delete_delay_us = 600_000_000
        self._opens_step = None
        self.hot = None
        for w in self.workloads:
            if w.problems.hot_disc is not None:
                names = [v["name"] for v in t.volumes]
                if w.problems.hot_disc.volume not in names:
                    raise ValueError(
                        f"workload {w.name}: problems.hot_disc.volume "
                        f"{w.problems.hot_disc.volume} is not a volume of this node"
                    )
                self.hot = (names.index(w.problems.hot_disc.volume), w.problems.hot_disc.share)
        self.types = types
        # stage arrays
        st: list[Stage] = []
        first, count = [], []
        for ti, tt in enumerate(types):
            stages = self._fold_never(tt.stages)
            tt.stages = stages
            first.append(len(st))
            count.append(len(stages))
            st += stages
        g_type = np.repeat(np.arange(len(types)), count)
        self.type_first = np.array(first, dtype=np.int64)
        self.type_n = np.array(count, dtype=np.int64)
        self.type_w = [tt.weight for tt in types]
        ng = len(st)
        self.st_kind = np.array([KIND_CODE[s.kind] for s in st], dtype=np.int64)
        role, anchor = [], []
        for s in st:
            if s.role.startswith("none@"):
                role.append(R["none"])
                anchor.append(R[s.role[5:]])
            else:
                role.append(R[s.role] if s.role else R["none"])
                anchor.append(R[s.role] if s.role else R["none"])
        self.st_role = np.array(role, dtype=np.int64)
        self.st_anchor = np.array(anchor, dtype=np.int64)
        factor = np.array([1.0 if g_type[g] in scaled_types else t.cpu_factor for g in range(ng)])
        # CPU and delay: ms -> µs (CPU scaled by the processor factor); disc: multiple of the
        # volume's mean physical I/O time; lines: computed from bytes and line speed
        self.st_mean = np.array([s.ms * (1.0 if s.kind == "disc" else 1000.0) for s in st])
        self.st_mean *= np.where(self.st_kind == K_CPU, factor, 1.0)
        self.st_dist = np.array([{"exp": 0, "const": 1, "uniform": 2}[s.dist] for s in st])
        self.st_prob = np.array([s.prob for s in st])
        self.st_remote = np.array(["remote" in s.flags for s in st])
        self.st_io = np.array([s.io for s in st], dtype=np.int64)
        self.st_write = np.array([s.op == "write" for s in st])
        self.st_bytes = np.array([s.bytes for s in st], dtype=float)
        self.st_begin = np.array(["begin" in s.flags for s in st])
        self.st_commit = np.array(["commit" in s.flags for s in st])
        self.st_reply = np.array(["reply" in s.flags for s in st])
        self.st_readdone = np.array(["read_done" in s.flags for s in st])
        self.st_comp = [s.component for s in st]

        def first_flag(arr):
            out = np.full(len(types), -1, dtype=np.int64)
            for ti in range(len(types)):
                hits = np.flatnonzero(arr[first[ti] : first[ti] + count[ti]])
                if hits.size:
                    out[ti] = hits[0]
            return out

        self.type_readdone = first_flag(self.st_readdone)
        self.type_reply = first_flag(self.st_reply)
        self.type_begin = first_flag(self.st_begin)
        self.type_commit = first_flag(self.st_commit)
        self.max_len = int(max(count)) + 1
        self.remote_p = np.zeros(len(types))
        for ti, tt in enumerate(types):
            self.remote_p[ti] = max([s.prob for s in tt.stages if "remote" in s.flags] or [0.0])
        # I/O group -> file index per type
        max_io = max([len(tt.io_files) for tt in types] + [1])
        self.type_iofile = np.full((len(types), max_io), -1, dtype=np.int64)
        for ti, tt in enumerate(types):
            for gi, fname in enumerate(tt.io_files):
                if fname not in self.file_index:
                    raise ValueError(
                        f"transaction type {tt.name}: file {fname} is not defined in "
                        f"node {t.system_name} ({t.source}) files:"
                    )
                self.type_iofile[ti, gi] = self.file_index[fname]
        self.max_io = max_io
        # effects
        ent_code = {e: i for i, e in enumerate(ENTITIES)}
        rows: list[tuple] = []
        for g, s in enumerate(st):
            eff = list(s.effects)
            k = s.kind
            has_file = s.io >= 0 and k in ("cpu", "disc")
            if k == "cpu":
                eff += [
                    ("cpu", "cpu", "CPU-BUSY-TIME", 1, "svc"),
                    ("cpu", "cpu", "CPU-QTIME", 1, "sys"),
                    ("cpu", "cpu", "DISPATCHES", 1, "done"),
                ]
                if not s.role.startswith("none@") and s.role:
                    eff += [
                        ("process", "proc", "CPU-BUSY-TIME", 1, "svc"),
                        ("process", "proc", "READY-TIME", 1, "sys"),
                        ("process", "proc", "DISPATCHES", 1, "done"),
                    ]
            elif k == "disc":
                rw = "WRITE" if s.op == "write" else "READ"
                eff += [
                    ("disc", "disc", "REQUEST-QTIME", 1, "sys"),
                    ("disc", "disc", "DEVICE-QBUSY-TIME", 1, "svc"),
                    ("disc", "disc", f"{rw}-QTIME", 1, "sys"),
                    ("disc", "disc", f"{rw}-QBUSY-TIME", 1, "svc"),
                ]
            elif k in ("line_in", "line_out"):
                eff += [
                    (
                        "line",
                        "line",
                        "READ-BUSY-TIME" if k == "line_in" else "WRITE-BUSY-TIME",
                        1,
                        "svc",
                    )
                ]
            elif k in ("net_out", "net_in"):
                eff += [
                    (
                        "netline",
                        "netline",
                        "WRITE-BUSY-TIME" if k == "net_out" else "READ-BUSY-TIME",
                        1,
                        "svc",
                    )
                ]
            elif k == "delay" and "remote" in s.flags:
                eff += [
                    ("system", "system", "LINK-TIME", 1, "sys"),
                    ("cluster", "cluster", "LINK-TIME", 1, "sys"),
                ]
            if has_file:
                eff += [("file", "file", "FILE-BUSY-TIME", 1, "sys")]
            for ent, sel, ctr, amount, when in eff:
                ed = cat.entity(ent)
                if ctr not in ed or amount == 0:
                    continue
                rows.append((g, ent_code[ent], S[sel], ed.index(ctr), float(amount), MODE[when]))
        rows.sort(key=lambda r: r[0])
        E = np.array(rows, dtype=float).reshape(-1, 6)
        self.ef_ent = E[:, 1].astype(np.int64)
        self.ef_sel = E[:, 2].astype(np.int64)
        self.ef_ctr = E[:, 3].astype(np.int64)
        self.ef_amt = E[:, 4]
        self.ef_mode = E[:, 5].astype(np.int64)
        g_of = E[:, 0].astype(np.int64)
        self.ef_g = g_of
        self.eff_n = np.bincount(g_of, minlength=ng).astype(np.int64)
        self.eff_start = np.concatenate([[0], np.cumsum(self.eff_n)[:-1]]).astype(np.int64)
        self.sel_used = sorted(set(self.ef_sel.tolist()))
        # kind masks per entity
        self.kind_of = {e: self.tables[e].entity.kinds for e in ENTITIES}
        self.maxq_of: dict[str, list[tuple[int, int]]] = {}
        for e in ENTITIES:
            ed = self.tables[e].entity
            self.maxq_of[e] = [
                (c.position, ed.index(c.max_of))
                for c in ed.counters
                if c.kind_code == KIND_MAXQ and c.max_of and c.max_of in ed
            ]
        self._plan_effects()
        # sources: terminals and server classes
        self._setup_sources()

    @staticmethod
    def _fold_never(stages: list[Stage]) -> list[Stage]:
        """Drop visits that never happen (probability 0, e.g. reads of a cached file): their
        "skipped" effects (cache hits) move to the preceding visit, which always happens."""
        out: list[Stage] = []
        for s in stages:
            if s.prob == 0.0 and "remote" not in s.flags and out and out[-1].prob == 1.0:
                prev = out[-1]
                moved = tuple(
                    (e, sel, c, a, "done") for e, sel, c, a, w in s.effects if w == "skipped"
                )
                if prev.io != s.io:
                    moved = tuple(
                        x for x in moved if x[1] not in ("disc", "discopen", "file", "dp2cpu")
                    )
                out[-1] = dataclasses.replace(prev, effects=prev.effects + moved)
                continue
            out.append(s)
        return out

    def _proc_by_name(self, name: str) -> int:
        P = self.tables["process"]
        hits = np.flatnonzero(P.ids["process_name"][: P.n] == name)
        if hits.size == 0:
            raise ValueError(
                f"process {name} is not defined in node {self.topo.system_name} "
                f"({self.topo.source}); add it under processes: or batch:"
            )
        return int(hits[0])

    def _setup_sources(self) -> None:
        t = self.topo
        P = self.tables["process"]
        tcps = np.flatnonzero(self.p_role == R["tcp"])
        tcp_cpu = P.cpu[tcps]
        nterm = len(t.terminals)
        self.term_line = np.array([tm["line"] for tm in t.terminals] or [0], dtype=np.int64)
        self.term_tcp = np.full(max(nterm, 1), -1, dtype=np.int64)
        for i, tm in enumerate(t.terminals):
            if tcps.size == 0:
                break
            c = t.lines[tm["line"]]["cpu"]
            same = tcps[tcp_cpu == c]
            pool = same if same.size else tcps
            self.term_tcp[i] = pool[i % pool.size]
        self.line_lh = np.array(
            [self.topo_slot[ln["handler"]] for ln in t.lines] or [-1], dtype=np.int64
        )
        self.line_hls = np.array(
            [self.topo_slot[ln["hls"]] if ln["hls"] >= 0 else -1 for ln in t.lines] or [-1],
            dtype=np.int64,
        )
        tm = np.flatnonzero(self.p_role == R["tmp"])
        self.tmf_by_cpu = np.full(t.n_cpus, -1, dtype=np.int64)
        self.tmf_by_cpu[P.cpu[tm]] = tm
        mc = np.flatnonzero(self.p_role == R["other"])
        self.mon_by_cpu = np.full(t.n_cpus, -1, dtype=np.int64)
        self.mon_by_cpu[P.cpu[mc][::-1]] = mc[::-1]  # first "other" process of each CPU
        self.static = {
            "tmp": self._role_first("tmp"),
            "pathmon": self._role_first("pathmon"),
            "cmon": self._role_first("cmon"),
        }
        self.sc_index = {sc["name"]: i for i, sc in enumerate(t.server_classes)}
        self.sc_rr = [0] * len(t.server_classes)
        self.sc_dyn_free = [
            list(
                range(sc["first"] + sc["n_static"], sc["first"] + sc["n_static"] + sc["n_dynamic"])
            )
            for sc in t.server_classes
        ]
        self.sc_dyn_live: list[list[int]] = [[] for _ in t.server_classes]
        self.stream_terms = []
        for s in self.streams:
            if s.source.startswith("terminals:"):
                proto = s.source.split(":")[1]
                ok = [
                    i
                    for i, tm in enumerate(t.terminals)
                    if proto in ("any",) or t.lines[tm["line"]]["protocol"] == proto
                ]
                if proto != "none" and not ok:
                    raise ValueError(
                        f"workload {s.name}: node {t.system_name} has no {proto} terminals"
                    )
                self.stream_terms.append(np.array(ok, dtype=np.int64))
                if s.server_class is not None and s.server_class not in self.sc_index:
                    raise ValueError(
                        f"workload {s.name}: server class {s.server_class} is not defined "
                        f"in node {t.system_name} ({t.source})"
                    )
            else:
                self.stream_terms.append(np.array([self._proc_by_name(s.source.split(":", 1)[1])]))

    def _role_first(self, role: str) -> int:
        hits = np.flatnonzero(self.p_role == R[role])
        return int(hits[0]) if hits.size else -1

    def _servers(self, sci: int) -> np.ndarray:
        sc = self.topo.server_classes[sci]
        static = self.topo_slot[sc["first"] : sc["first"] + sc["n_static"]]
        dyn = np.array([self.topo_slot[i] for i in self.sc_dyn_live[sci]], dtype=np.int64)
        allp = np.concatenate([static, dyn])
        return allp[self.tables["process"].alive[allp]]

    # -------------------------------------------------------------------------------- txns
    def _init_txns(self) -> None:
        z = lambda dt_=np.int64: np.zeros(0, dtype=dt_)
        self.tx = {
            "type": z(),
            "t_arr": z(),
            "cur": z(),
            "cur_arr": z(),
            "t_begin": z(),
            "tmf_cpu": z(),
            "term": z(),
            "line": z(),
            "tcp": z(),
            "server": z(),
            "lh": z(),
            "hls": z(),
            "netline": z(),
            "remote": z(),
            "is_remote": z(bool),
        }
        self.tx_part = np.zeros((0, self.max_io), dtype=np.int64)
        L = self.max_len  # per-stage state; the last column stays "not done"
        self.sd_done = np.zeros((0, L), dtype=bool)
        self.sd_soj = np.zeros((0, L), dtype=np.int64)
        self.sd_flag = np.zeros((0, L), dtype=np.int8)
        self.sd_arr = np.zeros((0, L), dtype=np.int64)
        self.sd_rem = np.zeros((0, L), dtype=np.int64)

    def _arrivals(self, t0: int, W: int) -> None:
        rng = self.rng
        t = self.topo
        mid = dt.datetime.fromtimestamp((t0 + W / 2) / 1e6, tz=self.tz)
        new: list[dict] = []
        parts: list[np.ndarray] = []
        type_base = 0
        for si, s in enumerate(self.streams):
            ntypes = len(s.types)
            tb = type_base
            type_base += ntypes
            if s.hours is not None:
                a, b = s.hours
                h = mid.hour
                if not ((a <= h < b) if a < b else (h >= a or h < b)):
                    continue
                mult = 1.0
            else:
                shape = self.shapes.get(s.name)
                mult = wl.rate_multiplier(shape, mid) if shape is not None else 1.0
            lam = s.tps * mult * W / 1e6
            n = int(rng.poisson(lam)) if lam > 0 else 0
            if n == 0:
                continue
            arr = t0 + np.sort(rng.integers(0, W, n))
            if ntypes > 1:
                w = np.array([tt.weight for tt in s.types])
                typ = tb + rng.choice(ntypes, size=n, p=w / w.sum())
            else:
                typ = np.full(n, tb, dtype=np.int64)
            d = {"type": typ, "t_arr": arr}
            src = self.stream_terms[si]
            if s.source.startswith("terminals:") and src.size:
                term = src[rng.integers(0, src.size, n)]
                line = self.term_line[term]
                d.update(
                    term=term,
                    line=line,
                    tcp=self.term_tcp[term],
                    lh=self.line_lh[line],
                    hls=self.line_hls[line],
                )
                if s.server_class is not None:
                    sci = self.sc_index[s.server_class]
                    srv = self._servers(sci)
                    k = self.sc_rr[sci]
                    d["server"] = srv[(k + np.arange(n)) % srv.size]
                    self.sc_rr[sci] = (k + n) % max(srv.size, 1)
                else:
                    d["server"] = np.full(n, -1, dtype=np.int64)
            else:
                d.update(
                    term=np.full(n, -1),
                    line=np.full(n, -1),
                    tcp=np.full(n, -1),
                    lh=np.full(n, -1),
                    hls=np.full(n, -1),
                    server=np.full(n, src[0]),
                )
            # remote (Expand) transactions
            rp = self.remote_p[typ]
            if t.netlines and rp.any():
                isr = rng.random(n) < rp
                nl = rng.integers(0, len(t.netlines), n)
                d.update(
                    is_remote=isr,
                    netline=nl,
                    remote=np.array([t.netlines[i]["remote"] for i in range(len(t.netlines))])[nl],
                )
            # file partitions per I/O group
            pm = np.full((n, self.max_io), -1, dtype=np.int64)
            for ti in np.unique(typ):
                rows = np.flatnonzero(typ == ti)
                for gi in range(self.max_io):
                    fi = self.type_iofile[ti, gi]
                    if fi < 0:
                        continue
                    plist = np.array(t.files[fi]["partitions"], dtype=np.int64)
                    if self.hot is not None and plist.size > 1:
                        hv = self.part_vol[plist] == self.hot[0]
                        if hv.any():
                            w = np.where(
                                hv, self.hot[1] / hv.sum(), (1 - self.hot[1]) / (~hv).sum()
                            )
                            pm[rows, gi] = plist[
                                rng.choice(plist.size, size=rows.size, p=w / w.sum())
                            ]
                            continue
                    pm[rows, gi] = plist[rng.integers(0, plist.size, rows.size)]
            parts.append(pm)
            new.append(d)
        if not new:
            return
        cols = {}
        n_total = sum(d["type"].size for d in new)
        for k, cur in self.tx.items():
            vals = []
            for d in new:
                n = d["type"].size
                if k in d:
                    vals.append(np.asarray(d[k]).astype(cur.dtype))
                elif k in ("cur", "is_remote"):
                    vals.append(np.zeros(n, dtype=cur.dtype))
                elif k == "cur_arr":
                    vals.append(d["t_arr"])
                else:
                    vals.append(np.full(n, -1, dtype=cur.dtype))
            cols[k] = np.concatenate([cur] + vals)
        self.tx = cols
        self.tx_part = np.concatenate([self.tx_part] + parts)
        L = self.max_len
        for nm, dt_ in (
            ("sd_done", bool),
            ("sd_soj", np.int64),
            ("sd_flag", np.int8),
            ("sd_arr", np.int64),
            ("sd_rem", np.int64),
        ):
            setattr(
                self, nm, np.concatenate([getattr(self, nm), np.zeros((n_total, L), dtype=dt_)])
            )
        self.stats.arrived += n_total

    # -------------------------------------------------------------------------------- step
    def advance(self, until_us: int) -> None:
        """Advance virtual time to ``until_us`` (the last step may be partial)."""
        until_us = int(until_us)
        while self.now_us < until_us:
            # Steps end on the grid of step_us (and at until_us): the same span cut by
            # different advance() calls gives the same steps, so a collector that replays
            # after a restart reproduces the counters of the run it replaces, bit for bit.
            next_grid = (self.now_us // self.step_us + 1) * self.step_us
            W = min(next_grid, until_us) - self.now_us
            self._step(W)

    def _draw_service(
        self, g: np.ndarray, job_vol: np.ndarray, job_line: np.ndarray, job_net: np.ndarray
    ) -> np.ndarray:
        rng = self.rng
        n = g.size
        kind = self.st_kind[g]
        mean = self.st_mean[g].copy()
        isd = kind == K_DISC
        mean[isd] *= self.vol_service[np.maximum(job_vol[isd], 0)]
        isl = (kind == K_LIN) | (kind == K_LOUT)
        mean[isl] = self.st_bytes[g[isl]] * 8e6 / self.line_speed[np.maximum(job_line[isl], 0)]
        isn = (kind == K_NOUT) | (kind == K_NIN)
        mean[isn] = self.st_bytes[g[isn]] * 8e6 / self.net_speed[np.maximum(job_net[isn], 0)]
        dist = self.st_dist[g]
        u = rng.random(n)
        f = np.where(dist == 0, -np.log1p(-u), np.where(dist == 2, 0.5 + u, 1.0))
        svc = np.rint(mean * f).astype(np.int64)
        res = kind != K_DELAY
        svc[res] = np.maximum(svc[res], 1)
        return svc

    def _step(self, W: int) -> None:
        t0 = self.now_us
        t1 = t0 + W
        rng = self.rng
        self._arrivals(t0, W)
        tx = self.tx
        ntx = tx["type"].size
        out = {e: None for e in ENTITIES}
        if ntx:
            out = self._run_jobs(t0, W)
        self._emit(t1, out, W)
        if self.dyn_opens:
            self._dynamic_opens(t0, t1)
        self._dynamic_servers(t0, W)
        self.now_us = t1
        del rng

    def _run_jobs(self, t0: int, W: int):
        tx = self.tx
        rng = self.rng
        P = self.tables["process"]
        typ = tx["type"]
        ntx = typ.size
        cur = tx["cur"]
        n_rem = self.type_n[typ] - cur
        J = int(n_rem.sum())
        jt = np.repeat(np.arange(ntx), n_rem)
        starts = np.cumsum(n_rem) - n_rem
        within = np.arange(J) - np.repeat(starts, n_rem)
        stg = cur[jt] + within  # stage position within the transaction
        notdone = ~self.sd_done[jt, stg]
        # ---- the transaction's nominal timeline: each stage follows its predecessor's
        # service (no waiting); waits are added per visit (network decomposition)
        flag = self.sd_flag[jt, stg]
        g_all = self.type_first[typ][jt] + stg
        act_all = rng.random(J) < self.st_prob[g_all]
        rem = self.st_remote[g_all]
        act_all[rem] = tx["is_remote"][jt[rem]]
        act_all[flag == 1] = True
        act_all[flag == 2] = False
        svc_nom = np.where(notdone & act_all, self._nominal(g_all, jt), 0)
        carried = flag > 0
        svc_nom[carried] = self.sd_rem[jt[carried], stg[carried]]
        csum = np.cumsum(svc_nom)
        base = np.repeat(tx["cur_arr"] - t0, n_rem)
        arr_nom = base + csum - svc_nom - np.repeat(csum[starts] - svc_nom[starts], n_rem)
        arr_true_all = np.where(carried, self.sd_arr[jt, stg] - t0, arr_nom)
        sel = np.flatnonzero(notdone & (carried | (arr_nom < W)))
        # ---- the jobs of this step
        jt_s, stg_s, g = jt[sel], stg[sel], g_all[sel]
        n = sel.size
        active = act_all[sel]
        arr_true = arr_true_all[sel]
        arr = np.maximum(arr_true, 0)
        kind = self.st_kind[g].copy()
        role = self.st_role[g]
        io = self.st_io[g]
        part = np.where(io >= 0, self.tx_part[jt_s, np.maximum(io, 0)], -1)
        vol = np.where(part >= 0, self.part_vol[np.maximum(part, 0)], -1)
        proc = np.full(n, -1, dtype=np.int64)
        for rname, col in (
            ("tcp", "tcp"),
            ("server", "server"),
            ("linehandler", "lh"),
            ("hls", "hls"),
            ("self", "server"),
        ):
            m = role == R[rname]
            proc[m] = tx[col][jt_s[m]]
        for rname in ("pathmon", "cmon"):
            proc[role == R[rname]] = self.static[rname]
        m = role == R["other"]  # "other processes": per-CPU monitors in the TCP's CPU
        if m.any():
            tc = tx["tcp"][jt_s[m]]
            tcpu = np.where(tc >= 0, self.cpu_map[P.cpu[np.maximum(tc, 0)]], 0)
            proc[m] = self.mon_by_cpu[tcpu]
        m = role == R["tmp"]  # the TMF monitor in the CPU of the transaction's TCP
        if m.any():
            tc = tx["tcp"][jt_s[m]]
            tcpu = np.where(tc >= 0, self.cpu_map[P.cpu[np.maximum(tc, 0)]], 0)
            proc[m] = self.tmf_by_cpu[tcpu]
        m = role == R["dp2"]
        proc[m] = self.vol_dp2[np.maximum(vol[m], 0)]
        anchor_proc = proc.copy()
        nr = role == R["none"]
        an = self.st_anchor[g]
        for rname, col in (
            ("tcp", "tcp"),
            ("server", "server"),
            ("linehandler", "lh"),
            ("hls", "hls"),
        ):
            mm = nr & (an == R[rname])
            anchor_proc[mm] = tx[col][jt_s[mm]]
        cpu = np.where(anchor_proc >= 0, P.cpu[np.maximum(anchor_proc, 0)], 0)
        cpu = self.cpu_map[cpu]
        line = tx["line"][jt_s]
        net = tx["netline"][jt_s]
        svc = svc_nom[sel]
        kind[~active] = K_DELAY  # a visit that does not happen takes no time, no resource
        server = np.zeros(n, dtype=np.int64)
        cls = np.zeros(n, dtype=np.int64)
        iscpu = kind == K_CPU
        server[iscpu] = cpu[iscpu]
        cls[iscpu] = np.where(proc[iscpu] >= 0, self.p_class[np.maximum(proc[iscpu], 0)], 0)
        isd = kind == K_DISC
        server[isd] = vol[isd]
        isl = (kind == K_LIN) | (kind == K_LOUT)
        server[isl] = 2 * line[isl] + (kind[isl] == K_LOUT)
        isn = (kind == K_NOUT) | (kind == K_NIN)
        server[isn] = 2 * net[isn] + (kind[isn] == K_NOUT)
        dep = np.empty(n, dtype=np.int64)
        done_svc = np.zeros(n, dtype=np.int64)
        execing = np.zeros(n, dtype=bool)
        for idx, ncls in (
            (np.flatnonzero(iscpu), N_CLASSES),
            (np.flatnonzero(isd), 1),
            (np.flatnonzero(isl), 1),
            (np.flatnonzero(isn), 1),
        ):
            if idx.size == 0:
                continue
            sc = schedule(server[idx], cls[idx], arr[idx], svc[idx], ncls)
            dep[idx] = sc.dep
            d, e = sc.done_before(W)
            done_svc[idx] = d
            execing[idx] = e
        dly = np.flatnonzero(kind == K_DELAY)
        dep[dly] = arr[dly] + svc[dly]
        done_svc[dly] = np.clip(W - arr[dly], 0, svc[dly])
        complete = dep <= W
        # ---- per-stage state
        ci = np.flatnonzero(complete)
        self.sd_done[jt_s[ci], stg_s[ci]] = True
        self.sd_soj[jt_s[ci], stg_s[ci]] = dep[ci] - arr_true[ci]
        ii = np.flatnonzero(~complete)
        self.sd_flag[jt_s[ii], stg_s[ii]] = np.where(active[ii], 1, 2)
        self.sd_arr[jt_s[ii], stg_s[ii]] = t0 + arr_true[ii]
        self.sd_rem[jt_s[ii], stg_s[ii]] = np.where(
            kind[ii] == K_DELAY, np.where(arr[ii] < W, dep[ii] - W, svc[ii]), svc[ii] - done_svc[ii]
        )
        m = complete & self.st_begin[g] & active
        tx["tmf_cpu"][jt_s[m]] = cpu[m]
        tx["t_begin"][jt_s[m]] = 1
        if self.dyn_opens:  # staged problem: every transaction opens (and closes) a file
            srv = tx["server"][jt_s[m]]
            self._opens_step = np.bincount(srv[srv >= 0], minlength=P.n)
        m = complete & self.st_commit[g]
        tx["t_begin"][jt_s[m]] = -1
        # ---- counter contributions of this step's visits
        out = self._effects(
            np.arange(n),
            g,
            jt_s,
            proc,
            cpu,
            vol,
            part,
            complete,
            active,
            done_svc,
            execing,
            arr_true,
            dep,
            W,
        )
        self._recv_queue(out, g, jt_s, proc, arr, dep, W)
        # ---- progress: the first stage not done; nominal arrival of fresh current stages
        width = self.sd_done.shape[1]
        new_cur = np.argmin(self.sd_done, axis=1)  # last column is always False
        new_cur = np.minimum(new_cur, width - 1)
        fin = new_cur >= self.type_n[typ]
        moved = (~fin) & (new_cur != cur)
        if moved.any():
            pos = starts[moved] + (new_cur[moved] - cur[moved])
            tx["cur_arr"][moved] = t0 + arr_nom[pos]
        tx["cur"][:] = np.where(fin, cur, new_cur)
        if fin.any():
            self._complete(np.flatnonzero(fin), t0, W, out)
        keep = ~fin
        self._keep(keep)
        # TMF level: transactions begun and not yet committed
        if out.get("tmf") is not None:
            T = self.tables["tmf"]
            if "HOME-TRANS-QTIME" in T.entity:
                c = T.entity.index("HOME-TRANS-QTIME")
                lv = self.tx["t_begin"] > 0
                cnt = np.bincount(self.tx["tmf_cpu"][lv], minlength=T.n)[: T.n]
                out["tmf"][1][:, c] += cnt
                out["tmf"][2][:, c] = np.maximum(out["tmf"][2][:, c], out["tmf"][1][:, c])
        return out

    def _nominal(self, g: np.ndarray, jt: np.ndarray) -> np.ndarray:
        tx = self.tx
        io = self.st_io[g]
        part = np.where(io >= 0, self.tx_part[jt, np.maximum(io, 0)], -1)
        vol = np.where(part >= 0, self.part_vol[np.maximum(part, 0)], -1)
        return self._draw_service(g, vol, tx["line"][jt], tx["netline"][jt])

    def _keep(self, keep: np.ndarray) -> None:
        self.tx = {k: v[keep] for k, v in self.tx.items()}
        self.tx_part = self.tx_part[keep]
        for nm in ("sd_done", "sd_soj", "sd_flag", "sd_arr", "sd_rem"):
            setattr(self, nm, getattr(self, nm)[keep])

    def _complete(self, fi: np.ndarray, t0: int, W: int, out) -> None:
        """Transactions whose last stage finished: response time and TMF lifetime from the
        transaction's own clock (Σ of its visits' sojourns)."""
        tx = self.tx
        typ = tx["type"][fi]
        soj = self.sd_soj[fi]
        act = np.cumsum(soj, axis=1)  # departure of each stage, relative to the arrival
        rows = np.arange(fi.size)
        self.stats.completed += int(fi.size)
        last = self.type_n[typ] - 1
        self.stats.sys_time_us += float(act[rows, last].sum())
        rd, rp, bg, cm = (
            self.type_readdone[typ],
            self.type_reply[typ],
            self.type_begin[typ],
            self.type_commit[typ],
        )
        ok = (rd >= 0) & (rp > 0)
        resp = np.where(ok, act[rows, np.maximum(rp - 1, 0)] - act[rows, np.maximum(rd, 0)], 0)
        self.stats.response_us += float(resp[ok].sum())
        self.stats.responses += int(ok.sum())
        okt = (bg >= 0) & (cm >= 0)
        life = np.where(okt, act[rows, np.maximum(cm, 0)] - act[rows, np.maximum(bg, 0)], 0)
        P = self.tables["process"]
        tcp = tx["tcp"][fi]
        tcpcpu = np.where(tcp >= 0, self.cpu_map[P.cpu[np.maximum(tcp, 0)]], -1)
        term = tx["term"][fi]
        line = tx["line"][fi]
        x25 = np.where((line >= 0) & self.line_x25[np.maximum(line, 0)], line, -1)
        for ent, slots, ctr, w in (
            ("terminal", term, "TRANSACTIONS", ok * 1.0),
            ("terminal", term, "RESPONSE-TIME", resp),
            ("cpu", tcpcpu, "TRANSACTIONS", ok * 1.0),
            ("cpu", tcpcpu, "RESPONSE-TIME", resp),
            ("line", x25, "TRANSACTIONS", ok * 1.0),
            ("line", x25, "RESPONSE-TIME", resp),
            ("tmf", tx["tmf_cpu"][fi], "HOME-TRANS-QTIME", life * okt),
        ):
            o = out.get(ent)
            T = self.tables[ent]
            if o is None or ctr not in T.entity:
                continue
            m = (slots >= 0) & (w != 0)
            o[0][:, T.entity.index(ctr)] += np.bincount(slots[m], weights=w[m], minlength=T.n)[
                : T.n
            ]

    # --------------------------------------------------------------------------- effects
    def _selector_columns(self, kj, jt, proc, cpu, vol, part):
        tx = self.tx
        P = self.tables["process"]
        cols: dict[int, np.ndarray] = {}
        tj = jt[kj]
        opener = tx["server"][tj]
        for s in self.sel_used:
            name = SELECTORS[s]
            if name == "proc":
                v = proc[kj]
            elif name == "cpu":
                v = cpu[kj]
            elif name == "opener":
                v = opener
            elif name == "dp2cpu":
                vv = vol[kj]
                v = np.where(vv >= 0, P.cpu[self.vol_dp2[np.maximum(vv, 0)]], -1)
            elif name == "disc":
                vv = vol[kj]
                v = np.where(vv >= 0, 2 * vv, -1)
            elif name in ("file", "discopen"):
                pp = part[kj]
                ok = (pp >= 0) & (opener >= 0)
                if name == "file":
                    fidx = self.topo_file_of_part[np.maximum(pp, 0)]
                    v = np.where(ok, self.fo[np.maximum(opener, 0), fidx], -1)
                else:
                    v = np.where(ok, self.dop[np.maximum(opener, 0), np.maximum(pp, 0)], -1)
            elif name == "terminal":
                v = tx["term"][tj]
            elif name == "line":
                v = tx["line"][tj]
            elif name == "x25line":
                ln = tx["line"][tj]
                v = np.where((ln >= 0) & self.line_x25[np.maximum(ln, 0)], ln, -1)
            elif name == "netline":
                v = np.where(tx["is_remote"][tj], tx["netline"][tj], -1)
            elif name == "system":
                v = np.where(tx["is_remote"][tj], tx["remote"][tj], -1)
            elif name == "cluster":
                r = tx["remote"][tj]
                v = np.where(
                    tx["is_remote"][tj] & (r >= 0), self.remote_cluster[np.maximum(r, 0)], -1
                )
            elif name in ("tmf", "tcpcpu"):
                tc = tx["tcp"][tj]
                v = np.where(tc >= 0, self.cpu_map[P.cpu[np.maximum(tc, 0)]], -1)
            elif name in ("tcp", "server"):
                v = tx[name][tj]
            elif name == "linehandler":
                v = tx["lh"][tj]
            elif name == "hls":
                v = tx["hls"][tj]
            else:  # pragma: no cover
                raise AssertionError(name)
            cols[s] = v
        return cols

    @property
    def topo_file_of_part(self) -> np.ndarray:
        if not hasattr(self, "_fop"):
            self._fop = np.array([p["file"] for p in self.topo.partitions] or [0], dtype=np.int64)
        return self._fop

    def _effects(
        self, kj, g, jt, proc, cpu, vol, part, complete, active, done_svc, execing, arr_true, dep, W
    ):
        """Counter contributions of this step's visits, per entity type.

        Per job there are a handful of weights (visit done / skipped, service µs in the step,
        time-in-system µs in the step, executing / present at the end). For each selector
        (which entity slot a job touches) the jobs are summed per (stage, slot) with one
        bincount, and a small dense matrix per stage turns those sums into counters:
        ``acc[slot, counter] += W[stage, slot]^T @ A[stage, counter]``.
        """
        measured = {e: self.tables[e].measured_slots() for e in ENTITIES}
        out: dict = {e: None for e in ENTITIES}
        if not any(m.size for m in measured.values()) or kj.size == 0:
            return out
        for e in ENTITIES:
            if measured[e].size:
                T = self.tables[e]
                out[e] = [np.zeros((T.n, T.n_counters)), np.zeros((T.n, T.n_counters)), None]
        sys_ov = np.where(active, np.clip(np.minimum(dep, W) - np.maximum(arr_true, 0), 0, None), 0)
        weights = {
            M_DONE: (complete & active).astype(float),
            M_SKIP: (complete & ~active).astype(float),
            M_SVC: done_svc.astype(float),
            M_SYS: sys_ov.astype(float),
        }
        levels = {
            M_SVC: execing.astype(float),
            M_SYS: (active & (arr_true <= W) & (dep > W)).astype(float),
        }
        cols = self._selector_columns(kj, jt, proc, cpu, vol, part)
        for s, ents in self.eff_plan.items():
            v = cols[s]
            for e, (gmap, ngl, A, Alv, qcols) in ents.items():
                if out[e] is None:
                    continue
                gl = gmap[g]
                idx = np.flatnonzero((gl >= 0) & (v >= 0))
                if idx.size == 0:
                    continue
                T = self.tables[e]
                acc, lev, _ = out[e]
                key = gl[idx] * T.n + v[idx]
                size = ngl * T.n
                for m, Am in A.items():
                    wm = np.bincount(key, weights=weights[m][idx], minlength=size)[:size]
                    acc += wm.reshape(ngl, T.n).T @ Am
                for m, Am in Alv.items():
                    wm = np.bincount(key, weights=levels[m][idx], minlength=size)[:size]
                    lev += wm.reshape(ngl, T.n).T @ Am
                if self.peaks and qcols:
                    if out[e][2] is None:
                        out[e][2] = np.zeros_like(acc)
                    for c, gsel in qcols:
                        jj = idx[gsel[gl[idx]]]
                        if jj.size:
                            self._peaks(
                                out[e][2],
                                v[jj] * T.n_counters + c,
                                arr_true[jj],
                                dep[jj],
                                active[jj],
                                W,
                            )
        for e in ENTITIES:
            if out[e] is not None:
                if out[e][2] is None:
                    out[e][2] = out[e][1].copy()
                else:
                    np.maximum(out[e][2], out[e][1], out=out[e][2])
        return out

    def _plan_effects(self) -> None:
        """Compile the effect rows into per-(selector, entity) dense stage x counter matrices."""
        plan: dict[int, dict[str, tuple]] = {}
        ng = self.st_kind.size
        for s in sorted(set(self.ef_sel.tolist())):
            plan[s] = {}
            ms = self.ef_sel == s
            for ei in sorted(set(self.ef_ent[ms].tolist())):
                e = ENTITIES[ei]
                T = self.tables[e]
                rows = np.flatnonzero(ms & (self.ef_ent == ei))
                gs = np.unique(self.ef_g[rows])
                gmap = np.full(ng, -1, dtype=np.int64)
                gmap[gs] = np.arange(gs.size)
                A: dict[int, np.ndarray] = {}
                Alv: dict[int, np.ndarray] = {}
                for r in rows:
                    m = int(self.ef_mode[r])
                    A.setdefault(m, np.zeros((gs.size, T.n_counters)))[
                        gmap[self.ef_g[r]], self.ef_ctr[r]
                    ] += self.ef_amt[r]
                    if m in (M_SVC, M_SYS):
                        Alv.setdefault(m, np.zeros((gs.size, T.n_counters)))[
                            gmap[self.ef_g[r]], self.ef_ctr[r]
                        ] = 1.0
                # queue counters with a max-queue twin: peaks by sweep
                qcols = []
                if M_SYS in A:
                    for pos, qpos in self.maxq_of[e]:
                        gsel = A[M_SYS][:, qpos] != 0
                        if gsel.any():
                            qcols.append((qpos, gsel))
                plan[s][e] = (gmap, gs.size, A, Alv, qcols)
        self.eff_plan = plan

    @staticmethod
    def _peaks(
        peak: np.ndarray, key: np.ndarray, a: np.ndarray, d: np.ndarray, act: np.ndarray, W: int
    ) -> None:
        """Max number of overlapping [a, d) intervals within [0, W] per key (queue peaks)."""
        ok = act & (a <= W) & (d > 0)
        key, a, d = key[ok], np.maximum(a[ok], 0), d[ok]
        if key.size == 0:
            return
        ends = d <= W
        k2 = np.concatenate([key, key[ends]])
        tt = np.concatenate([a * 2 + 1, d[ends] * 2])  # ends sort before starts at equal times
        delta = np.concatenate([np.ones(key.size), -np.ones(int(ends.sum()))])
        span = np.int64(2 * W + 4)  # times are in [0, 2W+1]: one int64 sort key
        order = np.argsort(k2 * span + tt, kind="stable")
        k2, delta = k2[order], delta[order]
        c = np.cumsum(delta)
        segs = np.flatnonzero(np.r_[True, k2[1:] != k2[:-1]])
        base = np.repeat(c[segs] - delta[segs], np.diff(np.r_[segs, k2.size]))
        run = c - base
        mx = np.maximum.reduceat(run, segs)
        flat = peak.reshape(-1)
        np.maximum.at(flat, k2[segs], mx)

    def _recv_queue(self, out, g, jt, proc, arr, dep, W) -> None:
        T = self.tables["process"]
        if out.get("process") is None or "RECV-QTIME" not in T.entity:
            return
        role = self.st_role[g]
        srv = role == R["server"]
        if not srv.any():
            return
        # first and last server visit per transaction, counted only when the first one is new
        tj = jt[srv]
        idx = np.flatnonzero(srv)
        firsts = np.r_[True, tj[1:] != tj[:-1]]
        lasts = np.r_[tj[1:] != tj[:-1], True]
        fi, li = idx[firsts], idx[lasts]
        fresh = proc[fi] >= 0
        fi, li = fi[fresh], li[fresh]
        if fi.size == 0:
            return
        a = arr[fi]
        span = np.maximum(dep[li] - a, 1)
        from collector.node.sched import fcfs

        order, d = fcfs(proc[fi], a, span)
        wait = (d - span[order]) - a[order]
        p = proc[fi][order]
        c = T.entity.index("RECV-QTIME")
        acc, lev, peak = out["process"]
        acc[:, c] += np.bincount(p, weights=wait, minlength=T.n)[: T.n]
        inq = (a[order] <= W) & (a[order] + wait > W)
        lev[:, c] += np.bincount(p, weights=inq, minlength=T.n)[: T.n]
        peak[:, c] = np.maximum(peak[:, c], lev[:, c])
        self._recv_wait_step = float(wait.mean())

    # ----------------------------------------------------------------------------- emit
    def _emit(self, t1: int, out, W: int) -> None:
        for e in ENTITIES:
            T = self.tables[e]
            ms = T.measured_slots()
            if ms.size == 0:
                continue
            nc = T.n_counters
            o = out.get(e)
            if o is None:
                acc = np.zeros((ms.size, nc))
                lev = np.zeros((ms.size, nc))
                peak = np.zeros((ms.size, nc))
            else:
                acc, lev, peak = (x[ms] for x in o)
            kinds = self.kind_of[e]
            busy = (kinds == KIND_BUSY) | (kinds == KIND_QBUSY)
            if busy.any():
                lev[:, busy] = np.minimum(lev[:, busy], 1.0)
                peak[:, busy] = lev[:, busy]
            sn = self.snap.get(e)
            if sn is not None:
                snapm = kinds == KIND_SNAPSHOT
                lev[:, snapm] = sn[ms][:, snapm]
            for pos, qpos in self.maxq_of[e]:
                peak[:, pos] = peak[:, qpos]
                lev[:, pos] = lev[:, qpos]
            self.hooks.xctr(e, ms, T.xptr[ms], acc, lev, peak, t1)

    def _dynamic_opens(self, t0: int, t1: int) -> None:
        """Staged problem "dynamic file opens": servers open a scratch file per transaction.
        Each server with work this step gets a transient FILE open (started at the step start,
        bumped, stopped at the step end) and its PROCESS FILE-OPEN-CALLS count."""
        counts = getattr(self, "_opens_step", None)
        self._opens_step = None
        if counts is None:
            return
        P, F = self.tables["process"], self.tables["file"]
        srv = np.flatnonzero(counts)
        if srv.size == 0:
            return
        if P.xptr[srv].max() >= 0 and "FILE-OPEN-CALLS" in P.entity:
            ms = srv[P.xptr[srv] >= 0]
            acc = np.zeros((ms.size, P.n_counters))
            acc[:, P.entity.index("FILE-OPEN-CALLS")] = counts[ms]
            z = np.zeros_like(acc)
            self.hooks.xctr("process", ms, P.xptr[ms], acc, z, z, t1)
        slots = []
        for sp in srv.tolist():
            slot = F.add(
                cpu=int(P.cpu[sp]),
                at_us=t0,
                transient=True,
                opener_cpu=int(P.cpu[sp]),
                opener_pin=int(P.ids["pin"][sp]),
                file_number=99,
                file_name="TEMP.SCRATCH",
                device_type=3,
            )
            self.hooks.entity_started("file", slot, t0)
            slots.append(slot)
        sl = np.array(slots, dtype=np.int64)
        meas = sl[F.xptr[sl] >= 0]
        if meas.size:
            acc = np.zeros((meas.size, F.n_counters))
            for ctr in ("WRITES", "READS"):
                if ctr in F.entity:
                    acc[:, F.entity.index(ctr)] = counts[srv][F.xptr[sl] >= 0]
            z = np.zeros_like(acc)
            self.hooks.xctr("file", meas, F.xptr[meas], acc, z, z, t1)
        for slot in slots:
            F.alive[slot] = False
            self.hooks.entity_stopped("file", slot, t1)

    # ----------------------------------------------------------------- dynamic processes
    def _dynamic_servers(self, t0: int, W: int) -> None:
        if not self.topo.server_classes:
            return
        churn = any(p.dynamic_process_creation for p in self.problems)
        wait = getattr(self, "_recv_wait_step", 0.0)
        self._recv_wait_step = 0.0
        at = t0 + W
        # PATHMON: start a dynamic server when requests wait on $RECEIVE (> 200 ms on average);
        # delete one after DELETEDELAY (10 min) of short waits (< 10 ms)
        self._quiet_us = self._quiet_us + W if wait < 10_000 else 0
        for sci, _sc in enumerate(self.topo.server_classes):
            free, live = self.sc_dyn_free[sci], self.sc_dyn_live[sci]
            if churn and free:
                # staged problem: PATHMON starts a dynamic server every step and stops it again
                self._start_dynamic(sci, at)
                if len(self.sc_dyn_live[sci]) > 1:
                    self._stop_dynamic(sci, at)
            elif wait > 200_000 and free:
                self._start_dynamic(sci, at)
            elif live and not churn and self._quiet_us >= self.delete_delay_us:
                self._stop_dynamic(sci, at)
                self._quiet_us = 0

    def _start_dynamic(self, sci: int, at: int) -> None:
        ti = self.sc_dyn_free[sci].pop(0)
        slot = self._add_process(ti, at, notify=True)
        self._open_files(slot, at, notify=True)
        self.sc_dyn_live[sci].append(ti)
        self._launch_cost(slot, at)

    def _stop_dynamic(self, sci: int, at: int) -> None:
        ti = self.sc_dyn_live[sci][0]
        slot = int(self.topo_slot[ti])
        if (self.tx["server"] == slot).any():
            return  # still busy: PATHMON stops idle servers only
        self.sc_dyn_live[sci].pop(0)
        self._stop_process(slot, at)
        self.sc_dyn_free[sci].append(ti)

    def _launch_cost(self, slot: int, at: int) -> None:
        """Process creation: PATHMON LAUNCHES and CPU PROCESS-OVHD (50 TXP ms), as pending bumps."""
        pm = self.static["pathmon"]
        P = self.tables["process"]
        cost = 50_000.0 * self.topo.cpu_factor
        if pm >= 0 and P.xptr[pm] >= 0 and "LAUNCHES" in P.entity:
            acc = np.zeros((1, P.n_counters))
            acc[0, P.entity.index("LAUNCHES")] = 1
            z = np.zeros_like(acc)
            self.hooks.xctr("process", np.array([pm]), P.xptr[[pm]], acc, z, z, at)
        C = self.tables["cpu"]
        c = int(P.cpu[slot])
        if C.xptr[c] >= 0 and "PROCESS-OVHD" in C.entity:
            acc = np.zeros((1, C.n_counters))
            acc[0, C.entity.index("PROCESS-OVHD")] = cost
            acc[0, C.entity.index("CPU-BUSY-TIME")] = cost
            z = np.zeros_like(acc)
            self.hooks.xctr("cpu", np.array([c]), C.xptr[[c]], acc, z, z, at)

    # ------------------------------------------------------------------ CPU fail/reload
    @property
    def cpu_map(self) -> np.ndarray:
        if not hasattr(self, "_cpu_map"):
            self._cpu_map = np.arange(self.topo.n_cpus, dtype=np.int64)
        return self._cpu_map

    def fail_cpu(self, cpu: int, at_us: int) -> None:
        """CPU ``cpu`` fails at ``at_us``: its processes stop, work moves to backup CPUs,
        transactions in flight that used it are aborted."""
        self._check_cpu(cpu)
        self.advance(at_us)
        if not self.cpu_up[cpu]:
            return
        self.cpu_up[cpu] = False
        P = self.tables["process"]
        victims = np.flatnonzero(P.alive[: P.n] & (P.cpu[: P.n] == cpu))
        backup = next(
            c
            for c in range((cpu + 1), cpu + 1 + self.topo.n_cpus)
            if self.cpu_up[c % self.topo.n_cpus]
        )
        self._cpu_map = np.where(self.cpu_map == cpu, backup % self.topo.n_cpus, self.cpu_map)
        # abort transactions whose terminal-side processes lived there
        tx = self.tx
        hit = np.zeros(tx["type"].size, dtype=bool)
        for col in ("tcp", "server", "lh", "hls"):
            v = tx[col]
            hit |= (v >= 0) & np.isin(v, victims)
        self.stats.aborted += int(hit.sum())
        self._keep(~hit)
        self._failed_victims = getattr(self, "_failed_victims", {})
        self._failed_victims[cpu] = victims
        for s in victims:
            self._stop_process(int(s), at_us)
        self.tables["cpu"].alive[cpu] = False
        self.tables["tmf"].alive[cpu] = False
        self.hooks.cpu_failed(cpu, at_us)
        # the processes' backups take over in the backup CPU (new incarnations)
        for s in victims:
            ti = int(self.p_topo[s])
            p = self.topo.processes[ti]
            if p.role.endswith("backup") or p.role in ("measctl",):
                continue
            orig = p.cpu
            p.cpu = backup % self.topo.n_cpus
            ns = self._add_process(ti, at_us, notify=True)
            p.cpu = orig
            self._open_files(ns, at_us, notify=True)
            self._remap_slot(int(s), ns)

    def reload_cpu(self, cpu: int, at_us: int) -> None:
        """Reload CPU ``cpu``: CPU counters restart from zero (MEASURE allocates them at load);
        its system processes (MEASCTL, disc-process backups) start again."""
        self._check_cpu(cpu)
        self.advance(at_us)
        if self.cpu_up[cpu]:
            return
        self.cpu_up[cpu] = True
        self.tables["cpu"].alive[cpu] = True
        self.tables["tmf"].alive[cpu] = True
        self.hooks.cpu_reloaded(cpu, at_us)
        for s in self._failed_victims.pop(cpu, []):
            ti = int(self.p_topo[s])
            p = self.topo.processes[ti]
            if p.role.endswith("backup") or p.role == "measctl":
                self._add_process(ti, at_us, notify=True)

    def _remap_slot(self, old: int, new: int) -> None:
        for arr in (self.vol_dp2, self.line_lh, self.line_hls, self.term_tcp):
            arr[arr == old] = new
        for k, v in self.static.items():
            if v == old:
                self.static[k] = new
        for col in ("tcp", "server", "lh", "hls"):
            v = self.tx[col]
            v[v == old] = new

    def _check_cpu(self, cpu: int) -> None:
        if not 0 <= cpu < self.topo.n_cpus:
            raise ValueError(
                f"CPU {cpu} does not exist on {self.topo.system_name} (0..{self.topo.n_cpus - 1})"
            )

    # -------------------------------------------------------------------------- helpers
    def inflight_age_us(self) -> int:
        """Σ over transactions still in the node of (now - arrival): with ``stats.sys_time_us``
        this closes Little's law against the queue counters."""
        return int((self.now_us - self.tx["t_arr"]).sum())

    def measure_all(self, start: int = 0) -> None:
        """Give every alive slot a counter pointer (what START MEASUREMENT of * would do)."""
        k = start
        for T in self.tables.values():
            n = T.n
            T.xptr[:n] = np.where(T.alive[:n], np.arange(k, k + n), -1)
            k += n

    def cpu_type_code(self) -> int:
        return CPU_TYPE_CODES[self.topo.cpu_type]
