"""The node's compiled inner loop: an event-driven simulation of the transactions' visits.

Every transaction in the node is one row of an int64 state matrix (columns ``C_*`` below) and
has exactly one current visit (stage ``C_K``), which is either pending (it starts at
``C_EV``), at a station (queued, or in service with ``C_REM`` µs of work left) or in a pure
delay (ends at ``C_EV``). A visit starts when its predecessor ends, so a wait at one station
delays everything after it (the transaction's own clock is real time, not a sum of
independent sojourns). Stations are single servers: CPUs with preemptive-resume priority
classes (FCFS within a class), discs, line directions and Expand link directions (FCFS).

:func:`run_step` simulates the events in ``[t0, t1)`` in (time, row) order and turns every
visit that ends in the step, and every visit still in progress at ``t1``, into counter
contributions right away (``acc``/``lev``: flat per-entity counter arrays), so no per-visit
record outlives its event. It takes its inputs as named structures (:class:`Tables`, compiled
once by the engine; :class:`Procs` and :class:`StepOut`, per step) and reads as its stages:
seed the step's random stream, lay out the effect groups, rebuild the stations and the pending
events from the state matrix, run the event loop (:func:`_simulate`: per event the visit that
ends, :func:`_end_visit`, the transaction moving on, :func:`_move_on`, and the counter bumps,
:func:`_bump`). The queue state between steps lives entirely in the state matrix: stations
and the pending events (a tournament tree over the stations, a heap of delays, the sorted
arrivals) are rebuilt from it at the start of each call, which keeps
:class:`~collector.node.engine.Node` a plain picklable object of numpy arrays. The smaller
kernels do the engine's per-step bookkeeping: :func:`complete` (finished transactions),
:func:`recv_queue` ($RECEIVE waits), :func:`fill_rows` and :func:`compact` (arrivals in,
finished rows out), :func:`spread` and :func:`emit_levels` (the counter rows MEASURE gets).

Speed notes: numba increfs and decrefs (atomic operations) every array a function receives,
also each array of a tuple, which costs more than an event's work; so the functions of the
event loop are compiled without the runtime's reference counting (``_EVENT``: they allocate
nothing, :func:`run_step` allocates for them) and LLVM inlines them into the loop. The kernels
index with unsigned integers where they can (a signed index costs a negative-index wraparound
test each time).

Randomness comes from the node's ``np.random.Generator`` (numba draws from the same bit
generator), so a seed gives the same counters bit for bit.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import njit

# ---------------------------------------------------------------- model codes (shared)
K_CPU, K_DISC, K_LIN, K_LOUT, K_NOUT, K_NIN, K_DELAY = range(7)
N_CLASSES = 3
M_DONE, M_SKIP, M_SVC, M_SYS, M_RESP = range(5)
(
    R_NONE,
    R_TCP,
    R_SERVER,
    R_LH,
    R_HLS,
    R_TMP,
    R_PATHMON,
    R_CMON,
    R_DP2,
    R_SELF,
    R_OTHER,
) = range(11)
(
    S_PROC,
    S_CPU,
    S_OPENER,
    S_DP2CPU,
    S_DISC,
    S_FILE,
    S_DISCOPEN,
    S_TERMINAL,
    S_LINE,
    S_NETLINE,
    S_SYSTEM,
    S_CLUSTER,
    S_TMF,
    S_TCP,
    S_SERVER,
    S_LH,
    S_HLS,
    S_TCPCPU,
    S_X25LINE,
) = range(19)

# ------------------------------------------------------------- transaction state columns
TX_COLUMNS = (
    "type",
    "t_arr",
    "term",
    "line",
    "tcp",
    "server",
    "lh",
    "hls",
    "netline",
    "remote",
    "is_remote",
    "tmf_cpu",
    "t_begin",  # 1 while begun and not committed (TMF level)
    "k",  # current stage
    "ph",  # 0 pending (starts at ev), 1 at a station, 2 in a delay (ends at ev), 3 finished
    "ev",
    "varr",  # arrival of the current visit
    "rem",  # service left (at a station)
    "seq",  # FCFS order at the station
    "st",  # station
    "cl",  # priority class at the station
    "inserv",  # 1 = being served
    "proc",  # resolved process slot of the current visit (-1 none)
    "cpu",  # resolved CPU of the current visit
    "vol",
    "part",
    "sdone",  # service done within the current step
    "t_rd",  # departure of the read-done stage
    "t_rp",  # departure of the stage before the reply
    "t_bg",  # departure of the BEGIN stage
    "t_cm",  # departure of the commit stage
    "srv_a",  # arrival of the first server visit ($RECEIVE span)
    "t_done",
)
(
    C_TYPE,
    C_T_ARR,
    C_TERM,
    C_LINE,
    C_TCP,
    C_SERVER,
    C_LH,
    C_HLS,
    C_NETLINE,
    C_REMOTE,
    C_IS_REMOTE,
    C_TMF_CPU,
    C_T_BEGIN,
    C_K,
    C_PH,
    C_EV,
    C_VARR,
    C_REM,
    C_SEQ,
    C_ST,
    C_CL,
    C_INSERV,
    C_PROC,
    C_CPU,
    C_VOL,
    C_PART,
    C_SDONE,
    C_T_RD,
    C_T_RP,
    C_T_BG,
    C_T_CM,
    C_SRV_A,
    C_T_DONE,
) = range(len(TX_COLUMNS))
C_PART0 = len(TX_COLUMNS)  # then one column per I/O group: the file partition

# stage table columns (int64)
G_KIND, G_ROLE, G_ANCHOR, G_IO, G_DIST, G_BEGIN, G_COMMIT, G_REMOTE, G_EF0, G_EFN = range(10)
# type table columns
T_FIRST, T_N, T_RD, T_RP, T_BG, T_CM, T_SRV_FIRST, T_SRV_LAST = range(8)
# effect rows
E_ENT, E_SEL, E_CTR, E_MODE, E_LEV = range(5)
# stage flags: the stage ends the read (response starts), precedes the reply, is BEGIN, is the
# commit, is the last / first server visit ($RECEIVE span), is the type's last stage
SF_RD, SF_RP, SF_BG, SF_CM, SF_SRV_LAST, SF_SRV_FIRST, SF_LAST = 1, 2, 4, 8, 16, 32, 64


# ------------------------------------------------------------------------- event order
# Events are ordered by (time, row): a total order, so the event sequence does not depend on
# how the pending events are stored. Each pending event is one int64 key,
# (time - t0) << KEY_SHIFT | row, so one comparison orders two events.
KEY_SHIFT = 21
KEY_ROWS = 1 << KEY_SHIFT  # rows (transactions in the node) per step
KEY_MASK = KEY_ROWS - 1
KEY_SPAN = 1 << 41  # µs after t0 an event may lie (25 days)
KEY_NONE = np.iinfo(np.int64).max


# ------------------------------------------------------------ random numbers (scalars only)
@njit(cache=True, inline="always")
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@njit(cache=True, inline="always")
def _xoshiro(s0, s1, s2, s3):
    """xoshiro256+ step: (new state, uniform double in [0, 1))."""
    u = np.float64((s0 + s3) >> np.uint64(11)) * (1.0 / 9007199254740992.0)
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    return s0, s1, s2, s3, u


# ------------------------------------------------------------------------- effects
# record columns: one row per visit that ended in the event being processed (or is in progress
# at the step end); _bump turns the records into counter contributions after each event
Q_G, Q_I, Q_FLAGS, Q_DSVC, Q_SYSOV, Q_PROC, Q_CPU, Q_VOL, Q_PART = range(9)
F_COMPLETE, F_ACTIVE, F_EXEC, F_PRESENT = 1, 2, 4, 8
REC_CAP = 512

# compile options: the step's stages that run once per step, and the functions of the event
# loop, run per event: no reference counting there (see "Speed notes"; numba's ``_nrt``
# option, which its own register_jitable documents), so they cannot allocate (numba refuses
# to compile one that does)
_STEP: dict[str, Any] = dict(cache=True, nogil=True, error_model="numpy")
_EVENT: dict[str, Any] = dict(cache=True, nogil=True, error_model="numpy", _nrt=False)


# ------------------------------------------------------------------ the step's structures
# run_step takes its inputs as named tuples (numba compiles them as structures of arrays):
# a mismatch between the engine and the kernel is an error by name, not a shifted argument.
class Stages(NamedTuple):
    """One entry per stage (a visit of a transaction type), all types one after the other."""

    kind: np.ndarray  # K_* station kind (int64)
    io: np.ndarray  # I/O group of the visit, -1 none (int64)
    role: np.ndarray  # R_* process the visit runs in (int64)
    anchor: np.ndarray  # R_* process whose CPU a role-less visit uses (int64)
    dist: np.ndarray  # service distribution: 0 exp, 1 const, 2 U(0.5, 1.5), 3 U(0, 2) (int64)
    remote: np.ndarray  # 1: the visit happens for remote transactions only (int64)
    flags: np.ndarray  # SF_* (int64)
    mean: np.ndarray  # mean service (µs; disc: multiple of the volume's) (float64)
    prob: np.ndarray  # probability the visit happens (float64)
    nbytes: np.ndarray  # bytes a line or Expand visit moves (float64)
    q0: np.ndarray  # the stage's effect groups [q0, q1) (uint64)
    q1: np.ndarray


class Types(NamedTuple):
    """One entry per transaction type."""

    first: np.ndarray  # its first stage (int64)
    n: np.ndarray  # its number of stages (int64)


class Effects(NamedTuple):
    """Effect groups (one per stage, selector and entity: one slot lookup) and their rows."""

    sel: np.ndarray  # S_* selector of the group (int64)
    ent: np.ndarray  # entity of the group, index into the entity layout (int64)
    r0: np.ndarray  # its rows [r0, r1) (uint64)
    r1: np.ndarray
    ctr: np.ndarray  # per row: counter (position in the entity's compact layout) (uint64)
    mode: np.ndarray  # M_* weight of the visit the row adds (uint64)
    lev: np.ndarray  # 1: the row also counts the visit in the counter's level (uint64)
    amt: np.ndarray  # amount per unit of weight (float64)


class Devices(NamedTuple):
    """The node's stations and the resources transactions address (fixed for its life)."""

    n_cpu: int
    n_vol: int
    n_line: int
    n_net: int
    vol_service: np.ndarray  # mean physical I/O of each volume (µs)
    line_speed: np.ndarray  # bits per second of each line
    net_speed: np.ndarray  # and of each Expand line
    part_vol: np.ndarray  # volume of each file partition
    file_of_part: np.ndarray  # file of each partition
    line_x25: np.ndarray  # 1: the line is X.25 (int64)
    remote_cluster: np.ndarray  # CLUSTER slot of each remote system, -1 none


