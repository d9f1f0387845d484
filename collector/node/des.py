"""The node's compiled inner loop: an event-driven simulation of the transactions' visits.

Every transaction in the node is one row of an int64 state matrix (columns ``C_*`` below) and
has exactly one current visit (stage ``C_K``), which is either pending (it starts at
``C_EV``), at a station (queued, or in service with ``C_REM`` µs of work left) or in a pure
delay (ends at ``C_EV``). A visit starts when its predecessor ends, so a wait at one station
delays everything after it (the transaction's own clock is real time, not a sum of
independent sojourns). Stations are single servers: CPUs with preemptive-resume priority
classes (FCFS within a class), discs, line directions and Expand link directions (FCFS).

:func:`run_step` simulates the events in ``[t0, t1)`` and turns every visit that ends in the
step, and every visit still in progress at ``t1``, into counter contributions at once
(``acc``/``lev``: flat per-entity counter arrays), so no per-visit record is ever stored. The
queue state between steps lives entirely in the state matrix: stations and the event heap are
rebuilt from it at the start of each call (the rows in flight are few: hundreds or thousands),
which keeps :class:`~collector.node.engine.Node` a plain picklable object of numpy arrays.

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


# ------------------------------------------------------------------- indexed event heap
@njit(cache=True, inline="always", error_model="numpy")
def _less(evt, a, b):
    ta = evt[a]
    tb = evt[b]
    return ta < tb or (ta == tb and a < b)


@njit(cache=True, inline="always", error_model="numpy")
def _up(heap, pos, evt, k):
    x = heap[k]
    tx = evt[x]
    while k > 0:
        p = (k - 1) >> 1
        y = heap[p]
        ty = evt[y]
        if tx < ty or (tx == ty and x < y):
            heap[k] = y
            pos[y] = k
            k = p
        else:
            break
    heap[k] = x
    pos[x] = k


@njit(cache=True, inline="always", error_model="numpy")
def _down(heap, pos, evt, k, n):
    x = heap[k]
    tx = evt[x]
    while True:
        c = 2 * k + 1
        if c >= n:
            break
        y = heap[c]
        ty = evt[y]
        if c + 1 < n:
            y2 = heap[c + 1]
            t2 = evt[y2]
            if t2 < ty or (t2 == ty and y2 < y):
                c += 1
                y = y2
                ty = t2
        if ty < tx or (ty == tx and y < x):
            heap[k] = y
            pos[y] = k
            k = c
        else:
            break
    heap[k] = x
    pos[x] = k


@njit(cache=True, inline="always", error_model="numpy")
def _push(heap, pos, evt, hn, i, t):
    evt[i] = t
    n = hn[0]
    heap[n] = i
    pos[i] = n
    hn[0] = n + 1
    _up(heap, pos, evt, n)


@njit(cache=True, inline="always", error_model="numpy")
def _pop(heap, pos, evt, hn):
    top = heap[0]
    n = hn[0] - 1
    hn[0] = n
    if n > 0:
        heap[0] = heap[n]
        pos[heap[0]] = 0
        _down(heap, pos, evt, 0, n)
    pos[top] = -1
    return top


@njit(cache=True, inline="always", error_model="numpy")
def _remove(heap, pos, evt, hn, i):
    k = pos[i]
    if k < 0:
        return
    n = hn[0] - 1
    hn[0] = n
    pos[i] = -1
    if k != n:
        last = heap[n]
        heap[k] = last
        pos[last] = k
        _up(heap, pos, evt, k)
        k2 = pos[last]
        _down(heap, pos, evt, k2, n)


@njit(cache=True, inline="always", error_model="numpy")
def _set(heap, pos, evt, hn, i, t):
    """Schedule i's event at t (push, or move its entry)."""
    k = pos[i]
    if k < 0:
        _push(heap, pos, evt, hn, i, t)
        return
    old = evt[i]
    evt[i] = t
    if t >= old:
        _down(heap, pos, evt, k, hn[0])
    else:
        _up(heap, pos, evt, k)


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
# record columns: one row per visit ended (or in progress at the step end) in this step
Q_G, Q_I, Q_FLAGS, Q_DSVC, Q_SYSOV, Q_PROC, Q_CPU, Q_VOL, Q_PART = range(9)
F_COMPLETE, F_ACTIVE, F_EXEC, F_PRESENT = 1, 2, 4, 8
REC_CAP = 16384


