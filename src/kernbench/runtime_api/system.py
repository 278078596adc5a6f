"""``SystemRuntime``: the host state shared by every context on one engine.

One virtual address space for the whole system, as unified virtual
addressing gives one process on a multi-GPU host: every allocation's VA is
unique across SIPs, and the directory below says which SIP (and tensor) owns
any VA, so a kernel that touches another SIP's memory fails with a message
naming the owner (docs/adr/0014-unified-virtual-addresses.md). Physical memory
stays per PE. The kernel registry lives here too, per simulation rather than
per process.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from weakref import WeakKeyDictionary

from kernbench.errors import UsageError
from kernbench.policy.address import AddressConfig, PEMemAllocator, VirtualAllocator
from kernbench.policy.address.free_list import FreeList
from kernbench.policy.address.phys_addr import PhysAddr
from kernbench.policy.address.va_allocator import DEFAULT_VA_SIZE
from kernbench.topology import naming as nm

_SYSTEMS: WeakKeyDictionary = WeakKeyDictionary()
MEMORIES = ("hbm", "sram", "tcm")


def va_space_bytes(spec) -> int:
    """A virtual address space as large as every byte the system can back (HBM, SRAM
    and TCM on every CUBE; at least the allocator's default): a tensor's VA range is
    its distinct shards' pages, each backed somewhere, so the system's memory, not a
    fixed 64 GiB, bounds what fits (llama70b_4sip has 3 TiB of HBM). A larger space
    moves no allocation: first fit hands out the same addresses from the base."""
    cube = spec.hbm.total_bytes + spec.sram_bytes + spec.pes_per_cube * spec.pe.tcm_bytes
    total = spec.sips.count * spec.cubes_per_sip * cube
    page = spec.pe.page_size
    return max(DEFAULT_VA_SIZE, -(-total // page) * page)


class SystemRuntime:
    def __init__(self, engine) -> None:
        # No reference to ``engine``: it is this runtime's key in the weak registry, and
        # a value that refers to its key keeps both alive for the rest of the process.
        spec = engine.graph.spec
        self.sips = spec.sips.count
        self.va = VirtualAllocator(va_size=va_space_bytes(spec), page_size=spec.pe.page_size)
        self._cfg = AddressConfig.from_spec(spec)
        self._allocators: dict[tuple[int, int, int], PEMemAllocator] = {}
        self._starts: list[int] = []  # live allocations: sorted VA starts
        self._owners: list[tuple[int, int, str]] = []  # (end, sip, tensor name)
        self._kernels: dict[str, Callable] = {}
        self._sram: dict[tuple[int, int], FreeList] = {}

    @classmethod
    def of(cls, engine) -> SystemRuntime:
        """The runtime of ``engine`` (created with the first context on it)."""
        rt = _SYSTEMS.get(engine)
        if rt is None:
            rt = _SYSTEMS[engine] = cls(engine)
        return rt

    # -- physical memory -------------------------------------------------------------
    def allocator(self, sip: int, cube: int, pe: int) -> PEMemAllocator:
        key = (sip, cube, pe)
        alloc = self._allocators.get(key)
        if alloc is None:
            alloc = self._allocators[key] = PEMemAllocator(sip, cube, pe, self._cfg)
        return alloc

    def alloc_sram(self, sip: int, cube: int, nbytes: int, align: int = 64) -> PhysAddr:
        """Memory in the CUBE's shared SRAM (first fit)."""
        free = self._sram.get((sip, cube))
        if free is None:
            free = self._sram[(sip, cube)] = FreeList(
                self._cfg.sram_bytes, what=f"SRAM of {nm.cube_prefix(sip, cube)}")
        return PhysAddr.sram_addr(sip, cube, free.alloc(nbytes, align))

    def free_sram(self, pa: PhysAddr, nbytes: int) -> None:
        self._sram[(pa.sip, pa.cube)].free(pa.sub_offset, nbytes)

    def alloc(self, memory: str, sip: int, cube: int, pe: int, nbytes: int,
              align: int = 64) -> PhysAddr:
        """``nbytes`` of ``memory`` ("hbm": the PE's slice, "sram": its CUBE's SRAM,
        "tcm": the PE's TCM)."""
        if memory == "hbm":
            return self.allocator(sip, cube, pe).alloc_hbm(nbytes, align=align)
        if memory == "sram":
            return self.alloc_sram(sip, cube, nbytes, align)
        if memory == "tcm":
            return self.allocator(sip, cube, pe).alloc_tcm(nbytes, align=align)
        raise UsageError(f"memory must be one of {', '.join(MEMORIES)}, got {memory!r}")

    def free(self, pa: PhysAddr, sip: int, cube: int, pe: int, nbytes: int) -> None:
        if pa.kind == "hbm":
            self.allocator(sip, cube, pe).free_hbm(pa, nbytes)
        elif pa.unit_type.name == "SRAM":
            self.free_sram(pa, nbytes)
        else:
            self.allocator(sip, cube, pe).free_tcm(pa, nbytes)

    # -- the system-wide virtual address space ---------------------------------------------
    def reserve(self, nbytes: int, sip: int, name: str) -> int:
        """A fresh VA range of ``nbytes`` owned by ``sip`` (unique across the system)."""
        va = self.va.alloc(nbytes)
        i = bisect_right(self._starts, va)
        self._starts.insert(i, va)
        self._owners.insert(i, (va + nbytes, sip, name))
        return va

    def release(self, va: int, nbytes: int) -> None:
        i = bisect_right(self._starts, va) - 1
        if i < 0 or self._starts[i] != va:
            raise ValueError(f"VA {va:#x} is not the start of a live allocation")
        del self._starts[i], self._owners[i]
        self.va.free(va, nbytes)

    def owner(self, va: int) -> tuple[int, str] | None:
        """(sip, tensor name) of the allocation holding ``va``, or None."""
        i = bisect_right(self._starts, va) - 1
        if i >= 0 and va < self._owners[i][0]:
            return self._owners[i][1], self._owners[i][2]
        return None

    def describe_va(self, va: int, sip: int | None = None) -> str:
        """Who owns ``va``, as seen from a PE of SIP ``sip`` (for fault messages)."""
        hit = self.owner(va)
        if hit is None:
            return "no SIP has it allocated"
        if hit[0] == sip:
            return (f"it belongs to tensor {hit[1]!r} of this SIP, which this PE does not "
                    f"map: it is outside the tensor's placement")
        return f"it belongs to SIP {hit[0]}, tensor {hit[1]!r}"

    def allocations(self) -> list[tuple[int, int, int]]:
        """Live (va start, va end, sip), sorted by address."""
        return [(s, e, sip) for s, (e, sip, _) in zip(self._starts, self._owners, strict=True)]

    # -- kernels ---------------------------------------------------------------------------
    def register_kernel(self, name: str, fn: Callable, *, replace: bool = False) -> None:
        """Name -> kernel function; a launch replaces its own name (last call wins)."""
        if not replace and name in self._kernels and self._kernels[name] is not fn:
            raise UsageError(f"a different kernel is already registered as {name!r}")
        self._kernels[name] = fn

    def kernel(self, name: str) -> Callable:
        try:
            return self._kernels[name]
        except KeyError:
            raise UsageError(f"no kernel registered as {name!r} "
                             f"(registered: {', '.join(sorted(self._kernels)) or 'none'})") from None

    def check_sip(self, sip: int) -> int:
        if not isinstance(sip, int) or not 0 <= sip < self.sips:
            raise UsageError(f"device {sip!r} does not exist (SIPs 0..{self.sips - 1})")
        return sip
