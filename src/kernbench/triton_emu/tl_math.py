"""``tl`` elementwise and reduction ops: one ``MathCmd`` each (docs/tl-api.md).

Mixed into :class:`~kernbench.triton_emu.tl_context.TLContext`: operands are
checked (TCM, broadcastable shapes, numbers kept in f32 next to float tensors),
the output is allocated from scratch unless ``out=`` names one, and the call
blocks until the op is done.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.errors import KernelMisuse, KernelTypeError
from kernbench.isa.commands import MathCmd
from kernbench.isa.handles import TensorHandle

_FLOATS = ("f16", "bf16", "f32")


class MathMixin:
    def _as_handle(self, x: Any, like: TensorHandle) -> TensorHandle:
        if isinstance(x, TensorHandle):
            self._check(x)
            return x
        if isinstance(x, int | float | np.floating | np.integer):
            # a number next to a float tensor is kept in f32 (no rounding to f16/bf16 first)
            return self.full((1,), float(x), "f32" if like.dtype in _FLOATS else like.dtype)
        raise KernelTypeError(f"cannot use {type(x).__name__} as a tensor operand")

    def _math(self, op: str, inputs: list[Any], axis: int | None = None,
              out_shape: tuple[int, ...] | None = None, out_dtype: str | None = None,
              out: TensorHandle | None = None) -> TensorHandle:
        first = None
        for x in inputs:  # (loops, not generator expressions: a kernel's arithmetic
            if isinstance(x, TensorHandle):  # comes here op by op)
                first = x
                break
        if first is None:
            raise KernelTypeError(f"tl math op {op!r} needs at least one tensor operand")
        handles = [self._as_handle(x, first) for x in inputs]
        same = True
        for h in handles:
            if h.space != "tcm":
                raise KernelMisuse(f"math operands must be in TCM, got {h}")
            same = same and h.shape == first.shape
        if out_shape is None and same:
            out_shape = first.shape
        elif out_shape is None:
            try:
                out_shape = np.broadcast_shapes(*(h.shape for h in handles))
            except ValueError:
                raise KernelMisuse(f"tl.{op}: shapes {[h.shape for h in handles]} do not broadcast"
                                 ) from None
        if out is None:
            out = self._alloc(tuple(out_shape), out_dtype or first.dtype)
        else:  # in place (e.g. a collective reducing into its buffer)
            self._check(out)
            if out.space != "tcm" or out.shape != tuple(out_shape) \
                    or out.dtype != (out_dtype or first.dtype):
                raise KernelMisuse(f"tl.{op} out= must be a TCM tensor of shape "
                                   f"{tuple(out_shape)} and dtype {out_dtype or first.dtype}, "
                                   f"got {out}")
        comp = self._emit(MathCmd(op, tuple(handles), out, axis))
        self._block(comp)
        out.pending = comp
        return out

    def _unary(self, op: str, x: TensorHandle) -> TensorHandle:
        return self._math(op, [x])

    def exp(self, x): return self._unary("exp", x)  # noqa: E704
    def log(self, x): return self._unary("log", x)  # noqa: E704
    def sqrt(self, x): return self._unary("sqrt", x)  # noqa: E704
    def abs(self, x): return self._unary("abs", x)  # noqa: E704
    def sigmoid(self, x): return self._unary("sigmoid", x)  # noqa: E704
    def cos(self, x): return self._unary("cos", x)  # noqa: E704
    def sin(self, x): return self._unary("sin", x)  # noqa: E704
    def relu(self, x): return self._unary("relu", x)  # noqa: E704

    def maximum(self, a, b, out=None): return self._math("maximum", [a, b], out=out)  # noqa: E704
    def minimum(self, a, b, out=None): return self._math("minimum", [a, b], out=out)  # noqa: E704
    def add(self, a, b, out=None): return self._math("add", [a, b], out=out)  # noqa: E704
    def sub(self, a, b, out=None): return self._math("sub", [a, b], out=out)  # noqa: E704
    def mul(self, a, b, out=None): return self._math("mul", [a, b], out=out)  # noqa: E704
    def div(self, a, b, out=None): return self._math("div", [a, b], out=out)  # noqa: E704
    def fma(self, a, b, c): return self._math("fma", [a, b, c])  # noqa: E704
    def clamp(self, x, lo, hi): return self._math("clamp", [x, lo, hi])  # noqa: E704
    def where(self, cond, a, b):
        """Elementwise ``a if cond else b``; the result has the dtype of ``a`` (or ``b``)."""
        value = next((x for x in (a, b) if isinstance(x, TensorHandle)), None)
        return self._math("where", [cond, a, b],
                          out_dtype=value.dtype if value is not None else None)

    def softmax(self, x: TensorHandle, axis: int = -1) -> TensorHandle:
        self._check(x)
        if not -len(x.shape) <= axis < len(x.shape):
            raise KernelMisuse(f"tl.softmax: axis {axis} out of range for shape {x.shape}")
        return self._math("softmax", [x], axis=axis, out_shape=x.shape)

    def _reduce(self, op: str, x: TensorHandle, axis: int) -> TensorHandle:
        self._check(x)
        if not -len(x.shape) <= axis < len(x.shape):
            raise KernelMisuse(f"tl.{op}: axis {axis} out of range for shape {x.shape}")
        shape = list(x.shape)
        shape[axis] = 1
        return self._math(op, [x], axis=axis, out_shape=tuple(shape))

    def sum(self, x, axis: int = -1): return self._reduce("sum", x, axis)  # noqa: E704
    def max(self, x, axis: int = -1): return self._reduce("max", x, axis)  # noqa: E704
    def min(self, x, axis: int = -1): return self._reduce("min", x, axis)  # noqa: E704