@njit(cache=True, error_model="numpy")
def _flush(
    rec,
    nrec,
    txm,
    stg,
    ef,
    grp,
    ef_amt,
    ent_off,
    ent_nc,
    ent_n,
    ent_soff,
    measured,
    acc,
    lev,
    P_cpu,
    vol_dp2,
    line_x25,
    remote_cluster,
    fop,
    fo,
    dop,
    cpu_map,
):
    """Counter contributions of the recorded visits (the effect rows of their stages)."""
    for rr in range(nrec):
        g = rec[rr, Q_G]
        g0 = stg[g, G_EF0]
        g1 = g0 + stg[g, G_EFN]
        if g0 == g1:
            continue
        i = rec[rr, Q_I]
        fl = rec[rr, Q_FLAGS]
        complete = (fl & F_COMPLETE) != 0
        active = (fl & F_ACTIVE) != 0
        execing = (fl & F_EXEC) != 0
        present = (fl & F_PRESENT) != 0
        proc = rec[rr, Q_PROC]
        cpu = rec[rr, Q_CPU]
        vol = rec[rr, Q_VOL]
        part = rec[rr, Q_PART]
        w0 = 1.0 if (complete and active) else 0.0  # M_DONE
        w1 = 1.0 if (complete and not active) else 0.0  # M_SKIP
        w2 = float(rec[rr, Q_DSVC])  # M_SVC
        w3 = float(rec[rr, Q_SYSOV]) if active else 0.0  # M_SYS
        l2 = 1.0 if execing else 0.0
        l3 = 1.0 if (active and present) else 0.0
        levels = execing or present
        for q in range(g0, g1):
            # the selector: which slot of the entity this group bumps (inline: no call)
            sel = grp[q, 0]
            slot = -1
            if sel == S_PROC:
                slot = proc
            elif sel == S_CPU:
                slot = cpu
            elif sel == S_OPENER or sel == S_SERVER:
                slot = txm[i, C_SERVER]
            elif sel == S_DP2CPU:
                if vol >= 0:
                    slot = P_cpu[vol_dp2[vol]]
            elif sel == S_DISC:
                if vol >= 0:
                    slot = 2 * vol
            elif sel == S_FILE:
                op = txm[i, C_SERVER]
                if part >= 0 and op >= 0:
                    slot = fo[op, fop[part]]
            elif sel == S_DISCOPEN:
                op = txm[i, C_SERVER]
                if part >= 0 and op >= 0:
                    slot = dop[op, part]
            elif sel == S_TERMINAL:
                slot = txm[i, C_TERM]
            elif sel == S_LINE:
                slot = txm[i, C_LINE]
            elif sel == S_X25LINE:
                ln = txm[i, C_LINE]
                if ln >= 0 and line_x25[ln] != 0:
                    slot = ln
            elif sel == S_NETLINE:
                if txm[i, C_IS_REMOTE] != 0:
                    slot = txm[i, C_NETLINE]
            elif sel == S_SYSTEM:
                if txm[i, C_IS_REMOTE] != 0:
                    slot = txm[i, C_REMOTE]
            elif sel == S_CLUSTER:
                rr = txm[i, C_REMOTE]
                if txm[i, C_IS_REMOTE] != 0 and rr >= 0:
                    slot = remote_cluster[rr]
            elif sel == S_TMF or sel == S_TCPCPU:
                tc = txm[i, C_TCP]
                if tc >= 0:
                    slot = cpu_map[P_cpu[tc]]
            elif sel == S_TCP:
                slot = txm[i, C_TCP]
            elif sel == S_LH:
                slot = txm[i, C_LH]
            elif sel == S_HLS:
                slot = txm[i, C_HLS]
            if slot < 0:
                continue
            ent = grp[q, 1]
            if slot >= ent_n[ent] or not measured[ent_soff[ent] + slot]:
                continue
            base = ent_off[ent] + slot * ent_nc[ent]
            for r in range(grp[q, 2], grp[q, 3]):
                m = ef[r, E_MODE]
                if m == M_DONE:
                    w = w0
                elif m == M_SKIP:
                    w = w1
                elif m == M_SVC:
                    w = w2
                else:
                    w = w3
                idx = base + ef[r, E_CTR]
                if w != 0.0:
                    acc[idx] += ef_amt[r] * w
                if levels and ef[r, E_LEV] != 0:
                    lev[idx] += l2 if m == M_SVC else l3


