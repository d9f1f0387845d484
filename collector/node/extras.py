"""USERDEF, PROCESSH and DEVICE entities of the simulated node.

The engine (:mod:`collector.node.engine`) produces CPU, PROCESS, FILE, DISCOPEN, DISC, LINE,
NETLINE, SYSTEM, CLUSTER, TERMINAL and TMF counters. This module adds the remaining 1986
entity types from what the engine already computes. Its inputs are engine-neutral:
:meth:`Extras.requests_done` (server slot and response time of each request replied to),
:meth:`Extras.blocks_done` (batch blocks completed) and :meth:`Extras.after_step` (the step's
per-entity contributions, optionally the requests in flight). The engine touches it at three
points: construction at the end of ``Node.__init__``, ``requests_done``/``blocks_done`` when
transactions finish (``Node._complete``, from :func:`collector.node.des.complete`: ``k0``,
``k1`` and ``is_batch`` below say where a type's request starts and ends), ``after_step`` at
the end of every step.

USERDEF (user-defined counters of application servers)
    Every PATHWAY server process gets one element per user counter its server class declares
    (node file ``pathway.server_classes[].user_counters``; default Figure 3's pair
    ``RESP-TIME`` QUEUE and ``THROUGHPUT`` ACCUM), INDEX 0, identified by cpu, pin,
    process_name, program_file_name, name, index. A server *request* spans its $RECEIVE
    span: from the arrival at the transaction's first server visit to the departure of its
    last one (the reply). For each request replied to, ``transactions`` counters
    (ACCUM/FACCUM) add 1 and ``response`` counters (QUEUE) add its response time in µs, so
    RESP-TIME ÷ THROUGHPUT over any interval is exactly the mean server response of the
    requests counted in it. Summed over requests this is the integral of the number of
    requests in flight (Little's law), bumped whole when the request is counted, like the
    engine's TMF lifetimes; the level is the number of requests in flight (first server
    visit reached, reply not yet sent) at the step end, the peak the larger of the levels at
    the step's start and end. With the vectorised engine a request is counted in the step its
    transaction completes, its span taken on the transaction's own clock (Σ of sojourns, as
    the engine's response times). Elements start and stop with their process (dynamic
    servers, CPU failures).

PROCESSH (program-counter sampling)
    Every process gets one element per code range of its program file (node file
    ``processh.programs``, else ``processh.default``: a few named procedures), identified by
    cpu, pin, program_file_name, code_space, code_range. The program counter of a busy process
    is sampled at ``processh.rate_hz`` (default 100 samples per second of CPU-busy time):
    a process's samples in a step are ``floor((carry + CPU-BUSY-TIME) / period)`` (the
    remainder carries over, so its samples over any span are busy × rate rounded down), drawn
    over its code ranges by weight (multinomial, from a Generator spawned from the node's, so
    a seed gives the same samples). Counters: PROCESS-BUSY-SAMPLES (the process's samples),
    CODE-SPACE-BUSY-SAMPLES (its samples in the element's code space), CODE-RANGE-BUSY-SAMPLES
    and TNS-BUSY-SAMPLES (the element's; 1986 processors run TNS code only, so ACCEL and TNSR
    are 0). Busy times come from the step's PROCESS contributions, which the engine computes
    when at least one PROCESS is measured: measure the processes whose code ranges you
    sample (MEASURE does the same for USERDEF processes).

DEVICE (tape drives)
    Node file ``tapes:``; each block a user batch job completes is one tape I/O (``op:
    write`` for a copy that writes its output to tape, ``read`` for a sort that reads its
    runs) of ``block_bytes``, served FCFS by the drive in ``overhead_ms`` + bytes ÷
    ``speed_kbs`` and arriving when the block completes. Counters: REQUESTS (at arrival),
    READS/WRITES and INPUT-/OUTPUT-BYTES (at completion), READ-/WRITE-QTIME (time in the
    drive's queue incl. service), their QLEN-MAX, READ-/WRITE-QBUSY-TIME and
    DEVICE-QBUSY-TIME (time at least one such I/O was queued or active),
    READ-/WRITE-BUSY-TIME (transfer time), DBIO-* 0. Identified by device_name, cpu and the
    PIN of the drive's I/O process (250, 251 … per CPU unless ``pin:`` is given; the I/O
    process itself is not a PROCESS entity).

Entities that come and go start (``entity_started``) before their first bump and stop
(``entity_stopped``) after their last one; a process's USERDEF and PROCESSH elements stop at
the end of the step in which the process stopped (after that step's bump) and start at the end
of the step in which it started.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Extras", "grow_fields", "user_counter_specs"]


def grow_fields(owner: Any, fields: tuple[tuple[str, Any], ...], cap: int) -> None:
    """Each per-slot array ``owner.<name>`` of ``fields`` (name, fill) grown to ``cap``
    slots, the new ones filled."""
    for name, fill in fields:
        old = getattr(owner, name)
        new = np.full(cap, fill, dtype=old.dtype)
        new[: old.size] = old
        setattr(owner, name, new)


def user_counter_specs(topo: Any) -> list[tuple[str, str, str]]:
    """(counter name, program file name, TYPE) for every user counter a node declares: what a
    default CONTAB needs (``ContabBuilder.add_counter(name, program, type)``) for USERDEF
    elements to be measured."""
    out: list[tuple[str, str, str]] = []
    for sc in topo.server_classes:
        prog = sc.get("program") or topo.processes[sc["first"]].program
        for uc in sc.get("user_counters", []):
            spec = (uc["name"], prog, uc["type"])
            if spec not in out:
                out.append(spec)
    return out


def _union(s: np.ndarray, e: np.ndarray) -> float:
    """Length of the union of intervals [s, e) sorted by s."""
    ok = e > s
    s, e = s[ok], e[ok]
    if s.size == 0:
        return 0.0
    prev = np.concatenate([[-np.inf], np.maximum.accumulate(e)[:-1]])
    return float(np.clip(e - np.maximum(s, prev), 0, None).sum())


def _peak(s: np.ndarray, e: np.ndarray, t1: int) -> float:
    """Most intervals [s, e) open at once (ends before starts at equal times); e > t1 = open."""
    if s.size == 0:
        return 0.0
    ends = e[e <= t1]
    tt = np.concatenate([s * 2 + 1, ends * 2])
    d = np.concatenate([np.ones(s.size), -np.ones(ends.size)])
    run = np.cumsum(d[np.argsort(tt, kind="stable")])
    return float(max(run.max(), 0.0))


class Extras:
    """USERDEF, PROCESSH and DEVICE entities of one node (see the module docstring)."""

    def __init__(self, node: Any) -> None:
        self.node = node
        topo = node.topo
        self.rng = node.rng.spawn(1)[0]  # a child stream: the node's own draws are unchanged
        T = node.tables
        self.U, self.H, self.D = T["userdef"], T["processh"], T["device"]
        self.c_tv = self.U.entity.index("TIME-VALUE")
        self.c_mv = self.U.entity.index("MAX-VALUE")
        self.c_busy = T["process"].entity.index("CPU-BUSY-TIME")
        # ---- transaction types: a server request starts on arrival at the first server visit
        # (k0: departure of the stage before it; -1 = the transaction's arrival) and ends with
        # the last server visit (k1; -1 = no server part)
        nt = len(node.types)
        self.k0 = np.full(max(nt, 1), -1, dtype=np.int64)
        self.k1 = np.full(max(nt, 1), -1, dtype=np.int64)
        self.is_batch = np.zeros(max(nt, 1), dtype=bool)
        for ti, tt in enumerate(node.types):
            roles = [s.role for s in tt.stages]
            srv = [k for k, r in enumerate(roles) if r == "server"]
            self.is_batch[ti] = tt.name.startswith("batch-")
            if not srv:
                continue
            self.k0[ti] = srv[0] - 1
            self.k1[ti] = srv[-1]
        # ---- user counters per server class, code ranges per program file
        self.sc_counters = {
            sc["name"]: list(sc.get("user_counters", [])) for sc in topo.server_classes
        }
        ph = topo.processh or {}
        self.period_us = 1e6 / float(ph.get("rate_hz", 100.0))
        self._ranges_default = ph.get("default") or [
            {"space": "UC", "range": "MAIN", "weight": 1.0}
        ]
        self._ranges_prog = dict(ph.get("programs", {}))
        self.groups: list[dict[str, Any]] = []  # one per distinct code-range list
        self._group_of: dict[str, int] = {}
        # ---- per userdef slot / processh slot / process slot
        self.ud_proc = np.zeros(0, dtype=np.int64)
        self.ud_resp = np.zeros(0, dtype=bool)
        self.ph_proc = np.zeros(0, dtype=np.int64)
        self._pcap = 0
        self.p_has = np.zeros(0, dtype=bool)
        self.p_ud = np.zeros(0, dtype=np.int64)  # first userdef slot
        self.p_nud = np.zeros(0, dtype=np.int64)
        self.p_ph = np.zeros(0, dtype=np.int64)  # first processh slot
        self.p_group = np.zeros(0, dtype=np.int64)
        self.carry_us = np.zeros(0)  # busy time not yet sampled
        self.lvl_prev = np.zeros(0)
        self._tp = np.zeros(0)  # this step: requests completed per server process
        self._rt = np.zeros(0)  # this step: Σ their response µs
        self._blocks: list[tuple[np.ndarray, np.ndarray]] = []  # batch blocks completed
        # cumulative, per process slot (tests and benchmarks; not MEASURE counters)
        self.served = np.zeros(0)
        self.response_us = np.zeros(0)
        self._seen_n = 0
        self._sync(node.now_us, notify=False)
        # ---- tapes
        self.tapes = list(topo.tapes)
        self.tape_slot = []
        for tp in self.tapes:
            self.tape_slot.append(
                self.D.add(cpu=tp["cpu"], at_us=node.now_us, device_name=tp["name"], pin=tp["pin"])
            )
        z = lambda: np.zeros(0, dtype=np.int64)
        self.tape_pending = [(z(), z(), z()) for _ in self.tapes]  # arrival, departure, op
        self.tape_free = [int(node.now_us) for _ in self.tapes]
        self.dc = {c.measure_name: c.position for c in self.D.entity.counters}

    # ------------------------------------------------------------------ engine entry points
    def requests_done(self, server: np.ndarray, response_us: np.ndarray) -> None:
        """Server requests replied to this step: the server process slot and the response
        time (µs) of each. Any engine can feed this (a $RECEIVE span per request)."""
        if server.size == 0:
            return
        n = self.node.tables["process"].n
        self._grow(n)
        self._tp[:n] += np.bincount(server, minlength=n)[:n]
        self._rt[:n] += np.bincount(server, weights=response_us.astype(float), minlength=n)[:n]

    def blocks_done(self, proc: np.ndarray, at_us: np.ndarray) -> None:
        """Batch blocks completed this step: the batch process slot and the time of each."""
        if proc.size and self.tapes:
            self._blocks.append((proc.astype(np.int64), at_us.astype(np.int64)))

    def after_step(
        self, t0: int, W: int, out: dict | None, inflight: np.ndarray | None = None
    ) -> None:
        """End of a step [t0, t0 + W): bump, then stop and start elements with their process.
        ``inflight``: requests in flight per process slot at the step end (computed from
        ``node.tx`` when not given)."""
        t1 = t0 + W
        self._grow(self.node.tables["process"].n)
        self._bump_userdef(t1, inflight)
        self._bump_processh(out, t1)
        self._bump_tapes(t0, t1)
        self._sync(t1, notify=True)

    # ------------------------------------------------------------------ elements
    def _grow(self, n: int) -> None:
        if n <= self._pcap:
            return
        cap = max(n, 2 * self._pcap, 64)
        fields = (
            ("p_has", False),
            ("p_ud", -1),
            ("p_nud", 0),
            ("p_ph", -1),
            ("p_group", -1),
            ("carry_us", 0.0),
            ("lvl_prev", 0.0),
            ("_tp", 0.0),
            ("_rt", 0.0),
            ("served", 0.0),
            ("response_us", 0.0),
        )
        grow_fields(self, fields, cap)
        self._pcap = cap

    def _group(self, program: str) -> int:
        key = program.upper()
        g = self._group_of.get(key)
        if g is not None:
            return g
        ranges = self._ranges_prog.get(key, self._ranges_default)
        sig = tuple((r["space"], r["range"], float(r["weight"])) for r in ranges)
        for gi, grp in enumerate(self.groups):
            if grp["sig"] == sig:
                self._group_of[key] = gi
                return gi
        w = np.array([r["weight"] for r in ranges], dtype=float)
        spaces = np.array([r["space"] for r in ranges], dtype=object)
        self.groups.append(
            {
                "sig": sig,
                "ranges": ranges,
                "p": w / w.sum(),
                "same_space": (spaces[:, None] == spaces[None, :]).astype(float),
            }
        )
        self._group_of[key] = len(self.groups) - 1
        return len(self.groups) - 1

    def _sync(self, at: int, notify: bool) -> None:
        """Stop the elements of stopped processes, create those of new processes."""
        node = self.node
        P = node.tables["process"]
        self._grow(P.n)
        hooks = node.hooks
        if notify:
            gone = np.flatnonzero(self.p_has[: P.n] & ~P.alive[: P.n])
            for s in gone.tolist():
                self.p_has[s] = False
                for T, first, k in (
                    (self.U, int(self.p_ud[s]), int(self.p_nud[s])),
                    (self.H, int(self.p_ph[s]), len(self.groups[self.p_group[s]]["ranges"])),
                ):
                    for slot in range(first, first + k) if first >= 0 else ():
                        T.alive[slot] = False
                        hooks.entity_stopped(T.name, slot, at)
        for s in range(self._seen_n, P.n):
            if P.alive[s]:
                self._add_elements(s, at, notify)
        self._seen_n = P.n

    def _add_elements(self, s: int, at: int, notify: bool) -> None:
        node = self.node
        P = node.tables["process"]
        proc = node.topo.processes[int(node.p_topo[s])]
        cpu = int(P.cpu[s])
        ids: dict[str, Any] = {
            "pin": int(P.ids["pin"][s]),
            "process_name": str(P.ids["process_name"][s]),
            "program_file_name": str(P.ids["program_file_name"][s]),
        }
        transient = bool(notify or proc.dynamic)
        started: list[tuple[str, int]] = []
        counters = self.sc_counters.get(proc.group, []) if proc.role == "server" else []
        self.p_ud[s], self.p_nud[s] = (self.U.n if counters else -1), len(counters)
        for uc in counters:
            slot = self.U.add(
                cpu=cpu, at_us=at, transient=transient, **ids, name=uc["name"], index=0
            )
            # indexed by USERDEF slot: the collector may add elements of processes outside
            # the node (MEASCOUNTERBUMPINIT over the API) in between; those stay -1 here
            if self.ud_proc.size <= slot:
                grow = slot + 1 - self.ud_proc.size
                self.ud_proc = np.append(self.ud_proc, np.full(grow, -1, dtype=np.int64))
                self.ud_resp = np.append(self.ud_resp, np.zeros(grow, dtype=bool))
            self.ud_proc[slot] = s
            self.ud_resp[slot] = uc["measures"] == "response"
            started.append(("userdef", slot))
        g = self._group(ids["program_file_name"])
        self.p_group[s] = g
        self.p_ph[s] = self.H.n
        for r in self.groups[g]["ranges"]:
            slot = self.H.add(
                cpu=cpu,
                at_us=at,
                transient=transient,
                pin=ids["pin"],
                program_file_name=ids["program_file_name"],
                code_space=r["space"],
                code_range=r["range"],
            )
            self.ph_proc = np.append(self.ph_proc, s)
            started.append(("processh", slot))
        self.p_has[s] = True
        self.carry_us[s] = 0.0
        self.lvl_prev[s] = 0.0
        if notify:
            for e, slot in started:
                node.hooks.entity_started(e, slot, at)

    # ------------------------------------------------------------------ USERDEF
    def _inflight(self, n: int) -> np.ndarray:
        """Requests received and not yet replied to, per server process slot."""
        node = self.node
        tx = node.tx
        typ = tx["type"]
        if typ.size == 0:
            return np.zeros(n)
        srv = tx["server"]
        rows = np.flatnonzero((self.k1[typ] >= 0) & (srv >= 0))
        if rows.size == 0:
            return np.zeros(n)
        k0 = self.k0[typ[rows]]
        k = tx["k"][rows]  # stages done (stage j is done when j < k)
        recv = (k0 < 0) | (k0 < k)
        fl = recv & (k <= self.k1[typ[rows]])
        return np.bincount(srv[rows][fl], minlength=n)[:n].astype(float)

    def _bump_userdef(self, t1: int, inflight: np.ndarray | None) -> None:
        n = self.node.tables["process"].n
        tp, rt = self._tp[:n].copy(), self._rt[:n].copy()
        self.served[:n] += tp
        self.response_us[:n] += rt
        self._tp[:] = 0.0
        self._rt[:] = 0.0
        U = self.U
        ms = U.measured_slots()
        ms = ms[ms < self.ud_proc.size]
        ms = ms[self.ud_proc[ms] >= 0]  # only the node's own servers' elements
        lvl = None
        if ms.size:
            lvl = np.zeros(n)
            if inflight is not None:
                k = min(n, inflight.size)
                lvl[:k] = inflight[:k]
            elif hasattr(type(self.node), "tx"):  # the engine's transaction rows
                lvl = self._inflight(n)
            p = self.ud_proc[ms]
            resp = self.ud_resp[ms]
            nc = U.n_counters
            acc, lev, peak = (np.zeros((ms.size, nc)) for _ in range(3))
            acc[:, self.c_tv] = np.where(resp, rt[p], tp[p])
            lev[:, self.c_tv] = np.where(resp, lvl[p], 0.0)
            peak[:, self.c_tv] = np.where(resp, np.maximum(self.lvl_prev[p], lvl[p]), 0.0)
            lev[:, self.c_mv] = lev[:, self.c_tv]
            peak[:, self.c_mv] = peak[:, self.c_tv]
            self.node.hooks.xctr("userdef", ms, U.xptr[ms], acc, lev, peak, t1)
        self.lvl_prev[:n] = lvl if lvl is not None else 0.0

    # ------------------------------------------------------------------ PROCESSH
    def _bump_processh(self, out: dict | None, t1: int) -> None:
        H = self.H
        ms = H.measured_slots()
        if ms.size == 0:
            return
        node = self.node
        n = node.tables["process"].n
        busy = np.zeros(n)
        o = out.get("process") if out else None
        if o is not None:
            b = o[0][:, self.c_busy]
            busy[: b.size] = b[:n]
        procs = np.unique(self.ph_proc[ms])
        tot = self.carry_us[procs] + busy[procs]
        k = np.floor(tot / self.period_us)
        self.carry_us[procs] = tot - k * self.period_us
        k = k.astype(np.int64)
        rng_s = np.zeros(H.n)  # samples per element (code range)
        spc_s = np.zeros(H.n)  # samples in the element's code space
        prc_s = np.zeros(n)  # samples of the process
        prc_s[procs] = k
        grp = self.p_group[procs]
        for g in np.unique(grp[k > 0]).tolist():
            sel = procs[(grp == g) & (k > 0)]
            G = self.groups[g]
            draws = self.rng.multinomial(prc_s[sel].astype(np.int64), G["p"])
            idx = self.p_ph[sel][:, None] + np.arange(G["p"].size)[None, :]
            rng_s[idx] = draws
            spc_s[idx] = draws @ G["same_space"]
        e = H.entity
        acc = np.zeros((ms.size, H.n_counters))
        acc[:, e.index("PROCESS-BUSY-SAMPLES")] = prc_s[self.ph_proc[ms]]
        acc[:, e.index("CODE-SPACE-BUSY-SAMPLES")] = spc_s[ms]
        acc[:, e.index("CODE-RANGE-BUSY-SAMPLES")] = rng_s[ms]
        acc[:, e.index("TNS-BUSY-SAMPLES")] = rng_s[ms]
        z = np.zeros_like(acc)
        node.hooks.xctr("processh", ms, H.xptr[ms], acc, z, z, t1)

    # ------------------------------------------------------------------ DEVICE (tapes)
    def _bump_tapes(self, t0: int, t1: int) -> None:
        if not self.tapes:
            return
        blocks, self._blocks = self._blocks, []
        P = self.node.tables["process"]
        if blocks:
            bproc = np.concatenate([b[0] for b in blocks])
            btime = np.clip(np.concatenate([b[1] for b in blocks]), t0, t1 - 1)
            bname = P.ids["process_name"][bproc]
        D = self.D
        dc = self.dc
        for ti, tp in enumerate(self.tapes):
            pa, pd, po = self.tape_pending[ti]
            na = np.zeros(0, dtype=np.int64)
            no = np.zeros(0, dtype=np.int64)
            if blocks:
                m = np.zeros(bname.size, dtype=bool)
                op = np.zeros(bname.size, dtype=np.int64)
                for pname, o in tp["users"].items():
                    hit = bname == pname
                    m |= hit
                    op[hit] = 1 if o == "write" else 0
                order = np.argsort(btime[m], kind="stable")
                na, no = btime[m][order], op[m][order]
            svc = round(tp["service_us"])
            # FCFS (Lindley) after the drive's backlog: d_i = max(a_i, d_{i-1}) + s
            if na.size:
                c = svc * np.arange(1, na.size + 1, dtype=np.int64)
                nd = c + np.maximum(np.maximum.accumulate(na - (c - svc)), self.tape_free[ti])
                self.tape_free[ti] = int(nd[-1])
            else:
                nd = np.zeros(0, dtype=np.int64)
            a = np.concatenate([pa, na])
            d = np.concatenate([pd, nd])
            o = np.concatenate([po, no])
            slot = self.tape_slot[ti]
            if D.alive[slot] and D.xptr[slot] >= 0 and a.size == 0:  # an idle drive: all 0
                sl = np.array([slot], dtype=np.int64)
                z = np.zeros((1, D.n_counters))
                self.node.hooks.xctr("device", sl, D.xptr[sl], z, z.copy(), z.copy(), t1)
            elif D.alive[slot] and D.xptr[slot] >= 0:
                acc = np.zeros(D.n_counters)
                lev = np.zeros(D.n_counters)
                peak = np.zeros(D.n_counters)
                done = d <= t1
                s = np.maximum(a, t0)
                e = np.minimum(d, t1)
                bs = np.maximum(d - svc, t0)
                acc[dc["REQUESTS"]] = na.size
                for code, rw, ctr, byts in (
                    (0, "READ", "READS", "INPUT-BYTES"),
                    (1, "WRITE", "WRITES", "OUTPUT-BYTES"),
                ):
                    k = o == code
                    nk = int((done & k).sum())
                    acc[dc[ctr]] = nk
                    acc[dc[byts]] = nk * tp["block_bytes"]
                    acc[dc[f"{rw}-QTIME"]] = float(np.clip(e[k] - s[k], 0, None).sum())
                    acc[dc[f"{rw}-QBUSY-TIME"]] = _union(s[k], e[k])
                    acc[dc[f"{rw}-BUSY-TIME"]] = float(np.clip(e[k] - bs[k], 0, None).sum())
                    q = float((d[k] > t1).sum())
                    lev[dc[f"{rw}-QTIME"]] = lev[dc[f"{rw}-QLEN-MAX"]] = q
                    lev[dc[f"{rw}-QBUSY-TIME"]] = float(q > 0)
                    lev[dc[f"{rw}-BUSY-TIME"]] = float(((d[k] - svc <= t1) & (d[k] > t1)).any())
                    peak[dc[f"{rw}-QTIME"]] = peak[dc[f"{rw}-QLEN-MAX"]] = max(
                        _peak(s[k], d[k], t1), q
                    )
                acc[dc["DEVICE-QBUSY-TIME"]] = _union(s, e)
                lev[dc["DEVICE-QBUSY-TIME"]] = float((d > t1).any())
                for col in (
                    "READ-QBUSY-TIME",
                    "WRITE-QBUSY-TIME",
                    "DEVICE-QBUSY-TIME",
                    "READ-BUSY-TIME",
                    "WRITE-BUSY-TIME",
                ):
                    peak[dc[col]] = lev[dc[col]]
                sl = np.array([slot], dtype=np.int64)
                self.node.hooks.xctr("device", sl, D.xptr[sl], acc[None], lev[None], peak[None], t1)
            keep = d > t1
            self.tape_pending[ti] = (a[keep], d[keep], o[keep])