class Tables(NamedTuple):
    """What the engine compiles once from the node and its workloads."""

    stages: Stages
    types: Types
    effects: Effects
    devices: Devices
    dep0: int  # column of the state matrix with the first stage's departure


class Procs(NamedTuple):
    """Processes and CPUs: change when processes start or stop and CPUs fail."""

    cpu: np.ndarray  # CPU of each process slot
    cls: np.ndarray  # priority class of each process slot
    cpu_map: np.ndarray  # CPU that does the work of each CPU (its backup after a failure)
    vol_dp2: np.ndarray  # disc process (primary) of each volume
    tmf_by_cpu: np.ndarray  # TMF monitor process of each CPU
    mon_by_cpu: np.ndarray  # first "other" (MEASCTL) process of each CPU
    pathmon: int  # PATHMON process slot, -1 none
    cmon: int  # CMON process slot, -1 none
    fo: np.ndarray  # FILE slot of [process slot, file], -1 not open
    dop: np.ndarray  # DISCOPEN slot of [process slot, partition], -1 not open


class StepOut(NamedTuple):
    """One step's entity layout and what the step writes."""

    ent_off: np.ndarray  # per entity: its first value in acc/lev
    ent_nc: np.ndarray  # its counters per slot (the compact layout)
    ent_n: np.ndarray  # its slots
    ent_soff: np.ndarray  # its first flag in measured
    measured: np.ndarray  # per slot of every entity: bumped or not (bool)
    acc: np.ndarray  # contributions (float64)
    lev: np.ndarray  # levels at the step end (float64)
    st_peak: np.ndarray  # most visits at each station (int64)
    opens: np.ndarray  # per process slot: transactions begun (dynamic file opens), or empty
    spans: np.ndarray  # $RECEIVE spans ended in the step: (server, first arrival, reply)


