"""The simulated NonStop node: a queueing network of transactions that bumps MEASURE counters.

Per step (``step_us``, default 1 s) the node

1. draws Poisson arrivals for every stream (rate x daily profile x weekday x growth), each
   transaction a row of the state matrix ``txm`` (:mod:`des` columns);
2. runs the step's events in the compiled inner loop (:func:`des.run_step`): each transaction
   visits its stages one after the other, a visit starting when its predecessor ends (waits
   propagate: the transaction's clock is real time); CPUs are preemptive-resume priority
   servers (class from the process priority), discs, line and Expand link directions FCFS,
   delays pure; a visit unfinished at the step end carries its remaining work over;
3. turns every visit that ended in the step, and every visit in progress at its end, into
   counter contributions through the stages' effect rows (busy and queue integrals split at
   the boundary; levels at the step end; queue peaks from the stations), reported through
   ``hooks.xctr`` for measured slots only. Transactions whose last visit ended bump their
   response time and TMF lifetime (departures of their flagged stages).

Approximations: $RECEIVE waits (RECV-QTIME) come from treating each server process as a FCFS
server of whole server spans and do not delay the transaction; TMF lifetimes and responses are
bumped whole in the step the transaction completes.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from collector.node import des
from collector.node import workload as wl
from collector.node.anomalies import Anomaly, Injector, Schedule
from collector.node.compiler import ENTITIES, R, build_streams, compile_types
from collector.node.extras import Extras
from collector.node.hooks import EntityTable, NodeHooks, NullHooks
from collector.node.later import Later, wanted
from collector.node.topology import CPU_TYPE_CODES, Topology, load_node, proc_class
from collector.node.workload import WorkloadSpec, load_workload
from core.catalog import KIND_BUSY, KIND_QBUSY, KIND_SNAPSHOT, load_catalog

__all__ = ["Node"]


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
        anomalies: Schedule | list[Anomaly] | None = None,
    ) -> None:
        self.topo = spec if isinstance(spec, Topology) else load_node(spec)
        wls = workload if isinstance(workload, list) else [workload]
        self.workloads = [w if isinstance(w, WorkloadSpec) else load_workload(w) for w in wls]
        # scheduled anomalies (collector/node/anomalies.py; 2 hooks in this file), None: none
        self._anomalies = Injector.attach(self, anomalies)
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
        # USERDEF, PROCESSH and DEVICE entities (collector/node/extras.py; 3 hooks in this file)
        self._extras = Extras(self)
        # IPUs, SQL, DISKFILE, SERVERNET, OSS (collector/node/later.py; 5 hooks in this file),
        # only on a node whose file asks for them
        self._later = Later(self) if wanted(self.topo) else None

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
        self.snap: dict[str, np.ndarray | None] = {name: None for name in T}
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
            # FILE names the file as the process opened it: $VOL.SUBVOL.FILE of the primary
            # partition (DISCOPEN has one entity per partition).
            primary = t.partitions[t.files[fi]["partitions"][0]]["name"]
            s = self.tables["file"].add(
                cpu=cpu,
                at_us=at,
                transient=notify,
                opener_cpu=cpu,
                opener_pin=pin,
                file_number=fnum + 1,
                file_name=primary,
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
        """The workloads compiled: arrival streams, staged problems, the kernel's tables
        (:mod:`collector.node.compiler`), the arrivals' sources."""
        self.streams, types, scaled_types = build_streams(self.workloads, self.topo)
        first_day = dt.datetime.fromtimestamp(self.now_us / 1e6, tz=self.tz).date()
        self.shapes = {w.name: w.shape.anchored(first_day) for w in self.workloads}
        self._stage_problems()
        c = compile_types(types, scaled_types, self.topo, self.tables, self.file_index)
        self.types = c.types
        self.typ = c.typ
        self.max_len = c.max_len
        self.max_io = c.max_io
        self.type_iofile = c.type_iofile
        self.remote_p = c.remote_p
        self.ucols = c.ucols
        self.ent_nu = c.ent_nu
        self.kind_of = c.kind_of
        self.maxq_of = c.maxq_of
        self._peak_cols = c.peak_cols
        self.kernel = des.Tables(
            stages=c.stages,
            types=c.ktypes,
            effects=c.effects,
            devices=self._devices(),
            dep0=des.C_PART0 + c.max_io,
        )
        des.check(self.kernel)
        self._setup_sources()

    def _stage_problems(self) -> None:
        """The workloads' staged problems (Table 1 of "Performance Considerations for
        Application Processes"): batch at the wrong priority, dynamic file opens, a hot disc;
        and the state of dynamic server creation."""
        t = self.topo
        self.problems = [w.problems for w in self.workloads]
        for w in self.workloads:
            if w.problems.batch_priority is not None:
                for b in w.batch:
                    s = self._proc_by_name(b.process)
                    self.tables["process"].ids["priority"][s] = w.problems.batch_priority
                    self.p_class[s] = proc_class(w.problems.batch_priority)
        self.dyn_opens = any(p.dynamic_file_opens for p in self.problems)
        self._quiet_us = 0
        self.delete_delay_us = 600_000_000
        self._opens_step: np.ndarray | None = None
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

    def _devices(self) -> des.Devices:
        """The node's stations and resources as the kernel sees them (fixed for its life)."""
        t = self.topo
        return des.Devices(
            n_cpu=t.n_cpus,
            n_vol=len(t.volumes),
            n_line=len(t.lines),
            n_net=len(t.netlines),
            vol_service=self.vol_service,
            line_speed=self.line_speed,
            net_speed=self.net_speed,
            part_vol=self.part_vol,
            file_of_part=self.topo_file_of_part,
            line_x25=self.line_x25_i,
            remote_cluster=self.remote_cluster,
        )

    def _procs(self) -> des.Procs:
        """The processes and CPUs as the kernel sees them (they change as processes start and
        stop and CPUs fail: built per step)."""
        return des.Procs(
            cpu=self.tables["process"].cpu,
            cls=self.p_class,
            cpu_map=self.cpu_map,
            vol_dp2=self.vol_dp2,
            tmf_by_cpu=self.tmf_by_cpu,
            mon_by_cpu=self.mon_by_cpu,
            pathmon=self.static["pathmon"],
            cmon=self.static["cmon"],
            fo=self.fo,
            dop=self.dop,
        )

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
        tmp = np.flatnonzero(self.p_role == R["tmp"])
        self.tmf_by_cpu = np.full(t.n_cpus, -1, dtype=np.int64)
        self.tmf_by_cpu[P.cpu[tmp]] = tmp
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
        # one int64 row per transaction in the node (des.TX_COLUMNS, then the partitions)
        self.c_dep0 = des.C_PART0 + self.max_io  # then each stage's departure - arrival
        # self.txm is a view of the first rows of a buffer with room for the next arrivals
        self._txbuf = np.zeros((64, self.c_dep0 + self.max_len), dtype=np.int64)
        self.txm = self._txbuf[:0]
        self.seqc = np.zeros(1, dtype=np.int64)

    @property
    def tx(self) -> dict[str, np.ndarray]:
        """Column views of the transaction state (writable)."""
        m = self.txm
        return {name: m[:, c] for c, name in enumerate(des.TX_COLUMNS)}

    @property
    def tx_part(self) -> np.ndarray:
        return self.txm[:, des.C_PART0 : self.c_dep0]

    @property
    def sd_done(self) -> np.ndarray:
        """(transactions x stages) True for the stages a transaction has finished."""
        L = self.txm.shape[1] - self.c_dep0
        return np.arange(L)[None, :] < self.txm[:, des.C_K][:, None]

    @property
    def sd_soj(self) -> np.ndarray:
        """(transactions x stages) for finished stages, departure minus the previous stage's
        departure (the first: minus the arrival), else 0: its cumulative sum is each stage's
        departure on the transaction's clock."""
        dep = self.txm[:, self.c_dep0 :]
        done = self.sd_done
        soj = np.diff(dep, axis=1, prepend=0)
        return np.where(done, soj, 0)

    _ARR_COLS = ("type", "t_arr", "ev", "term", "line", "tcp", "lh", "hls", "server",
                 "is_remote", "netline", "remote")  # fmt: skip

    def _arrival_tables(self) -> None:
        """Per-node constants of _arrivals: the new rows' defaults, partition lists, remotes."""
        t = self.topo
        row = np.full(self.txm.shape[1], -1, dtype=np.int64)
        for c in (des.C_IS_REMOTE, des.C_T_BEGIN, des.C_K, des.C_PH, des.C_REM, des.C_INSERV,
                  des.C_SDONE):  # fmt: skip
            row[c] = 0
        row[self.c_dep0 :] = 0
        self._arr_row = row
        self._arr_cidx = np.array(
            [des.TX_COLUMNS.index(c) for c in self._ARR_COLS]
            + list(range(des.C_PART0, self.c_dep0)),
            dtype=np.int64,
        )
        self._arr_plist = [np.array(f["partitions"], dtype=np.int64) for f in t.files]
        self._arr_remote = np.array([nl["remote"] for nl in t.netlines] or [-1], dtype=np.int64)

    def _arrivals(self, t0: int, W: int) -> None:
        rng = self.rng
        t = self.topo
        if not hasattr(self, "_arr_row"):
            self._arrival_tables()
        mid = dt.datetime.fromtimestamp((t0 + W / 2) / 1e6, tz=self.tz)
        blocks: list[np.ndarray] = []
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
                # the weekday the run began on (after midnight: the day before)
                if s.days is not None and (mid.weekday() - (a > b and h < b)) % 7 not in s.days:
                    continue
                mult = 1.0
            else:
                shape = self.shapes.get(s.name)
                mult = wl.rate_multiplier(shape, mid) if shape is not None else 1.0
            lam = s.tps * mult * W / 1e6
            n = int(rng.poisson(lam)) if lam > 0 else 0
            if n == 0:
                continue
            # one column per _ARR_COLS entry, then the partition of each I/O group
            v = np.empty((len(self._ARR_COLS) + self.max_io, n), dtype=np.int64)
            v[1] = t0 + np.sort(rng.integers(0, W, n))
            v[2] = v[1]
            if ntypes > 1:
                w = np.array([tt.weight for tt in s.types])
                v[0] = tb + rng.choice(ntypes, size=n, p=w / w.sum())
            else:
                v[0] = tb
            typ = v[0]
            src = self.stream_terms[si]
            if s.source.startswith("terminals:") and src.size:
                term = src[rng.integers(0, src.size, n)]
                line = self.term_line[term]
                v[3] = term
                v[4] = line
                v[5] = self.term_tcp[term]
                v[6] = self.line_lh[line]
                v[7] = self.line_hls[line]
                if s.server_class is not None:
                    sci = self.sc_index[s.server_class]
                    srv = self._servers(sci)
                    k = self.sc_rr[sci]
                    v[8] = srv[(k + np.arange(n)) % srv.size]
                    self.sc_rr[sci] = (k + n) % max(srv.size, 1)
                else:
                    v[8] = -1
            else:
                v[3:8] = -1
                v[8] = src[0]
            # remote (Expand) transactions
            v[9] = 0
            v[10:12] = -1
            rp = self.remote_p[typ]
            if t.netlines and rp.any():
                v[9] = rng.random(n) < rp
                nl = rng.integers(0, len(t.netlines), n)
                v[10] = nl
                v[11] = self._arr_remote[nl]
            # file partitions per I/O group
            pm = v[len(self._ARR_COLS) :]
            pm[:] = -1
            for ti in np.unique(typ):
                rows = np.flatnonzero(typ == ti)
                for gi in range(self.max_io):
                    fi = self.type_iofile[ti, gi]
                    if fi < 0:
                        continue
                    plist = self._arr_plist[fi]
                    if self.hot is not None and plist.size > 1:
                        hv = self.part_vol[plist] == self.hot[0]
                        if hv.any():
                            w = np.where(
                                hv, self.hot[1] / hv.sum(), (1 - self.hot[1]) / (~hv).sum()
                            )
                            pm[gi, rows] = plist[
                                rng.choice(plist.size, size=rows.size, p=w / w.sum())
                            ]
                            continue
                    pm[gi, rows] = plist[rng.integers(0, plist.size, rows.size)]
            blocks.append(v)
        if not blocks:
            return
        vals = blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=1)
        n_total = vals.shape[1]
        n0 = self.txm.shape[0]
        buf = self._txbuf
        if buf.shape[0] < n0 + n_total:  # grow the row buffer (self.txm is a view of it)
            buf = np.empty((max(2 * buf.shape[0], n0 + n_total, 64), buf.shape[1]), np.int64)
            buf[:n0] = self.txm
            self._txbuf = buf
        des.fill_rows(buf, n0, self._arr_row, self._arr_cidx, vals)
        self.txm = buf[: n0 + n_total]
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

    def _step(self, W: int) -> None:
        t0 = self.now_us
        t1 = t0 + W
        anomalies = getattr(self, "_anomalies", None)  # (a node from an older checkpoint: none)
        if anomalies is not None:
            anomalies.step(t0)
        self._arrivals(t0, W)
        out = {e: None for e in ENTITIES}
        if self.txm.shape[0]:
            out = self._run_jobs(t0, W)
        self._emit(t1, out, W)
        if self.dyn_opens:
            self._dynamic_opens(t0, t1)
        self._dynamic_servers(t0, W)
        self.now_us = t1
        if getattr(self, "_extras", None) is not None:
            self._extras.after_step(t0, W, out)
        lt = getattr(self, "_later", None)
        if lt is not None:
            lt.after_step(t0, W, out)

    def _run_jobs(self, t0: int, W: int):
        """Simulate the step's events (des.run_step) and collect the counter contributions:
        per entity its (acc, level, peak) rows, or None when none of its slots is measured."""
        step = self._step_out()
        procs = self._procs()
        des.check(procs)
        des.check(step)
        nspan = des.run_step(t0, t0 + W, self.rng, self.txm, self.seqc, self.kernel, procs, step)
        if self.dyn_opens:
            self._opens_step = step.opens
        out = self._spread(step)
        self._recv_queue(out, step.spans[:nspan], t0, W)
        fin = self.txm[:, des.C_PH] == 3
        if fin.any():
            self._complete(np.flatnonzero(fin), t0, W, out)
            self._keep(~fin)
        self._tmf_level(out)
        return out

    def _step_out(self) -> des.StepOut:
        """The step's entity layout in the kernel's compact accumulators (per entity its
        slots x its used counters, one after the other) and its empty outputs."""
        t = self.topo
        ne = len(ENTITIES)
        ent_n = np.zeros(ne, dtype=np.int64)
        ent_nc = np.zeros(ne, dtype=np.int64)
        ent_off = np.zeros(ne, dtype=np.int64)
        ent_soff = np.zeros(ne, dtype=np.int64)
        meas = []
        off = soff = 0
        for ei, e in enumerate(ENTITIES):
            T = self.tables[e]
            nu = int(self.ent_nu[ei])
            ent_n[ei], ent_nc[ei], ent_off[ei], ent_soff[ei] = T.n, nu, off, soff
            meas.append(T.alive[: T.n] & (T.xptr[: T.n] >= 0))
            off += T.n * nu
            soff += T.n
        n_st = t.n_cpus + len(t.volumes) + 2 * len(t.lines) + 2 * len(t.netlines)
        return des.StepOut(
            ent_off=ent_off,
            ent_nc=ent_nc,
            ent_n=ent_n,
            ent_soff=ent_soff,
            measured=np.concatenate(meas),
            acc=np.zeros(off),
            lev=np.zeros(off),
            st_peak=np.zeros(n_st, dtype=np.int64),
            opens=np.zeros(self.tables["process"].n if self.dyn_opens else 0, dtype=np.int64),
            spans=np.empty((self.txm.shape[0], 3), dtype=np.int64),
        )

    def _spread(self, step: des.StepOut) -> dict:
        """Each measured entity's full counter rows from the kernel's compact accumulators,
        with the queue peaks the stations saw."""
        t = self.topo
        out: dict = {e: None for e in ENTITIES}
        for ei, e in enumerate(ENTITIES):
            n, o, so = int(step.ent_n[ei]), int(step.ent_off[ei]), int(step.ent_soff[ei])
            if not step.measured[so : so + n].any():
                continue
            a, lv, pk = self._out_buffers(e, n)
            des.spread(step.acc, step.lev, o, self.ucols[ei], a, lv, pk)
            c = self._peak_cols.get(e)
            if self.peaks and c is not None:
                st_peak = step.st_peak
                if e == "cpu":
                    pk[:, c] = np.maximum(pk[:, c], st_peak[: t.n_cpus][:n])
                else:  # disc: the primary path's record carries the volume's queue
                    nv = len(t.volumes)
                    d0 = t.n_cpus
                    pk[0 : 2 * nv : 2, c] = np.maximum(pk[0 : 2 * nv : 2, c], st_peak[d0 : d0 + nv])
            out[e] = [a, lv, pk]
        return out

    def _tmf_level(self, out: dict) -> None:
        """TMF level: transactions begun and not yet committed, per committing CPU."""
        if out.get("tmf") is None:
            return
        T = self.tables["tmf"]
        if "HOME-TRANS-QTIME" in T.entity:
            c = T.entity.index("HOME-TRANS-QTIME")
            lv = self.txm[:, des.C_T_BEGIN] > 0
            cnt = np.bincount(self.txm[lv, des.C_TMF_CPU], minlength=T.n)[: T.n]
            out["tmf"][1][:, c] += cnt
            out["tmf"][2][:, c] = np.maximum(out["tmf"][2][:, c], out["tmf"][1][:, c])

    def _out_buffers(self, e: str, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The step's (acc, level, peak) rows of entity ``e``: buffers kept from step to step
        (the hooks get them only for the duration of the call), refilled by des.spread."""
        bufs = self.__dict__.setdefault("_outbuf", {})
        b = bufs.get(e)
        if b is None or b[0].shape[0] < n:
            nc = self.tables[e].n_counters
            cap = max(n, 2 * (0 if b is None else b[0].shape[0]), 16)
            b = bufs[e] = tuple(np.zeros((cap, nc)) for _ in range(3))
        return b[0][:n], b[1][:n], b[2][:n]

    @property
    def line_x25_i(self) -> np.ndarray:
        return self.line_x25.astype(np.int64)

    def _keep(self, keep: np.ndarray) -> None:
        n = des.compact(self.txm, ~keep)
        self.txm = self._txbuf[:n]

    def __getstate__(self) -> dict:
        """Pickle the transaction rows, not the buffer behind them."""
        state = self.__dict__.copy()
        state["_txbuf"] = None
        state["txm"] = self.txm.copy()
        state.pop("_outbuf", None)  # per-step scratch
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._txbuf = self.txm

    _COMPLETE_TARGETS = (
        ("terminal", "TRANSACTIONS"),
        ("terminal", "RESPONSE-TIME"),
        ("cpu", "TRANSACTIONS"),
        ("cpu", "RESPONSE-TIME"),
        ("line", "TRANSACTIONS"),
        ("line", "RESPONSE-TIME"),
        ("tmf", "HOME-TRANS-QTIME"),
    )

    def _complete(self, fi: np.ndarray, t0: int, W: int, out) -> None:
        """Transactions whose last visit ended: response time and TMF lifetime from the
        transaction's own clock (departures of its flagged stages), see :func:`des.complete`."""
        cols = np.full(7, -1, dtype=np.int64)
        arrs = {}
        for q, (ent, ctr) in enumerate(self._COMPLETE_TARGETS):
            o = out.get(ent)
            T = self.tables[ent]
            if o is not None and ctr in T.entity:
                cols[q] = T.entity.index(ctr)
                arrs[ent] = o[0]
        dummy = np.zeros((1, 1))
        ex = getattr(self, "_extras", None)
        if ex is not None:
            k0, k1, is_batch = ex.k0, ex.k1, ex.is_batch
        else:
            k0 = k1 = np.full(len(self.types), -1, dtype=np.int64)
            is_batch = np.zeros(len(self.types), dtype=bool)
        req = np.empty((fi.size, 2), dtype=np.int64)
        blk = np.empty((fi.size, 2), dtype=np.int64)
        n_resp, s_resp, s_sys, nreq, nblk = des.complete(
            self.txm, fi, self.typ, self.c_dep0, self.tables["process"].cpu, self.cpu_map,
            self.line_x25_i, arrs.get("terminal", dummy), arrs.get("cpu", dummy),
            arrs.get("line", dummy), arrs.get("tmf", dummy), cols, k0, k1, is_batch, req, blk,
        )  # fmt: skip
        self.stats.completed += int(fi.size)
        self.stats.sys_time_us += float(s_sys)
        self.stats.response_us += float(s_resp)
        self.stats.responses += int(n_resp)
        if ex is not None:
            if nreq:
                ex.requests_done(req[:nreq, 0], req[:nreq, 1])
            if nblk:
                ex.blocks_done(blk[:nblk, 0], blk[:nblk, 1])
        lt = getattr(self, "_later", None)
        if lt is not None and nreq:
            lt.requests_done(req[:nreq, 0], req[:nreq, 1])

    @property
    def topo_file_of_part(self) -> np.ndarray:
        if not hasattr(self, "_fop"):
            self._fop = np.array([p["file"] for p in self.topo.partitions] or [0], dtype=np.int64)
        return self._fop

    def _recv_queue(self, out, spans: np.ndarray, t0: int, W: int) -> None:
        """$RECEIVE queues: each server process serves whole transactions (first to last
        server visit) FCFS; a span that finds its server busy waits (RECV-QTIME). The wait is
        accounted in the step the span ends and does not delay the transaction."""
        T = self.tables["process"]
        if out.get("process") is None or "RECV-QTIME" not in T.entity or spans.shape[0] == 0:
            return
        acc, lev, peak = out["process"]
        total = des.recv_queue(spans, t0, W, acc, lev, peak, T.entity.index("RECV-QTIME"))
        self._recv_wait_step = float(total) / spans.shape[0]

    # ----------------------------------------------------------------------------- emit
    def _emit(self, t1: int, out, W: int) -> None:
        if not hasattr(self, "_emit_cols"):
            self._emit_cols = {}
            self._busy_carry: dict[str, np.ndarray] = {}
            for e in ENTITIES:
                kinds = self.kind_of[e]
                mq = np.array(self.maxq_of[e], dtype=np.int64).reshape(-1, 2)
                self._emit_cols[e] = (
                    np.flatnonzero((kinds == KIND_BUSY) | (kinds == KIND_QBUSY)),
                    np.flatnonzero(kinds == KIND_SNAPSHOT),
                    np.ascontiguousarray(mq[:, 0]),
                    np.ascontiguousarray(mq[:, 1]),
                )
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
            elif ms.size == T.n:  # every slot measured: this step's own buffers, no gather
                acc, lev, peak = o
            else:
                acc, lev, peak = (x[ms] for x in o)
            busy, snapc, mq_pos, mq_src = self._emit_cols[e]
            if busy.size:
                self._busy_within_step(e, T, ms, acc, busy, W)
            sn = self.snap.get(e)
            des.emit_levels(lev, peak, busy, mq_pos, mq_src, sn, ms, snapc)
            lt = getattr(self, "_later", None)
            if lt is not None:
                acc, lev, peak = lt.rows(e, ms, acc, lev, peak, out, t1, W)
            self.hooks.xctr(e, ms, T.xptr[ms], acc, lev, peak, t1)

    def _busy_within_step(self, e: str, T, ms: np.ndarray, acc: np.ndarray, busy: np.ndarray, W: int) -> None:
        """A busy time is at most the time it is measured over (MEASURE's busy counters are the
        time an entity was busy): the amounts a step bumps into an entity's busy counters (the
        visits that ended in it, whose waits may have begun in earlier steps or overlap) are
        passed on at most W per step, the rest carried into the next steps, so no interval
        of whole steps ever holds more busy time than its length and none is lost."""
        carry = self._busy_carry.get(e)
        if carry is None or carry.shape[0] < T.n:
            grown = np.zeros((max(T.n, 1), len(busy)))
            if carry is not None:
                grown[: carry.shape[0]] = carry
            carry = self._busy_carry[e] = grown
        carry[~T.alive[: carry.shape[0]]] = 0.0  # a slot's entity ended: nothing of it carries over
        due = carry[ms] + acc[:, busy]
        passed = np.minimum(due, float(W))
        acc[:, busy] = passed
        carry[ms] = due - passed

    def _dynamic_opens(self, t0: int, t1: int) -> None:
        """Staged problem "dynamic file opens": servers open a scratch file per transaction.
        Each server with work this step gets a transient FILE open (started at the step start,
        bumped, stopped at the step end) and its PROCESS FILE-OPEN-CALLS count."""
        counts = getattr(self, "_opens_step", None)
        self._opens_step = None
        if counts is None:
            return
        P, F = self.tables["process"], self.tables["file"]
        if not hasattr(self, "_scratch_file"):
            # a scratch file on the first application volume (else the first volume)
            vols = [v["name"] for v in self.topo.volumes]
            app = [v for v in vols if v not in ("$SYSTEM", "$AUDIT")] or vols
            self._scratch_file = f"{app[0]}.TEMP.SCRATCH"
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
                file_name=self._scratch_file,
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
            z = zp = np.zeros_like(acc)
            lt = getattr(self, "_later", None)
            if lt is not None:  # per IPU (the launch's step is over: its shares)
                acc, z, zp = lt.rows("cpu", np.array([c]), acc, z, z, None, at, self.step_us)
            self.hooks.xctr("cpu", np.array([c]), C.xptr[[c]], acc, z, zp, at)

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
        # visits queued or in service at the failed CPU start again (on the backup CPU)
        m = self.txm
        there = (m[:, des.C_PH] == 1) & (m[:, des.C_ST] == cpu)
        m[there, des.C_PH] = 0
        m[there, des.C_EV] = at_us
        m[there, des.C_INSERV] = 0
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
            slots = self.tx[col]
            slots[slots == old] = new

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
