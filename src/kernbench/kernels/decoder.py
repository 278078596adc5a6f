"""Llama decoder-layer kernels: one PE's share of each tensor-parallel step.

Activations between steps are f16 rows in HBM (the residual stream, which the
all-reduces sum, in the 2-byte type a bf16 deployment all-reduces); matmul
operands are f16 (the attention kernels' type; bf16
has the same bytes, so timing does not change). Every projection is one
composite: the RMSNorm runs as the ``rmsnorm`` prologue recipe feeding the
GEMM, SiLU and the gate product are epilogues, and the residual is added by
the epilogue of the one rank that carries it, so the all-reduce that follows
sums it in. Shapes: ``T`` token rows, model width ``D``.
"""

from __future__ import annotations

F16, F32 = 2, 4
RES = "f16"  # the residual stream's type (what the all-reduces carry)
ZERO_BYTES = 256 * 1024  # scratch the embedding zeroes its rows through
STREAM = "stream"  # weight-streaming supertiles (pe.scheduler.stream_tile_kb, ADR 0041)


def norm_in(tl, x, norm_w, T: int, D: int, eps: float):
    """The rmsnorm prologue item over x [T, D] (the residual, in HBM) and its f16 output."""
    xt = tl.load(x, (T, D), RES)
    y = tl.zeros((T, D), "f16")
    item = {"op": "rmsnorm", "x": xt, "w": tl.load(norm_w, (D,), "f32"),
            "eps": tl.full((1,), eps, "f32"), "inv_d": tl.full((1,), 1.0 / D, "f32"), "y": y}
    return item, y


def qkv_project(x, norm_w, w_qk, w_v, qk, v, T: int, D: int, qk_cols: int, v_cols: int,
                qk_width: int, v_width: int, qk_col0: int, v_col0: int, eps: float,
                rows: int, *, tl):
    """This rank's columns of rmsnorm(x) @ [W_q | W_k] and of rmsnorm(x) @ W_v, stored
    into its attention group's [T, qk_width] and [T, v_width] buffers (f16), ``rows``
    token rows at a time (what the scratch holds)."""
    for r0 in range(0, T, rows):
        n = min(rows, T - r0)
        with tl.scratch_scope():
            item, y = norm_in(tl, x + r0 * D * F16, norm_w, n, D, eps)
            if qk_cols:
                out = tl.composite("gemm", prologue=[item], b=tl.ref(w_qk, (D, qk_cols), "f16"),
                                   tile_shape=STREAM, out_dtype="f16")
                tl.store(qk + (r0 * qk_width + qk_col0) * F16, out, row_stride=qk_width)
                item = None
            if v_cols:
                if item is None:
                    tl.wait(y)  # a composite's TCM operands must be finished when issued
                    out = tl.composite("gemm", a=y, b=tl.ref(w_v, (D, v_cols), "f16"),
                                       tile_shape=STREAM, out_dtype="f16")
                else:
                    out = tl.composite("gemm", prologue=[item],
                                       b=tl.ref(w_v, (D, v_cols), "f16"), tile_shape=STREAM,
                                       out_dtype="f16")
                tl.store(v + (r0 * v_width + v_col0) * F16, out, row_stride=v_width)


def rope_rows(tl, ptr: int, cos, sin, rows: int, heads: int, d: int) -> None:
    """Rotate-half RoPE in place on ``rows`` x ``heads`` head vectors of ``d`` f16
    elements stored back to back at ``ptr``; ``cos``/``sin`` are f32 [rows, 1, d/2]."""
    h = d // 2
    with tl.scratch_scope():
        a = tl.reshape(tl.load(ptr, (rows * heads, h), "f16", row_stride=d), (rows, heads, h))
        b = tl.reshape(tl.load(ptr + h * F16, (rows * heads, h), "f16", row_stride=d),
                       (rows, heads, h))
        ra = a * cos - b * sin
        rb = b * cos + a * sin
        tl.store(ptr, tl.reshape(ra, (rows * heads, h)), row_stride=d)
        tl.store(ptr + h * F16, tl.reshape(rb, (rows * heads, h)), row_stride=d)


def rope_append(qk, v, cos, sin, T: int, heads: int, d: int, slots, *, tl):
    """Decode: rotate the new tokens' query and key heads (``heads`` = G + 1 per row of
    ``qk``), then write each token's key (as a K^T column) and value into its KV-cache
    slot: ``slots[t] = (kT_ptr, v_ptr, column, row_stride)``. ``cos``/``sin`` are the
    tokens' angle rows (f32 [T, d/2])."""
    h = d // 2
    c = tl.reshape(tl.load(cos, (T, h), "f32"), (T, 1, h))
    s = tl.reshape(tl.load(sin, (T, h), "f32"), (T, 1, h))
    rope_rows(tl, qk, c, s, T, heads, d)
    width = heads * d
    for t, (kt_ptr, v_ptr, col, stride) in enumerate(slots):
        with tl.scratch_scope():
            k = tl.load(qk + (t * width + (heads - 1) * d) * F16, (d, 1), "f16")
            tl.store(kt_ptr + col * F16, k, row_stride=stride)
            vt = tl.load(v + t * d * F16, (1, d), "f16")
            tl.store(v_ptr + col * d * F16, vt)