_I8, _U8, _F8, _B1 = np.dtype(np.int64), np.dtype(np.uint64), np.dtype(np.float64), np.dtype(bool)
# per structure and field: (dtype, dimensions) of an array, or int for a scalar. numba would
# compile another version of the step for another dtype (and mixing signed and unsigned
# integers changes its arithmetic), so the engine checks what it passes (check()).
_LAYOUT: dict[type, dict[str, Any]] = {
    Stages: dict(kind=(_I8, 1), io=(_I8, 1), role=(_I8, 1), anchor=(_I8, 1), dist=(_I8, 1),
                 remote=(_I8, 1), flags=(_I8, 1), mean=(_F8, 1), prob=(_F8, 1),
                 nbytes=(_F8, 1), q0=(_U8, 1), q1=(_U8, 1)),
    Types: dict(first=(_I8, 1), n=(_I8, 1)),
    Effects: dict(sel=(_I8, 1), ent=(_I8, 1), r0=(_U8, 1), r1=(_U8, 1), ctr=(_U8, 1),
                  mode=(_U8, 1), lev=(_U8, 1), amt=(_F8, 1)),
    Devices: dict(n_cpu=int, n_vol=int, n_line=int, n_net=int, vol_service=(_F8, 1),
                  line_speed=(_F8, 1), net_speed=(_F8, 1), part_vol=(_I8, 1),
                  file_of_part=(_I8, 1), line_x25=(_I8, 1), remote_cluster=(_I8, 1)),
    Tables: dict(stages=Stages, types=Types, effects=Effects, devices=Devices, dep0=int),
    Procs: dict(cpu=(_I8, 1), cls=(_I8, 1), cpu_map=(_I8, 1), vol_dp2=(_I8, 1),
                tmf_by_cpu=(_I8, 1), mon_by_cpu=(_I8, 1), pathmon=int, cmon=int,
                fo=(_I8, 2), dop=(_I8, 2)),
    StepOut: dict(ent_off=(_I8, 1), ent_nc=(_I8, 1), ent_n=(_I8, 1), ent_soff=(_I8, 1),
                  measured=(_B1, 1), acc=(_F8, 1), lev=(_F8, 1), st_peak=(_I8, 1),
                  opens=(_I8, 1), spans=(_I8, 2)),
}  # fmt: skip


def check(x: object) -> None:  # Tables, Procs, StepOut and their parts (_LAYOUT)
    """Raise TypeError, naming the field, if a structure for :func:`run_step` holds an
    array of another dtype or number of dimensions, or a non-integer scalar."""
    for name, want in _LAYOUT[type(x)].items():
        v = getattr(x, name)
        where = f"{type(x).__name__}.{name}"
        if isinstance(want, type) and want in _LAYOUT:
            if not isinstance(v, want):
                raise TypeError(f"{where} must be a des.{want.__name__}, not {type(v).__name__}")
            check(v)
        elif want is int:
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise TypeError(f"{where} must be an integer, not {type(v).__name__}")
        elif not isinstance(v, np.ndarray) or (v.dtype, v.ndim) != want:
            got = (
                f"{v.dtype} array of {v.ndim} dimensions"
                if isinstance(v, np.ndarray)
                else type(v).__name__
            )
            raise TypeError(f"{where} must be a {want[0]} array of {want[1]} dimensions, not {got}")


# the kernel's own working structures (built inside the step)
class _Layout(NamedTuple):  # each effect group's entity in acc, for this step
    n: np.ndarray  # slots
    soff: np.ndarray  # first measured flag
    off: np.ndarray  # first value
    nc: np.ndarray  # values per slot


class _Stations(NamedTuple):  # single servers with N_CLASSES FCFS queues each
    run: np.ndarray  # row in service, -1 idle
    seg: np.ndarray  # start of the running visit's current service segment
    cnt: np.ndarray  # visits at the station (queued or in service)
    qhead: np.ndarray  # per (station, class): first and last queued row, -1 empty
    qtail: np.ndarray
    qnext: np.ndarray  # per row: the next row in its queue


class _Scratch(NamedTuple):  # what the event loop writes and reads back at once
    rec: np.ndarray  # the visits recorded by an event (columns Q_*)
    wv: np.ndarray  # a visit's weight per mode (resp rows weigh like sys rows)
    lv: np.ndarray  # and its level per mode (svc: executing; others: present)


class _Events(NamedTuple):  # pending events, ordered by key (see "event order")
    tree: np.ndarray  # tournament tree of the stations' completions (leaves from tp)
    tp: int
    dheap: np.ndarray  # binary heap of the ends of pure delays, dn entries
    dn: int
    akey: np.ndarray  # sorted starts of pending visits (arrivals, mostly)


# --------------------------------------------------------------------------- the step
@njit(**_STEP)
def run_step(t0, t1, rng, txm, seqc, tables, procs, out):
    """Simulate [t0, t1) for the transactions in ``txm``: their events in (time, row) order,
    then the visits in progress at ``t1``; contributions to ``out.acc``/``out.lev``. Returns
    the number of $RECEIVE spans written to ``out.spans``."""
    rs = _seed(rng)
    lay = _group_layout(tables.effects, out)
    sta = _stations(t0, txm, tables.devices, out.st_peak)
    ev = _pending(t0, txm, sta)
    wk = _scratch(tables.types)
    nspan, sqc = _simulate(t0, t1, rs, txm, seqc[0], tables, procs, out, lay, sta, ev, wk)
    seqc[0] = sqc  # FCFS order at the stations, kept across steps
    return nspan


@njit(**_STEP)
def _seed(rng):
    """The step's own xoshiro256+ stream, seeded from the node's Generator (4 draws)."""
    r0 = np.uint64(rng.integers(1, 2**63))
    r1 = np.uint64(rng.integers(1, 2**63))
    r2 = np.uint64(rng.integers(1, 2**63))
    r3 = np.uint64(rng.integers(1, 2**63))
    return (r0, r1, r2, r3)


@njit(**_STEP)
def _group_layout(effects, out):
    """Each effect group's entity layout in acc for this step."""
    nqg = effects.ent.size
    lay = _Layout(
        np.empty(nqg, dtype=np.int64),
        np.empty(nqg, dtype=np.int64),
        np.empty(nqg, dtype=np.int64),
        np.empty(nqg, dtype=np.int64),
    )
    for q in range(nqg):
        e = effects.ent[q]
        lay.n[q] = out.ent_n[e]
        lay.soff[q] = out.ent_soff[e]
        lay.off[q] = out.ent_off[e]
        lay.nc[q] = out.ent_nc[e]
    return lay


@njit(**_STEP)
def _stations(t0, txm, dev, st_peak):
    """The stations rebuilt from the state matrix: runners, queues in FCFS order (``C_SEQ``),
    counts (which raise the stations' peaks)."""
    ntx = txm.shape[0]
    n_st = dev.n_cpu + dev.n_vol + 2 * dev.n_line + 2 * dev.n_net
    run = np.full(n_st, -1, dtype=np.int64)
    seg = np.zeros(n_st, dtype=np.int64)
    cnt = np.zeros(n_st, dtype=np.int64)
    qhead = np.full(n_st * N_CLASSES, -1, dtype=np.int64)
    qtail = np.full(n_st * N_CLASSES, -1, dtype=np.int64)
    qnext = np.full(max(ntx, 1), -1, dtype=np.int64)
    nq = 0
    for i in range(ntx):
        txm[i, C_SDONE] = 0
        ph = txm[i, C_PH]
        if ph == 1:
            s = txm[i, C_ST]
            cnt[s] += 1
            if txm[i, C_INSERV] != 0:
                run[s] = i
                seg[s] = t0
            else:
                nq += 1
    if nq:
        qi = np.empty(nq, dtype=np.int64)
        qs = np.empty(nq, dtype=np.int64)
        j = 0
        for i in range(ntx):
            if txm[i, C_PH] == 1 and txm[i, C_INSERV] == 0:
                qi[j] = i
                qs[j] = txm[i, C_SEQ]
                j += 1
        order = np.argsort(qs)
        for jj in range(nq):
            i = qi[order[jj]]
            q = txm[i, C_ST] * N_CLASSES + txm[i, C_CL]
            if qtail[q] < 0:
                qhead[q] = i
            else:
                qnext[qtail[q]] = i
            qtail[q] = i
    for s in range(n_st):
        st_peak[s] = max(st_peak[s], cnt[s])
    return _Stations(run, seg, cnt, qhead, qtail, qnext)


