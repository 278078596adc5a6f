"""``tl``: the kernel-side API (reference: docs/tl-api.md; decisions: docs/adr/0021-tl-kernel-api.md).

Every call builds a :class:`PeCommand` and hands it to the PE (greenlet mode)
or appends it to ``commands`` (command-list mode, for inspection). Semantics:

* ``tl.load`` is lazy: it issues the DMA and returns a TCM handle at once; the
  first op that consumes the handle waits for it.
* compute ops (``dot``, math, ``copy_to``, ``broadcast``) and ``tl.store``
  block the kernel until they finish; ``tl.composite`` does not (its output
  handle carries the pending completion).
* outputs are allocated from the PE's kernel scratch with a bump cursor that
  ``tl.scratch_scope`` rewinds; a handle used after its scope ended
  is an error, and in-flight writes into a scope finish before it is reused.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kernbench.components.builtin.pe_cost_model import PeCostModel
from kernbench.components.tiling import supertile
from kernbench.errors import KernelMisuse, KernelStateError, KernelTypeError
from kernbench.isa.commands import (
    CopyCmd,
    DmaReadCmd,
    DmaWriteCmd,
    GemmCmd,
    PeCommand,
    PeCpuOverheadCmd,
)
from kernbench.isa.dtypes import dtype_bytes, np_dtype
from kernbench.isa.handles import Completion, TensorHandle, set_arithmetic
from kernbench.triton_emu.scratch import Scope, Scratch
from kernbench.triton_emu.tl_composite import CompositeMixin, check_stationary
from kernbench.triton_emu.tl_math import MathMixin
from kernbench.triton_emu.tl_queues import QueuesMixin
from kernbench.triton_emu.tl_views import ViewsMixin

_active: list[TLContext | None] = [None]


class ScratchOverflow(KernelStateError):
    """A kernel allocated more scratch than its PE has (use tl.scratch_scope)."""


class TLContext(CompositeMixin, MathMixin, ViewsMixin, QueuesMixin):
    """The ``tl`` object one kernel instance receives (docs/tl-api.md).

    What it owns: the kernel's program ids (PE, CUBE, SIP), its scratch
    allocator and scopes, and the construction and checking of every command.
    What it does not own: timing. It hands each command to its executor
    (the PE's PE_CPU in a simulation, or a plain list in command-list mode).
    """

    def __init__(self, *, pe_id: int = 0, num_programs: int = 1, cube_id: int = 0,
                 num_cubes: int = 1, sip_id: int = 0, num_sips: int = 1, executor=None,
                 scratch_base: int = 0, scratch_size: int = 1 << 20,
                 cost_model: PeCostModel | None = None,
                 tile_shape: tuple[int, int, int] = (32, 64, 32)) -> None:
        self._ids = (pe_id, cube_id, sip_id)
        self._counts = (num_programs, num_cubes, num_sips)
        self._exec = executor  # PE_CPU in greenlet mode; None = command-list mode
        self.peak_scratch = 0  # (kept up to date by the scratch allocator)
        self._scratch = Scratch(self, scratch_base, scratch_size, self._overflow)
        # the compiled allocator's own methods, called without a method of ours between
        self._alloc = self._scratch.alloc
        self._new_id = self._scratch.new_id
        self.cost_model = cost_model or PeCostModel()
        self.tile_shape = tile_shape
        self.commands: list[PeCommand] = []

    # -- context plumbing ----------------------------------------------------
    @staticmethod
    def _set_active(ctx: TLContext | None) -> None:
        _active[0] = ctx

    @staticmethod
    def _get_active() -> TLContext:
        ctx = _active[0]
        if ctx is None:
            raise KernelStateError("no active TLContext: tensor operators only work inside a kernel")
        return ctx

    def _overflow(self, nbytes: int, in_use: int) -> None:
        raise ScratchOverflow(
            f"TLContext scratch overflow: {nbytes} more bytes do not fit in "
            f"{self._scratch.size} (in use: {in_use}); wrap per-tile work in tl.scratch_scope()")

    def _emit(self, cmd: PeCommand) -> Completion | None:
        if self._exec is None:
            self.commands.append(cmd)
            return None
        return self._exec.submit(cmd)

    def _check(self, *handles: TensorHandle) -> None:
        for h in handles:
            if not isinstance(h, TensorHandle):
                raise KernelTypeError(f"expected a tensor handle, got {type(h).__name__}")
            scope = h.scope
            if scope is not None and scope.dead:
                raise KernelMisuse(f"{h} is used after the tl.scratch_scope that allocated it ended")

    def _block(self, comp: Completion | None) -> None:
        if comp is not None:
            self._exec.wait(comp)

    def _write_now(self, h: TensorHandle, value) -> None:
        """Initialise ``h``; ``value()`` builds the array, only if data mode needs it."""
        if self._exec is not None:
            self._exec.write_now(h, value)

    # -- scalars / indices -----------------------------------------------------
    def program_id(self, axis: int = 0) -> int:
        """0: this PE's index in its CUBE's launch grid, 1: the CUBE, 2: the SIP."""
        if axis not in (0, 1, 2):
            raise KernelMisuse(f"program_id axis must be 0 (PE in cube), 1 (cube) or 2 (SIP), "
                               f"got {axis}")
        return self._ids[axis]

    def num_programs(self, axis: int = 0) -> int:
        """0: PEs per CUBE in the launch, 1: CUBEs in the launch, 2: SIPs in the system."""
        if axis not in (0, 1, 2):
            raise KernelMisuse(f"num_programs axis must be 0, 1 or 2, got {axis}")
        return self._counts[axis]

    @staticmethod
    def cdiv(a: int, b: int) -> int:
        return -(-a // b)

    @staticmethod
    def element_size(dtype: str) -> int:
        return dtype_bytes(dtype)

    def supertile(self, K: int, N: int) -> tuple[int, int, int]:
        """The (M, K, N) tile PE_SCHEDULER would use for a GEMM with this K and N."""
        return supertile(self.tile_shape, K, N)

    # -- creation (no command) -------------------------------------------------
    def zeros(self, shape: Sequence[int], dtype: str = "f16") -> TensorHandle:
        return self.full(shape, 0.0, dtype)

    def full(self, shape: Sequence[int], value: float, dtype: str = "f16") -> TensorHandle:
        h = self._alloc(tuple(shape), dtype)
        self._write_now(h, lambda: np.full(h.shape, value, np_dtype(dtype)))
        return h

    def arange(self, start: int, end: int, dtype: str = "i32") -> TensorHandle:
        if end <= start:
            raise KernelMisuse(f"tl.arange needs end > start, got [{start}, {end})")
        h = self._alloc((end - start,), dtype)
        self._write_now(h, lambda: np.arange(start, end).astype(np_dtype(dtype)))
        return h

    def ref(self, ptr: int, shape: Sequence[int], dtype: str = "f16",
            row_stride: int | None = None) -> TensorHandle:
        """An HBM view (virtual address ``ptr``) without moving data."""
        shape = tuple(int(s) for s in shape)
        if row_stride is not None and (len(shape) != 2 or row_stride < shape[1]):
            raise KernelMisuse(f"row_stride {row_stride} needs a 2-D shape whose rows fit in it")
        dtype_bytes(dtype)
        return TensorHandle(self._new_id(), int(ptr), shape, dtype, "hbm", False,
                            None if row_stride is None else int(row_stride))

    # -- data movement -----------------------------------------------------------
    def load(self, ptr: int, shape: Sequence[int], dtype: str = "f16",
             row_stride: int | None = None, out: TensorHandle | None = None) -> TensorHandle:
        """Issue an HBM -> TCM read and return at once (lazy: the first reader waits).

        ``out`` reuses an existing TCM buffer (explicit double buffering); the
        load then waits for earlier work that still uses that buffer.
        """
        src = self.ref(ptr, shape, dtype, row_stride)
        if out is None:
            dst = self._alloc(src.shape, dtype)
        else:
            self._check(out)
            if out.space != "tcm" or out.shape != src.shape or out.dtype != dtype:
                raise KernelMisuse(f"tl.load out= must be a TCM tensor of shape {src.shape} "
                                 f"and dtype {dtype}, got {out}")
            dst = out  # the scheduler orders this write after the buffer's readers
        dst.pending = self._emit(DmaReadCmd(src, dst))
        return dst

    def store(self, ptr: int, handle: TensorHandle, row_stride: int | None = None) -> None:
        self._check(handle)
        if handle.space != "tcm":
            raise KernelMisuse(f"tl.store needs a TCM handle, got {handle}")
        dst = self.ref(ptr, handle.shape, handle.dtype, row_stride)
        self._block(self._emit(DmaWriteCmd(handle, dst)))

    # -- compute -------------------------------------------------------------------
    def dot(self, a: TensorHandle, b: TensorHandle, acc: TensorHandle | None = None,
            out_dtype: str = "f32", stationary: str = "b") -> TensorHandle:
        """``a @ b`` (+ ``acc``) on the MAC array; ``stationary`` names the operand the
        array holds: "b" (weights, the default), "a", or "auto" (the cheaper one)."""
        self._check(a, b, *(h for h in (acc,) if h is not None))
        check_stationary("tl.dot", stationary)
        for h in (a, b):
            if h.space != "tcm":
                raise KernelMisuse(f"tl.dot operands must be in TCM (tl.load them first), got {h}")
        if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
            raise KernelMisuse(f"tl.dot shapes do not chain: {a.shape} x {b.shape}")
        shape = (a.shape[0], b.shape[1])
        if acc is not None and (acc.shape != shape or acc.space != "tcm"):
            raise KernelMisuse(f"tl.dot acc must be a TCM tensor of shape {shape}, got {acc}")
        out = acc if acc is not None else self._alloc(shape, out_dtype)
        comp = self._emit(GemmCmd(a, b, out, accumulate=acc is not None, stationary=stationary))
        self._block(comp)
        out.pending = comp
        return out

    # -- scratch scopes -------------------------------------------------------------
    def scratch_scope(self) -> Scope:
        """``with tl.scratch_scope():`` -- scratch allocated inside is given back at its
        end, and its handles may not be used after it."""
        return Scope(self._scratch)

    def copy_to(self, dst: TensorHandle, src: TensorHandle) -> None:
        self._check(dst, src)
        if dst.shape != src.shape or dst.dtype != src.dtype:
            raise KernelMisuse(f"tl.copy_to needs equal shapes and dtypes, got {dst} <- {src}")
        if dst.space != "tcm" or src.space != "tcm":
            raise KernelMisuse(f"tl.copy_to copies TCM to TCM, got {dst} <- {src}")
        comp = self._emit(CopyCmd(src, dst))
        self._block(comp)
        dst.pending = comp

    def mark(self, label: str) -> None:
        """A zero-cost op-log label at the kernel's current time (per-phase timing)."""
        if not isinstance(label, str) or not label:
            raise KernelMisuse(f"tl.mark needs a non-empty string label, got {label!r}")
        if self._exec is not None:
            self._exec.mark(label)

    # -- control -------------------------------------------------------------------------
    def cycles(self, n: int) -> None:
        if n < 0:
            raise KernelMisuse(f"tl.cycles needs n >= 0, got {n}")
        comp = self._emit(PeCpuOverheadCmd(int(n)))
        self._block(comp)

    def wait(self, handle: TensorHandle | Completion | None = None) -> None:
        if handle is not None and not isinstance(handle, TensorHandle | Completion):
            raise KernelTypeError(f"tl.wait takes a tensor handle, a completion or None, got {handle!r}")
        if self._exec is None:
            return
        if handle is None:
            self._exec.wait_all()
        elif isinstance(handle, TensorHandle):
            if handle.pending is not None:
                self._exec.wait(handle.pending)
        else:
            self._exec.wait(handle)

def _arithmetic(op: str, operands: list):
    """``a + b`` and friends on handles: the active kernel's ``tl`` op."""
    return TLContext._get_active()._math(op, operands)


set_arithmetic(_arithmetic)


def run_kernel(kernel_fn, tl: TLContext, *args, **kwargs):
    """Run a kernel in command-list mode (no simulation) and return its commands."""
    previous = _active[0]
    TLContext._set_active(tl)
    try:
        kernel_fn(*args, tl=tl, **kwargs)
    finally:
        TLContext._set_active(previous)
    return tl.commands
