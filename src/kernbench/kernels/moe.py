"""Mixture-of-experts FFN kernels, launched with the host's routing between them
(``experiments.llm.moe_run``, ``moe_ep``):

* ``moe_router``: RMSNorm (the router composite's prologue) and the router GEMM on
  every rank's copy of the token rows; the logits and the normalised rows go to HBM,
  and an exp over each token's logits charges the vector engine what the top-k
  softmax costs (the choice itself is taken on the host, from these logits);
* ``moe_expert_rows``: each of a rank's expert slices over the rows routed to it, a
  block of rows at a time, so an expert's weights are read once per block of its
  own rows (not once per block of every token); each result row, scaled by its
  routing weight, is written to its own row of an HBM buffer;
* ``moe_combine``: each token's result rows (and the residual, on the rank that
  carries it) summed into the layer's partial; the all-reduce that follows sums the
  ranks' columns (tensor-parallel) or gathers the owners' tokens (expert-parallel);
* ``moe_pack``: expert parallelism's send rows, by destination.
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


# -- expert parallelism: rows travel to the experts and back by all-to-all ------------------
def moe_pack(normed, send, D: int, rows: tuple, *, tl):
    """Copy the normalised rows this rank sends, ``rows`` = token index per send row, in
    the all-to-all's order (by destination rank), into its send buffer."""
    for i, t in enumerate(rows):
        with tl.scratch_scope():
            tl.store(send + i * D * F16, tl.load(normed + t * D * F16, (D,), "f16"))


def moe_expert_rows(src, ret, D: int, slots: tuple, block: int, *, tl):
    """Run each of this rank's expert slices over its rows of ``src`` (f16 [*, D]):
    ``slots`` = (w_gate, w_up, w_down, cols, ((src row, weight, ret row), ...)) per
    slice with rows, taken ``block`` rows at a time (what the scratch holds). Each
    result row, scaled by its weight, goes to its row of ``ret`` (f16)."""
    for wg, wu, wd, cols, rows in slots:
        for b0 in range(0, len(rows), block):
            _expert_block(tl, src, ret, D, wg, wu, wd, cols, rows[b0:b0 + block])


def _expert_block(tl, src, ret, D: int, wg, wu, wd, cols: int, rows: tuple) -> None:
    """One block of an expert slice's rows, each result row scaled by its weight."""
    with tl.scratch_scope():
        y = _swiglu_rows(tl, src, [i for i, _, _ in rows], D, cols, wg, wu, wd)
        flat = tl.reshape(y, (len(rows) * D,))
        for k, (_, w, dst) in enumerate(rows):
            with tl.scratch_scope():
                scaled = tl.mul(tl.view(flat, k * D, D), float(w))
                out = tl.composite("math", math_op="copy", a=scaled, out_dtype="f16")
                tl.wait(out)
                tl.store(ret + dst * D * F16, out)


def moe_combine(back, h, partial, T: int, D: int, owned: tuple, block: int, *, tl):
    """partial [T, D]: zero, but for each token in ``owned`` = (token, (row, ...)) pairs,
    the rows of ``back`` that hold its experts' results, plus its residual from ``h``
    (None: a rank that does not carry the residual)."""
    for r0 in range(0, T, block):
        with tl.scratch_scope():
            tl.store(partial + r0 * D * F16, tl.zeros((min(block, T - r0) * D,), RES))
    for t, rows in owned:
        with tl.scratch_scope():
            acc = tl.zeros((D,), "f32")
            if h is not None:
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
