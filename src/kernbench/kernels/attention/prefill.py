"""Causal prefill GQA attention, Ring Attention style: head-parallel, KV rotating.

CUBE ``i`` of a KV head's group owns G / C of its query heads (one when
C = G) and KV block ``i``; its P PEs split the query rows into blocks dealt
round-robin (PE p takes blocks p, p + P, ..., which balances the causal
triangle). PE p of every CUBE forms one ring lane: for each of its query
blocks, tile ``t`` of every CUBE's KV block travels once around the lane
(C ring steps, C - 1 IPCQ hops). A step forwards the tile it holds, posts an
asynchronous receive of the next one into the other half of a ping-pong
buffer and computes on the current one meanwhile, so the rotation hides
behind compute when a block's math outlasts its hop. Tiles entirely in the
future of the query block are forwarded but not computed; the boundary tile
gets an additive mask. There is no (m, l, O) reduce: each CUBE writes its
own heads' rows. Design: docs/adr/0026-gqa-attention.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.kernels.attention.helpers import (
    all_future,
    init_running,
    mask_column,
    online_update,
    partial,
)

F16 = 2


@dataclass(frozen=True)
class QBlock:
    q: int  # VA of Q rows [heads_here * rows, d] (head-major), f16
    o: int  # VA of O rows, same shape, f32
    q0: int  # position of the first row
    rows: int


@dataclass(frozen=True)
class KvTile:
    k: int  # VA of K^T columns [d, width] (row stride B), f16
    v: int  # VA of V rows [width, d], f16
    width: int
    pos: int  # global position of the tile's first token


@dataclass(frozen=True)
class PrefillRank:
    q_blocks: tuple[QBlock, ...]  # per user, flattened in user order
    user_of_block: tuple[int, ...]
    kv: tuple[tuple[tuple[KvTile, ...], ...], ...]  # [user][block c][tile t]
    ring_pos: int
    C: int
    heads_here: int
    B: int
    d: int
    tile: int
    scale: float
    banks: dict  # rows -> (VA of the mask bank [heads_here * rows, rows + 2 tile], width)


def _compute(tl, r: PrefillRank, qb: QBlock, q, state, K, V, t: KvTile) -> None:
    with tl.scratch_scope():
        s = tl.composite("gemm", a=q, b=K, epilogue=[{"op": "scale", "factor": r.scale}])
        if partial(qb.q0, t.pos, t.width):
            bank, width = r.banks[qb.rows]
            col = mask_column(qb.q0, t.pos, r.tile)
            mask = tl.load(bank + col * 4, (r.heads_here * qb.rows, t.width), "f32",
                           row_stride=width)
            s = s + mask
        online_update(tl, state, s, lambda p: tl.composite("gemm", a=p, b=V))


def _q_block(tl, r: PrefillRank, qb: QBlock, kv, ping) -> None:
    C, d, lane_tiles = r.C, r.d, kv[0]
    q = tl.load(qb.q, (r.heads_here * qb.rows, d), "f16")
    state = init_running(tl, r.heads_here * qb.rows, d)
    last = qb.q0 + qb.rows - 1
    # tile t rotates while block 0's copy of it (the earliest) is not all-future
    n_t = sum(1 for t in lane_tiles if t.width and t.pos <= last)
    for t in range(n_t):
        cur = r.ring_pos
        mine = kv[cur][t]
        if mine.width:
            K = tl.load(mine.k, (d, mine.width), "f16", row_stride=r.B)
            V = tl.load(mine.v, (mine.width, d), "f16")
        for k in range(C):
            held = kv[cur][t]
            nxt = (cur - 1) % C
            coming = kv[nxt][t]
            if k < C - 1:
                if held.width:
                    tl.send("ring_next", K)
                    tl.send("ring_next", V)
                if coming.width:
                    full = coming.width == r.tile
                    fK = tl.recv_async("ring_prev", (d, coming.width), "f16",
                                       dst=ping[0][k % 2] if full else None)
                    fV = tl.recv_async("ring_prev", (coming.width, d), "f16",
                                       dst=ping[1][k % 2] if full else None)
            if held.width and not all_future(qb.q0, qb.rows, held.pos):
                _compute(tl, r, qb, q, state, K, V, held)
            if k < C - 1:
                cur = nxt
                if coming.width:
                    K, V = fK, fV
                    tl.mark("ring_wait")  # the span to "ring_go" is rotation not hidden
                    tl.wait(K)
                    tl.wait(V)
                    tl.mark("ring_go")
    m, l, O = state
    tl.store(qb.o, O / l)


def gqa_prefill(ranks: dict, *, tl) -> None:
    """One PE of ring prefill; ``ranks[(sip, cube, pe)]`` is its :class:`PrefillRank`."""
    r: PrefillRank = ranks[(tl.program_id(2), tl.program_id(1), tl.program_id(0))]
    # persistent ping-pong receive buffers for full-width K^T and V tiles
    ping = ((tl.zeros((r.d, r.tile), "f16"), tl.zeros((r.d, r.tile), "f16")),
            (tl.zeros((r.tile, r.d), "f16"), tl.zeros((r.tile, r.d), "f16"))) if r.C > 1 else None
    for qb, u in zip(r.q_blocks, r.user_of_block, strict=True):
        with tl.scratch_scope():
            _q_block(tl, r, qb, r.kv[u], ping)
    tl.wait()
