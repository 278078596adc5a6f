"""Kernels that move rows between layouts: strided block copies (with an optional
transpose, for K^T) and RoPE over a range of token rows.

The whole-model prefill uses them to hand the projections' row-major Q, K and V
to the ring-attention layout of the gqa study and its output back
(``experiments/llm/prefill_run.py``).
"""

from __future__ import annotations

from kernbench.kernels.decoder import rope_rows

F32 = 4


def copy_blocks(copies: tuple, *, tl) -> None:
    """Each ``(src, src_stride, dst, dst_stride, rows, cols, dtype, transpose)``:
    load a [rows, cols] block (row strides in elements) and store it, transposed
    into [cols, rows] when asked."""
    for src, src_stride, dst, dst_stride, rows, cols, dtype, transpose in copies:
        with tl.scratch_scope():
            x = tl.load(src, (rows, cols), dtype, row_stride=src_stride)
            tl.store(dst, tl.trans(x) if transpose else x, row_stride=dst_stride)


def rope_range(qk, cos, sin, r0: int, n: int, heads: int, d: int, block: int, *, tl) -> None:
    """Rotate-half RoPE in place on token rows ``r0 .. r0 + n`` of ``qk`` (rows of
    ``heads`` head vectors of ``d`` f16), ``block`` rows at a time; ``cos``/``sin``
    are f32 [rows, d/2] tables indexed by row."""
    h = d // 2
    for b0 in range(r0, r0 + n, block):
        m = min(block, r0 + n - b0)
        with tl.scratch_scope():
            c = tl.reshape(tl.load(cos + b0 * h * F32, (m, h), "f32"), (m, 1, h))
            s = tl.reshape(tl.load(sin + b0 * h * F32, (m, h), "f32"), (m, 1, h))
            rope_rows(tl, qk + b0 * heads * d * 2, c, s, m, heads, d)