@njit(**_STEP)
def _scratch(types):
    """The event loop's scratch arrays (it allocates nothing itself)."""
    if types.n.max() + 2 > REC_CAP:
        raise ValueError("a transaction type has too many stages")
    return _Scratch(
        np.empty((REC_CAP, 9), dtype=np.int64), np.zeros(M_RESP + 1), np.zeros(M_RESP + 1)
    )


@njit(**_STEP)
def _pending(t0, txm, sta):
    """The pending events, three stores ordered by key: station completions in a tournament
    tree (a leaf per station holds its running visit's end, each inner node the smaller of its
    children), pure delays in a binary heap, visits that start later (arrivals, mostly) in a
    sorted list."""
    ntx = txm.shape[0]
    if ntx >= KEY_ROWS:
        raise ValueError("too many transactions in the node for one step")
    n_st = sta.run.size
    tp = 1
    while tp < n_st:
        tp *= 2
    tree = np.full(2 * tp, KEY_NONE, dtype=np.int64)
    for s in range(n_st):
        i = sta.run[s]
        if i >= 0:
            tree[tp + s] = (txm[i, C_REM] << KEY_SHIFT) | i
    for k in range(tp - 1, 0, -1):
        tree[k] = min(tree[2 * k], tree[2 * k + 1])
    dheap = np.empty(max(ntx, 1), dtype=np.int64)
    dn = 0
    na = 0
    for i in range(ntx):
        ph = txm[i, C_PH]
        if ph == 2:
            dheap[dn] = ((max(txm[i, C_EV], t0) - t0) << KEY_SHIFT) | i
            dn += 1
        elif ph == 0:
            na += 1
    if dn:
        dheap[:dn] = np.sort(dheap[:dn])  # a sorted array is a heap
    akey = np.empty(na, dtype=np.int64)
    if na:
        j = 0
        for i in range(ntx):
            if txm[i, C_PH] == 0:
                akey[j] = ((max(txm[i, C_EV], t0) - t0) << KEY_SHIFT) | i
                j += 1
        akey.sort()
    return _Events(tree, tp, dheap, dn, akey)


# ------------------------------------------------------------------------ the event loop
@njit(**_EVENT)
def _simulate(t0, t1, rs, txm, sqc, tables, procs, out, lay, sta, ev, wk):
    """The events of [t0, t1) in key order, then the visits in progress at t1 (in batches of
    at most REC_CAP). Each event or batch records its visits in ``rec``; :func:`_bump` turns
    them into counter contributions right away. Returns ($RECEIVE spans, FCFS counter)."""
    ntx = txm.shape[0]
    tree, tp, dheap, akey = ev.tree, ev.tp, ev.dheap, ev.akey
    dn = ev.dn
    rec = wk.rec
    na = akey.size
    ap = 0
    nspan = 0
    nrec = 0
    ip = -1  # next row of the pass over the visits in progress at t1 (-1: events first)
    while True:
        if ip < 0:
            ka = akey[ap] if ap < na else KEY_NONE
            kd = dheap[0] if dn > 0 else KEY_NONE
            key = min(ka, kd, tree[1])
            t = t0 + (key >> KEY_SHIFT) if key != KEY_NONE else t1
            if t >= t1:
                ip = 0
        if ip < 0:
            i = key & KEY_MASK
            if key == ka:
                ap += 1
            elif key == kd:
                dn = _pop_delay(dheap, dn)
            s_end, nrec = _end_visit(t0, t, i, txm, tables.types, sta, rec, nrec)
            s_new, dn, nrec, nspan, sqc, rs = _move_on(
                t0, t, i, txm, tables, procs, out, sta, dheap, dn, rec, nrec, nspan, sqc, rs
            )
            # tree leaves of the stations whose running visit changed, and their paths
            _retree(t0, s_end, tree, tp, sta, txm)
            _retree(t0, s_new, tree, tp, sta, txm)
        else:
            ip, nrec = _in_progress(t0, t1, ip, txm, tables.types, sta, rec, nrec)
        _bump(rec, nrec, txm, tables, procs, out, lay, wk.wv, wk.lv)
        nrec = 0
        if ip >= ntx:
            break
    return nspan, sqc


@njit(**_EVENT)
def _record(rec, nrec, g, i, flags, dsvc, sysov, proc, cpu, vol, part):
    """Record a visit for :func:`_bump`; returns the new record count."""
    nr = np.uint64(nrec)
    rec[nr, Q_G] = g
    rec[nr, Q_I] = i
    rec[nr, Q_FLAGS] = flags
    rec[nr, Q_DSVC] = dsvc
    rec[nr, Q_SYSOV] = sysov
    rec[nr, Q_PROC] = proc
    rec[nr, Q_CPU] = cpu
    rec[nr, Q_VOL] = vol
    rec[nr, Q_PART] = part
    return nrec + 1


@njit(**_EVENT)
def _pop_delay(dheap, dn):
    """Pop the delay heap's root: the last entry sifts down from the root. Returns dn - 1."""
    dn -= 1
    if dn > 0:
        x = dheap[dn]
        k = 0
        while True:
            c = 2 * k + 1
            if c >= dn:
                break
            if c + 1 < dn and dheap[c + 1] < dheap[c]:
                c += 1
            if dheap[c] < x:
                dheap[k] = dheap[c]
                k = c
            else:
                break
        dheap[k] = x
    return dn


@njit(**_EVENT)
def _end_visit(t0, t, i, txm, types, sta, rec, nrec):
    """Row i's event at t: if it is at a station or in a delay, its visit ends (a station
    serves its next job: highest class first, FCFS within) and is recorded. Returns (the
    station whose runner changed or -1, records)."""
    iu = np.uint64(i)  # (unsigned indices: no negative-index wraparound code)
    ph = txm[iu, C_PH]
    if ph != 1 and ph != 2:
        return -1, nrec
    s_end = -1
    if ph == 1:
        s = txm[iu, C_ST]
        su = np.uint64(s)
        txm[iu, C_SDONE] += t - sta.seg[su]
        txm[iu, C_REM] = 0
        txm[iu, C_INSERV] = 0
        sta.run[su] = -1
        sta.cnt[su] -= 1
        for c in range(N_CLASSES):
            q = np.uint64(s * N_CLASSES + c)
            j = sta.qhead[q]
            if j >= 0:
                ju = np.uint64(j)
                sta.qhead[q] = sta.qnext[ju]
                if sta.qnext[ju] < 0:
                    sta.qtail[q] = -1
                sta.qnext[ju] = -1
                sta.run[su] = j
                sta.seg[su] = t
                txm[ju, C_INSERV] = 1
                break
        s_end = s
    g = types.first[np.uint64(txm[iu, C_TYPE])] + txm[iu, C_K]
    nrec = _record(
        rec, nrec, g, i, F_COMPLETE | F_ACTIVE, txm[iu, C_SDONE], t - max(txm[iu, C_VARR], t0),
        txm[iu, C_PROC], txm[iu, C_CPU], txm[iu, C_VOL], txm[iu, C_PART],
    )  # fmt: skip
    return s_end, nrec


