"""Decode attention over one PE's KV shard: the per-tile loops of FlashDecoding.

One KV head, its ``G`` query heads folded into the GEMM M dimension
(Q: [G, d]), K stored transposed (K^T: [d, S]) and V: [S, d], all f16 in HBM.
Both kernels sweep KV tiles with an online softmax and store the running
(m, l, O) (f32) so a later reduction can merge shards; O / l is the output.

* ``decode_opt3``: software pipelining with primitives. The next tile's
  Q·K^T composite is issued before this tile's softmax, the softmax merge is
  ~14 primitive commands, P·V is a composite.
* ``decode_opt2``: two composites per tile: #1 Q·K^T, #2 the
  ``softmax_merge`` recipe + P·V accumulated into O.
"""

from __future__ import annotations

F16 = 2


def _k_ref(tl, kT: int, j: int, tile: int, d: int, S: int):
    return tl.ref(kT + j * tile * F16, (d, tile), "f16", row_stride=S)


def _v_ref(tl, v: int, j: int, tile: int, d: int):
    return tl.ref(v + j * tile * d * F16, (tile, d), "f16")


def _init_running(tl, G: int, d: int):
    return tl.full((G, 1), float("-inf"), "f32"), tl.zeros((G, 1), "f32"), tl.zeros((G, d), "f32")


def _store_running(tl, m, l, O, out_m: int, out_l: int, out_o: int) -> None:
    tl.store(out_m, m)
    tl.store(out_l, l)
    tl.store(out_o, O)


def decode_opt3(q: int, kT: int, v: int, out_m: int, out_l: int, out_o: int, G: int, d: int,
                S: int, tile: int, scale: float, *, tl) -> None:
    q_g = tl.load(q, (G, d), "f16")
    m, l, O = _init_running(tl, G, d)
    n = tl.cdiv(S, tile)
    scores = [tl.zeros((G, tile), "f32"), tl.zeros((G, tile), "f32")]  # persistent double buffer
    scale_epi = [{"op": "scale", "factor": scale}]
    tl.composite("gemm", a=q_g, b=_k_ref(tl, kT, 0, tile, d, S), out=scores[0], epilogue=scale_epi)
    for j in range(n):
        s_j = scores[j % 2]
        if j + 1 < n:  # next Q·K^T keeps the GEMM engine busy during this softmax
            tl.composite("gemm", a=q_g, b=_k_ref(tl, kT, j + 1, tile, d, S),
                         out=scores[(j + 1) % 2], epilogue=scale_epi)
        with tl.scratch_scope():
            m2 = tl.maximum(m, tl.max(s_j, -1))
            p = tl.exp(s_j - m2)
            corr = tl.exp(m - m2)
            l_new = l * corr + tl.sum(p, -1)
            pv = tl.composite("gemm", a=p, b=_v_ref(tl, v, j, tile, d))
            o_new = O * corr + pv
            tl.copy_to(m, m2)
            tl.copy_to(l, l_new)
            tl.copy_to(O, o_new)
    _store_running(tl, m, l, O, out_m, out_l, out_o)


def decode_opt2(q: int, kT: int, v: int, out_m: int, out_l: int, out_o: int, G: int, d: int,
                S: int, tile: int, scale: float, *, tl) -> None:
    q_g = tl.load(q, (G, d), "f16")
    m, l, O = _init_running(tl, G, d)
    for j in range(tl.cdiv(S, tile)):
        with tl.scratch_scope():
            s_j = tl.composite("gemm", a=q_g, b=_k_ref(tl, kT, j, tile, d, S),
                               epilogue=[{"op": "scale", "factor": scale}])
            tl.composite("gemm", b=_v_ref(tl, v, j, tile, d), out=O,
                         prologue=[{"op": "softmax_merge", "s": s_j, "m": m, "l": l, "O": O}],
                         epilogue=[{"op": "add", "other": O}])
    tl.wait()
    _store_running(tl, m, l, O, out_m, out_l, out_o)


VARIANTS = {"opt3": decode_opt3, "opt2": decode_opt2}
