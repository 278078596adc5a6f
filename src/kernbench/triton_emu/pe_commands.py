"""PE commands: what a kernel's ``tl`` calls hand to PE_SCHEDULER.

Every command is a frozen dataclass with ``logical_bytes``, the size of its
hardware descriptor by the ADR-0064 D2 rule (framing 4 B, opcode 1 B, enum
1 B, tensor reference 8 B, scalar 4 B, tuple length 1 B), from which PE_CPU
derives its dispatch cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

DTYPES = {"f16": np.float16, "f32": np.float32, "bf16": np.float32, "i32": np.int32,
          "i8": np.int8, "u8": np.uint8, "bool": np.bool_}
DTYPE_BYTES = {"f16": 2, "f32": 4, "bf16": 2, "i32": 4, "i8": 1, "u8": 1, "bool": 1}

FRAMING_BYTES = 4  # command-type discriminator + completion id reference
HANDLE_BYTES = 8
SCALAR_BYTES = 4
# A move between two handles: opcode, source, destination, byte count.
MOVE_BYTES = FRAMING_BYTES + 1 + 2 * HANDLE_BYTES + SCALAR_BYTES


def dtype_bytes(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r} (allowed: {', '.join(DTYPE_BYTES)})") from None


def numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


class Completion:
    """When an operation finishes: a known time, or a SimPy event still pending.

    Most PE work is timed analytically, so ``done_at`` is known at issue. Work
    whose end depends on the future (a composite's tile pipeline) carries an
    ``event`` until it completes; ``done_at`` is filled in then.
    """

    __slots__ = ("done_at", "event", "label")

    def __init__(self, done_at: float | None = None, event=None, label: str = "") -> None:
        self.done_at = done_at
        self.event = event
        self.label = label

    @property
    def known(self) -> bool:
        return self.done_at is not None

    def __repr__(self) -> str:
        return f"Completion({self.label or '?'} at {self.done_at})"


class TensorHandle:
    """A tensor as the kernel sees it: where it lives, its shape, and readiness.

    ``space`` is "tcm" (on-chip, addr = encoded TCM physical address) or "hbm"
    (addr = virtual address). ``pinned`` means already in TCM (no DMA needed).
    ``row_stride`` (elements) describes a 2-D view into a wider row-major
    matrix. ``transposed`` marks a ``tl.trans`` view of stored data.
    ``pending`` is the completion of the op that produces it (lazy loads,
    composites); consumers wait for it.
    """

    __slots__ = ("id", "addr", "shape", "dtype", "space", "pinned", "row_stride",
                 "transposed", "pending")

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

    @property
    def nbytes(self) -> int:
        return numel(self.shape) * dtype_bytes(self.dtype)

    @property
    def numel(self) -> int:
        return numel(self.shape)

    def __repr__(self) -> str:
        t = ".T" if self.transposed else ""
        return f"TensorHandle({self.id}{t} {self.space}@{self.addr:#x} {self.shape} {self.dtype})"

    # arithmetic operators are attached by kernbench.triton_emu.tl_context


class Scope(Enum):
    """How often a composite op repeats within its phase (ADR-0065 D3)."""

    KERNEL = "kernel"  # once per composite, at its position
    K_TILE = "k_tile"  # every K tile of the head GEMM
    OUTPUT_TILE = "output_tile"  # every output tile, after K accumulation


def extra_bytes(value: Any) -> int:
    if isinstance(value, bool):
        return 1
    if isinstance(value, int | float):
        return SCALAR_BYTES
    if isinstance(value, tuple | list):
        return 1 + SCALAR_BYTES * len(value)
    if isinstance(value, str):
        return 1
    return SCALAR_BYTES


@dataclass(frozen=True, eq=False)
class OpSpec:
    """One op of a composite: named operands, scalar extras, optional output."""

    kind: str
    scope: Scope
    operands: dict[str, TensorHandle] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    out: TensorHandle | None = None

    @property
    def logical_bytes(self) -> int:
        return (1 + 1  # opcode + scope enum
                + 1 + HANDLE_BYTES * len(self.operands)
                + (HANDLE_BYTES if self.out is not None else 0)
                + 1 + sum(extra_bytes(v) for v in self.extra.values()))


@dataclass(frozen=True, eq=False)
class PeCommand:
    """Base class; subclasses define their fields and ``logical_bytes``."""

    single_op = True  # D8: every command but a composite takes the light FIXED cost

    @property
    def logical_bytes(self) -> int:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def accesses(self) -> tuple[list[TensorHandle], list[TensorHandle]]:
        """(handles read, handles written): what PE hazard tracking orders on."""
        return ([], [])


@dataclass(frozen=True, eq=False)
class MoveCmd(PeCommand):
    """Base of the three commands that move ``src`` into ``dst``."""

    src: TensorHandle
    dst: TensorHandle

    @property
    def logical_bytes(self) -> int:
        return MOVE_BYTES

    def accesses(self) -> tuple[list[TensorHandle], list[TensorHandle]]:
        return ([self.src], [self.dst])


@dataclass(frozen=True, eq=False)
class DmaReadCmd(MoveCmd):
    """``src``: HBM view being read; ``dst``: TCM handle receiving it."""


@dataclass(frozen=True, eq=False)
class DmaWriteCmd(MoveCmd):
    """``src``: TCM handle; ``dst``: HBM view written."""


@dataclass(frozen=True, eq=False)
class GemmCmd(PeCommand):
    a: TensorHandle
    b: TensorHandle
    out: TensorHandle
    accumulate: bool = False  # out += a @ b

    @property
    def logical_bytes(self) -> int:
        return FRAMING_BYTES + 1 + 3 * HANDLE_BYTES + 3 * SCALAR_BYTES + 1  # m,k,n + flag

    def accesses(self) -> tuple[list[TensorHandle], list[TensorHandle]]:
        return ([self.a, self.b] + ([self.out] if self.accumulate else []), [self.out])


@dataclass(frozen=True, eq=False)
class MathCmd(PeCommand):
    op: str
    inputs: tuple[TensorHandle, ...]
    out: TensorHandle
    axis: int | None = None
    scalars: tuple[float, ...] = ()

    @property
    def logical_bytes(self) -> int:
        return (FRAMING_BYTES + 1 + 1 + HANDLE_BYTES * len(self.inputs) + HANDLE_BYTES
                + (SCALAR_BYTES if self.axis is not None else 0)
                + 1 + SCALAR_BYTES * len(self.scalars))

    def accesses(self) -> tuple[list[TensorHandle], list[TensorHandle]]:
        return (list(self.inputs), [self.out])


@dataclass(frozen=True, eq=False)
class CopyCmd(MoveCmd):
    """TCM -> TCM copy on the vector engine (``tl.copy_to``)."""


@dataclass(frozen=True, eq=False)
class BroadcastCmd(PeCommand):
    """Replicate ``src`` along size-1 axes into ``out`` (``tl.broadcast``)."""

    src: TensorHandle
    out: TensorHandle
    new_shape: tuple[int, ...]

    @property
    def logical_bytes(self) -> int:
        return FRAMING_BYTES + 1 + 2 * HANDLE_BYTES + 1 + SCALAR_BYTES * len(self.new_shape)

    def accesses(self) -> tuple[list[TensorHandle], list[TensorHandle]]:
        return ([self.src], [self.out])


@dataclass(frozen=True, eq=False)
class CompositeCmd(PeCommand):
    """A flat, ordered op list PE_SCHEDULER turns into a tile pipeline (ADR-0065)."""

    ops: tuple[OpSpec, ...]
    rw_handles: tuple[TensorHandle, ...] = ()
    tile_shape: tuple[int, int, int] | None = None
    single_op = False

    @property
    def logical_bytes(self) -> int:
        return (FRAMING_BYTES + 1 + sum(op.logical_bytes for op in self.ops)
                + 1 + HANDLE_BYTES * len(self.rw_handles))

    def accesses(self) -> tuple[list[TensorHandle], list[TensorHandle]]:
        reads = [h for op in self.ops for h in op.operands.values()] + list(self.rw_handles)
        writes = [op.out for op in self.ops if op.out is not None] + list(self.rw_handles)
        return (reads, writes)

    @property
    def gemm_index(self) -> int | None:
        for i, op in enumerate(self.ops):
            if op.kind == "gemm":
                return i
        return None


@dataclass(frozen=True, eq=False)
class PeCpuOverheadCmd(PeCommand):
    """Explicit PE_CPU cycles (``tl.cycles``); bypasses the dispatch formula."""

    cycles: int

    @property
    def logical_bytes(self) -> int:
        return 0
