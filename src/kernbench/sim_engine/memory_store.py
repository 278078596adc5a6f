"""Byte-addressable simulated memory for data mode (docs/adr/0005-memory-store-and-allocators.md).

Each space ("hbm", "tcm", "sram", "mcpu") holds disjoint segments of bytes.
Writes and reads copy, so no caller can alias stored data by accident, and a
read of bytes that were never written is an error rather than silent garbage.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from kernbench.errors import SimulationError


class _Space:
    __slots__ = ("starts", "bufs")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.bufs: list[np.ndarray] = []  # uint8, one per segment

    def find(self, addr: int, nbytes: int) -> tuple[int, int] | None:
        """(segment index, offset) if ``[addr, addr+nbytes)`` lies inside one segment."""
        i = bisect_right(self.starts, addr) - 1
        if i >= 0:
            off = addr - self.starts[i]
            if off + nbytes <= self.bufs[i].size:
                return i, off
        return None

    def write(self, addr: int, data: np.ndarray) -> None:
        n = data.size
        hit = self.find(addr, n)
        if hit is not None:
            i, off = hit
            self.bufs[i][off:off + n] = data
            return
        end = addr + n
        lo = bisect_right(self.starts, addr) - 1
        if lo < 0 or self.starts[lo] + self.bufs[lo].size < addr:
            lo += 1  # previous segment neither overlaps nor touches
        hi = lo
        while hi < len(self.starts) and self.starts[hi] <= end:
            hi += 1
        new_start = min([addr] + self.starts[lo:hi])
        new_end = max([end] + [s + b.size for s, b in zip(self.starts[lo:hi], self.bufs[lo:hi],
                                                         strict=True)])
        buf = np.zeros(new_end - new_start, dtype=np.uint8)
        for s, b in zip(self.starts[lo:hi], self.bufs[lo:hi], strict=True):
            buf[s - new_start:s - new_start + b.size] = b
        buf[addr - new_start:addr - new_start + n] = data
        self.starts[lo:hi] = [new_start]
        self.bufs[lo:hi] = [buf]


class MemoryStore:
    def __init__(self) -> None:
        self._spaces: dict[str, _Space] = {}

    def _space(self, space: str) -> _Space:
        sp = self._spaces.get(space)
        if sp is None:
            sp = self._spaces[space] = _Space()
        return sp

    def write(self, space: str, addr: int, data: np.ndarray) -> None:
        """Copy ``data``'s bytes to ``addr`` (C order)."""
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        self._space(space).write(addr, raw)

    def fill(self, space: str, addr: int, nbytes: int, value: int = 0) -> None:
        self._space(space).write(addr, np.full(nbytes, value, dtype=np.uint8))

    def locate(self, space: str, addr: int, extent: int, what: str) -> tuple[np.ndarray, int]:
        """(segment buffer, offset) holding ``extent`` written bytes at ``addr``, or raise."""
        sp = self._spaces.get(space)
        hit = sp.find(addr, extent) if sp else None
        if hit is None:
            raise SimulationError(f"data read of {what} at {space}:{addr:#x} touches "
                                  f"bytes that were never written")
        return sp.bufs[hit[0]], hit[1]

    def read_bytes(self, space: str, addr: int, nbytes: int) -> np.ndarray:
        buf, off = self.locate(space, addr, nbytes, f"{nbytes} bytes")
        return buf[off:off + nbytes].copy()

    def read(self, space: str, addr: int, shape: tuple[int, ...], dtype) -> np.ndarray:
        dt = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        return self.read_bytes(space, addr, n).view(dt).reshape(shape)

    def has(self, space: str, addr: int, nbytes: int = 1) -> bool:
        sp = self._spaces.get(space)
        return bool(sp and sp.find(addr, nbytes) is not None)

    def snapshot(self) -> MemoryStore:
        """Deep copy: later writes to either store do not show in the other."""
        out = MemoryStore()
        for name, sp in self._spaces.items():
            copy = out._space(name)
            copy.starts = list(sp.starts)
            copy.bufs = [b.copy() for b in sp.bufs]
        return out

    def segments(self, space: str) -> list[tuple[int, int]]:
        sp = self._spaces.get(space)
        return [(s, b.size) for s, b in zip(sp.starts, sp.bufs, strict=True)] if sp else []


def _strided(buf: np.ndarray, off: int, shape: tuple[int, int], stride_bytes: int,
             dtype: np.dtype) -> np.ndarray:
    rows, cols = shape
    itemsize = dtype.itemsize
    view = np.lib.stride_tricks.as_strided(
        buf[off:], shape=(rows, cols * itemsize), strides=(stride_bytes, 1), writeable=True)
    return view


def read_strided(store: MemoryStore, space: str, addr: int, shape: tuple[int, int],
                 stride_bytes: int, dtype) -> np.ndarray:
    """A (rows, cols) block whose rows start ``stride_bytes`` apart."""
    dt = np.dtype(dtype)
    rows, cols = shape
    extent = (rows - 1) * stride_bytes + cols * dt.itemsize
    buf, off = store.locate(space, addr, extent, f"a {rows}x{cols} block")
    return _strided(buf, off, shape, stride_bytes, dt).copy().view(dt).reshape(shape)


def write_strided(store: MemoryStore, space: str, addr: int, data: np.ndarray,
                  stride_bytes: int) -> None:
    """Write a 2-D array whose rows land ``stride_bytes`` apart."""
    data = np.ascontiguousarray(data)
    rows, cols = data.shape
    row_bytes = cols * data.dtype.itemsize
    raw = data.view(np.uint8).reshape(rows, row_bytes)
    extent = (rows - 1) * stride_bytes + row_bytes
    sp = store._space(space)
    hit = sp.find(addr, extent)
    if hit is None:  # rows land in fresh memory: write them one by one (segments merge)
        for r in range(rows):
            sp.write(addr + r * stride_bytes, raw[r])
        return
    i, off = hit
    _strided(sp.bufs[i], off, (rows, cols), stride_bytes, data.dtype)[...] = raw
