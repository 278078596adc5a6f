"""Data mode: tensor bytes in the memory store, read and written in simulated time.

An op reads its inputs when it starts and commits its output when it ends;
both are SimPy callbacks at those times, so timing never depends on data and a
racy kernel visibly computes the wrong values. TCM handles are keyed by their
encoded physical address; HBM handles hold virtual addresses, translated by
the issuing PE's MMU.
"""

from __future__ import annotations

import numpy as np

from kernbench.errors import SimulationError
from kernbench.isa.dtypes import dtype_bytes, np_dtype
from kernbench.isa.handles import TensorHandle
from kernbench.policy.address.phys_addr import PhysAddr, UnitType
from kernbench.sim_engine.memory_store import MemoryStore, read_strided, write_strided


def _space_of_pa(encoded: int) -> str:
    pa = PhysAddr.decode(encoded)
    if pa.kind == "hbm":
        return "hbm"
    return "sram" if pa.unit_type == UnitType.SRAM else "tcm"


class DataPlane:
    def __init__(self, store: MemoryStore, env) -> None:
        self.store = store
        self.env = env

    def at(self, t: float, fn) -> None:
        """Run ``fn()`` at simulated time ``t`` (after same-time events already scheduled)."""
        delay = t - self.env.now
        ev = self.env.timeout(delay if delay > 0 else 0.0)
        ev.callbacks.append(lambda _e: fn())

    def _locate(self, h: TensorHandle, mmu) -> tuple[str, int]:
        if h.space == "tcm":
            return "tcm", h.addr
        if h.space == "hbm":  # a memory view: HBM, or SRAM/TCM mapped into the VA space
            start, end, pa = mmu.region(h.addr)
            return _space_of_pa(pa), pa + (h.addr - start)
        raise SimulationError(f"handle {h} has unknown space {h.space!r}")

    def _stored_shape(self, h: TensorHandle) -> tuple[int, ...]:
        return (h.shape[1], h.shape[0]) if h.transposed else h.shape

    def read(self, h: TensorHandle, mmu) -> np.ndarray:
        space, addr = self._locate(h, mmu)
        dt = np.dtype(np_dtype(h.dtype))
        shape = self._stored_shape(h)
        if h.row_stride is not None and len(shape) == 2 and h.row_stride != shape[1]:
            arr = read_strided(self.store, space, addr, shape, h.row_stride * dt.itemsize, dt)
        else:
            arr = self.store.read(space, addr, shape, dt)
        return arr.T if h.transposed else arr

    def write(self, h: TensorHandle, value: np.ndarray, mmu) -> None:
        if h.transposed:
            raise SimulationError(f"cannot write through a transposed view {h}")
        space, addr = self._locate(h, mmu)
        arr = np.asarray(value).astype(np_dtype(h.dtype), copy=False)
        if arr.shape != h.shape:
            arr = np.broadcast_to(arr, h.shape)
        if h.row_stride is not None and len(h.shape) == 2 and h.row_stride != h.shape[1]:
            write_strided(self.store, space, addr, arr, h.row_stride * dtype_bytes(h.dtype))
        else:
            self.store.write(space, addr, arr)

    def write_block(self, h: TensorHandle, r0: int, c0: int, block: np.ndarray, mmu) -> None:
        """Write ``block`` at (r0, c0) of the 2-D tensor ``h`` (composite output tiles)."""
        space, addr = self._locate(h, mmu)
        bpe = dtype_bytes(h.dtype)
        stride = (h.row_stride or h.shape[1]) * bpe
        arr = np.ascontiguousarray(np.asarray(block).astype(np_dtype(h.dtype), copy=False))
        write_strided(self.store, space, addr + r0 * stride + c0 * bpe, arr, stride)
