"""Short-context GQA attention: a CUBE serves ``kv_per_cube`` KV heads (ADR 0036).

The 8 PEs of a CUBE form ``kv_per_cube`` groups; a group serves one KV head
with its G query heads folded into the GEMM M dimension. No data leaves the
CUBE: the group's PEs talk over IPCQ along one tree, rows of four PEs chained
toward their first PE and the first PEs of the rows chained toward the group
root (``up`` is the direction toward the parent, ``down`` those toward the
children; the host builds both).

* Decode (:func:`gqa_short_decode`): each PE sweeps its own contiguous slice
  of the head's context, then the partial (m, l, O) flow up the tree and the
  root normalises and stores O [G, d].
* Prefill (:func:`gqa_short_prefill`, causal): the query positions are cut
  into Q tiles and each Q tile's positions are split across the group; the
  root streams the K/V tiles the Q tile needs from its HBM slice and every PE
  forwards each tile to its children before computing on it. All-future tiles
  are forwarded but not computed; the boundary tile gets an additive mask.

``tier`` picks how the GEMMs and the softmax are issued, so the cost of each
issue style can be compared on the same mapping: 1 = primitives (``tl.dot``
for both GEMMs), 2 = the Q.K^T GEMM as a composite, 3 = Q.K^T composite then
a P.V composite whose ``softmax_merge`` prologue updates (m, l) and rescales
O and whose epilogue adds into O. The accumulators (m, l, O) are f32.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.kernels.attention.helpers import (
    all_future,
    init_running,
    mask_column,
    merge_into,
    online_update,
    partial,
    tiles,
)

F16 = 2
F32 = 4


@dataclass(frozen=True)
class DecodeShard:
    """One user's buffers on one decode PE: Q [G, d], K^T [d, B], V [B, d] (f16);
    ``valid`` of the B slots hold tokens; O [G, d] f32 only at the group root."""

    q: int
    kT: int
    v: int
    valid: int
    o: int | None


@dataclass(frozen=True)
class ShortDecodeRank:
    users: tuple[DecodeShard, ...]
    B: int  # slots per PE slice (the K^T row stride)
    G: int
    d: int
    tile: int
    scale: float
    tier: int
    widths: tuple[int, ...]  # tile widths this PE meets (one buffer pair each)
    up: str | None
    down: tuple[str, ...]


@dataclass(frozen=True)
class QTile:
    """This PE's share of one Q tile: rows [q0, q0 + rows) of every query head,
    stored head-major as [G * rows, d] (Q f16, O f32); ``n_kv`` KV tiles are
    streamed through the group for the whole Q tile."""

    q: int
    o: int
    q0: int
    rows: int
    n_kv: int


@dataclass(frozen=True)
class PrefillUser:
    kT: int | None  # root only: K^T [d, S] f16
    v: int | None  # root only: V [S, d] f16
    q_tiles: tuple[QTile, ...]


@dataclass(frozen=True)
class ShortPrefillRank:
    users: tuple[PrefillUser, ...]
    S: int
    G: int
    d: int
    tile: int
    scale: float
    tier: int
    widths: tuple[int, ...]
    up: str | None
    down: tuple[str, ...]
    banks: dict  # rows -> (VA of the mask bank [G * rows, rows + 2 tile] f32, its width)


# -- per-tile math, shared by both phases ------------------------------------------------
def _scores(tl, tier: int, q, K, scale: float):
    """S = Q.K^T; tier 1 gets Q already scaled, the composites scale in the epilogue."""
    if tier == 1:
        return tl.dot(q, K)
    return tl.composite("gemm", a=q, b=K, epilogue=[{"op": "scale", "factor": scale}])


def _accumulate(tl, tier: int, state, s, V) -> None:
    """Fold score tile ``s`` and its V tile into the running (m, l, O)."""
    if tier < 3:
        online_update(tl, state, s, lambda p: tl.dot(p, V))
        return
    m, l, O = state
    tl.composite("gemm", b=V, out=O,
                 prologue=[{"op": "softmax_merge", "s": s, "m": m, "l": l, "O": O}],
                 epilogue=[{"op": "add", "other": O}])


def _load_q(tl, tier: int, ptr: int, rows: int, d: int, scale: float):
    q = tl.load(ptr, (rows, d), "f16")
    return q * scale if tier == 1 else q  # one scaling per Q instead of one per score tile


def _buffers(tl, d: int, widths) -> dict:
    """Two persistent (K^T, V) tile pairs per width, alternated by step parity, so
    the next tile's DMA or receive lands while this one is computed on."""
    return {w: tuple((tl.zeros((d, w), "f16"), tl.zeros((w, d), "f16")) for _ in range(2))
            for w in widths}


