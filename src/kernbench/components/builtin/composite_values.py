"""Data mode of composites: the values their ops compute (timing never reads these)."""

from __future__ import annotations

import numpy as np

from kernbench.components import numerics
from kernbench.isa.ops import OpSpec


def epilogue_value(op: OpSpec, acc: np.ndarray, read, out) -> np.ndarray:
    """An epilogue applied to a GEMM tile's (or an elementwise chunk's) values."""
    kind = op.kind
    if kind == "bias":
        return acc + read(op.operands["bias"]).astype(np.float32).reshape(1, -1)
    if kind == "scale":
        return acc * np.float32(op.extra["factor"])
    if kind == "add":
        return acc + read(op.operands["other"]).astype(np.float32)
    if kind == "mul":
        return acc * read(op.operands["other"]).astype(np.float32)
    if kind in numerics.UNARY:
        return numerics.UNARY[kind](acc)
    raise ValueError(f"unknown epilogue op {kind!r}")


def recipe_value(op: OpSpec, vals: dict[str, np.ndarray]) -> np.ndarray:
    """Numeric value of a composite MATH op from its named operands."""
    kind = op.kind
    axis = op.extra.get("reduce_axis", op.extra.get("axis"))
    if kind in ("rmax", "rsum", "sum", "max", "min"):
        return numerics.compute(kind, [vals["src"]], axis)
    if kind == "copy":
        return vals["src"]
    if kind == "fma":
        return numerics.compute("fma", [vals["src_a"], vals["src_b"], vals["src_c"]])
    if kind in numerics.BINARY:
        return numerics.compute(kind, [vals["src_a"], vals["src_b"]])
    if kind in numerics.UNARY or kind == "softmax":
        key = "a" if "a" in vals else "src"
        return numerics.compute(kind, [vals[key]], axis)
    raise ValueError(f"unknown composite op {kind!r}")


def gemm_value(head: OpSpec, k_epi, o_epi, tk: int, read) -> np.ndarray:
    """A composite GEMM's output: per-k-tile epilogues on the partial products, then the
    output-tile epilogues on the sum (f32 accumulation)."""
    a, b, out = head.operands["a"], head.operands["b"], head.out
    av = read(a).astype(np.float32)
    bv = read(b).astype(np.float32)
    if k_epi:
        acc = np.zeros((av.shape[0], bv.shape[1]), np.float32)
        for k0 in range(0, av.shape[1], tk):
            part = av[:, k0:k0 + tk] @ bv[k0:k0 + tk, :]
            for op in k_epi:
                part = epilogue_value(op, part, read, None)
            acc += part
    else:
        acc = av @ bv
    for op in o_epi:
        acc = epilogue_value(op, acc, read, out)
    return acc
