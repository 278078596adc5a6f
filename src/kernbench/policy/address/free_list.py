"""First-fit free list with coalescing, shared by the PA and VA allocators.

Blocks are kept sorted by start offset. ``free`` validates its range (inside
the region, not overlapping a free block) in O(log n) with bisect, so a double
free or a wrong size is an error instead of silent corruption.

Aligned allocations leave small gaps behind (the padding up to each aligned
start), so a long-lived list holds many blocks too small for a large request.
Blocks of at least ``index_from`` bytes are also listed by start, and a request
that large looks at them alone: the same first fit, without walking the gaps
(a model's KV caches and weights made first fit quadratic in the layers).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort

from kernbench.errors import AllocationError

# bytes: the default size from which blocks are indexed. A page: the gaps that aligned
# allocations leave are smaller than their alignment, so page-aligned memory (HBM, VA)
# keeps every gap out of the index, and any request of a page or more skips them all.
INDEX_FROM = 4096


class FreeList:
    def __init__(self, capacity: int, base: int = 0, *, what: str = "memory",
                 error: type[AllocationError] = AllocationError,
                 index_from: int = INDEX_FROM) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.base = base
        self.capacity = capacity
        self.used = 0
        self._what = what
        self._error = error
        self._starts: list[int] = [base]
        self._sizes: list[int] = [capacity]
        self._index_from = index_from
        self._large: list[int] = [base] if capacity >= index_from else []  # their starts

    @property
    def blocks(self) -> list[tuple[int, int]]:
        """Free blocks as sorted (start, size) pairs."""
        return list(zip(self._starts, self._sizes, strict=True))

    @property
    def largest_free(self) -> int:
        return max(self._sizes, default=0)

    def alloc(self, nbytes: int, align: int = 1) -> int:
        """Take ``nbytes`` from the first block that fits (with ``align``-aligned start)."""
        if nbytes <= 0:
            raise ValueError(f"allocation size must be positive, got {nbytes}")
        i = self._first_fit(nbytes, align)
        if i < 0:
            raise self._error(
                f"{self._what} overflow: required {nbytes} bytes, largest free block "
                f"{self.largest_free} bytes ({self.capacity - self.used} bytes free in total)")
        start, size = self._starts[i], self._sizes[i]
        aligned = _aligned(start, align)
        pad = aligned - start
        tail = size - pad - nbytes
        repl_starts, repl_sizes = [], []
        if pad:
            repl_starts.append(start)
            repl_sizes.append(pad)
        if tail:
            repl_starts.append(aligned + nbytes)
            repl_sizes.append(tail)
        self._unindex(start)
        self._starts[i:i + 1] = repl_starts
        self._sizes[i:i + 1] = repl_sizes
        for s, n in zip(repl_starts, repl_sizes, strict=True):
            self._index(s, n)
        self.used += nbytes
        return aligned

    def _first_fit(self, nbytes: int, align: int) -> int:
        """Index of the first block holding ``nbytes`` at an aligned start, or -1. A
        block smaller than the request never fits, so a large request only looks at
        the indexed blocks."""
        starts, sizes = self._starts, self._sizes
        if nbytes >= self._index_from:
            candidates = (bisect_left(starts, s) for s in self._large)
        else:
            candidates = range(len(starts))
        for i in candidates:
            start = starts[i]
            if start + sizes[i] - _aligned(start, align) >= nbytes:
                return i
        return -1

    def free(self, offset: int, nbytes: int) -> None:
        """Return ``[offset, offset + nbytes)`` and merge it with free neighbours."""
        end = offset + nbytes
        if nbytes <= 0 or offset < self.base or end > self.base + self.capacity:
            raise ValueError(f"free of [{offset:#x}, {end:#x}) lies outside the {self._what} region")
        starts, sizes = self._starts, self._sizes
        i = bisect_right(starts, offset)
        if i and starts[i - 1] + sizes[i - 1] > offset:
            raise ValueError(f"free of [{offset:#x}, {end:#x}) overlaps a free block (double free?)")
        if i < len(starts) and starts[i] < end:
            raise ValueError(f"free of [{offset:#x}, {end:#x}) overlaps a free block (double free?)")
        merge_prev = i > 0 and starts[i - 1] + sizes[i - 1] == offset
        merge_next = i < len(starts) and starts[i] == end
        if merge_next:
            self._unindex(starts[i])
        if merge_prev:
            self._unindex(starts[i - 1])
        if merge_prev and merge_next:
            sizes[i - 1] += nbytes + sizes[i]
            del starts[i], sizes[i]
        elif merge_prev:
            sizes[i - 1] += nbytes
        elif merge_next:
            starts[i] = offset
            sizes[i] += nbytes
        else:
            starts.insert(i, offset)
            sizes.insert(i, nbytes)
        j = i - 1 if merge_prev else i  # the block the freed range is now part of
        self._index(starts[j], sizes[j])
        self.used -= nbytes

    def _index(self, start: int, size: int) -> None:
        if size >= self._index_from:
            insort(self._large, start)

    def _unindex(self, start: int) -> None:
        large = self._large
        j = bisect_left(large, start)
        if j < len(large) and large[j] == start:
            del large[j]


def _aligned(start: int, align: int) -> int:
    """The first ``align``-aligned offset at or after ``start``."""
    return -(-start // align) * align
