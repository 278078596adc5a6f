"""Mixture-of-experts FFN kernels, tensor-parallel: every rank holds its columns of every
expert's gate and up projections and the matching rows of its down projection.

Two launches with the host's routing between them (``experiments.llm.moe_run``):

* ``moe_router``: RMSNorm (the router composite's prologue) and the router GEMM on
  every rank's copy of the token rows; the logits and the normalised rows go to HBM,
  and an exp over each token's logits charges the vector engine what the top-k
  softmax costs (the choice itself is taken on the host, from these logits);
* ``moe_experts``: per token block, per expert with tokens there, its rows are read
  from the normalised rows, run through the expert's SwiGLU columns, scaled by their
  routing weights and added into the block's f32 sums; the carrying rank adds the
  residual. The all-reduce that follows sums the ranks' columns and the experts.
"""

from __future__ import annotations

from kernbench.kernels.decoder import F16, RES, STREAM, _norm_in

F32 = 4


def moe_router(h, norm_w, router, logits, normed, T: int, D: int, E: int, eps: float,
               rows: int, *, tl):
    """logits [T, E] (f32) = rmsnorm(h) @ W_router and normed [T, D] (f16) = rmsnorm(h)."""
    for r0 in range(0, T, rows):
        n = min(rows, T - r0)
        with tl.scratch_scope():
            item, y = _norm_in(tl, h + r0 * D * F16, norm_w, n, D, eps)
            lg = tl.composite("gemm", prologue=[item], b=tl.ref(router, (D, E), "f16"),
                              tile_shape=STREAM, out_dtype="f32")
            tl.exp(lg - tl.max(lg, -1))  # the selection's softmax, on the vector engine
            tl.store(logits + r0 * E * F32, lg)
            tl.store(normed + r0 * D * F16, y)


def moe_experts(normed, residual, partial, T: int, D: int, cols: int, experts: tuple,
                rows: int, *, tl):
    """partial [T, D] = sum over experts of weight * SwiGLU_e(normed rows) over this
    rank's ``cols`` columns of each (+ the residual on the carrying rank).
    ``experts``: (w_gate, w_up, w_down, ((token, weight), ...)) of each expert with
    tokens, the VAs of this rank's shards."""
    for r0 in range(0, T, rows):
        n = min(rows, T - r0)
        with tl.scratch_scope():
            acc = tl.zeros((n * D,), "f32")
            for wg, wu, wd, tokens in experts:
                mine = [(t - r0, w) for t, w in tokens if r0 <= t < r0 + n]
                if mine:
                    with tl.scratch_scope():
                        _expert(tl, normed, acc, r0, mine, D, cols, wg, wu, wd)
            if residual is not None:
                tl.add(acc, tl.load(residual + r0 * D * F16, (n * D,), RES), out=acc)
            out = tl.composite("math", math_op="copy", a=acc, out_dtype=RES)
            tl.wait(out)
            tl.store(partial + r0 * D * F16, out)


def _expert(tl, normed, acc, r0: int, mine: list, D: int, cols: int, wg, wu, wd) -> None:
    """One expert on its rows of a token block, added into ``acc`` by routing weight."""
    m = len(mine)
    rows = tl.zeros((m * D,), "f16")
    loads = [tl.load(normed + (r0 + t) * D * F16, (D,), "f16", out=tl.view(rows, i * D, D))
             for i, (t, _) in enumerate(mine)]
    for h in loads:
        tl.wait(h)  # a composite's TCM operands must be finished when issued
    x = tl.reshape(rows, (m, D))
    gate = tl.composite("gemm", a=x, b=tl.ref(wg, (D, cols), "f16"), tile_shape=STREAM,
                        out_dtype="f32", epilogue=[{"op": "silu"}])
    tl.wait(gate)
    act = tl.composite("gemm", a=x, b=tl.ref(wu, (D, cols), "f16"), tile_shape=STREAM,
                       out_dtype="f16", epilogue=[{"op": "mul", "other": gate}])
    tl.wait(act)
    y = tl.composite("gemm", a=act, b=tl.ref(wd, (cols, D), "f16"), tile_shape=STREAM,
                     out_dtype="f32")
    tl.wait(y)
    flat = tl.reshape(y, (m * D,))
    for i, (t, w) in enumerate(mine):
        row = tl.view(acc, t * D, D)
        tl.add(row, tl.mul(tl.view(flat, i * D, D), float(w)), out=row)
