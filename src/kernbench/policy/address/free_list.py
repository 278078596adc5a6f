"""First-fit free list with coalescing, shared by the PA and VA allocators.

Blocks are kept sorted by start offset. ``free`` validates its range (inside
the region, not overlapping a free block) in O(log n) with bisect, so a double
free or a wrong size is an error instead of silent corruption.
"""

from __future__ import annotations

from bisect import bisect_right

from kernbench.errors import AllocationError


class FreeList:
    def __init__(self, capacity: int, base: int = 0, *, what: str = "memory",
                 error: type[AllocationError] = AllocationError) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.base = base
        self.capacity = capacity
        self.used = 0
        self._what = what
        self._error = error
        self._starts: list[int] = [base]
        self._sizes: list[int] = [capacity]

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
        for i, (start, size) in enumerate(zip(self._starts, self._sizes, strict=True)):
            aligned = -(-start // align) * align
            pad = aligned - start
            if size - pad < nbytes:
                continue
            tail = size - pad - nbytes
            repl_starts, repl_sizes = [], []
            if pad:
                repl_starts.append(start)
                repl_sizes.append(pad)
            if tail:
                repl_starts.append(aligned + nbytes)
                repl_sizes.append(tail)
            self._starts[i:i + 1] = repl_starts
            self._sizes[i:i + 1] = repl_sizes
            self.used += nbytes
            return aligned
        raise self._error(
            f"{self._what} overflow: required {nbytes} bytes, largest free block "
            f"{self.largest_free} bytes ({self.capacity - self.used} bytes free in total)")

    def free(self, offset: int, nbytes: int) -> None:
        """Return ``[offset, offset + nbytes)`` and merge it with free neighbours."""
        end = offset + nbytes
        if nbytes <= 0 or offset < self.base or end > self.base + self.capacity:
            raise ValueError(f"free of [{offset:#x}, {end:#x}) lies outside the {self._what} region")
        i = bisect_right(self._starts, offset)
        if i and self._starts[i - 1] + self._sizes[i - 1] > offset:
            raise ValueError(f"free of [{offset:#x}, {end:#x}) overlaps a free block (double free?)")
        if i < len(self._starts) and self._starts[i] < end:
            raise ValueError(f"free of [{offset:#x}, {end:#x}) overlaps a free block (double free?)")
        merge_prev = i > 0 and self._starts[i - 1] + self._sizes[i - 1] == offset
        merge_next = i < len(self._starts) and self._starts[i] == end
        if merge_prev and merge_next:
            self._sizes[i - 1] += nbytes + self._sizes[i]
            del self._starts[i], self._sizes[i]
        elif merge_prev:
            self._sizes[i - 1] += nbytes
        elif merge_next:
            self._starts[i] = offset
            self._sizes[i] += nbytes
        else:
            self._starts.insert(i, offset)
            self._sizes.insert(i, nbytes)
        self.used -= nbytes