# --------------------------------------------------------------------------- the step
@njit(cache=True, error_model="numpy")
def run_step(
    t0,
    t1,
    rng,
    txm,
    seqc,
    stg,
    st_mean,
    st_prob,
    st_bytes,
    typ,
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
    ef,
    grp,
    ef_amt,
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
    heap = np.empty(max(ntx, 1), dtype=np.int64)
    pos = np.full(max(ntx, 1), -1, dtype=np.int64)
    evt = np.zeros(max(ntx, 1), dtype=np.int64)
    hn = np.zeros(1, dtype=np.int64)
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
        i = run[s]
        if i >= 0:
            _push(heap, pos, evt, hn, i, t0 + txm[i, C_REM])
    # visits that start later (arrivals, mostly) wait in a sorted list, not in the heap
    na = 0
    for i in range(ntx):
        ph = txm[i, C_PH]
        if ph == 2:
            _push(heap, pos, evt, hn, i, max(txm[i, C_EV], t0))
        elif ph == 0:
            na += 1
    aq = np.empty(na, dtype=np.int64)
    aev = np.empty(na, dtype=np.int64)
    if na:
        j = 0
        for i in range(ntx):
            if txm[i, C_PH] == 0:
                aq[j] = i
                aev[j] = max(txm[i, C_EV], t0)
                j += 1
        o = np.argsort(aev, kind="mergesort")  # stable: ties in row order
        aq = aq[o]
        aev = aev[o]
    ap = 0
    nspan = 0
    rec = np.empty((REC_CAP, 9), dtype=np.int64)
    nrec = 0
    margin = REC_CAP - 2 - typ[:, T_N].max()
    # ---- events
    while True:
        if nrec > margin:
            _flush(
                rec,
                nrec,
                txm,
                stg,
                ef,
                grp,
                ef_amt,
                ent_off,
                ent_nc,
                ent_n,
                ent_soff,
                measured,
                acc,
                lev,
                P_cpu,
                vol_dp2,
                line_x25,
                remote_cluster,
                fop,
                fo,
                dop,
                cpu_map,
            )
            nrec = 0
        hi = heap[0] if hn[0] > 0 else -1
        if ap < na and (hi < 0 or aev[ap] < evt[hi] or (aev[ap] == evt[hi] and aq[ap] < hi)):
            i = aq[ap]
            t = aev[ap]
            from_heap = False
        elif hi >= 0:
            i = hi
            t = evt[hi]
            from_heap = True
        else:
            break
        if t >= t1:
            break
        if not from_heap:
            ap += 1
        keep = False  # does i get a new event (then its heap entry moves)
        ph = txm[i, C_PH]
        g = typ[txm[i, C_TYPE], T_FIRST] + txm[i, C_K]
        if ph == 1 or ph == 2:  # the current visit ends
            if ph == 1:
                s = txm[i, C_ST]
                txm[i, C_SDONE] += t - seg[s]
                txm[i, C_REM] = 0
                txm[i, C_INSERV] = 0
                run[s] = -1
                cnt[s] -= 1
                # next job at the station: highest class first, FCFS within
                for c in range(N_CLASSES):
                    q = s * N_CLASSES + c
                    j = qhead[q]
                    if j >= 0:
                        qhead[q] = qnext[j]
                        if qnext[j] < 0:
                            qtail[q] = -1
                        qnext[j] = -1
                        run[s] = j
                        seg[s] = t
                        txm[j, C_INSERV] = 1
                        _set(heap, pos, evt, hn, j, t + txm[j, C_REM])
                        break
            rec[nrec, Q_G] = g
            rec[nrec, Q_I] = i
            rec[nrec, Q_FLAGS] = F_COMPLETE | F_ACTIVE
            rec[nrec, Q_DSVC] = txm[i, C_SDONE]
            rec[nrec, Q_SYSOV] = t - max(txm[i, C_VARR], t0)
            rec[nrec, Q_PROC] = txm[i, C_PROC]
            rec[nrec, Q_CPU] = txm[i, C_CPU]
            rec[nrec, Q_VOL] = txm[i, C_VOL]
            rec[nrec, Q_PART] = txm[i, C_PART]
            nrec += 1
        # ---- the transaction moves on: mark the stage's departure, start the next visit(s)
        ended = ph != 0
        was_active = True
        while True:
            if ended:
                tt = txm[i, C_TYPE]
                k = txm[i, C_K]
                txm[i, c_dep0 + k] = t - txm[i, C_T_ARR]
                if k == typ[tt, T_RD]:
                    txm[i, C_T_RD] = t
                if k == typ[tt, T_RP] - 1:
                    txm[i, C_T_RP] = t
                if k == typ[tt, T_BG]:
                    txm[i, C_T_BG] = t
                    if was_active:
                        txm[i, C_TMF_CPU] = txm[i, C_CPU]
                        txm[i, C_T_BEGIN] = 1
                        sv = txm[i, C_SERVER]
                        if sv >= 0 and sv < opens.size:
                            opens[sv] += 1
                if k == typ[tt, T_CM]:
                    txm[i, C_T_CM] = t
                    txm[i, C_T_BEGIN] = -1
                if k == typ[tt, T_SRV_LAST] and txm[i, C_SERVER] >= 0:
                    spans[nspan, 0] = txm[i, C_SERVER]
                    spans[nspan, 1] = txm[i, C_SRV_A]
                    spans[nspan, 2] = t
                    nspan += 1
                k += 1
                txm[i, C_K] = k
                if k >= typ[tt, T_N]:
                    txm[i, C_PH] = 3
                    txm[i, C_T_DONE] = t
                    break
            # ---- start visit k at time t
            tt = txm[i, C_TYPE]
            k = txm[i, C_K]
            g = typ[tt, T_FIRST] + k
            kind = stg[g, G_KIND]
            io = stg[g, G_IO]
            part = txm[i, C_PART0 + io] if io >= 0 else -1
            vol = part_vol[part] if part >= 0 else -1
            role = stg[g, G_ROLE]
            proc = -1
            if role == R_TCP:
                proc = txm[i, C_TCP]
            elif role == R_SERVER or role == R_SELF:
                proc = txm[i, C_SERVER]
            elif role == R_LH:
                proc = txm[i, C_LH]
            elif role == R_HLS:
                proc = txm[i, C_HLS]
            elif role == R_PATHMON:
                proc = pathmon
            elif role == R_CMON:
                proc = cmon
            elif role == R_OTHER or role == R_TMP:
                tc = txm[i, C_TCP]
                tcpu = cpu_map[P_cpu[tc]] if tc >= 0 else 0
                proc = mon_by_cpu[tcpu] if role == R_OTHER else tmf_by_cpu[tcpu]
            elif role == R_DP2:
                proc = vol_dp2[max(vol, 0)]
            anchor = proc
            if role == R_NONE:
                an = stg[g, G_ANCHOR]
                if an == R_TCP:
                    anchor = txm[i, C_TCP]
                elif an == R_SERVER:
                    anchor = txm[i, C_SERVER]
                elif an == R_LH:
                    anchor = txm[i, C_LH]
                elif an == R_HLS:
                    anchor = txm[i, C_HLS]
            cpu = cpu_map[P_cpu[anchor] if anchor >= 0 else 0]
            txm[i, C_PROC] = proc
            txm[i, C_CPU] = cpu
            txm[i, C_VOL] = vol
            txm[i, C_PART] = part
            if role == R_SERVER and k == typ[tt, T_SRV_FIRST]:
                txm[i, C_SRV_A] = t
            # does the visit happen?
            if stg[g, G_REMOTE] != 0:
                active = txm[i, C_IS_REMOTE] != 0
            else:
                p = st_prob[g]
                if p >= 1.0:
                    active = True
                elif p <= 0.0:
                    active = False
                else:
                    r0, r1, r2, r3, u = _xoshiro(r0, r1, r2, r3)
                    active = u < p
            txm[i, C_VARR] = t
            txm[i, C_SDONE] = 0
            was_active = True
            if not active:
                rec[nrec, Q_G] = g
                rec[nrec, Q_I] = i
                rec[nrec, Q_FLAGS] = F_COMPLETE
                rec[nrec, Q_DSVC] = 0
                rec[nrec, Q_SYSOV] = 0
                rec[nrec, Q_PROC] = txm[i, C_PROC]
                rec[nrec, Q_CPU] = txm[i, C_CPU]
                rec[nrec, Q_VOL] = txm[i, C_VOL]
                rec[nrec, Q_PART] = txm[i, C_PART]
                nrec += 1
                ended = True
                was_active = False
                continue
            # service demand
            mean = st_mean[g]
            s = -1
            if kind == K_CPU:
                s = cpu
            elif kind == K_DISC:
                if vol >= 0:
                    mean = mean * vol_service[vol]
                    s = d0 + vol
            elif kind == K_LIN or kind == K_LOUT:
                ln = txm[i, C_LINE]
                if ln >= 0:
                    mean = st_bytes[g] * 8e6 / line_speed[ln]
                    s = l0 + 2 * ln + (1 if kind == K_LOUT else 0)
                else:
                    mean = 0.0
            elif kind == K_NOUT or kind == K_NIN:
                nl = txm[i, C_NETLINE]
                if nl >= 0:
                    mean = st_bytes[g] * 8e6 / net_speed[nl]
                    s = x0 + 2 * nl + (1 if kind == K_NOUT else 0)
                else:
                    mean = 0.0
            dist = stg[g, G_DIST]
            if dist == 0:
                r0, r1, r2, r3, u = _xoshiro(r0, r1, r2, r3)
                f = -np.log1p(-u)
            elif dist == 2:
                r0, r1, r2, r3, u = _xoshiro(r0, r1, r2, r3)
                f = 0.5 + u
            else:
                f = 1.0
            svc = np.int64(np.rint(mean * f))
            if s < 0:  # a pure delay (no resource)
                svc = max(svc, 0)
                txm[i, C_PH] = 2
                txm[i, C_EV] = t + svc
                _set(heap, pos, evt, hn, i, t + svc)
                keep = True
                break
            svc = max(svc, 1)
            txm[i, C_PH] = 1
            txm[i, C_ST] = s
            txm[i, C_REM] = svc
            cl = 0
            if kind == K_CPU and proc >= 0:
                cl = p_class[proc]
            txm[i, C_CL] = cl
            sq = seqc[0]
            seqc[0] = sq + 1
            txm[i, C_SEQ] = sq
            cnt[s] += 1
            st_peak[s] = max(st_peak[s], cnt[s])
            r = run[s]
            if r < 0:
                run[s] = i
                seg[s] = t
                txm[i, C_INSERV] = 1
                _set(heap, pos, evt, hn, i, t + svc)
                keep = True
            elif cl < txm[r, C_CL]:
                # preempt: the runner goes back to the head of its class queue
                done = t - seg[s]
                txm[r, C_REM] -= done
                txm[r, C_SDONE] += done
                txm[r, C_INSERV] = 0
                _remove(heap, pos, evt, hn, r)
                q = s * N_CLASSES + txm[r, C_CL]
                qnext[r] = qhead[q]
                if qhead[q] < 0:
                    qtail[q] = r
                qhead[q] = r
                run[s] = i
                seg[s] = t
                txm[i, C_INSERV] = 1
                _set(heap, pos, evt, hn, i, t + svc)
                keep = True
            else:
                txm[i, C_INSERV] = 0
                q = s * N_CLASSES + cl
                if qtail[q] < 0:
                    qhead[q] = i
                else:
                    qnext[qtail[q]] = i
                qtail[q] = i
            break
        if from_heap and not keep:
            _remove(heap, pos, evt, hn, i)
    # ---- visits in progress at t1: their part of the step, levels at t1
    for i in range(ntx):
        ph = txm[i, C_PH]
        if ph == 1 or ph == 2:
            execing = False
            if ph == 1 and txm[i, C_INSERV] != 0:
                s = txm[i, C_ST]
                d = t1 - seg[s]
                txm[i, C_SDONE] += d
                txm[i, C_REM] -= d
                execing = True
            g = typ[txm[i, C_TYPE], T_FIRST] + txm[i, C_K]
            if nrec >= REC_CAP:
                _flush(
                    rec,
                    nrec,
                    txm,
                    stg,
                    ef,
                    grp,
                    ef_amt,
                    ent_off,
                    ent_nc,
                    ent_n,
                    ent_soff,
                    measured,
                    acc,
                    lev,
                    P_cpu,
                    vol_dp2,
                    line_x25,
                    remote_cluster,
                    fop,
                    fo,
                    dop,
                    cpu_map,
                )
                nrec = 0
            rec[nrec, Q_G] = g
            rec[nrec, Q_I] = i
            rec[nrec, Q_FLAGS] = F_ACTIVE | F_PRESENT | (F_EXEC if execing else 0)
            rec[nrec, Q_DSVC] = txm[i, C_SDONE]
            rec[nrec, Q_SYSOV] = t1 - max(txm[i, C_VARR], t0)
            rec[nrec, Q_PROC] = txm[i, C_PROC]
            rec[nrec, Q_CPU] = txm[i, C_CPU]
            rec[nrec, Q_VOL] = txm[i, C_VOL]
            rec[nrec, Q_PART] = txm[i, C_PART]
            nrec += 1
    _flush(
        rec,
        nrec,
        txm,
        stg,
        ef,
        grp,
        ef_amt,
        ent_off,
        ent_nc,
        ent_n,
        ent_soff,
        measured,
        acc,
        lev,
        P_cpu,
        vol_dp2,
        line_x25,
        remote_cluster,
        fop,
        fo,
        dop,
        cpu_map,
    )
    nrec = 0
    return nspan
