"""Addresses: the 51-bit physical address, allocators, VA allocator, page-table MMU."""

from kernbench.policy.address.allocator import AddressConfig, FreeList, PEMemAllocator
from kernbench.policy.address.mmu import PageTableMmu
from kernbench.policy.address.phys_addr import PA_BITS, PhysAddr, UnitType
from kernbench.policy.address.va_allocator import VirtualAllocator

__all__ = ["PA_BITS", "AddressConfig", "FreeList", "PEMemAllocator", "PageTableMmu", "PhysAddr",
           "UnitType", "VirtualAllocator"]
