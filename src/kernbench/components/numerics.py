"""Numeric definitions of every op the engines can run in data mode.

Inputs are computed in float32 (f16 operands are widened, like the hardware's
f32 accumulators) and cast to the output dtype by the caller. Reductions keep
the reduced axis with size 1.
"""

from __future__ import annotations

import numpy as np

UNARY = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "abs": np.abs,
    "neg": np.negative,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "cos": np.cos,
    "sin": np.sin,
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": lambda x: 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "copy": lambda x: x,
}
BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    # softmax_merge recipe micro-ops (numpy broadcasting covers bcast_axis)
    "max_elem": np.maximum,
    "exp_diff": lambda a, b: np.exp(a - b),
    "mul_bcast": np.multiply,
}
TERNARY = {
    "fma": lambda a, b, c: a * b + c,
    "clamp": lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
    "where": lambda c, a, b: np.where(c.astype(bool), a, b),
}
REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "rmax": np.max, "rsum": np.sum}


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def arity(op: str) -> int:
    if op in UNARY or op in REDUCE or op == "softmax":
        return 1
    if op in BINARY:
        return 2
    if op in TERNARY:
        return 3
    raise ValueError(f"unknown math op {op!r}")


_EXACT_INT = frozenset({"add", "sub", "mul", "maximum", "minimum", "copy", "abs", "neg"})

ALL_MATH_OPS = tuple(sorted({*UNARY, *BINARY, *TERNARY, *REDUCE, "softmax"}))


def compute(op: str, inputs: list[np.ndarray], axis: int | None = None) -> np.ndarray:
    arrays = [np.asarray(x) for x in inputs]
    if op in _EXACT_INT and all(a.dtype.kind in "iu" for a in arrays):
        xs = [a.astype(np.int64) for a in arrays]  # integer adds are exact, like the ALU's
    else:
        xs = [a.astype(np.float32, copy=False) for a in arrays]
    if op in UNARY:
        return UNARY[op](xs[0])
    if op in BINARY:
        return BINARY[op](xs[0], xs[1])
    if op in TERNARY:
        return TERNARY[op](*xs)
    if op in REDUCE:
        return REDUCE[op](xs[0], axis=-1 if axis is None else axis, keepdims=True)
    if op == "softmax":
        return softmax(xs[0], -1 if axis is None else axis)
    raise ValueError(f"unknown math op {op!r}")
