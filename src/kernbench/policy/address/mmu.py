"""A page-granular MMU that stores mappings as regions.

``map`` takes page-aligned (va, pa, nbytes) and records one region, so a
tensor shard costs one entry however many pages it spans; translation is a
bisect over region starts. Overlapping maps, unmapped accesses and partial
unmaps of unmapped pages are :class:`MmuFault` errors.
"""

from __future__ import annotations

import bisect
from typing import Final

from kernbench.errors import MmuFault

# (Final: the compiled twin keeps these in C statics, not looked up by name per call; ADR 0065)
bisect_right: Final = bisect.bisect_right


class PageTableMmu:
    def __init__(self, page_size: int) -> None:
        if page_size <= 0 or page_size & (page_size - 1):
            raise ValueError(f"page_size must be a power of two, got {page_size}")
        self.page_size = page_size
        self._starts: list[int] = []  # region va starts, sorted
        self._ends: list[int] = []
        self._pas: list[int] = []
        # the region the last translation found: a DMA stream translates address after
        # address of one tensor, so most lookups skip the bisect (reset on any change)
        self._last: tuple[int, int, int] = (0, 0, 0)

    def _pages(self, nbytes: int) -> int:
        return -(-nbytes // self.page_size) * self.page_size

    def map(self, va: int, pa: int, nbytes: int) -> None:
        if va % self.page_size or pa % self.page_size:
            raise MmuFault(f"map needs page-aligned addresses (va={va:#x}, pa={pa:#x}, "
                           f"page={self.page_size})")
        if nbytes <= 0:
            raise MmuFault(f"map of {nbytes} bytes")
        end = va + self._pages(nbytes)
        i = bisect_right(self._starts, va)
        if (i and self._ends[i - 1] > va) or (i < len(self._starts) and self._starts[i] < end):
            clash = va if i and self._ends[i - 1] > va else self._starts[i]
            raise MmuFault(f"virtual page {clash - clash % self.page_size:#x} is already mapped")
        self._starts.insert(i, va)
        self._ends.insert(i, end)
        self._pas.insert(i, pa)
        self._last = (0, 0, 0)

    def map_many(self, regions: list[tuple[int, int, int]]) -> None:
        """:meth:`map` of each (va, pa, nbytes); regions given in increasing va order
        beyond everything mapped (a new tensor's shards) are appended at once."""
        self.map_batch(RegionBatch(regions, self.page_size))

    def map_batch(self, batch: RegionBatch) -> None:
        """:meth:`map_many` of regions checked once for every MMU that maps them."""
        if batch.page_size != self.page_size or batch.starts is None or (
                batch.starts and self._ends and batch.starts[0] < self._ends[-1]):
            for region in batch.regions:  # the general path, with its errors
                self.map(*region)
            return
        self._starts += batch.starts
        self._ends += batch.ends
        self._pas += batch.pas
        self._last = (0, 0, 0)

    def unmap(self, va: int, nbytes: int) -> None:
        """Unmap whole pages ``[va, va + nbytes)``; regions are split as needed."""
        end = va + self._pages(nbytes)
        pos = va
        self._last = (0, 0, 0)
        while pos < end:
            i = bisect_right(self._starts, pos) - 1
            if i < 0 or self._ends[i] <= pos:
                raise MmuFault(f"unmap of unmapped virtual page {pos - pos % self.page_size:#x}")
            s, e, pa = self._starts[i], self._ends[i], self._pas[i]
            cut_end = min(e, end)
            pieces = []
            if s < pos:
                pieces.append((s, pos, pa))
            if cut_end < e:
                pieces.append((cut_end, e, pa + (cut_end - s)))
            del self._starts[i], self._ends[i], self._pas[i]
            for k, (ps, pe, ppa) in enumerate(pieces):
                self._starts.insert(i + k, ps)
                self._ends.insert(i + k, pe)
                self._pas.insert(i + k, ppa)
            pos = cut_end

    def region(self, va: int) -> tuple[int, int, int]:
        """(region va start, region va end, pa of the start) containing ``va``."""
        last = self._last
        if last[0] <= va < last[1]:
            return last
        i = bisect_right(self._starts, va) - 1
        if i < 0 or self._ends[i] <= va:
            raise MmuFault(f"page fault: virtual address {va:#x} is not mapped", va=va)
        last = self._last = (self._starts[i], self._ends[i], self._pas[i])
        return last

    def translate(self, va: int) -> int:
        start, _, pa = self.region(va)
        return pa + (va - start)

    def translate_range(self, va: int, nbytes: int) -> list[tuple[int, int]]:
        """Physical (pa, length) segments covering ``[va, va + nbytes)``, merged when contiguous."""
        segments: list[tuple[int, int]] = []
        pos, end = va, va + nbytes
        while pos < end:
            start, rend, pa0 = self.region(pos)
            length = min(end, rend) - pos
            pa = pa0 + (pos - start)
            if segments and segments[-1][0] + segments[-1][1] == pa:
                segments[-1] = (segments[-1][0], segments[-1][1] + length)
            else:
                segments.append((pa, length))
            pos += length
        return segments

    @property
    def mapped_pages(self) -> int:
        return sum(e - s for s, e in zip(self._starts, self._ends, strict=True)) // self.page_size

    @property
    def regions(self) -> int:
        return len(self._starts)


class RegionBatch:
    """(va, pa, nbytes) regions for :meth:`PageTableMmu.map_batch`, with their page
    bounds worked out once: every PE holding a shard of a tensor maps all of it.
    ``starts`` is None unless the regions are page-aligned and in increasing va order
    (then each MMU maps them one by one, with the errors of :meth:`~PageTableMmu.map`)."""

    __slots__ = ("regions", "page_size", "starts", "ends", "pas")

    def __init__(self, regions: list[tuple[int, int, int]], page_size: int) -> None:
        self.regions, self.page_size = regions, page_size
        starts: list[int] = []
        ends: list[int] = []
        pas: list[int] = []
        last, ordered = 0, True
        for va, pa, nbytes in regions:
            if va % page_size or pa % page_size or nbytes <= 0 or va < last:
                ordered = False
                break
            starts.append(va)
            pas.append(pa)
            last = va + -(-nbytes // page_size) * page_size
            ends.append(last)
        self.starts: list[int] | None = starts if ordered else None
        self.ends, self.pas = (ends, pas) if ordered else ([], [])
