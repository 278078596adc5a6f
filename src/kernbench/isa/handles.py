"""Tensor handles (what a kernel holds) and completions (when work is done)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeAlias

from kernbench.isa import dtypes

# (Final: the compiled twin keeps these in C statics, not looked up by name per call; ADR 0065)
dtype_bytes: Final = dtypes.dtype_bytes
ELEMENT_BYTES: Final = dtypes.ELEMENT_BYTES


def element_bytes(dtype: Any) -> int:
    """``dtype_bytes`` without a call into the interpreter for a known dtype (compiled
    callers size every new handle and scratch tensor); an unknown one gets its error."""
    if isinstance(dtype, str):
        n = ELEMENT_BYTES.get(dtype)
        if n is not None:
            return n
    return dtype_bytes(dtype)


# A view's bytes as (space, start, end): the unit of PE hazard tracking. A plain
# ``tuple`` to the compiler on purpose: typed ``tuple[str, int, int]``, the compiled
# twins pass it as a C struct, so every time one was stored in a list or a set, or
# hashed, a new tuple and two new ints were built (ADR 0066).
ByteRange: TypeAlias = tuple

# The arithmetic of handles (``a + b`` in a kernel is ``tl.add(a, b)``): the ``tl``
# surface installs it (:func:`set_arithmetic`), so this layer never imports it.
_arithmetic: Callable[[str, list], Any] | None = None


def set_arithmetic(fn: Callable[[str, list], Any]) -> None:
    """Route the operators of every handle to ``fn(op, [left, right])``."""
    global _arithmetic
    _arithmetic = fn


def _arith(op: str, left: Any, right: Any) -> Any:
    if _arithmetic is None:
        raise TypeError(f"tensor handle arithmetic ({op}) needs the tl surface")
    return _arithmetic(op, [left, right])


def numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


class Completion:
    """When an operation finishes: a known time, or a signal from the owning unit.

    Work timed when it is issued has ``done_at`` at once. Work whose end depends
    on the future (a composite's tile pipeline, a receive that waits for another
    PE, a transfer sharing links fairly) is pending until its unit calls
    :meth:`complete` (or :meth:`fail`). Code that continues after it registers
    :meth:`then`, which runs at once when the time is known; a kernel or a
    process that must block yields :meth:`waitable`, a SimPy event made on
    first need, so work nobody blocks on costs no event.
    """

    __slots__ = ("done_at", "event", "label", "value", "_then", "_error")

    def __init__(self, done_at: float | None = None, event=None, label: str = "",
                 value=None) -> None:
        self.done_at = done_at
        self.event = event
        self.label = label
        self.value = value  # what the work produced, if anything (e.g. a message payload)
        self._then: list | None = None
        self._error: BaseException | None = None  # a failure nobody waited for yet

    @property
    def known(self) -> bool:
        return self.done_at is not None

    def then(self, fn) -> None:
        """Call ``fn(self)`` when the work is done: now if it is, else at completion."""
        if self.done_at is not None:
            fn(self)
        elif self._then is None:
            self._then = [fn]
        else:
            self._then.append(fn)

    def waitable(self, env):
        """The event a blocked kernel or process yields on (made on first need)."""
        if self.event is None:
            self.event = env.event()
            if self.done_at is not None:
                self.event.succeed(self.done_at)
            elif self._error is not None:
                self.event.fail(self._error)
        return self.event

    def complete(self, t: float, value=None) -> None:
        """Signal that the work finished at simulated time ``t``: the current time, or
        a later one already fixed (a waiter's clock then moves on to ``t``)."""
        self.done_at = t
        self.value = value
        then, self._then = self._then, None
        if then:
            for fn in then:
                fn(self)
        if self.event is not None:
            self.event.succeed(t)

    def fail(self, error: BaseException) -> None:
        """Signal that the work cannot finish; whoever waits on it sees ``error``, now or
        when it first waits (a kernel waits for all its work before it ends)."""
        if self.event is None:
            self._error = error
        else:
            self.event.fail(error)

    def __repr__(self) -> str:
        return f"Completion({self.label or '?'} at {self.done_at})"


class TensorHandle:
    """A tensor as the kernel sees it: where it lives, its shape, and readiness.

    ``space`` is "tcm" (on-chip, addr = encoded TCM physical address) or "hbm"
    (addr = virtual address). ``pinned`` means already in TCM (no DMA needed).
    ``row_stride`` (elements) describes a 2-D view into a wider row-major
    matrix. ``transposed`` marks a ``tl.trans`` view of stored data.
    ``pending`` is the completion of the op that produces it (lazy loads,
    composites); consumers wait for it. ``scope`` is the ``tl.scratch_scope`` whose
    scratch it lives in (None outside one): using it once that scope has ended is
    an error, and the handle, not a table in the kernel's context, carries it, so a
    long kernel does not keep every handle it ever made alive.
    """

    __slots__ = ("id", "addr", "shape", "dtype", "space", "pinned", "row_stride",
                 "transposed", "pending", "scope", "_numel", "_nbytes", "_range")

    def __init__(self, id: str, addr: int, shape: tuple[int, ...], dtype: str, space: str,
                 pinned: bool, row_stride: int | None = None, transposed: bool = False,
                 pending: Completion | None = None) -> None:
        self.id = id
        self.addr = addr
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.space = space
        self.pinned = pinned
        self.row_stride = row_stride
        self.transposed = transposed
        self.pending = pending
        self.scope: Any = None  # a tl scratch scope (it has ``dead``); None: not scratch
        self._numel = -1
        self._nbytes = -1
        self._range: ByteRange | None = None

    @property
    def nbytes(self) -> int:
        nb = self._nbytes
        if nb < 0:  # computed once: shape and dtype never change
            nb = self._nbytes = self.numel * element_bytes(self.dtype)
        return nb

    @property
    def numel(self) -> int:
        n = self._numel
        if n < 0:  # computed once, like nbytes
            n = self._numel = numel(self.shape)
        return n

    def byte_range(self) -> ByteRange:
        """(space, start, end) of the bytes this view may touch (a strided 2-D view
        spans its rows), the unit of PE hazard tracking; computed once (a view's
        fields never change)."""
        r = self._range
        if r is not None:
            return r
        bpe = element_bytes(self.dtype)
        if len(self.shape) == 2 and self.row_stride is not None:
            rows, cols = (self.shape[1], self.shape[0]) if self.transposed else self.shape
            extent = ((rows - 1) * self.row_stride + cols) * bpe
        else:
            extent = self.nbytes
        r = self._range = (self.space, self.addr, self.addr + extent)
        return r

    def __add__(self, other: Any) -> Any:
        return _arith("add", self, other)

    def __radd__(self, other: Any) -> Any:
        return _arith("add", other, self)

    def __sub__(self, other: Any) -> Any:
        return _arith("sub", self, other)

    def __rsub__(self, other: Any) -> Any:
        return _arith("sub", other, self)

    def __mul__(self, other: Any) -> Any:
        return _arith("mul", self, other)

    def __rmul__(self, other: Any) -> Any:
        return _arith("mul", other, self)

    def __truediv__(self, other: Any) -> Any:
        return _arith("div", self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return _arith("div", other, self)

    def __repr__(self) -> str:
        t = ".T" if self.transposed else ""
        return f"TensorHandle({self.id}{t} {self.space}@{self.addr:#x} {self.shape} {self.dtype})"

    # arithmetic operators are attached by kernbench.triton_emu.tl_context


def ready_at(h: TensorHandle) -> float:
    """When ``h``'s data is ready: its producer's end, 0.0 when nothing produces it."""
    p = h.pending
    if p is None:
        return 0.0
    if p.done_at is None:
        raise RuntimeError(f"{h} is still being produced; the kernel must wait for it first")
    return p.done_at
