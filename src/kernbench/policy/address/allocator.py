"""Per-PE physical allocators for the PE's HBM slice and TCM (docs/adr/0005-memory-store-and-allocators.md)."""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.policy.address.free_list import FreeList
from kernbench.policy.address.phys_addr import PhysAddr, UnitType
from kernbench.topology import naming as nm

# Allocations start on this boundary so DMA bursts and HBM interleave granules line up.
DEFAULT_ALIGN = 64


@dataclass(frozen=True)
class AddressConfig:
    hbm_slice_bytes: int
    tcm_bytes: int
    tcm_reserved_bytes: int
    sram_bytes: int

    @property
    def tcm_allocatable_bytes(self) -> int:
        return self.tcm_bytes - self.tcm_reserved_bytes

    @classmethod
    def from_spec(cls, spec) -> AddressConfig:
        return cls(spec.hbm_slice_bytes, spec.pe.tcm_bytes, spec.pe.tcm_reserved_bytes,
                   spec.sram_bytes)


class PEMemAllocator:
    """One PE's HBM slice and TCM, each a first-fit free list."""

    def __init__(self, sip: int, cube: int, pe: int, cfg: AddressConfig) -> None:
        self.sip, self.cube, self.pe, self.cfg = sip, cube, pe, cfg
        where = nm.pe_prefix(sip, cube, pe)
        self._hbm = FreeList(cfg.hbm_slice_bytes, what=f"HBM slice of {where}")
        # The scheduler's reservation sits at the start of TCM; allocations follow it.
        self._tcm = FreeList(cfg.tcm_allocatable_bytes, base=cfg.tcm_reserved_bytes,
                             what=f"TCM of {where}")

    def alloc_hbm(self, nbytes: int, align: int = DEFAULT_ALIGN) -> PhysAddr:
        offset = self._hbm.alloc(nbytes, align)
        return PhysAddr.pe_hbm_addr(self.sip, self.cube, self.pe, offset, self.cfg.hbm_slice_bytes)

    def free_hbm(self, pa: PhysAddr, nbytes: int) -> None:
        if pa.kind != "hbm" or (pa.sip, pa.cube) != (self.sip, self.cube):
            raise ValueError(f"{pa} is not in the HBM of {nm.cube_prefix(self.sip, self.cube)}")
        self._hbm.free(pa.hbm_offset - self.pe * self.cfg.hbm_slice_bytes, nbytes)

    def alloc_tcm(self, nbytes: int, align: int = DEFAULT_ALIGN) -> PhysAddr:
        return PhysAddr.pe_tcm_addr(self.sip, self.cube, self.pe, self._tcm.alloc(nbytes, align))

    def free_tcm(self, pa: PhysAddr, nbytes: int) -> None:
        if pa.kind != "pe_resource" or pa.unit_type != UnitType.PE or pa.pe_id != self.pe:
            raise ValueError(f"{pa} is not in the TCM of PE {self.pe}")
        self._tcm.free(pa.sub_offset, nbytes)

    @property
    def hbm_used(self) -> int:
        return self._hbm.used

    @property
    def tcm_used(self) -> int:
        return self._tcm.used
