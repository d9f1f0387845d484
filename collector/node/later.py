"""What a NonStop of today's kind measures beyond 1986: IPUs, SQL, disc files, ServerNet, OSS.

The engine (:mod:`collector.node.engine`) models a CPU as one server; :mod:`collector.node.extras`
adds the remaining 1986 types. This module adds, from what the engine already computes, the
counters and entity types of the H-, J- and L-series catalogue (docs/measure-reference.md §4;
schema/catalog/): the IPU counters of CPU and PROCESS and the types SQLPROC, SQLSTMT,
DISKFILE, SERVERNET, OSSCPU and OSSNS. A node has it only when its node file asks for one of
them (``processor.ipus`` > 1, a server class's ``sql:``, ``oss:``, ``servernet:``), so the
1986 nodes run exactly as before. Its inputs are engine-neutral, as Extras's:
:meth:`Later.requests_done` (server slot and response time of each request replied to),
:meth:`Later.rows` (an entity's rows just before the engine reports them through
``hooks.xctr``; it returns the rows to report) and :meth:`Later.after_step` (the step's
per-entity contributions). Counters are named as the catalogue names them.

IPUs (``processor.ipus``, a multi-core processor type: topology.MULTI_IPU_TYPES)
    The engine serves a CPU of I IPUs as one server I times as fast as one IPU (the node's
    ``cpu_factor`` is the per-IPU factor / I). MEASURE counts CPU time per IPU, so the CPU
    time counters (CPU: CPU-BUSY-TIME, INTR-BUSY-TIME, PROCESS-OVHD, SEND-BUSY-TIME; PROCESS:
    CPU-BUSY-TIME) are the engine's times I: a CPU's CPU-BUSY-TIME is the sum over its IPUs,
    up to I x the interval (the ipu-balance report normalises it per IPU). Each process runs
    on one IPU (IPU-NUM; IPU-NUM-PREV the one before): PIN mod I at its start; each step a
    process that ran moves to another IPU with probability ``MIGRATE_P``, and the dispatcher
    moves the busiest process of an IPU busier than ``REBALANCE`` x the CPU's mean (or than
    fully busy) to the least busy IPU while that lowers the busier one; every move counts in
    IPU-SWITCHES. An IPU's load is the CPU time of its processes; the CPU's time outside
    processes (interrupts, the message system: CPU-BUSY-TIME − Σ process CPU-BUSY-TIME) is
    on IPU 0 (interrupt affinity). So the IPUs of a CPU are not even: a few heavy processes
    (the OSS requesters) cannot be spread finely, and IPU 0 carries the interrupts — the
    imbalance the ipu-balance report shows (10-50 points in a minute, a few over a day). IPU-BUSY-TIME-k is
    the CPU's CPU-BUSY-TIME times IPU k's share of the load, at most the step per IPU (an
    excess goes to the IPUs with room), and Σ_k IPU-BUSY-TIME-k = CPU-BUSY-TIME in every
    step; IPU-DISPATCHES-k and IPU-QTIME-k are DISPATCHES and CPU-QTIME shared the same way
    (dispatches as whole numbers, largest remainders); IPUS is I.

SQLPROC and SQLSTMT (a server class's ``sql:``: module and statements)
    Every server process of the class is an SQLPROC element and has one SQLSTMT element per
    statement (module_name, statement_index), started and stopped with the process. For each
    request a server replied to, each statement runs with its probability ``prob`` (drawn
    from a Generator spawned from the node's); the statements a request ran share its server
    response time by ``weight``, in whole µs (the remainder to the last one), so Σ
    ELAPSED-BUSY-TIME over a process's statements is the response time of its requests (its
    USERDEF RESP-TIME) and CALLS of a statement with ``prob: 1`` is its requests (USERDEF
    THROUGHPUT). RECORDS-ACCESSED, RECORDS-USED, MESSAGES (1 KB each), SORTS: CALLS x the
    statement's ``rows``, ``used``, ``messages``, ``sorts``. DISC-READS: the physical reads of
    the process's FILE open of the statement's ``table`` in the step (FILE DISC-READS), shared
    by the statements on that table that ran in the step by records accessed (whole reads;
    reads of a step whose table no statement ran in wait for the next), so Σ DISC-READS over
    the statements of a table is the FILE's. SQLPROC: at the process start, OPENS (one per
    table its statements use) and OPEN-TIME (``open_ms`` each); the rest 0. SQL counters come
    from the step's FILE contributions: measure FILE with SQLSTMT.

DISKFILE (every partition of every file: one per file per volume)
    Identified by the volume's primary CPU, device_name (the volume), fcb_number (1, 2 … per
    volume) and file_name ($VOL.SUBVOL.FILE). Its REQUESTS, DRIVER-INPUT-CALLS,
    DRIVER-OUTPUT-CALLS, CACHE-READ-HITS (DISCOPEN CACHE-HITS), CACHE-WRITE-HITS and
    BLOCK-SPLITS are the sums of the DISCOPEN contributions of the partition's opens in the
    step (measure DISCOPEN with DISKFILE); TRANSIENT-OPENS the opens started in the step,
    OPEN-QTIME the opens (level: the opens at the step end); STARTING-/ENDING-ROWS and -EOF
    the file's records and records x record bytes (the engine keeps no file sizes).

SERVERNET (``servernet:``: fabrics, rate, overhead)
    One element per CPU and fabric (adapter_name the fabric, sac_name ``CPU<n>.SAC``). The
    physical disc I/Os of the volumes whose primary disc process runs in the CPU (DISC READS,
    WRITES, INPUT-BYTES, OUTPUT-BYTES of the primary path) go through its adapters, shared
    between the fabrics alternately (the odd one to X on even steps, Y on odd ones), so the
    fabrics' sums are the disc's; REQUESTS = READ- + WRITE-REQUESTS = ACKS, TOTAL-IO-BYTES the
    bytes, READ-/WRITE-CBYTES 64 control bytes per transfer, READ-/WRITE-QTIME and IO-QTIME
    each transfer's time (``overhead_us`` + bytes / ``mbytes_per_s``), their QBUSY times the
    same at most the step. Needs DISC measured.

OSSCPU and OSSNS (``oss:``)
    OSS processes are the processes whose program is an OSS pathname (``/…``). Per CPU:
    OSS-BUSY-TIME = Σ CPU-BUSY-TIME the step reports for its OSS processes, PIPE-MESSAGES
    their MESSAGES-RECEIVED, OSS-FILE-CALLS ``lookups_per_message`` per such message (whole
    calls, the fraction carried), OSS-PROCESSES-START/-END the OSS processes alive. Every
    OSS file call is a pathname resolution by a name server (``name_servers``, PROCESS
    entities of the node; the calls shared between them in turn): RR-PROCESSED and
    LC-LOOKUPS the calls, LC-HITS drawn with ``name_cache_hit``, the misses IC-LOOKUPS, IC-HITS
    drawn with ``inode_cache_hit``, the misses DP2-DD-REQS and DP2-MESSAGES, DP2-MSG-QTIME
    their time at the disc process (the volume's mean service time). Σ RR-PROCESSED =
    Σ OSS-FILE-CALLS in every step. Needs PROCESS measured.

Entities that come and go start (``entity_started``) before their first bump and stop after
their last one, at the end of the step in which their process stopped (as Extras's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collector.node.extras import grow_fields

__all__ = ["MIGRATE_P", "REBALANCE", "Later", "wanted"]

MIGRATE_P = 0.1  # per step, a process that ran moves to another IPU with this probability
REBALANCE = 1.25  # the dispatcher moves work off an IPU this much busier than its CPU's mean
_MSG_BYTES = 1024  # bytes per SQL message
_CBYTES = 64  # ServerNet control bytes per transfer
_CPU_TIMES = ("CPU-BUSY-TIME", "INTR-BUSY-TIME", "PROCESS-OVHD", "SEND-BUSY-TIME")
# DISKFILE counter <- DISCOPEN counter (sums over the partition's opens)
_DISKFILE_FROM = (
    ("REQUESTS", "REQUESTS"),
    ("DRIVER-INPUT-CALLS", "DRIVER-INPUT-CALLS"),
    ("DRIVER-OUTPUT-CALLS", "DRIVER-OUTPUT-CALLS"),
    ("CACHE-READ-HITS", "CACHE-HITS"),
    ("CACHE-WRITE-HITS", "CACHE-WRITE-HITS"),
    ("BLOCK-SPLITS", "BLOCK-SPLITS"),
)


def wanted(topo: Any) -> bool:
    """Does the node file ask for anything this module adds?"""
    return bool(
        topo.ipus > 1
        or topo.oss
        or topo.servernet
        or any(sc.get("sql") for sc in topo.server_classes)
    )


def _split_int(total: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Whole numbers ``total`` (rows) shared by weights ``w`` (rows x k) by largest
    remainders: each row sums to its total (rows with no weight: all to column 0)."""
    tot = np.rint(total).astype(np.int64)
    ws = w.sum(axis=1, keepdims=True)
    share = np.where(ws > 0, w / np.where(ws > 0, ws, 1.0), 0.0)
    share[ws[:, 0] <= 0, 0] = 1.0
    exact = tot[:, None] * share
    out = np.floor(exact).astype(np.int64)
    left = tot - out.sum(axis=1)
    order = np.argsort(-(exact - out), axis=1, kind="stable")
    for r in np.flatnonzero(left > 0):
        out[r, order[r, : left[r]]] += 1
    return out