@njit(**_EVENT)
def _move_on(t0, t, i, txm, tables, procs, out, sta, dheap, dn, rec, nrec, nspan, sqc, rs):
    """Row i moves on at t: the stage whose visit ended departs, the next visits start until
    one takes time (at a station or in a delay) or the transaction is done; visits that do not
    happen are recorded as skipped. Returns (the station whose runner changed or -1, delays,
    records, spans, FCFS counter, random state)."""
    iu = np.uint64(i)
    g = tables.types.first[np.uint64(txm[iu, C_TYPE])] + txm[iu, C_K]
    ended = txm[iu, C_PH] != 0
    was_active = True
    s_new = -1
    while True:
        if ended:
            last, nspan = _depart(t, iu, g, was_active, txm, tables, out, nspan)
            if last:
                break
            g += 1
        # ---- start visit g at time t
        proc, cpu, vol, part = _resolve(t, iu, g, txm, tables, procs)
        active, rs = _happens(iu, g, txm, tables.stages, rs)
        txm[iu, C_VARR] = t
        txm[iu, C_SDONE] = 0
        was_active = True
        if not active:
            nrec = _record(rec, nrec, g, i, F_COMPLETE, 0, 0, proc, cpu, vol, part)
            ended = True
            was_active = False
            continue
        s, svc, rs = _demand(iu, g, cpu, vol, txm, tables, rs)
        if s < 0:
            dn = _delay(t0, t, i, svc, txm, dheap, dn)
        else:
            kind = tables.stages.kind[np.uint64(g)]
            cl = 0
            if kind == K_CPU and proc >= 0:
                cl = procs.cls[np.uint64(proc)]
            s_new, sqc = _join(t0, t, i, s, svc, cl, sqc, txm, sta, out.st_peak)
        break
    return s_new, dn, nrec, nspan, sqc, rs


@njit(**_EVENT)
def _depart(t, iu, g, was_active, txm, tables, out, nspan):
    """Stage g of row iu departs at t: its departure column, the times its flags mark (read
    done, reply, BEGIN, commit), a TMF transaction begun, a $RECEIVE span ended. Returns
    (the transaction is done, spans)."""
    gu = np.uint64(g)
    k = txm[iu, C_K]
    sf = tables.stages.flags[gu]
    txm[iu, np.uint64(tables.dep0 + k)] = t - txm[iu, C_T_ARR]
    if sf != 0:
        if sf & SF_RD:
            txm[iu, C_T_RD] = t
        if sf & SF_RP:
            txm[iu, C_T_RP] = t
        if sf & SF_BG:
            txm[iu, C_T_BG] = t
            if was_active:
                txm[iu, C_TMF_CPU] = txm[iu, C_CPU]
                txm[iu, C_T_BEGIN] = 1
                sv = txm[iu, C_SERVER]
                if sv >= 0 and sv < out.opens.size:
                    out.opens[np.uint64(sv)] += 1
        if sf & SF_CM:
            txm[iu, C_T_CM] = t
            txm[iu, C_T_BEGIN] = -1
        if sf & SF_SRV_LAST and txm[iu, C_SERVER] >= 0:
            out.spans[nspan, 0] = txm[iu, C_SERVER]
            out.spans[nspan, 1] = txm[iu, C_SRV_A]
            out.spans[nspan, 2] = t
            nspan += 1
    txm[iu, C_K] = k + 1
    if sf & SF_LAST:
        txm[iu, C_PH] = 3
        txm[iu, C_T_DONE] = t
        return True, nspan
    return False, nspan


@njit(**_EVENT)
def _resolve(t, iu, g, txm, tables, procs):
    """The partition, volume, process and CPU of row iu's visit of stage g (written to its
    row). Returns (process, CPU, volume, partition)."""
    gu = np.uint64(g)
    st = tables.stages
    io = st.io[gu]
    part = txm[iu, np.uint64(C_PART0 + io)] if io >= 0 else -1
    vol = tables.devices.part_vol[np.uint64(part)] if part >= 0 else -1
    role = st.role[gu]
    proc = -1
    if role == R_TCP:
        proc = txm[iu, C_TCP]
    elif role == R_SERVER or role == R_SELF:
        proc = txm[iu, C_SERVER]
    elif role == R_LH:
        proc = txm[iu, C_LH]
    elif role == R_HLS:
        proc = txm[iu, C_HLS]
    elif role == R_PATHMON:
        proc = procs.pathmon
    elif role == R_CMON:
        proc = procs.cmon
    elif role == R_OTHER or role == R_TMP:
        tc = txm[iu, C_TCP]
        tcpu = procs.cpu_map[procs.cpu[tc]] if tc >= 0 else 0
        proc = procs.mon_by_cpu[tcpu] if role == R_OTHER else procs.tmf_by_cpu[tcpu]
    elif role == R_DP2:
        proc = procs.vol_dp2[max(vol, 0)]
    anchor = proc
    if role == R_NONE:
        an = st.anchor[gu]
        if an == R_TCP:
            anchor = txm[iu, C_TCP]
        elif an == R_SERVER:
            anchor = txm[iu, C_SERVER]
        elif an == R_LH:
            anchor = txm[iu, C_LH]
        elif an == R_HLS:
            anchor = txm[iu, C_HLS]
    ca = procs.cpu[np.uint64(anchor)] if anchor >= 0 else 0
    cpu = procs.cpu_map[np.uint64(ca)]
    txm[iu, C_PROC] = proc
    txm[iu, C_CPU] = cpu
    txm[iu, C_VOL] = vol
    txm[iu, C_PART] = part
    if st.flags[gu] & SF_SRV_FIRST:
        txm[iu, C_SRV_A] = t
    return proc, cpu, vol, part


@njit(**_EVENT)
def _happens(iu, g, txm, st, rs):
    """Does row iu's visit of stage g happen (remote transactions only, or by probability)?
    Returns (it does, random state)."""
    gu = np.uint64(g)
    if st.remote[gu] != 0:
        return txm[iu, C_IS_REMOTE] != 0, rs
    p = st.prob[gu]
    if p >= 1.0:
        return True, rs
    if p <= 0.0:
        return False, rs
    r0, r1, r2, r3, u = _xoshiro(rs[0], rs[1], rs[2], rs[3])
    return u < p, (r0, r1, r2, r3)


