"""A page-table MMU: virtual pages map to physical page frames (encoded PAs)."""

from __future__ import annotations

from kernbench.errors import MmuFault


class PageTableMmu:
    """Single-level page table keyed by virtual page number.

    ``map`` covers whole pages; a translation returns the encoded physical
    address. Ranges that cross pages translate into contiguous segments.
    """

    def __init__(self, page_size: int) -> None:
        if page_size <= 0 or page_size & (page_size - 1):
            raise ValueError(f"page_size must be a power of two, got {page_size}")
        self.page_size = page_size
        self._shift = page_size.bit_length() - 1
        self._table: dict[int, int] = {}

    def map(self, va: int, pa: int, nbytes: int) -> None:
        if va % self.page_size or pa % self.page_size:
            raise MmuFault(f"map needs page-aligned addresses (va={va:#x}, pa={pa:#x}, "
                           f"page={self.page_size})")
        pages = -(-nbytes // self.page_size)
        vpn0 = va >> self._shift
        clash = [vpn for vpn in range(vpn0, vpn0 + pages) if vpn in self._table]
        if clash:
            raise MmuFault(f"virtual page {clash[0] << self._shift:#x} is already mapped")
        for k in range(pages):
            self._table[vpn0 + k] = pa + k * self.page_size

    def unmap(self, va: int, nbytes: int) -> None:
        pages = -(-nbytes // self.page_size)
        vpn0 = va >> self._shift
        missing = [vpn for vpn in range(vpn0, vpn0 + pages) if vpn not in self._table]
        if missing:
            raise MmuFault(f"unmap of unmapped virtual page {missing[0] << self._shift:#x}")
        for k in range(pages):
            del self._table[vpn0 + k]

    def translate(self, va: int) -> int:
        frame = self._table.get(va >> self._shift)
        if frame is None:
            raise MmuFault(f"page fault: virtual address {va:#x} is not mapped")
        return frame + (va & (self.page_size - 1))

    def translate_range(self, va: int, nbytes: int) -> list[tuple[int, int]]:
        """Physical (pa, length) segments covering ``[va, va + nbytes)``, merged when contiguous."""
        segments: list[tuple[int, int]] = []
        pos, end = va, va + nbytes
        while pos < end:
            page_end = ((pos >> self._shift) + 1) << self._shift
            length = min(end, page_end) - pos
            pa = self.translate(pos)
            if segments and segments[-1][0] + segments[-1][1] == pa:
                segments[-1] = (segments[-1][0], segments[-1][1] + length)
            else:
                segments.append((pa, length))
            pos += length
        return segments

    @property
    def mapped_pages(self) -> int:
        return len(self._table)
