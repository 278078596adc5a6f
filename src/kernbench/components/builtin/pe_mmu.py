"""PE_MMU: the PE's own page table, so one VA can mean a local copy on every PE."""

from __future__ import annotations

from kernbench.policy.address.mmu import PageTableMmu
from kernbench.policy.address.phys_addr import PhysAddr, decode_pa


class PeMmu(PageTableMmu):
    def __init__(self, node_id: str, overhead_ns: float, page_size: int) -> None:
        super().__init__(page_size)
        self.node_id = node_id
        self.overhead_ns = overhead_ns

    def translate_pa(self, va: int) -> PhysAddr:
        return decode_pa(self.translate(va))