@njit(**_EVENT)
def _demand(iu, g, cpu, vol, txm, tables, rs):
    """The station (-1: a pure delay) and service time (µs) of row iu's visit of stage g.
    Returns (station, service, random state)."""
    gu = np.uint64(g)
    st = tables.stages
    dev = tables.devices
    kind = st.kind[gu]
    mean = st.mean[gu]
    s = -1
    if kind == K_CPU:
        s = cpu
    elif kind == K_DISC:
        if vol >= 0:
            mean = mean * dev.vol_service[np.uint64(vol)]
            s = dev.n_cpu + vol
    elif kind == K_LIN or kind == K_LOUT:
        ln = txm[iu, C_LINE]
        if ln >= 0:
            mean = st.nbytes[gu] * 8e6 / dev.line_speed[np.uint64(ln)]
            s = dev.n_cpu + dev.n_vol + 2 * ln + (1 if kind == K_LOUT else 0)
        else:
            mean = 0.0
    elif kind == K_NOUT or kind == K_NIN:
        nl = txm[iu, C_NETLINE]
        if nl >= 0:
            mean = st.nbytes[gu] * 8e6 / dev.net_speed[np.uint64(nl)]
            s = dev.n_cpu + dev.n_vol + 2 * dev.n_line + 2 * nl + (1 if kind == K_NOUT else 0)
        else:
            mean = 0.0
    dist = st.dist[gu]
    r0, r1, r2, r3 = rs
    if dist == 0:
        r0, r1, r2, r3, u = _xoshiro(r0, r1, r2, r3)
        f = -np.log1p(-u)
    elif dist == 2:
        r0, r1, r2, r3, u = _xoshiro(r0, r1, r2, r3)
        f = 0.5 + u
    elif dist == 3:  # U(0, 2 x mean): the wait for a poll at a fixed interval
        r0, r1, r2, r3, u = _xoshiro(r0, r1, r2, r3)
        f = 2.0 * u
    else:
        f = 1.0
    svc = np.int64(np.rint(mean * f))
    return s, svc, (r0, r1, r2, r3)


@njit(**_EVENT)
def _delay(t0, t, i, svc, txm, dheap, dn):
    """Row i starts a pure delay of ``svc`` µs at t: pushed on the delay heap (sift up).
    Returns dn + 1."""
    iu = np.uint64(i)
    svc = max(svc, 0)
    txm[iu, C_PH] = 2
    txm[iu, C_EV] = t + svc
    if t + svc - t0 >= KEY_SPAN:
        raise ValueError("an event lies too far after the step start")
    x = ((t + svc - t0) << KEY_SHIFT) | i
    k = dn
    dn += 1
    while k > 0:
        hp = (k - 1) >> 1
        if dheap[hp] > x:
            dheap[k] = dheap[hp]
            k = hp
        else:
            break
    dheap[k] = x
    return dn


@njit(**_EVENT)
def _join(t0, t, i, s, svc, cl, sqc, txm, sta, st_peak):
    """Row i arrives at station s at t with ``svc`` µs of work in class ``cl``: served at once
    (idle station, or it preempts a runner of a lower class: the runner goes back to the head
    of its class queue) or queued FCFS in its class. Returns (s if its runner changed, else
    -1; FCFS counter)."""
    iu = np.uint64(i)
    svc = max(svc, 1)
    if t + svc - t0 >= KEY_SPAN:
        raise ValueError("an event lies too far after the step start")
    su = np.uint64(s)
    txm[iu, C_PH] = 1
    txm[iu, C_ST] = s
    txm[iu, C_REM] = svc
    txm[iu, C_CL] = cl
    txm[iu, C_SEQ] = sqc
    sqc += 1
    sta.cnt[su] += 1
    st_peak[su] = max(st_peak[su], sta.cnt[su])
    r = sta.run[su]
    if r < 0:
        sta.run[su] = i
        sta.seg[su] = t
        txm[iu, C_INSERV] = 1
        return s, sqc
    if cl < txm[np.uint64(r), C_CL]:
        ru = np.uint64(r)
        done = t - sta.seg[su]
        txm[ru, C_REM] -= done
        txm[ru, C_SDONE] += done
        txm[ru, C_INSERV] = 0
        q = np.uint64(s * N_CLASSES + txm[ru, C_CL])
        sta.qnext[ru] = sta.qhead[q]
        if sta.qhead[q] < 0:
            sta.qtail[q] = r
        sta.qhead[q] = r
        sta.run[su] = i
        sta.seg[su] = t
        txm[iu, C_INSERV] = 1
        return s, sqc
    txm[iu, C_INSERV] = 0
    q = np.uint64(s * N_CLASSES + cl)
    if sta.qtail[q] < 0:
        sta.qhead[q] = i
    else:
        sta.qnext[np.uint64(sta.qtail[q])] = i
    sta.qtail[q] = i
    return -1, sqc


@njit(**_EVENT)
def _retree(t0, s, tree, tp, sta, txm):
    """Station s's leaf of the completion tree (its runner's end) and the path to the root."""
    if s < 0:
        return
    su = np.uint64(s)
    r = sta.run[su]
    if r < 0:
        x = KEY_NONE
    else:
        x = ((sta.seg[su] + txm[np.uint64(r), C_REM] - t0) << KEY_SHIFT) | r
    k = tp + s
    tree[k] = x
    while k > 1:  # the running minimum stays in a register: no reload of a store
        x = min(x, tree[k ^ 1])
        k >>= 1
        tree[k] = x


@njit(**_EVENT)
def _in_progress(t0, t1, ip, txm, types, sta, rec, nrec):
    """Record the visits in progress at t1 from row ip on (their part of the step, levels at
    t1), until the records are full. Returns (next row, records)."""
    ntx = txm.shape[0]
    while ip < ntx and nrec < REC_CAP:
        i = ip
        ip += 1
        ph = txm[i, C_PH]
        if ph == 1 or ph == 2:
            execing = False
            if ph == 1 and txm[i, C_INSERV] != 0:
                s = txm[i, C_ST]
                d = t1 - sta.seg[s]
                txm[i, C_SDONE] += d
                txm[i, C_REM] -= d
                execing = True
            nrec = _record(
                rec, nrec, types.first[txm[i, C_TYPE]] + txm[i, C_K], i,
                F_ACTIVE | F_PRESENT | (F_EXEC if execing else 0), txm[i, C_SDONE],
                t1 - max(txm[i, C_VARR], t0), txm[i, C_PROC], txm[i, C_CPU], txm[i, C_VOL],
                txm[i, C_PART],
            )  # fmt: skip
    return ip, nrec