# -- decode ------------------------------------------------------------------------------
def _decode_sweep(tl, r: ShortDecodeRank, u: DecodeShard, q, state, bufs) -> None:
    steps = [(u.kT + s * F16, u.v + s * r.d * F16, w) for s, w in tiles(u.valid, r.tile)]

    def k_ref(ka, w):
        return tl.ref(ka, (r.d, w), "f16", row_stride=r.B)

    def issue(j):
        ka, va, w = steps[j]
        kb, vb = bufs[w][j % 2]
        K = tl.load(ka, (r.d, w), "f16", row_stride=r.B, out=kb) if r.tier == 1 else None
        return K, tl.load(va, (w, r.d), "f16", out=vb)

    nxt = issue(0) if steps and r.tier < 3 else None
    for j, (ka, va, w) in enumerate(steps):
        with tl.scratch_scope():
            if r.tier == 3:  # both operands streamed from HBM by the composites
                K, V = k_ref(ka, w), tl.ref(va, (w, r.d), "f16")
            else:
                K, V = nxt
                if j + 1 < len(steps):
                    nxt = issue(j + 1)
                K = K if r.tier == 1 else k_ref(ka, w)
            _accumulate(tl, r.tier, state, _scores(tl, r.tier, q, K, r.scale), V)
    if r.tier == 3:
        tl.wait()  # the composites of the sweep end before the reduce reuses their scratch


def _receive_merge(tl, state, direction: str, G: int, d: int) -> None:
    with tl.scratch_scope():
        m_b = tl.recv(direction, (G, 1), "f32")
        l_b = tl.recv(direction, (G, 1), "f32")
        o_b = tl.recv(direction, (G, d), "f32")
        merge_into(tl, state, m_b, l_b, o_b)


def gqa_short_decode(ranks: dict, *, tl) -> None:
    """One PE of short-context decode; ``ranks[(sip, cube, pe)]`` is its plan."""
    r: ShortDecodeRank = ranks[(tl.program_id(2), tl.program_id(1), tl.program_id(0))]
    bufs = _buffers(tl, r.d, r.widths if r.tier < 3 else ())  # tier 3 streams from HBM
    states = []
    for u in r.users:
        q = _load_q(tl, r.tier, u.q, r.G, r.d, r.scale)
        state = init_running(tl, r.G, r.d)
        _decode_sweep(tl, r, u, q, state, bufs)
        states.append(state)
    tl.mark("reduce")
    for u, state in zip(r.users, states, strict=True):
        for direction in r.down:  # children first, so a PE sends its subtree's merge
            _receive_merge(tl, state, direction, r.G, r.d)
        if r.up is not None:
            for h in state:
                tl.send(r.up, h)
        else:
            m, l, O = state
            tl.store(u.o, O / l)
    tl.wait()


# -- prefill -----------------------------------------------------------------------------
def _prefill_step(tl, r: ShortPrefillRank, qt: QTile, q, state, K, V, k0: int, w: int) -> None:
    s = _scores(tl, r.tier, q, K, r.scale)
    if partial(qt.q0, k0, w):
        bank, width = r.banks[qt.rows]
        col = mask_column(qt.q0, k0, r.tile)
        s = s + tl.load(bank + col * F32, (r.G * qt.rows, w), "f32", row_stride=width)
    _accumulate(tl, r.tier, state, s, V)


def gqa_short_prefill(ranks: dict, *, tl) -> None:
    """One PE of short-context causal prefill; ``ranks[(sip, cube, pe)]`` is its plan."""
    r: ShortPrefillRank = ranks[(tl.program_id(2), tl.program_id(1), tl.program_id(0))]
    d, tile = r.d, r.tile
    bufs = _buffers(tl, d, r.widths)
    # the group's KV stream: every (user, Q tile, KV tile) in order, one tile ahead
    stream = [(u, t * tile, min(tile, r.S - t * tile))
              for u in r.users for qt in u.q_tiles for t in range(qt.n_kv)]

    def fetch(j):
        u, k0, w = stream[j]
        kb, vb = bufs[w][j % 2]
        if r.up is None:  # the root reads its HBM slice
            return (tl.load(u.kT + k0 * F16, (d, w), "f16", row_stride=r.S, out=kb),
                    tl.load(u.v + k0 * d * F16, (w, d), "f16", out=vb))
        return tl.recv_async(r.up, (d, w), "f16", dst=kb), tl.recv_async(r.up, (w, d), "f16",
                                                                         dst=vb)

    j = 0
    nxt = fetch(0) if stream else None
    for u in r.users:
        for qt in u.q_tiles:
            with tl.scratch_scope():
                if qt.rows:
                    q = _load_q(tl, r.tier, qt.q, r.G * qt.rows, d, r.scale)
                    state = init_running(tl, r.G * qt.rows, d)
                for t in range(qt.n_kv):
                    K, V = nxt
                    if r.tier == 3 and qt.rows:
                        # the last P.V composite still reads the buffer fetch(j + 1) fills;
                        # waiting here (rather than inside the DMA or receive) keeps the
                        # CPU clock abreast of simulated time for the sends that follow
                        tl.wait(state[2])
                    if j + 1 < len(stream):
                        nxt = fetch(j + 1)
                    j += 1
                    for direction in r.down:
                        tl.send(direction, K)
                        tl.send(direction, V)
                    k0, w = t * tile, min(tile, r.S - t * tile)
                    if qt.rows and not all_future(qt.q0, qt.rows, k0):
                        with tl.scratch_scope():
                            _prefill_step(tl, r, qt, q, state, K, V, k0, w)
                if qt.rows:
                    m, l, O = state
                    tl.store(qt.o, O / l)
    tl.wait()