def o_project(o, w_o, partial, residual, T: int, rows: int, o_width: int, D: int,
              block: int, *, tl):
    """partial [T, D] = O[:, this rank's rows] @ W_o[rows, :] (+ the residual on
    the rank that carries it), ``block`` token rows at a time; O is the attention
    group's [T, o_width] f32 output. A rank with no rows (its SIP holds no KV head)
    contributes zeros (or the residual)."""
    for r0 in range(0, T, block):
        n = min(block, T - r0)
        with tl.scratch_scope():
            res = None if residual is None else tl.load(residual + r0 * D * F16, (n, D), RES)
            if rows == 0:
                tl.store(partial + r0 * D * F16, res if res is not None else tl.zeros((n, D), RES))
                continue
            ot = tl.load(o + r0 * o_width * F32, (n, rows), "f32", row_stride=o_width)
            a = tl.composite("math", math_op="copy", a=ot, out_dtype="f16")
            tl.wait(a)
            epilogue = [] if res is None else [{"op": "add", "other": res}]
            tl.wait(tl.composite("gemm", a=a, b=tl.ref(w_o, (rows, D), "f16"),
                                 tile_shape=STREAM, out_ptr=partial + r0 * D * F16,
                                 out_dtype=RES, epilogue=epilogue))


def swiglu_ffn(h, norm_w, w_gate, w_up, w_down, partial, residual, T: int, D: int, cols: int,
               eps: float, rows: int, *, tl):
    """partial [T, D] = (silu(n W_gate) * (n W_up)) W_down over this rank's ``cols``
    FFN columns, n = rmsnorm(h) (+ the residual h on the rank that carries it), ``rows``
    token rows at a time."""
    for r0 in range(0, T, rows):
        n = min(rows, T - r0)
        with tl.scratch_scope():
            item, y = norm_in(tl, h + r0 * D * F16, norm_w, n, D, eps)
            gate = tl.composite("gemm", prologue=[item], b=tl.ref(w_gate, (D, cols), "f16"),
                                tile_shape=STREAM, out_dtype="f32", epilogue=[{"op": "silu"}])
            tl.wait(gate)
            act = tl.composite("gemm", a=y, b=tl.ref(w_up, (D, cols), "f16"), tile_shape=STREAM,
                               out_dtype="f16", epilogue=[{"op": "mul", "other": gate}])
            tl.wait(act)
            epilogue = []
            if residual is not None:
                epilogue = [{"op": "add",
                             "other": tl.load(residual + r0 * D * F16, (n, D), RES)}]
            tl.wait(tl.composite("gemm", a=act, b=tl.ref(w_down, (cols, D), "f16"),
                                 tile_shape=STREAM, out_ptr=partial + r0 * D * F16, out_dtype=RES,
                                 epilogue=epilogue))


def embed(table, partial, T: int, D: int, rows: tuple, *, tl):
    """partial [T, D]: embedding rows for the tokens whose ids fall in this rank's
    vocabulary shard, zero elsewhere (an all-reduce then gives every rank x).
    ``rows``: (token row, row in the shard) pairs."""
    block = max(1, ZERO_BYTES // (D * F16))
    for r0 in range(0, T, block):  # zero the rows a block at a time (a prompt is long)
        with tl.scratch_scope():
            tl.store(partial + r0 * D * F16, tl.zeros((min(block, T - r0), D), RES))
    for t, r in rows:
        with tl.scratch_scope():
            tl.store(partial + t * D * F16, tl.load(table + r * D * F16, (1, D), "f16"))


def lm_head(x, norm_w, w, logits, T: int, D: int, cols: int, eps: float, rows: int, *, tl):
    """This rank's vocabulary columns of the logits: rmsnorm(x) @ W_lm[:, shard] (f32),
    ``rows`` token rows at a time."""
    for r0 in range(0, T, rows):
        n = min(rows, T - r0)
        with tl.scratch_scope():
            item, _ = norm_in(tl, x + r0 * D * F16, norm_w, n, D, eps)
            tl.wait(tl.composite("gemm", prologue=[item], b=tl.ref(w, (D, cols), "f16"),
                                 tile_shape=STREAM, out_ptr=logits + r0 * cols * F32,
                                 out_dtype="f32"))
