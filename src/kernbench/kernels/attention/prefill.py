"""Causal prefill GQA attention, Ring Attention style: head-parallel, KV rotating.

CUBE ``i`` of a KV head's group owns G / C of its query heads (one when
C = G) and KV block ``i``; its P PEs split the query rows into blocks dealt
back and forth (0..P-1, P-1..0, ...), which balances the causal triangle.
PE p of every CUBE forms one ring lane: for each of its query blocks, tile
``t`` of every CUBE's KV block travels once around the lane (C ring steps,
C - 1 IPCQ hops, K^T and V packed in one message). A step forwards the tile
it holds, posts an asynchronous receive of the next one into a rotating set of
receive buffers and computes on the current one meanwhile, so the rotation
hides behind compute when a block's math outlasts its hop. A tile entirely in
the future of the query block is needed by no CUBE of the lane (they all hold
the same query positions), so it neither moves nor is computed; the boundary
tile gets an additive mask. There is no (m, l, O) reduce: each CUBE writes its
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
    fused: bool = True  # P.V composite runs the softmax_merge recipe (else primitives)
    tile_shape: tuple[int, int, int] | None = None  # composite supertile (None: scheduler's)
    causal: bool = True  # False: every query attends to every key (the ring-overlap study)
    stationary: str = "auto"  # operand the MAC array holds: "b" (K, V), "a" (Q, P), "auto"


def _compute(tl, r: PrefillRank, qb: QBlock, q, state, K, V, t: KvTile) -> None:
    with tl.scratch_scope():
        epi = [{"op": "scale", "factor": r.scale}]
        if r.causal and partial(qb.q0, t.pos, t.width):  # the boundary tile: add its causal mask in the
            bank, width = r.banks[qb.rows]  # composite, so PE_CPU does not wait for the scores
            col = mask_column(qb.q0, t.pos, r.tile)
            mask = tl.load(bank + col * 4, (r.heads_here * qb.rows, t.width), "f32",
                           row_stride=width)
            epi.append({"op": "add", "other": mask})
        s = tl.composite("gemm", a=q, b=K, epilogue=epi, tile_shape=r.tile_shape,
                         stationary=r.stationary)
        if r.fused:
            m, l, O = state
            tl.composite("gemm", b=V, out=O, tile_shape=r.tile_shape, stationary=r.stationary,
                         prologue=[{"op": "softmax_merge", "s": s, "m": m, "l": l, "O": O}],
                         epilogue=[{"op": "add", "other": O}])
        else:
            online_update(tl, state, s, lambda p: tl.composite("gemm", a=p, b=V,
                                                              tile_shape=r.tile_shape,
                                                              stationary=r.stationary))


def _split(tl, kv, d: int, width: int):
    """K^T [d, width] and V [width, d] views of one packed tile buffer."""
    n = d * width
    return (tl.reshape(tl.view(kv, 0, n), (d, width)),
            tl.reshape(tl.view(kv, n, n), (width, d)))


def _q_block(tl, r: PrefillRank, qb: QBlock, kv, ping) -> None:
    C, d = r.C, r.d
    q = tl.load(qb.q, (r.heads_here * qb.rows, d), "f16")
    state = init_running(tl, r.heads_here * qb.rows, d)

    def needed(c: int, t: int) -> bool:  # the same answer on every CUBE of the lane
        tile = kv[c][t]
        return tile.width > 0 and not (r.causal and all_future(qb.q0, qb.rows, tile.pos))

    for t in range(len(kv[0])):
        if not any(needed(c, t) for c in range(C)):
            continue
        with tl.scratch_scope():
            cur = r.ring_pos
            mine = kv[cur][t]
            if needed(cur, t):
                buf = tl.zeros((2 * d * mine.width,), "f16") if C > 1 else None
                if buf is None:
                    K = tl.load(mine.k, (d, mine.width), "f16", row_stride=r.B)
                    V = tl.load(mine.v, (mine.width, d), "f16")
                else:
                    K, V = _split(tl, buf, d, mine.width)
                    tl.load(mine.k, (d, mine.width), "f16", row_stride=r.B, out=K)
                    tl.load(mine.v, (mine.width, d), "f16", out=V)
                    tl.wait(K)
                    tl.wait(V)
            for k in range(C):
                held, nxt = kv[cur][t], (cur - 1) % C
                coming = kv[nxt][t]
                recv = None
                if k < C - 1:
                    if needed(cur, t):
                        tl.send("ring_next", buf)  # K and V of the tile in one message
                    if needed(nxt, t):
                        full = coming.width == r.tile
                        recv = tl.recv_async("ring_prev", (2 * d * coming.width,), "f16",
                                             dst=ping[k % len(ping)] if full else None)
                if needed(cur, t):
                    _compute(tl, r, qb, q, state, K, V, held)
                cur = nxt
                if recv is not None:
                    buf = recv
                    tl.mark("ring_wait")  # the span to "ring_go" is rotation not hidden
                    tl.wait(buf)
                    tl.mark("ring_go")
                    K, V = _split(tl, buf, d, coming.width)
    m, l, O = state
    tl.store(qb.o, O / l)


def gqa_prefill(ranks: dict, *, tl) -> None:
    """One PE of ring prefill; ``ranks[(sip, cube, pe)]`` is its :class:`PrefillRank`."""
    r: PrefillRank = ranks[(tl.program_id(2), tl.program_id(1), tl.program_id(0))]
    # persistent receive buffers for full-width packed K^T + V tiles, three deep: the
    # receive posted at step k reuses the buffer computed on at step k - 2, which is
    # done by then, so posting it never stalls PE_CPU (two would wait for step k - 1)
    ping = tuple(tl.zeros((2 * r.d * r.tile,), "f16") for _ in range(3)) if r.C > 1 else None
    for qb, u in zip(r.q_blocks, r.user_of_block, strict=True):
        with tl.scratch_scope():
            _q_block(tl, r, qb, r.kv[u], ping)
    tl.wait()