def _fill_exact(total: np.ndarray, share: np.ndarray, cap: float | None) -> np.ndarray:
    """``total`` (rows) shared by ``share`` (rows x k, rows sum to 1), at most ``cap`` each
    (an excess goes to the columns with room, in proportion to their room); each row sums to
    its total exactly (the remainder on the largest column)."""
    v = total[:, None] * share
    if cap is not None:
        for _ in range(v.shape[1]):
            over = np.clip(v - cap, 0, None)
            ex = over.sum(axis=1)
            if not (ex > 0).any():
                break
            v -= over
            room = np.clip(cap - v, 0, None)
            rs = room.sum(axis=1, keepdims=True)
            v += np.where(rs > 0, room / np.where(rs > 0, rs, 1.0), 0.0) * ex[:, None]
    big = np.argmax(v, axis=1)
    r = np.arange(v.shape[0])
    v[r, big] += total - v.sum(axis=1)
    return v


class Later:
    """The later entity types and IPU counters of one node (see the module docstring)."""

    def __init__(self, node: Any) -> None:
        self.node = node
        topo = node.topo
        T = node.tables
        self.rng = node.rng.spawn(1)[0]  # a child stream: the node's own draws are unchanged
        self.n_ipu = int(topo.ipus)
        cpu, proc = T["cpu"].entity, T["process"].entity
        self.cc = {n: cpu.index(n) for n in _CPU_TIMES + ("DISPATCHES", "CPU-QTIME", "IPUS")}
        self.c_ipu_busy = [cpu.index(f"IPU-BUSY-TIME-{k}") for k in range(self.n_ipu)]
        self.c_ipu_disp = [cpu.index(f"IPU-DISPATCHES-{k}") for k in range(self.n_ipu)]
        self.c_ipu_q = [cpu.index(f"IPU-QTIME-{k}") for k in range(self.n_ipu)]
        self.pc = {
            n: proc.index(n)
            for n in ("CPU-BUSY-TIME", "MESSAGES-RECEIVED", "IPU-NUM", "IPU-NUM-PREV",
                      "IPU-SWITCHES")
        }  # fmt: skip
        self._pcap = 0
        self.p_ipu = np.zeros(0, dtype=np.int64)
        self.p_prev = np.zeros(0, dtype=np.int64)
        self.p_sw = np.zeros(0)  # IPU switches of this step
        self.p_busy = np.zeros(0)  # CPU-BUSY-TIME reported this step (scaled), per process slot
        self.p_msgs = np.zeros(0)  # MESSAGES-RECEIVED reported this step
        self.p_oss = np.zeros(0, dtype=bool)
        self._known = 0
        self._share: np.ndarray | None = None  # per CPU, IPU shares of this step
        self._share_at = -1
        # ---- SQL
        self.sql_sc = {
            sc["name"]: sc["sql"] for sc in topo.server_classes if sc.get("sql") is not None
        }
        self.SP, self.SS = T["sqlproc"], T["sqlstmt"]
        self.ss_proc = np.zeros(0, dtype=np.int64)  # sqlstmt slot -> process slot
        self.sp_proc = np.zeros(0, dtype=np.int64)
        self.sp_new = np.zeros(0, dtype=bool)  # started, opens not yet bumped
        self.p_ss = np.full(0, -1, dtype=np.int64)  # first sqlstmt slot of a process
        self.p_sp = np.full(0, -1, dtype=np.int64)
        self.p_cls = np.full(0, -1, dtype=np.int64)  # SQL server class of a process slot
        self._calls = np.zeros(0)  # this step, per sqlstmt slot
        self._elapsed = np.zeros(0)
        self.read_carry: dict[tuple[int, int], float] = {}  # (process, file) reads not shared
        self.sql_names = list(self.sql_sc)  # SQL server classes; p_cls indexes them
        self._sc_stmt = [
            {
                "prob": np.array([s["prob"] for s in m["statements"]]),
                "weight": np.array([s["weight"] for s in m["statements"]]),
                # per statement: rows, used, messages, sorts per call, its table (file index)
                "spec": np.array(
                    [[s["rows"], s["used"], s["messages"], s["sorts"], node.file_index[s["table"]]]
                     for s in m["statements"]], dtype=float,
                ),  # fmt: skip
            }
            for m in self.sql_sc.values()
        ]
        self.ss_spec = np.zeros((0, 5))  # per sqlstmt slot: its statement's spec row
        # ---- DISKFILE: one per partition, static
        self.DF = T["diskfile"]
        self.df_slot = []
        per_vol: dict[int, int] = {}
        for p in topo.partitions:
            v = topo.volumes[p["volume"]]
            per_vol[p["volume"]] = per_vol.get(p["volume"], 0) + 1
            self.df_slot.append(
                self.DF.add(
                    cpu=v["primary_cpu"],
                    at_us=node.now_us,
                    device_name=v["name"],
                    fcb_number=per_vol[p["volume"]],
                    file_name=p["name"],
                )
            )
        self.part_of_name = {p["name"]: i for i, p in enumerate(topo.partitions)}
        self.dop_part = np.zeros(0, dtype=np.int64)
        self.df_snap = np.zeros((len(topo.partitions), self.DF.n_counters))
        e = self.DF.entity
        for i, p in enumerate(topo.partitions):
            f = topo.files[p["file"]]
            rows = f["records"] / max(len(f["partitions"]), 1)
            for name, v in (("STARTING-ROWS", rows), ("ENDING-ROWS", rows),
                            ("STARTING-EOF", rows * f["record_bytes"]),
                            ("ENDING-EOF", rows * f["record_bytes"])):  # fmt: skip
                self.df_snap[i, e.index(name)] = round(v)
        # ---- SERVERNET
        self.sn = topo.servernet
        self.SN = T["servernet"]
        self.sn_slot: list[list[int]] = []
        if self.sn:
            for c in range(topo.n_cpus):
                self.sn_slot.append(
                    [
                        self.SN.add(
                            cpu=c, at_us=node.now_us, adapter_name=fab, sac_name=f"CPU{c:02d}.SAC"
                        )  # fmt: skip
                        for fab in self.sn["fabrics"]
                    ]
                )
        self._parity = 0
        # ---- OSS
        self.oss = topo.oss
        self.OC, self.ON = T["osscpu"], T["ossns"]
        self.oc_slot = (
            [self.OC.add(cpu=c, at_us=node.now_us) for c in range(topo.n_cpus)] if self.oss else []
        )
        self.ns_names = list(self.oss["name_servers"]) if self.oss else []
        self.ns_slot: dict[str, int] = {}  # name server -> its OSSNS slot
        self.ns_proc: dict[str, int] = {}
        self._lookup_carry = np.zeros(topo.n_cpus)
        self._ns_turn = 0
        self._sync(node.now_us, notify=False)

    # ------------------------------------------------------------------ engine entry points
    def requests_done(self, server: np.ndarray, response_us: np.ndarray) -> None:
        """Server requests replied to this step: the server process slot and the response
        time (µs) of each (as Extras.requests_done)."""
        if server.size == 0 or not self.sql_sc:
            return
        self._grow(self.node.tables["process"].n)
        first = self.p_ss[server]
        ok = first >= 0
        if not ok.any():
            return
        server, resp, first = server[ok], response_us[ok].astype(np.int64), first[ok]
        groups = self.p_cls[server]
        for g in np.unique(groups).tolist():
            sel = groups == g
            st = self._sc_stmt[g]
            k = st["prob"].size
            n = int(sel.sum())
            ran = self.rng.random((n, k)) < st["prob"][None, :]
            w = ran * st["weight"][None, :]
            ws = w.sum(axis=1)
            none = ws <= 0  # a request that drew none runs the heaviest always-run statement
            if none.any():
                j = int(np.argmax(np.where(st["prob"] >= 1.0, st["weight"], -1.0)))
                ran[none, j] = True
                w[none, j] = st["weight"][j]
            el = _split_int(resp[sel].astype(float), w)
            slots = first[sel][:, None] + np.arange(k)[None, :]
            self._grow_ss(self.SS.n)
            np.add.at(self._calls, slots.ravel(), ran.ravel().astype(float))
            np.add.at(self._elapsed, slots.ravel(), el.ravel().astype(float))

    def rows(
        self, entity: str, slots: np.ndarray, acc: np.ndarray, lev: np.ndarray,
        peak: np.ndarray, out: dict | None, t1: int, W: int,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
        """An entity's rows (``slots``) as the engine is about to report them: the rows to
        report instead (copies; the engine's buffers are left alone)."""
        if entity not in ("cpu", "process"):
            return acc, lev, peak
        acc, lev, peak = acc.copy(), lev.copy(), peak.copy()
        if entity == "process":
            n = self.node.tables["process"].n
            self._grow(n)
            if self.n_ipu > 1:
                self._assign(out, t1, W)
                c = self.pc["CPU-BUSY-TIME"]
                for a in (acc, lev, peak):
                    a[:, c] *= self.n_ipu
                lev[:, self.pc["IPU-NUM"]] = self.p_ipu[slots]
                lev[:, self.pc["IPU-NUM-PREV"]] = self.p_prev[slots]
                acc[:, self.pc["IPU-SWITCHES"]] = self.p_sw[slots]
            self.p_busy[:n] = 0.0
            self.p_msgs[:n] = 0.0
            self.p_busy[slots] = acc[:, self.pc["CPU-BUSY-TIME"]]
            self.p_msgs[slots] = acc[:, self.pc["MESSAGES-RECEIVED"]]
        elif self.n_ipu > 1:
            self._assign(out, t1, W)
            self._cpu_rows(slots, acc, lev, peak, W)
        return acc, lev, peak

    def after_step(self, t0: int, W: int, out: dict | None) -> None:
        """End of a step [t0, t0 + W): bump, then stop and start elements with their process."""
        t1 = t0 + W
        self._grow(self.node.tables["process"].n)
        if self.sql_sc:
            self._bump_sql(out, t1)
        self._bump_diskfile(out, t0, t1, W)
        if self.sn:
            self._bump_servernet(out, t1, W)
        if self.oss:
            self._bump_oss(t1, W)
        self.p_busy[:] = 0.0
        self.p_msgs[:] = 0.0
        self.p_sw[:] = 0.0
        self._sync(t1, notify=True)

    # ------------------------------------------------------------------ processes
    def _grow(self, n: int) -> None:
        if n <= self._pcap:
            return
        cap = max(n, 2 * self._pcap, 64)
        fields = (("p_ipu", 0), ("p_prev", 0), ("p_sw", 0.0), ("p_busy", 0.0), ("p_msgs", 0.0),
                  ("p_oss", False), ("p_ss", -1), ("p_sp", -1), ("p_cls", -1))  # fmt: skip
        grow_fields(self, fields, cap)
        self._pcap = cap

    def _grow_ss(self, n: int) -> None:
        if self._calls.size < n:
            grow = max(n, 2 * self._calls.size, 64) - self._calls.size
            self._calls = np.append(self._calls, np.zeros(grow))
            self._elapsed = np.append(self._elapsed, np.zeros(grow))

    def _sync(self, at: int, notify: bool) -> None:
        """New processes: their IPU, their SQL elements, OSS; stopped ones: stop those."""
        P = self.node.tables["process"]
        self._grow(P.n)
        if notify:
            self._stop_sql(P, at)
        hooks = self.node.hooks
        for s in range(self._known, P.n):
            if P.alive[s]:
                self._add(s, at, notify)
        self._known = P.n
        for ns in self.ns_names:  # a name server's OSSNS element follows its process
            hits = np.flatnonzero(P.alive[: P.n] & (P.ids["process_name"][: P.n] == ns))
            cur = self.ns_slot.get(ns)
            if cur is not None and (not hits.size or int(hits[0]) != self.ns_proc[ns]):
                self.ON.alive[cur] = False
                if notify:
                    hooks.entity_stopped("ossns", cur, at)
                del self.ns_slot[ns]
            if hits.size and ns not in self.ns_slot:
                s = int(hits[0])
                slot = self.ON.add(
                    cpu=int(P.cpu[s]), at_us=at, transient=notify, pin=int(P.ids["pin"][s]),
                    process_name=ns, program_file_name=str(P.ids["program_file_name"][s]),
                )  # fmt: skip
                self.ns_slot[ns], self.ns_proc[ns] = slot, s
                if notify:
                    hooks.entity_started("ossns", slot, at)

    def _stop_sql(self, P: Any, at: int) -> None:
        """The SQLSTMT and SQLPROC elements of the processes that stopped."""
        for T, first, count in ((self.SS, self.p_ss, self._nstmt), (self.SP, self.p_sp, None)):
            gone = np.flatnonzero((first[: P.n] >= 0) & ~P.alive[: P.n])
            for s in gone.tolist():
                k = count(s) if count is not None else 1
                for slot in range(int(first[s]), int(first[s]) + k):
                    T.alive[slot] = False
                    self.node.hooks.entity_stopped(T.name, slot, at)
                first[s] = -1

    def _nstmt(self, s: int) -> int:
        return int(self._sc_stmt[self.p_cls[s]]["prob"].size)

    def _add(self, s: int, at: int, notify: bool) -> None:
        node = self.node
        P = node.tables["process"]
        self.p_ipu[s] = self.p_prev[s] = int(P.ids["pin"][s]) % self.n_ipu
        prog = str(P.ids["program_file_name"][s])
        self.p_oss[s] = prog.startswith("/")
        proc = node.topo.processes[int(node.p_topo[s])]
        sql = self.sql_sc.get(proc.group) if proc.role == "server" else None
        if sql is None:
            return
        cpu = int(P.cpu[s])
        ids = {"pin": int(P.ids["pin"][s]), "process_name": str(P.ids["process_name"][s]),
               "program_file_name": prog}  # fmt: skip
        transient = bool(notify or proc.dynamic)
        self.p_sp[s] = self.SP.add(
            cpu=cpu, at_us=at, transient=transient, **ids, priority=int(P.ids["priority"][s])
        )
        self.sp_proc = np.append(self.sp_proc, s)
        self.sp_new = np.append(self.sp_new, True)
        started = [("sqlproc", int(self.p_sp[s]))]
        self.p_ss[s] = self.SS.n
        self.p_cls[s] = self.sql_names.index(proc.group)
        self.ss_spec = np.vstack([self.ss_spec, self._sc_stmt[self.p_cls[s]]["spec"]])
        for st in sql["statements"]:
            slot = self.SS.add(cpu=cpu, at_us=at, transient=transient, **ids,
                               module_name=sql["module"], statement_index=st["index"])  # fmt: skip
            self.ss_proc = np.append(self.ss_proc, s)
            started.append(("sqlstmt", slot))
        self._grow_ss(self.SS.n)
        if notify:
            for e, slot in started:
                node.hooks.entity_started(e, slot, at)

    # ------------------------------------------------------------------ IPUs
    def _assign(self, out: dict | None, t1: int, W: int) -> None:
        """This step's IPU of every process and the IPU shares of every CPU (once a step)."""
        if self._share_at == t1:
            return
        self._share_at = t1
        node = self.node
        P = node.tables["process"]
        n, ni, ncpu = P.n, self.n_ipu, node.topo.n_cpus
        pb = np.zeros(n)
        o = out.get("process") if out else None
        if o is not None:
            pb[:] = o[0][:n, self.pc["CPU-BUSY-TIME"]] * ni
        oc = out.get("cpu") if out else None
        cb = np.zeros(ncpu)
        if oc is not None:
            cb[:] = oc[0][:ncpu, self.cc["CPU-BUSY-TIME"]] * ni
        alive = P.alive[:n]
        ran = np.flatnonzero(alive & (pb > 0))
        # the dispatcher's moves: a few processes that ran go to another IPU
        mv = ran[self.rng.random(ran.size) < MIGRATE_P]
        if mv.size:
            new = (self.p_ipu[mv] + self.rng.integers(1, ni, mv.size)) % ni
            self._move(mv, new)
        cpu = P.cpu[:n]
        load = np.zeros((ncpu, ni))
        np.add.at(load, (cpu[ran], self.p_ipu[ran]), pb[ran])
        load[:, 0] += np.clip(cb - load.sum(axis=1), 0, None)  # interrupts etc.: IPU 0
        mean = load.mean(axis=1)
        for c in np.flatnonzero(load.max(axis=1) > np.minimum(W, REBALANCE * mean)).tolist():
            for _ in range(ni * 4):  # the busiest process of a too busy IPU to the least busy
                hi, lo = int(np.argmax(load[c])), int(np.argmin(load[c]))
                if load[c, hi] <= min(W, REBALANCE * mean[c]):
                    break
                on = ran[(cpu[ran] == c) & (self.p_ipu[ran] == hi)]
                if on.size == 0:
                    break
                j = on[np.argmax(pb[on])]
                if load[c, lo] + pb[j] >= load[c, hi]:
                    break
                self._move(np.array([j]), np.array([lo]))
                load[c, hi] -= pb[j]
                load[c, lo] += pb[j]
        tot = load.sum(axis=1, keepdims=True)
        share = np.full((ncpu, ni), 1.0 / ni)
        np.divide(load, tot, out=share, where=tot > 0)
        self._share = share

    def _move(self, procs: np.ndarray, to: np.ndarray) -> None:
        self.p_prev[procs] = self.p_ipu[procs]
        self.p_ipu[procs] = to
        self.p_sw[procs] += 1

    def _cpu_rows(self, slots: np.ndarray, acc: np.ndarray, lev: np.ndarray, peak: np.ndarray,
                  W: int) -> None:  # fmt: skip
        ni = self.n_ipu
        assert self._share is not None
        sh = self._share[self.node.tables["cpu"].cpu[slots]]
        for name in _CPU_TIMES:
            c = self.cc[name]
            for a in (acc, lev, peak):
                a[:, c] *= ni
        cb = self.cc["CPU-BUSY-TIME"]
        acc[:, self.c_ipu_busy] = _fill_exact(acc[:, cb], sh, float(W))
        lev[:, self.c_ipu_busy] = lev[:, cb][:, None] * sh
        peak[:, self.c_ipu_busy] = lev[:, self.c_ipu_busy]
        acc[:, self.c_ipu_disp] = _split_int(acc[:, self.cc["DISPATCHES"]], sh)
        cq = self.cc["CPU-QTIME"]
        acc[:, self.c_ipu_q] = _fill_exact(acc[:, cq], sh, None)
        lev[:, self.c_ipu_q] = lev[:, cq][:, None] * sh
        peak[:, self.c_ipu_q] = np.maximum(peak[:, cq][:, None] * sh, lev[:, self.c_ipu_q])
        lev[:, self.cc["IPUS"]] = ni
        peak[:, self.cc["IPUS"]] = ni

    # ------------------------------------------------------------------ SQL
    def _bump_sql(self, out: dict | None, t1: int) -> None:
        node = self.node
        SS, SP = self.SS, self.SP
        n = SS.n
        self._grow_ss(n)
        calls, elapsed = self._calls[:n].copy(), self._elapsed[:n].copy()
        self._calls[:] = 0.0
        self._elapsed[:] = 0.0
        e = SS.entity
        spec = {k: self.ss_spec[:n, j] for j, k in enumerate(("rows", "used", "messages", "sorts"))}
        reads = self._disc_reads(out, calls * spec["rows"])
        ms = SS.measured_slots()
        if ms.size:
            acc = np.zeros((ms.size, SS.n_counters))
            acc[:, e.index("CALLS")] = calls[ms]
            acc[:, e.index("ELAPSED-BUSY-TIME")] = elapsed[ms]
            acc[:, e.index("RECORDS-ACCESSED")] = calls[ms] * spec["rows"][ms]
            acc[:, e.index("RECORDS-USED")] = calls[ms] * spec["used"][ms]
            acc[:, e.index("MESSAGES")] = calls[ms] * spec["messages"][ms]
            acc[:, e.index("MESSAGE-BYTES")] = calls[ms] * spec["messages"][ms] * _MSG_BYTES
            acc[:, e.index("SORTS")] = calls[ms] * spec["sorts"][ms]
            acc[:, e.index("DISC-READS")] = reads[ms]
            z = np.zeros_like(acc)
            node.hooks.xctr("sqlstmt", ms, SS.xptr[ms], acc, z, z.copy(), t1)
        msp = SP.measured_slots()
        new = msp[self.sp_new[msp]]
        self.sp_new[SP.alive[: SP.n] & (SP.xptr[: SP.n] >= 0)] = False
        if msp.size:
            acc = np.zeros((msp.size, SP.n_counters))
            for i, sl in enumerate(msp.tolist()):
                if sl not in new:
                    continue
                sql = self.sql_sc[self.sql_names[self.p_cls[self.sp_proc[sl]]]]
                opens = len({s["table"] for s in sql["statements"]})
                acc[i, SP.entity.index("OPENS")] = opens
                acc[i, SP.entity.index("OPEN-TIME")] = opens * sql["open_ms"] * 1000.0
            z = np.zeros_like(acc)
            node.hooks.xctr("sqlproc", msp, SP.xptr[msp], acc, z, z.copy(), t1)

    def _disc_reads(self, out: dict | None, weight: np.ndarray) -> np.ndarray:
        """Per sqlstmt slot, its share of its process's FILE DISC-READS on its table."""
        node = self.node
        n = self.SS.n
        reads = np.zeros(n)
        o = out.get("file") if out else None
        F = node.tables["file"]
        c = F.entity.index("DISC-READS")
        alive = np.flatnonzero(self.SS.alive[:n])
        files = self.ss_spec[alive, 4].astype(np.int64)
        keys: dict[tuple[int, int], list[int]] = {}
        for sl, f in zip(alive.tolist(), files.tolist(), strict=True):
            keys.setdefault((int(self.ss_proc[sl]), f), []).append(sl)
        for (p, f), sls in keys.items():
            fs = int(node.fo[p, f]) if p < node.fo.shape[0] else -1
            r = self.read_carry.pop((p, f), 0.0)
            if o is not None and fs >= 0:
                r += float(o[0][fs, c])
            if r <= 0:
                continue
            w = weight[sls][None, :]
            if w.sum() <= 0:
                self.read_carry[(p, f)] = r
                continue
            reads[sls] = _split_int(np.array([r]), w)[0]
        return reads

    # ------------------------------------------------------------------ DISKFILE
    def _bump_diskfile(self, out: dict | None, t0: int, t1: int, W: int) -> None:
        DF = self.DF
        ms = DF.measured_slots()
        if ms.size == 0:
            return
        node = self.node
        D = node.tables["discopen"]
        n = D.n
        if self.dop_part.size < n:
            names = D.ids["file_name"][self.dop_part.size : n]
            self.dop_part = np.append(
                self.dop_part, np.array([self.part_of_name.get(x, -1) for x in names], np.int64)
            )
        part = self.dop_part[:n]
        npart = len(self.df_slot)
        ok = part >= 0
        e, de = DF.entity, D.entity
        acc = np.zeros((npart, DF.n_counters))
        o = out.get("discopen") if out else None
        if o is not None:
            for dst, src in _DISKFILE_FROM:
                acc[:, e.index(dst)] = np.bincount(
                    part[ok], weights=o[0][:n][ok, de.index(src)], minlength=npart
                )
        alive = D.alive[:n] & ok
        opens = np.bincount(part[alive], minlength=npart).astype(float)
        new = ok & D.transient[:n] & (D.started_us[:n] >= t0) & (D.started_us[:n] < t1)
        acc[:, e.index("TRANSIENT-OPENS")] = np.bincount(part[new], minlength=npart)
        acc[:, e.index("OPEN-QTIME")] = opens * W
        lev = self.df_snap.copy()
        lev[:, e.index("OPEN-QTIME")] = opens
        idx = np.array(self.df_slot, dtype=np.int64)
        sel = np.flatnonzero(np.isin(idx, ms))
        sl = idx[sel]
        node.hooks.xctr("diskfile", sl, DF.xptr[sl], acc[sel], lev[sel], lev[sel].copy(), t1)

    # ------------------------------------------------------------------ SERVERNET
    def _bump_servernet(self, out: dict | None, t1: int, W: int) -> None:
        SN = self.SN
        ms = SN.measured_slots()
        if ms.size == 0:
            return
        node = self.node
        topo = node.topo
        D = node.tables["disc"]
        de, e = D.entity, SN.entity
        ncpu = topo.n_cpus
        per_cpu = np.zeros((ncpu, 4))  # reads, writes, input bytes, output bytes
        o = out.get("disc") if out else None
        if o is not None:
            prim = np.arange(0, 2 * len(topo.volumes), 2)
            c = D.cpu[prim]
            for k, name in enumerate(("READS", "WRITES", "INPUT-BYTES", "OUTPUT-BYTES")):
                np.add.at(per_cpu[:, k], c, o[0][prim, de.index(name)])
        nf = len(self.sn["fabrics"])
        rate = self.sn["mbytes_per_s"]  # bytes per µs
        ovh = self.sn["overhead_us"]
        slots, rows = [], []
        for cpu in range(ncpu):
            tot = np.rint(per_cpu[cpu]).astype(np.int64)
            first = (tot + self._parity) // 2 if nf == 2 else tot
            for f, sl in enumerate(self.sn_slot[cpu]):
                if not (SN.alive[sl] and SN.xptr[sl] >= 0):
                    continue
                r, w, ib, ob = (first if f == 0 else tot - first).astype(float)
                a = np.zeros(SN.n_counters)
                rq, wq = r * ovh + ib / rate, w * ovh + ob / rate
                for name, v in (("READ-REQUESTS", r), ("WRITE-REQUESTS", w), ("REQUESTS", r + w),
                                ("ACKS", r + w), ("READ-BYTES", ib), ("WRITE-BYTES", ob),
                                ("TOTAL-IO-BYTES", ib + ob), ("READ-CBYTES", r * _CBYTES),
                                ("WRITE-CBYTES", w * _CBYTES), ("READ-QTIME", rq),
                                ("WRITE-QTIME", wq), ("IO-QTIME", rq + wq),
                                ("READ-QBUSY-TIME", min(rq, W)),
                                ("WRITE-QBUSY-TIME", min(wq, W))):  # fmt: skip
                    a[e.index(name)] = v
                slots.append(sl)
                rows.append(a)
        self._parity ^= 1
        if slots:
            sa = np.array(slots, dtype=np.int64)
            acc = np.array(rows)
            z = np.zeros_like(acc)
            node.hooks.xctr("servernet", sa, SN.xptr[sa], acc, z, z.copy(), t1)

    # ------------------------------------------------------------------ OSS
    def _bump_oss(self, t1: int, W: int) -> None:
        node = self.node
        P = node.tables["process"]
        n = P.n
        ncpu = node.topo.n_cpus
        oss = self.p_oss[:n] & P.alive[:n]
        cpu = P.cpu[:n]
        busy = np.bincount(cpu[oss], weights=self.p_busy[:n][oss], minlength=ncpu)
        msgs = np.bincount(cpu[oss], weights=self.p_msgs[:n][oss], minlength=ncpu)
        nproc = np.bincount(cpu[oss], minlength=ncpu).astype(float)
        want = self._lookup_carry + msgs * float(self.oss["lookups_per_message"])
        calls = np.floor(want + 1e-9)
        self._lookup_carry = want - calls
        OC = self.OC
        ms = OC.measured_slots()
        if ms.size:
            e = OC.entity
            c = OC.cpu[ms]
            acc = np.zeros((ms.size, OC.n_counters))
            lev = np.zeros_like(acc)
            acc[:, e.index("OSS-BUSY-TIME")] = busy[c]
            acc[:, e.index("PIPE-MESSAGES")] = msgs[c]
            acc[:, e.index("OSS-FILE-CALLS")] = calls[c]
            lev[:, e.index("OSS-PROCESSES-START")] = nproc[c]
            lev[:, e.index("OSS-PROCESSES-END")] = nproc[c]
            node.hooks.xctr("osscpu", ms, OC.xptr[ms], acc, lev, lev.copy(), t1)
        self._bump_ossns(int(calls.sum()), t1)

    def _bump_ossns(self, lookups: int, t1: int) -> None:
        ON = self.ON
        live = [self.ns_slot[ns] for ns in self.ns_names if ns in self.ns_slot]
        if not live:
            return
        k = len(live)
        share = np.full(k, lookups // k)
        share[(self._ns_turn + np.arange(lookups % k)) % k] += 1
        self._ns_turn = (self._ns_turn + lookups) % k
        e = ON.entity
        svc = float(np.mean([v["service_us"] for v in self.node.topo.volumes]))
        slots, rows = [], []
        for sl, nl in zip(live, share.tolist(), strict=True):
            lc_hits = int(self.rng.binomial(nl, self.oss["name_cache_hit"])) if nl else 0
            ic = nl - lc_hits
            ic_hits = int(self.rng.binomial(ic, self.oss["inode_cache_hit"])) if ic else 0
            dd = ic - ic_hits
            if not (ON.alive[sl] and ON.xptr[sl] >= 0):
                continue
            a = np.zeros(ON.n_counters)
            for name, v in (("RR-PROCESSED", nl), ("LC-LOOKUPS", nl), ("LC-HITS", lc_hits),
                            ("IC-LOOKUPS", ic), ("IC-HITS", ic_hits), ("DP2-DD-REQS", dd),
                            ("DP2-MESSAGES", dd), ("DP2-MSG-QTIME", dd * svc)):  # fmt: skip
                a[e.index(name)] = v
            slots.append(sl)
            rows.append(a)
        if slots:
            s = np.array(slots, dtype=np.int64)
            acc = np.array(rows)
            z = np.zeros_like(acc)
            self.node.hooks.xctr("ossns", s, ON.xptr[s], acc, z, z.copy(), t1)
