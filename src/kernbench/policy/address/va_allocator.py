"""The system-wide virtual address allocator: page-aligned first-fit (docs/adr/0014-unified-virtual-addresses.md)."""

from __future__ import annotations

from kernbench.errors import VaAllocationError
from kernbench.policy.address.free_list import FreeList
from kernbench.units import GiB, MiB

DEFAULT_VA_BASE = 0x1_0000_0000  # 4 GiB: clear of host-side addresses
DEFAULT_VA_SIZE = 64 * GiB


class VirtualAllocator:
    def __init__(self, va_base: int = DEFAULT_VA_BASE, va_size: int = DEFAULT_VA_SIZE,
                 page_size: int = 2 * MiB) -> None:
        if page_size <= 0 or page_size & (page_size - 1):
            raise ValueError(f"page_size must be a power of two, got {page_size}")
        if va_base % page_size:
            raise ValueError(f"va_base {va_base:#x} is not aligned to the page size {page_size}")
        self.page_size = page_size
        self._free = FreeList(va_size, base=va_base, what="virtual address space",
                              error=VaAllocationError)

    def _align_up(self, nbytes: int) -> int:
        return -(-nbytes // self.page_size) * self.page_size

    def alloc(self, nbytes: int) -> int:
        return self._free.alloc(self._align_up(nbytes), self.page_size)

    def free(self, va: int, nbytes: int) -> None:
        self._free.free(va, self._align_up(nbytes))

    @property
    def used(self) -> int:
        return self._free.used

    @property
    def blocks(self) -> list[tuple[int, int]]:
        return self._free.blocks
