"""A kernel's TCM scratch: a bump allocator whose scopes give memory back (``tl``).

Every tensor a kernel makes in TCM (a load's destination, an op's result, a recipe's
intermediates) comes from here. A prefill kernel allocates a dozen per ring step, so
the allocator is compiled (docs/adr/0069); ``TLContext`` holds one and hands out its
bound ``alloc``. Handle ids are numbered here too, for every handle the kernel makes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from kernbench.isa.handles import TensorHandle, element_bytes

ALIGN: Final = 64


class Scope:
    """One ``tl.scratch_scope``: the cursor it rewinds to, and whether it has ended
    (each handle allocated in it points here, ``TensorHandle.scope``). Its own context
    manager: a kernel opens one or two per tile."""

    def __init__(self, scratch: Scratch) -> None:
        self.scratch = scratch
        self.cursor = 0
        self.dead = False

    def __enter__(self) -> None:
        self.cursor = self.scratch.cursor
        self.scratch.scopes.append(self)

    def __exit__(self, *exc_info: object) -> None:
        # recycled memory is safe: PE_SCHEDULER orders later writers after the
        # ops still reading or writing it (address hazards), without a CPU stall
        scratch = self.scratch
        scratch.scopes.pop()
        self.dead = True
        scratch.cursor = self.cursor


class Scratch:
    """``size`` bytes of TCM from ``base``. ``owner.peak_scratch`` follows the largest
    cursor reached; ``overflow(nbytes, in_use)`` raises when a tensor does not fit."""

    def __init__(self, owner: Any, base: int, size: int,
                 overflow: Callable[[int, int], None]) -> None:
        self.owner = owner
        self.base = base
        self.size = size
        self.overflow = overflow
        self.cursor = 0
        self.peak = 0
        self.scopes: list[Scope] = []
        self.counter = 0

    def new_id(self) -> str:
        self.counter += 1
        return f"h{self.counter}"

    def alloc(self, shape: tuple, dtype: str) -> TensorHandle:
        """A new TCM tensor of ``shape`` (a tuple) and ``dtype``, 64-byte aligned."""
        nbytes = max(1, math.prod(shape)) * element_bytes(dtype)
        offset = self.cursor
        cursor = -(-(offset + nbytes) // ALIGN) * ALIGN
        self.cursor = cursor
        if cursor > self.size:
            self.overflow(nbytes, offset)
        if cursor > self.peak:
            self.peak = cursor
            self.owner.peak_scratch = cursor
        self.counter += 1
        h = TensorHandle(f"h{self.counter}", self.base + offset, shape, dtype, "tcm", True)
        if self.scopes:
            h.scope = self.scopes[-1]
        return h

    def scope(self) -> Scope:
        return Scope(self)