# ------------------------------------------------------------------- counter contributions
@njit(**_EVENT)
def _bump(rec, nrec, txm, tables, procs, out, lay, wv, lv):
    """The recorded visits' counter contributions: per stage g its effect groups, per group a
    selector (which slot of the entity), the entity's layout in acc (``lay``) and its rows;
    per row the counter, the mode (which weight of the visit), the level flag and the
    amount."""
    st = tables.stages
    ef = tables.effects
    for rr in range(nrec):
        vg = np.uint64(rec[rr, Q_G])  # (unsigned indices: no negative-index wraparound code)
        q0 = st.q0[vg]
        q1 = st.q1[vg]
        if q0 == q1:
            continue
        vi = np.uint64(rec[rr, Q_I])
        fl = rec[rr, Q_FLAGS]
        complete = (fl & F_COMPLETE) != 0
        active = (fl & F_ACTIVE) != 0
        execing = (fl & F_EXEC) != 0
        present = (fl & F_PRESENT) != 0
        w3 = float(rec[rr, Q_SYSOV]) if active else 0.0
        wv[M_DONE] = 1.0 if (complete and active) else 0.0
        wv[M_SKIP] = 1.0 if (complete and not active) else 0.0
        wv[M_SVC] = float(rec[rr, Q_DSVC])
        wv[M_SYS] = w3
        wv[M_RESP] = w3
        l3 = 1.0 if (active and present) else 0.0
        lv[M_DONE] = l3
        lv[M_SKIP] = l3
        lv[M_SVC] = 1.0 if execing else 0.0
        lv[M_SYS] = l3
        lv[M_RESP] = l3
        levels = execing or present
        for vq in range(q0, q1):
            slot = _slot(ef.sel[vq], vi, rec[rr, Q_PROC], rec[rr, Q_CPU], rec[rr, Q_VOL],
                         rec[rr, Q_PART], txm, procs, tables.devices)  # fmt: skip
            if slot < 0 or slot >= lay.n[vq] or not out.measured[np.uint64(lay.soff[vq] + slot)]:
                continue
            # unsigned indices from here on: no negative-index wraparound code per access
            base = np.uint64(lay.off[vq] + slot * lay.nc[vq])
            for vr in range(ef.r0[vq], ef.r1[vq]):
                vm = ef.mode[vr]
                idx = base + ef.ctr[vr]
                # no test for a zero weight: adding ±0.0 leaves every sum as it is (amounts
                # are finite, and a sum that starts at +0.0 never becomes -0.0)
                out.acc[idx] += ef.amt[vr] * wv[vm]
                if levels and ef.lev[vr] != 0:
                    out.lev[idx] += lv[vm]


@njit(**_EVENT)
def _slot(sel, vi, vproc, vcpu, vvol, vpart, txm, procs, dev):  # noqa: C901 - numba kernel: a branch per selector
    """Which slot of its entity an effect group with selector ``sel`` bumps for a visit of row
    vi (-1: none)."""
    slot = -1
    if sel == S_PROC:
        slot = vproc
    elif sel == S_CPU:
        slot = vcpu
    elif sel == S_OPENER or sel == S_SERVER:
        slot = txm[vi, C_SERVER]
    elif sel == S_DP2CPU:
        if vvol >= 0:
            slot = procs.cpu[procs.vol_dp2[vvol]]
    elif sel == S_DISC:
        if vvol >= 0:
            slot = 2 * vvol
    elif sel == S_FILE:
        vop = txm[vi, C_SERVER]
        if vpart >= 0 and vop >= 0:
            slot = procs.fo[np.uint64(vop), dev.file_of_part[np.uint64(vpart)]]
    elif sel == S_DISCOPEN:
        vop = txm[vi, C_SERVER]
        if vpart >= 0 and vop >= 0:
            slot = procs.dop[np.uint64(vop), np.uint64(vpart)]
    elif sel == S_TERMINAL:
        slot = txm[vi, C_TERM]
    elif sel == S_LINE:
        slot = txm[vi, C_LINE]
    elif sel == S_X25LINE:
        vln = txm[vi, C_LINE]
        if vln >= 0 and dev.line_x25[vln] != 0:
            slot = vln
    elif sel == S_NETLINE:
        if txm[vi, C_IS_REMOTE] != 0:
            slot = txm[vi, C_NETLINE]
    elif sel == S_SYSTEM:
        if txm[vi, C_IS_REMOTE] != 0:
            slot = txm[vi, C_REMOTE]
    elif sel == S_CLUSTER:
        vrm = txm[vi, C_REMOTE]
        if txm[vi, C_IS_REMOTE] != 0 and vrm >= 0:
            slot = dev.remote_cluster[vrm]
    elif sel == S_TMF or sel == S_TCPCPU:
        vtc = txm[vi, C_TCP]
        if vtc >= 0:
            slot = procs.cpu_map[procs.cpu[vtc]]
    elif sel == S_TCP:
        slot = txm[vi, C_TCP]
    elif sel == S_LH:
        slot = txm[vi, C_LH]
    elif sel == S_HLS:
        slot = txm[vi, C_HLS]
    return slot


