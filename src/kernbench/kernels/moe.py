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

from kernbench.kernels.decoder import F16, RES, STREAM, norm_in

F32 = 4


def moe_router(h, norm_w, router, logits, normed, T: int, D: int, E: int, eps: float,
               rows: int, *, tl):
    """logits [T, E] (f32) = rmsnorm(h) @ W_router and normed [T, D] (f16) = rmsnorm(h)."""
    for r0 in range(0, T, rows):
        n = min(rows, T - r0)
        with tl.scratch_scope():
            item, y = norm_in(tl, h + r0 * D * F16, norm_w, n, D, eps)
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
    y = _swiglu_rows(tl, normed, [r0 + t for t, _ in mine], D, cols, wg, wu, wd)
    flat = tl.reshape(y, (m * D,))
    for i, (t, w) in enumerate(mine):
        row = tl.view(acc, t * D, D)
        tl.add(row, tl.mul(tl.view(flat, i * D, D), float(w)), out=row)


# -- expert parallelism: rows travel to the experts and back by all-to-all ------------------
def moe_pack(normed, send, D: int, rows: tuple, *, tl):
    """Copy the normalised rows this rank sends, ``rows`` = token index per send row, in
    the all-to-all's order (by destination rank), into its send buffer."""
    for i, t in enumerate(rows):
        with tl.scratch_scope():
            tl.store(send + i * D * F16, tl.load(normed + t * D * F16, (D,), "f16"))


def moe_ep_experts(recv, ret, D: int, slots: tuple, *, tl):
    """Run each of this rank's expert slices over the rows it received: ``slots`` =
    (w_gate, w_up, w_down, cols, ((row, weight), ...)) per slice with rows. Each result
    row, scaled by its weight, goes to the same row of ``ret`` (the combine's input)."""
    for wg, wu, wd, cols, rows in slots:
        with tl.scratch_scope():
            y = _swiglu_rows(tl, recv, [i for i, _ in rows], D, cols, wg, wu, wd)
            flat = tl.reshape(y, (len(rows) * D,))
            for k, (i, w) in enumerate(rows):
                with tl.scratch_scope():
                    scaled = tl.mul(tl.view(flat, k * D, D), float(w))
                    out = tl.composite("math", math_op="copy", a=scaled, out_dtype="f16")
                    tl.wait(out)
                    tl.store(ret + i * D * F16, out)


def moe_ep_combine(back, h, partial, T: int, D: int, owned: tuple, block: int, *, tl):
    """partial [T, D]: zero, but for each token this rank owns, its residual plus the
    expert rows that came back for it (``owned`` = (token, (row, ...)) pairs); the
    all-reduce that follows then gathers every token on every rank."""
    for r0 in range(0, T, block):
        with tl.scratch_scope():
            tl.store(partial + r0 * D * F16, tl.zeros((min(block, T - r0) * D,), RES))
    for t, rows in owned:
        with tl.scratch_scope():
            acc = tl.zeros((D,), "f32")
            tl.add(acc, tl.load(h + t * D * F16, (D,), RES), out=acc)
            for i in rows:
                tl.add(acc, tl.load(back + i * D * F16, (D,), "f16"), out=acc)
            out = tl.composite("math", math_op="copy", a=acc, out_dtype=RES)
            tl.wait(out)
            tl.store(partial + t * D * F16, out)


def _swiglu_rows(tl, src, rows: list, D: int, cols: int, wg, wu, wd):
    """SwiGLU over ``cols`` columns of rows ``rows`` of ``src`` (f16 [*, D] in HBM): the
    f32 result [len(rows), D]."""
    m = len(rows)
    buf = tl.zeros((m * D,), "f16")
    loads = [tl.load(src + t * D * F16, (D,), "f16", out=tl.view(buf, i * D, D))
             for i, t in enumerate(rows)]
    for h in loads:
        tl.wait(h)  # a composite's TCM operands must be finished when issued
    x = tl.reshape(buf, (m, D))
    gate = tl.composite("gemm", a=x, b=tl.ref(wg, (D, cols), "f16"), tile_shape=STREAM,
                        out_dtype="f32", epilogue=[{"op": "silu"}])
    tl.wait(gate)
    act = tl.composite("gemm", a=x, b=tl.ref(wu, (D, cols), "f16"), tile_shape=STREAM,
                       out_dtype="f16", epilogue=[{"op": "mul", "other": gate}])
    tl.wait(act)
    y = tl.composite("gemm", a=act, b=tl.ref(wd, (cols, D), "f16"), tile_shape=STREAM,
                     out_dtype="f32")
    tl.wait(y)
    return y
