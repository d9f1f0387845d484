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
record outlives its event. The queue state between steps lives entirely in the state matrix:
stations and the pending events (a tournament tree over the stations, a heap of delays, the
sorted arrivals) are rebuilt from it at the start of each call, which keeps
:class:`~collector.node.engine.Node` a plain picklable object of numpy arrays. The smaller
kernels do the engine's per-step bookkeeping: :func:`complete` (finished transactions),
:func:`recv_queue` ($RECEIVE waits), :func:`fill_rows` and :func:`compact` (arrivals in,
finished rows out), :func:`spread` and :func:`emit_levels` (the counter rows MEASURE gets).

Speed notes: the kernels call no helper function with array arguments in their loops (numba
increfs and decrefs every array passed, with atomic operations), and index with unsigned
integers where they can (a signed index costs a negative-index wraparound test each time).

Randomness comes from the node's ``np.random.Generator`` (numba draws from the same bit
generator), so a seed gives the same counters bit for bit.
"""

from __future__ import annotations

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
# (time - t0) << KEY_SHIFT | row, so one comparison orders two events. The stores are written
# out inside run_step rather than in helper functions: numba increfs and decrefs every array
# passed to a function, inlined or not, and those atomic operations cost more than the work.
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
# at the step end); run_step turns the records into counter contributions after each event
Q_G, Q_I, Q_FLAGS, Q_DSVC, Q_SYSOV, Q_PROC, Q_CPU, Q_VOL, Q_PART = range(9)
F_COMPLETE, F_ACTIVE, F_EXEC, F_PRESENT = 1, 2, 4, 8
REC_CAP = 512


# --------------------------------------------------------------------------- the step
@njit(cache=True, nogil=True, error_model="numpy")
def run_step(
    t0,
    t1,
    rng,
    txm,
    seqc,
    st_kind,
    st_io,
    st_role,
    st_anchor,
    st_dist,
    st_remote,
    st_flags,
    st_mean,
    st_prob,
    st_bytes,
    ty_first,
    ty_n,
    P_cpu,
    p_class,
    cpu_map,
    vol_dp2,
    tmf_by_cpu,
    mon_by_cpu,
    pathmon,
    cmon,
    part_vol,
    vol_service,
    line_speed,
    net_speed,
    n_cpu,
    n_vol,
    n_line,
    n_net,
    g_q0,
    g_q1,
    q_sel,
    q_ent,
    q_r0,
    q_r1,
    r_ctr,
    r_mode,
    r_lev,
    r_amt,
    ent_off,
    ent_nc,
    ent_n,
    ent_soff,
    measured,
    acc,
    lev,
    fop,
    fo,
    dop,
    line_x25,
    remote_cluster,
    st_peak,
    opens,
    spans,
    c_dep0,
):
    """Simulate [t0, t1); returns the number of $RECEIVE spans written to ``spans``."""
    ntx = txm.shape[0]
    # the step's own xoshiro256+ stream, seeded from the node's Generator (4 draws per step)
    r0 = np.uint64(rng.integers(1, 2**63))
    r1 = np.uint64(rng.integers(1, 2**63))
    r2 = np.uint64(rng.integers(1, 2**63))
    r3 = np.uint64(rng.integers(1, 2**63))
    n_st = n_cpu + n_vol + 2 * n_line + 2 * n_net
    # each effect group's entity layout in acc for this step
    nqg = q_ent.size
    q_n = np.empty(nqg, dtype=np.int64)
    q_soff = np.empty(nqg, dtype=np.int64)
    q_off = np.empty(nqg, dtype=np.int64)
    q_nc = np.empty(nqg, dtype=np.int64)
    for q in range(nqg):
        e = q_ent[q]
        q_n[q] = ent_n[e]
        q_soff[q] = ent_soff[e]
        q_off[q] = ent_off[e]
        q_nc[q] = ent_nc[e]
    d0 = n_cpu
    l0 = d0 + n_vol
    x0 = l0 + 2 * n_line
    # ---- rebuild stations and the event heap from the state matrix
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
    # ---- pending events, three stores ordered by key: station completions in a tournament
    # tree (a leaf per station holds its running visit's end, each inner node the smaller of
    # its children), pure delays in a binary heap, visits that start later (arrivals, mostly)
    # in a sorted list
    if ntx >= KEY_ROWS:
        raise ValueError("too many transactions in the node for one step")
    tp = 1
    while tp < n_st:
        tp *= 2
    tree = np.full(2 * tp, KEY_NONE, dtype=np.int64)
    for s in range(n_st):
        i = run[s]
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
    ap = 0
    nspan = 0
    sqc = seqc[0]  # FCFS order at the stations (kept across steps in seqc)
    # ---- events, then the visits in progress at t1; after each event (or batch of visits
    # in progress) the effect rows of the visits it recorded (rec) go into acc and lev: per
    # stage g its effect groups [g_q0[g], g_q1[g]), per group q a selector (which slot of the
    # entity), the entity's layout in acc (q_n slots, q_nc counters from q_off, measured
    # flags from q_soff) and its rows [q_r0[q], q_r1[q]); per row the counter, the mode
    # (which weight of the visit), the level flag and the amount
    if ty_n.max() + 2 > REC_CAP:
        raise ValueError("a transaction type has too many stages")
    rec = np.empty((REC_CAP, 9), dtype=np.int64)
    nrec = 0
    wv = np.zeros(M_RESP + 1)  # the visit's weight per mode (resp rows weigh like sys rows)
    lv = np.zeros(M_RESP + 1)  # and its level per mode (svc: executing; others: present)
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
            iu = np.uint64(i)  # (unsigned indices: no negative-index wraparound code)
            if key == ka:
                ap += 1
            elif key == kd:  # pop the delay heap: the last entry sifts down from the root
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
            s_end = -1  # stations whose running visit changes in this event
            s_new = -1
            ph = txm[iu, C_PH]
            g = ty_first[np.uint64(txm[iu, C_TYPE])] + txm[iu, C_K]
            gu = np.uint64(g)
            if ph == 1 or ph == 2:  # the current visit ends
                if ph == 1:
                    s = txm[iu, C_ST]
                    su = np.uint64(s)
                    txm[iu, C_SDONE] += t - seg[su]
                    txm[iu, C_REM] = 0
                    txm[iu, C_INSERV] = 0
                    run[su] = -1
                    cnt[su] -= 1
                    # next job at the station: highest class first, FCFS within
                    for c in range(N_CLASSES):
                        q = np.uint64(s * N_CLASSES + c)
                        j = qhead[q]
                        if j >= 0:
                            ju = np.uint64(j)
                            qhead[q] = qnext[ju]
                            if qnext[ju] < 0:
                                qtail[q] = -1
                            qnext[ju] = -1
                            run[su] = j
                            seg[su] = t
                            txm[ju, C_INSERV] = 1
                            break
                    s_end = s
                nr = np.uint64(nrec)
                rec[nr, Q_G] = g
                rec[nr, Q_I] = i
                rec[nr, Q_FLAGS] = F_COMPLETE | F_ACTIVE
                rec[nr, Q_DSVC] = txm[iu, C_SDONE]
                rec[nr, Q_SYSOV] = t - max(txm[iu, C_VARR], t0)
                rec[nr, Q_PROC] = txm[iu, C_PROC]
                rec[nr, Q_CPU] = txm[iu, C_CPU]
                rec[nr, Q_VOL] = txm[iu, C_VOL]
                rec[nr, Q_PART] = txm[iu, C_PART]
                nrec += 1
            # ---- the transaction moves on: mark the stage's departure, start the next visit(s)
            ended = ph != 0
            was_active = True
            while True:
                if ended:  # visit g (stage k) ended
                    k = txm[iu, C_K]
                    sf = st_flags[gu]
                    txm[iu, np.uint64(c_dep0 + k)] = t - txm[iu, C_T_ARR]
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
                                if sv >= 0 and sv < opens.size:
                                    opens[np.uint64(sv)] += 1
                        if sf & SF_CM:
                            txm[iu, C_T_CM] = t
                            txm[iu, C_T_BEGIN] = -1
                        if sf & SF_SRV_LAST and txm[iu, C_SERVER] >= 0:
                            spans[nspan, 0] = txm[iu, C_SERVER]
                            spans[nspan, 1] = txm[iu, C_SRV_A]
                            spans[nspan, 2] = t
                            nspan += 1
                    txm[iu, C_K] = k + 1
                    if sf & SF_LAST:
                        txm[iu, C_PH] = 3
                        txm[iu, C_T_DONE] = t
                        break
                    g += 1
                    gu = np.uint64(g)
                # ---- start visit g at time t
                kind = st_kind[gu]
                io = st_io[gu]
                part = txm[iu, np.uint64(C_PART0 + io)] if io >= 0 else -1
                vol = part_vol[np.uint64(part)] if part >= 0 else -1
                role = st_role[gu]
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
                    proc = pathmon
                elif role == R_CMON:
                    proc = cmon
                elif role == R_OTHER or role == R_TMP:
                    tc = txm[iu, C_TCP]
                    tcpu = cpu_map[P_cpu[tc]] if tc >= 0 else 0
                    proc = mon_by_cpu[tcpu] if role == R_OTHER else tmf_by_cpu[tcpu]
                elif role == R_DP2:
                    proc = vol_dp2[max(vol, 0)]
                anchor = proc
                if role == R_NONE:
                    an = st_anchor[gu]
                    if an == R_TCP:
                        anchor = txm[iu, C_TCP]
                    elif an == R_SERVER:
                        anchor = txm[iu, C_SERVER]
                    elif an == R_LH:
                        anchor = txm[iu, C_LH]
                    elif an == R_HLS:
                        anchor = txm[iu, C_HLS]
                ca = P_cpu[np.uint64(anchor)] if anchor >= 0 else 0
                cpu = cpu_map[np.uint64(ca)]
                txm[iu, C_PROC] = proc
                txm[iu, C_CPU] = cpu
                txm[iu, C_VOL] = vol
                txm[iu, C_PART] = part
                if st_flags[gu] & SF_SRV_FIRST:
                    txm[iu, C_SRV_A] = t
                # does the visit happen?
                if st_remote[gu] != 0:
                    active = txm[iu, C_IS_REMOTE] != 0
                else:
                    p = st_prob[gu]
                    if p >= 1.0:
                        active = True
                    elif p <= 0.0:
                        active = False
                    else:
                        r0, r1, r2, r3, u = _xoshiro(r0, r1, r2, r3)
                        active = u < p
                txm[iu, C_VARR] = t
                txm[iu, C_SDONE] = 0
                was_active = True
                if not active:
                    nr = np.uint64(nrec)
                    rec[nr, Q_G] = g
                    rec[nr, Q_I] = i
                    rec[nr, Q_FLAGS] = F_COMPLETE
                    rec[nr, Q_DSVC] = 0
                    rec[nr, Q_SYSOV] = 0
                    rec[nr, Q_PROC] = proc
                    rec[nr, Q_CPU] = cpu
                    rec[nr, Q_VOL] = vol
                    rec[nr, Q_PART] = part
                    nrec += 1
                    ended = True
                    was_active = False
                    continue
                # service demand
                mean = st_mean[gu]
                s = -1
                if kind == K_CPU:
                    s = cpu
                elif kind == K_DISC:
                    if vol >= 0:
                        mean = mean * vol_service[np.uint64(vol)]
                        s = d0 + vol
                elif kind == K_LIN or kind == K_LOUT:
                    ln = txm[iu, C_LINE]
                    if ln >= 0:
                        mean = st_bytes[gu] * 8e6 / line_speed[np.uint64(ln)]
                        s = l0 + 2 * ln + (1 if kind == K_LOUT else 0)
                    else:
                        mean = 0.0
                elif kind == K_NOUT or kind == K_NIN:
                    nl = txm[iu, C_NETLINE]
                    if nl >= 0:
                        mean = st_bytes[gu] * 8e6 / net_speed[np.uint64(nl)]
                        s = x0 + 2 * nl + (1 if kind == K_NOUT else 0)
                    else:
                        mean = 0.0
                dist = st_dist[gu]
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
                if s < 0:  # a pure delay (no resource)
                    svc = max(svc, 0)
                    txm[iu, C_PH] = 2
                    txm[iu, C_EV] = t + svc
                    if t + svc - t0 >= KEY_SPAN:
                        raise ValueError("an event lies too far after the step start")
                    x = ((t + svc - t0) << KEY_SHIFT) | i  # push on the delay heap (sift up)
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
                    break
                svc = max(svc, 1)
                if t + svc - t0 >= KEY_SPAN:
                    raise ValueError("an event lies too far after the step start")
                su = np.uint64(s)
                txm[iu, C_PH] = 1
                txm[iu, C_ST] = s
                txm[iu, C_REM] = svc
                cl = 0
                if kind == K_CPU and proc >= 0:
                    cl = p_class[np.uint64(proc)]
                txm[iu, C_CL] = cl
                txm[iu, C_SEQ] = sqc
                sqc += 1
                cnt[su] += 1
                st_peak[su] = max(st_peak[su], cnt[su])
                r = run[su]
                if r < 0:
                    run[su] = i
                    seg[su] = t
                    txm[iu, C_INSERV] = 1
                    s_new = s
                elif cl < txm[np.uint64(r), C_CL]:
                    # preempt: the runner goes back to the head of its class queue
                    ru = np.uint64(r)
                    done = t - seg[su]
                    txm[ru, C_REM] -= done
                    txm[ru, C_SDONE] += done
                    txm[ru, C_INSERV] = 0
                    q = np.uint64(s * N_CLASSES + txm[ru, C_CL])
                    qnext[ru] = qhead[q]
                    if qhead[q] < 0:
                        qtail[q] = r
                    qhead[q] = r
                    run[su] = i
                    seg[su] = t
                    txm[iu, C_INSERV] = 1
                    s_new = s
                else:
                    txm[iu, C_INSERV] = 0
                    q = np.uint64(s * N_CLASSES + cl)
                    if qtail[q] < 0:
                        qhead[q] = i
                    else:
                        qnext[np.uint64(qtail[q])] = i
                    qtail[q] = i
                break
            # ---- tree leaves of the stations whose running visit changed, and their paths
            for u in range(2):
                s = s_end if u == 0 else s_new
                if s < 0:
                    continue
                su = np.uint64(s)
                r = run[su]
                if r < 0:
                    x = KEY_NONE
                else:
                    x = ((seg[su] + txm[np.uint64(r), C_REM] - t0) << KEY_SHIFT) | r
                k = tp + s
                tree[k] = x
                while k > 1:  # the running minimum stays in a register: no reload of a store
                    x = min(x, tree[k ^ 1])
                    k >>= 1
                    tree[k] = x
        else:
            # ---- visits in progress at t1: their part of the step, levels at t1
            while ip < ntx and nrec < REC_CAP:
                i = ip
                ip += 1
                ph = txm[i, C_PH]
                if ph == 1 or ph == 2:
                    execing = False
                    if ph == 1 and txm[i, C_INSERV] != 0:
                        s = txm[i, C_ST]
                        d = t1 - seg[s]
                        txm[i, C_SDONE] += d
                        txm[i, C_REM] -= d
                        execing = True
                    rec[nrec, Q_G] = ty_first[txm[i, C_TYPE]] + txm[i, C_K]
                    rec[nrec, Q_I] = i
                    rec[nrec, Q_FLAGS] = F_ACTIVE | F_PRESENT | (F_EXEC if execing else 0)
                    rec[nrec, Q_DSVC] = txm[i, C_SDONE]
                    rec[nrec, Q_SYSOV] = t1 - max(txm[i, C_VARR], t0)
                    rec[nrec, Q_PROC] = txm[i, C_PROC]
                    rec[nrec, Q_CPU] = txm[i, C_CPU]
                    rec[nrec, Q_VOL] = txm[i, C_VOL]
                    rec[nrec, Q_PART] = txm[i, C_PART]
                    nrec += 1
        # ---- counter contributions of the recorded visits
        for rr in range(nrec):
            vg = np.uint64(rec[rr, Q_G])  # (unsigned indices: no negative-index wraparound code)
            q0 = g_q0[vg]
            q1 = g_q1[vg]
            if q0 == q1:
                continue
            vi = np.uint64(rec[rr, Q_I])
            fl = rec[rr, Q_FLAGS]
            complete = (fl & F_COMPLETE) != 0
            active = (fl & F_ACTIVE) != 0
            execing = (fl & F_EXEC) != 0
            present = (fl & F_PRESENT) != 0
            vproc = rec[rr, Q_PROC]
            vcpu = rec[rr, Q_CPU]
            vvol = rec[rr, Q_VOL]
            vpart = rec[rr, Q_PART]
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
                # the selector: which slot of the entity this group bumps (inline: no call)
                sel = q_sel[vq]
                slot = -1
                if sel == S_PROC:
                    slot = vproc
                elif sel == S_CPU:
                    slot = vcpu
                elif sel == S_OPENER or sel == S_SERVER:
                    slot = txm[vi, C_SERVER]
                elif sel == S_DP2CPU:
                    if vvol >= 0:
                        slot = P_cpu[vol_dp2[vvol]]
                elif sel == S_DISC:
                    if vvol >= 0:
                        slot = 2 * vvol
                elif sel == S_FILE:
                    vop = txm[vi, C_SERVER]
                    if vpart >= 0 and vop >= 0:
                        slot = fo[np.uint64(vop), fop[np.uint64(vpart)]]
                elif sel == S_DISCOPEN:
                    vop = txm[vi, C_SERVER]
                    if vpart >= 0 and vop >= 0:
                        slot = dop[np.uint64(vop), np.uint64(vpart)]
                elif sel == S_TERMINAL:
                    slot = txm[vi, C_TERM]
                elif sel == S_LINE:
                    slot = txm[vi, C_LINE]
                elif sel == S_X25LINE:
                    vln = txm[vi, C_LINE]
                    if vln >= 0 and line_x25[vln] != 0:
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
                        slot = remote_cluster[vrm]
                elif sel == S_TMF or sel == S_TCPCPU:
                    vtc = txm[vi, C_TCP]
                    if vtc >= 0:
                        slot = cpu_map[P_cpu[vtc]]
                elif sel == S_TCP:
                    slot = txm[vi, C_TCP]
                elif sel == S_LH:
                    slot = txm[vi, C_LH]
                elif sel == S_HLS:
                    slot = txm[vi, C_HLS]
                if slot < 0 or slot >= q_n[vq] or not measured[np.uint64(q_soff[vq] + slot)]:
                    continue
                # unsigned indices from here on: no negative-index wraparound code per access
                base = np.uint64(q_off[vq] + slot * q_nc[vq])
                for vr in range(q_r0[vq], q_r1[vq]):
                    vm = r_mode[vr]
                    idx = base + r_ctr[vr]
                    # no test for a zero weight: adding ±0.0 leaves every sum as it is (amounts
                    # are finite, and a sum that starts at +0.0 never becomes -0.0)
                    acc[idx] += r_amt[vr] * wv[vm]
                    if levels and r_lev[vr] != 0:
                        lev[idx] += lv[vm]
        nrec = 0
        if ip >= ntx:
            break
    seqc[0] = sqc
    return nspan


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