# ------------------------------------------------------------------ completed transactions
@njit(cache=True, nogil=True, error_model="numpy")
def complete(
    txm,
    fin,
    typ,
    c_dep0,
    P_cpu,
    cpu_map,
    line_x25,
    a_term,
    a_cpu,
    a_line,
    a_tmf,
    cols,
    k0,
    k1,
    is_batch,
    req,
    blk,
):
    """Transactions ``fin`` (rows of ``txm``) finished their last visit: their response time
    (read done to reply) and TMF lifetime (BEGIN to commit) from their own clock, bumped into
    TERMINAL, CPU (the TCP's), LINE (X.25) TRANSACTIONS and RESPONSE-TIME and TMF
    HOME-TRANS-QTIME: ``cols`` holds the counter column of each of these seven targets in
    ``a_term``, ``a_cpu``, ``a_line``, ``a_tmf`` (-1: not bumped). Each target's contributions
    are summed over the transactions in row order, then added to its column (what
    ``acc[:, c] += np.bincount(slots, weights)`` does). Server requests (server, span) go to
    ``req``, batch blocks (process, time) to ``blk`` (``k0``/``k1``/``is_batch``: per type, the
    stage before the first server visit, the last server visit, batch or not).

    Returns (responses, Σ response µs, Σ time in system µs, requests, blocks)."""
    nf = fin.size
    n_resp = 0
    s_resp = 0
    s_sys = 0
    # each target's sums over the transactions in row order, added to its column at the end
    lim = np.array([a_term.shape[0], a_term.shape[0], a_cpu.shape[0], a_cpu.shape[0],
                    a_line.shape[0], a_line.shape[0], a_tmf.shape[0]])  # fmt: skip
    tmp = np.zeros((7, lim.max()))
    for j in range(nf):
        i = fin[j]
        tt = txm[i, C_TYPE]
        s_sys += txm[i, C_T_DONE] - txm[i, C_T_ARR]
        ok = typ[tt, T_RD] >= 0 and typ[tt, T_RP] > 0
        resp = txm[i, C_T_RP] - txm[i, C_T_RD] if ok else 0
        if ok:
            n_resp += 1
            s_resp += resp
        life = 0
        if typ[tt, T_BG] >= 0 and typ[tt, T_CM] >= 0:
            life = txm[i, C_T_CM] - txm[i, C_T_BG]
        tc = txm[i, C_TCP]
        ln = txm[i, C_LINE]
        for q in range(7):
            if cols[q] < 0:
                continue
            if q < 2:
                slot = txm[i, C_TERM]
            elif q < 4:
                slot = cpu_map[P_cpu[tc]] if tc >= 0 else -1
            elif q < 6:
                slot = ln if ln >= 0 and line_x25[ln] != 0 else -1
            else:
                slot = txm[i, C_TMF_CPU]
            w = float(life) if q == 6 else (float(resp) if q % 2 == 1 else (1.0 if ok else 0.0))
            if slot < 0 or slot >= lim[q] or w == 0.0:
                continue
            tmp[q, slot] += w
    for q in range(7):
        c = cols[q]
        if c < 0:
            continue
        a = a_term if q < 2 else (a_cpu if q < 4 else (a_line if q < 6 else a_tmf))
        for s in range(a.shape[0]):
            a[s, c] += tmp[q, s]
    nreq = 0
    nblk = 0
    for j in range(nf):
        i = fin[j]
        tt = txm[i, C_TYPE]
        srv = txm[i, C_SERVER]
        if srv < 0:
            continue
        if k1[tt] >= 0:
            start = txm[i, c_dep0 + k0[tt]] if k0[tt] >= 0 else 0
            req[nreq, 0] = srv
            req[nreq, 1] = txm[i, c_dep0 + k1[tt]] - start
            nreq += 1
        if is_batch[tt]:
            blk[nblk, 0] = srv
            blk[nblk, 1] = txm[i, C_T_ARR] + txm[i, c_dep0 + typ[tt, T_N] - 1]
            nblk += 1
    return n_resp, s_resp, s_sys, nreq, nblk


@njit(cache=True, nogil=True)
def compact(txm, drop):
    """Move the rows not flagged in ``drop`` to the front, in order; returns their count."""
    n = 0
    for i in range(txm.shape[0]):
        if drop[i]:
            continue
        if n != i:
            txm[n, :] = txm[i, :]
        n += 1
    return n


@njit(cache=True, nogil=True)
def fill_rows(buf, n0, row, cidx, vals):
    """New transactions: rows ``n0 ..`` of ``buf`` get the defaults ``row``, then column
    ``cidx[k]`` of new row j gets ``vals[k, j]``."""
    nc = row.size
    for j in range(vals.shape[1]):
        r = n0 + j
        for c in range(nc):
            buf[r, c] = row[c]
        for k in range(cidx.size):
            buf[r, cidx[k]] = vals[k, j]


@njit(cache=True, nogil=True)
def spread(acc, lev, o, ucols, a, lv, pk):
    """One entity's rows from the kernel's compact layout (its used counters ``ucols``, from
    offset ``o``) to full counter rows: ``a`` the contributions, ``lv`` and ``pk`` the levels
    (the peak starts as the level); every other counter 0."""
    nu = ucols.size
    for r in range(a.shape[0]):
        for c in range(a.shape[1]):
            a[r, c] = 0.0
            lv[r, c] = 0.0
            pk[r, c] = 0.0
        b = o + r * nu
        for j in range(nu):
            c = ucols[j]
            a[r, c] = acc[b + j]
            lv[r, c] = lev[b + j]
            pk[r, c] = lev[b + j]


@njit(cache=True, nogil=True)
def recv_queue(spans, t0, W, acc, lev, peak, c):
    """$RECEIVE queues of one step: each server process serves its spans (rows of ``spans``:
    server, first server visit's arrival, reply) FCFS in (arrival, row) order, a span taking
    its length (at least 1 µs); a span that finds its server busy waits. Adds the waits to
    column ``c`` of ``acc``, the spans waiting at the step end (``W`` after ``t0``) to its
    level and peak. Returns Σ wait (µs) over the spans."""
    n = spans.shape[0]
    a = spans[:, 1] - t0
    x = np.maximum(spans[:, 2] - spans[:, 1], 1)
    # (server, arrival, row) order: a counting sort by server, then an insertion sort by
    # arrival within each server (spans come in reply order, so nearly in arrival order)
    ns = spans[:, 0].max() + 1 if n else 0
    first = np.zeros(ns + 1, dtype=np.int64)
    for j in range(n):
        first[spans[j, 0] + 1] += 1
    for k in range(ns):
        first[k + 1] += first[k]
    order = np.empty(n, dtype=np.int64)
    fill = first[:ns].copy()
    for j in range(n):
        k = spans[j, 0]
        order[fill[k]] = j
        fill[k] += 1
    for k in range(ns):
        for jj in range(first[k] + 1, first[k + 1]):
            j = order[jj]
            m = jj
            while m > first[k] and a[order[m - 1]] > a[j]:
                order[m] = order[m - 1]
                m -= 1
            order[m] = j
    rows = acc.shape[0]
    tw = np.zeros(rows)
    tq = np.zeros(rows)
    total = 0
    srv = -1
    dep = 0
    for jj in range(n):
        j = order[jj]
        s = spans[j, 0]
        start = a[j] if s != srv or dep < a[j] else dep  # FCFS: after the previous span
        srv = s
        dep = start + x[j]
        wait = start - a[j]
        total += wait
        if 0 <= s < rows:
            tw[s] += wait
            if a[j] <= W and a[j] + wait > W:
                tq[s] += 1.0
    for s in range(rows):
        acc[s, c] += tw[s]
        lev[s, c] += tq[s]
        peak[s, c] = max(peak[s, c], lev[s, c])
    return total


@njit(cache=True, nogil=True)
def emit_levels(lev, peak, busy, mq_pos, mq_src, snap, ms, snapc):
    """Levels and peaks as MEASURE gets them: a busy level is at most 1 (its peak is the
    level), snapshot counters take their value (``snap[ms]``, None: none), a max-queue twin
    takes its queue's level and peak."""
    for r in range(lev.shape[0]):
        for c in busy:
            v = min(lev[r, c], 1.0)
            lev[r, c] = v
            peak[r, c] = v
        if snap is not None:
            for c in snapc:
                lev[r, c] = snap[ms[r], c]
        for k in range(mq_pos.size):
            peak[r, mq_pos[k]] = peak[r, mq_src[k]]
            lev[r, mq_pos[k]] = lev[r, mq_src[k]]
