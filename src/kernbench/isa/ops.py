"""The ops of a composite command, and the descriptor field sizes every command is
measured in (docs/adr/0011-pe-dispatch-cost.md).

Kept apart from the commands so it can be compiled (docs/adr/0069): the scheduler,
the plan cache and the hazard table read an op's fields many times per composite, and
from compiled code an attribute of a compiled class is a direct read, where one of an
interpreted dataclass is a lookup by name.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from kernbench.isa.handles import TensorHandle

FRAMING_BYTES = 4  # command-type discriminator + completion id reference
HANDLE_BYTES = 8
SCALAR_BYTES = 4


class Scope(Enum):
    """How often a composite op repeats within its phase."""

    KERNEL = "kernel"  # once per composite, at its position
    K_TILE = "k_tile"  # every K tile of the head GEMM
    OUTPUT_TILE = "output_tile"  # every output tile, after K accumulation


def extra_bytes(value: Any) -> int:
    """Descriptor bytes of one scalar field of an op or a command."""
    if isinstance(value, bool):
        return 1
    if isinstance(value, int | float):
        return SCALAR_BYTES
    if isinstance(value, tuple | list):
        return 1 + SCALAR_BYTES * len(value)
    if isinstance(value, str):
        return 1
    return SCALAR_BYTES


class OpSpec:
    """One op of a composite: named operands, scalar extras, optional output. Nothing
    changes an op once it is built (a composite builds several per call, so the
    constructor stays a plain one)."""

    __slots__ = ("kind", "scope", "operands", "extra", "out")

    def __init__(self, kind: str, scope: Scope, operands: dict[str, TensorHandle] | None = None,
                 extra: dict[str, Any] | None = None, out: TensorHandle | None = None) -> None:
        self.kind = kind
        self.scope = scope
        self.operands: dict[str, TensorHandle] = {} if operands is None else operands
        self.extra: dict[str, Any] = {} if extra is None else extra
        self.out = out

    def __repr__(self) -> str:
        return (f"OpSpec(kind={self.kind!r}, scope={self.scope}, operands={self.operands!r}, "
                f"extra={self.extra!r}, out={self.out!r})")

    @property
    def logical_bytes(self) -> int:
        size = (1 + 1  # opcode + scope enum
                + 1 + HANDLE_BYTES * len(self.operands)
                + (HANDLE_BYTES if self.out is not None else 0) + 1)
        for value in self.extra.values():
            size += extra_bytes(value)
        return size


def ops_accesses(ops: tuple[OpSpec, ...], rw_handles: tuple[TensorHandle, ...]
                 ) -> tuple[list[TensorHandle], list[TensorHandle]]:
    """(handles read, handles written) by a composite's ``ops`` and read-write handles:
    every operand is read, every output written, the read-write handles both, in op
    order. (Compiled with the ops: the hazard table asks for them at every dispatch.)"""
    reads: list[TensorHandle] = []
    writes: list[TensorHandle] = []
    for op in ops:
        for h in op.operands.values():
            reads.append(h)
    for op in ops:
        out = op.out
        if out is not None:
            writes.append(out)
    for h in rw_handles:
        reads.append(h)
        writes.append(h)
    return reads, writes
