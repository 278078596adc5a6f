"""Property tests for physical addresses, free lists, VA allocation and the page-table MMU."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernbench.errors import AllocationError, MmuFault, VaAllocationError
from kernbench.policy.address import (
    PA_BITS,
    AddressConfig,
    FreeList,
    PageTableMmu,
    PEMemAllocator,
    PhysAddr,
    UnitType,
    VirtualAllocator,
)
from kernbench.policy.address.free_list import INDEX_FROM
from kernbench.policy.address.mmu import RegionBatch
from kernbench.units import KiB, MiB

PROPS = settings(max_examples=200, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=60, deadline=None, database=None,
               suppress_health_check=[HealthCheck.too_slow])

sips = st.integers(0, 31)
cubes = st.integers(0, 63)
hbm_offsets = st.integers(0, 2**39 - 1)
pe_ids = st.integers(0, 31)
sub_offsets = st.integers(0, 2**32 - 1)
units = st.sampled_from(list(UnitType))


# --- PhysAddr ----------------------------------------------------------------------------

@PROPS
@given(sips, cubes, hbm_offsets)
def test_hbm_round_trip(sip, cube, offset):
    pa = PhysAddr.hbm(sip, cube, offset)
    value = pa.encode()
    assert 0 <= value < 2**PA_BITS
    assert PA_BITS == 51
    # layout: [50:46] sip, [45:40] cube, [39] region = 0, [38:0] offset
    assert value == (sip << 46) | (cube << 40) | offset
    assert (value >> 39) & 1 == 0
    back = PhysAddr.decode(value)
    assert back == pa
    assert (back.kind, back.sip, back.cube, back.hbm_offset) == ("hbm", sip, cube, offset)
    assert int(pa) == value


@PROPS
@given(sips, cubes, units, pe_ids, sub_offsets)
def test_resource_round_trip(sip, cube, unit, pe, sub):
    pa = PhysAddr("pe_resource", sip, cube, unit_type=unit, pe_id=pe, sub_offset=sub)
    value = pa.encode()
    assert 0 <= value < 2**PA_BITS
    assert value == (sip << 46) | (cube << 40) | (1 << 39) | (int(unit) << 37) | (pe << 32) | sub
    back = PhysAddr.decode(value)
    assert back == pa
    assert back.unit_type is unit and back.pe_id == pe and back.sub_offset == sub
    assert back.hbm_offset == 0


@PROPS
@given(st.integers(0, 2**PA_BITS - 1))
def test_decode_encode_is_identity_on_valid_values(value):
    unit = (value >> 37) & 3
    if (value >> 39) & 1 and unit == 3:
        with pytest.raises(ValueError, match="reserved unit type 3"):
            PhysAddr.decode(value)
    else:
        assert PhysAddr.decode(value).encode() == value


@FEW
@given(sips, cubes, pe_ids, sub_offsets)
def test_constructors_agree_with_fields(sip, cube, pe, sub):
    tcm = PhysAddr.pe_tcm_addr(sip, cube, pe, sub)
    assert (tcm.kind, tcm.unit_type) == ("pe_resource", UnitType.PE)
    assert (tcm.pe_id, tcm.sub_offset) == (pe, sub)
    sram = PhysAddr.sram_addr(sip, cube, sub)
    assert (sram.unit_type, sram.pe_id, sram.sub_offset) == (UnitType.SRAM, 0, sub)
    mcpu = PhysAddr.mcpu_addr(sip, cube, sub)
    assert (mcpu.unit_type, mcpu.pe_id) == (UnitType.MCPU, 0)
    assert len({tcm.encode(), sram.encode(), mcpu.encode()}) == 3


@FEW
@given(sips, cubes, st.integers(0, 7), st.integers(1, 2**30), st.data())
def test_pe_hbm_addr_places_offset_in_slice(sip, cube, pe, slice_bytes, data):
    local = data.draw(st.integers(0, slice_bytes - 1))
    pa = PhysAddr.pe_hbm_addr(sip, cube, pe, local, slice_bytes)
    assert pa.hbm_offset == pe * slice_bytes + local
    assert pa.hbm_offset // slice_bytes == pe
    with pytest.raises(ValueError, match="outside"):
        PhysAddr.pe_hbm_addr(sip, cube, pe, slice_bytes, slice_bytes)
    with pytest.raises(ValueError, match="outside"):
        PhysAddr.pe_hbm_addr(sip, cube, pe, -1, slice_bytes)


def _too_big(bits):
    return st.one_of(st.integers(-(2**60), -1), st.integers(2**bits, 2**bits + 2**40))


@PROPS
@given(st.sampled_from(["sip", "cube", "hbm_offset"]), st.data())
def test_out_of_range_hbm_fields_raise(field, data):
    bits = {"sip": 5, "cube": 6, "hbm_offset": 39}[field]
    bad = data.draw(_too_big(bits))
    args = {"sip": 0, "cube": 0, "offset": 0}
    args["offset" if field == "hbm_offset" else field] = bad
    with pytest.raises(ValueError, match=rf"{field}=-?\d+ does not fit in {bits} bits"):
        PhysAddr.hbm(args["sip"], args["cube"], args["offset"])


@PROPS
@given(st.sampled_from(["pe_id", "sub_offset"]), st.data())
def test_out_of_range_resource_fields_raise(field, data):
    bits = {"pe_id": 5, "sub_offset": 32}[field]
    kwargs = {"pe_id": 0, "sub_offset": 0, field: data.draw(_too_big(bits))}
    with pytest.raises(ValueError, match=f"{field}=.* does not fit in {bits} bits"):
        PhysAddr("pe_resource", 0, 0, unit_type=UnitType.SRAM, **kwargs)


@PROPS
@given(st.one_of(st.integers(-(2**60), -1), st.integers(2**PA_BITS, 2**64)))
def test_decode_rejects_values_outside_51_bits(value):
    with pytest.raises(ValueError, match="does not fit in 51 bits"):
        PhysAddr.decode(value)


def test_invalid_field_combinations():
    with pytest.raises(ValueError, match="kind must be"):
        PhysAddr("dram", 0, 0)
    with pytest.raises(ValueError, match="no pe_id/sub_offset"):
        PhysAddr("hbm", 0, 0, pe_id=1)
    with pytest.raises(ValueError, match="no hbm_offset"):
        PhysAddr("pe_resource", 0, 0, hbm_offset=4)
    with pytest.raises(ValueError):
        PhysAddr("pe_resource", 0, 0, unit_type=3)


# --- FreeList against a reference model ---------------------------------------------------

class Model:
    """Reference: the set of live [start, end) ranges inside [base, base + cap)."""

    def __init__(self, base: int, cap: int) -> None:
        self.base, self.cap = base, cap
        self.live: dict[int, int] = {}  # start -> size

    def gaps(self) -> list[tuple[int, int]]:
        out, pos = [], self.base
        for start in sorted(self.live):
            if start > pos:
                out.append((pos, start - pos))
            pos = start + self.live[start]
        if pos < self.base + self.cap:
            out.append((pos, self.base + self.cap - pos))
        return out

    def first_fit(self, nbytes: int, align: int) -> int | None:
        for start, size in self.gaps():
            aligned = -(-start // align) * align
            if aligned + nbytes <= start + size:
                return aligned
        return None


ops = st.lists(
    st.tuples(st.sampled_from(["alloc", "alloc", "free"]), st.integers(1, 400),
              st.sampled_from([1, 2, 8, 64]), st.integers(0, 10**6)),
    min_size=1, max_size=60,
)


@PROPS
@given(st.integers(0, 512), st.integers(1, 4096), ops, st.sampled_from([1, 16, 100, INDEX_FROM]))
def test_free_list_matches_reference_model(base, cap, operations, index_from):
    """``index_from``: small values send most requests through the index of large
    blocks, which must give the first fit the full walk gives."""
    fl = FreeList(cap, base=base, what="test region", index_from=index_from)
    model = Model(base, cap)
    for op, nbytes, align, pick in operations:
        if op == "alloc":
            want = model.first_fit(nbytes, align)
            if want is None:
                with pytest.raises(AllocationError) as info:
                    fl.alloc(nbytes, align)
                largest = max((s for _, s in model.gaps()), default=0)
                msg = str(info.value)
                assert f"required {nbytes} bytes" in msg
                assert f"largest free block {largest} bytes" in msg
                assert "test region overflow" in msg
            else:
                got = fl.alloc(nbytes, align)
                assert got == want  # first fit: lowest fitting aligned address
                assert got % align == 0
                assert base <= got and got + nbytes <= base + cap
                for s, n in model.live.items():  # no overlap with live allocations
                    assert got + nbytes <= s or s + n <= got
                model.live[got] = nbytes
        elif model.live:
            starts = sorted(model.live)
            start = starts[pick % len(starts)]
            fl.free(start, model.live.pop(start))
        # invariants after every step
        assert fl.used == sum(model.live.values())
        assert fl.blocks == model.gaps()  # free blocks are exactly the maximal gaps (coalesced)
        assert fl.largest_free == max((s for _, s in model.gaps()), default=0)
    for start in sorted(model.live, key=lambda s: (pick_order(s), s)):
        fl.free(start, model.live[start])
    assert fl.used == 0
    assert fl.blocks == [(base, cap)]


def pick_order(start: int) -> int:
    """Free in a scrambled (but deterministic) order so every merge case is hit."""
    return (start * 2654435761) % 97


@PROPS
@given(st.lists(st.integers(1, 64), min_size=1, max_size=20), st.data())
def test_double_free_raises(sizes, data):
    fl = FreeList(sum(sizes) + 64)
    addrs = [fl.alloc(n) for n in sizes]
    assert addrs == [sum(sizes[:i]) for i in range(len(sizes))]  # packed, first fit
    i = data.draw(st.integers(0, len(sizes) - 1))
    fl.free(addrs[i], sizes[i])
    blocks, used = fl.blocks, fl.used
    with pytest.raises(ValueError, match="double free"):
        fl.free(addrs[i], sizes[i])
    # a range that only partly overlaps the freed block is caught too
    if sizes[i] > 1:
        with pytest.raises(ValueError, match="overlaps a free block"):
            fl.free(addrs[i] + 1, sizes[i] - 1)
    assert fl.blocks == blocks and fl.used == used  # a rejected free changes nothing


def test_free_list_argument_errors():
    with pytest.raises(ValueError, match="capacity must be positive"):
        FreeList(0)
    fl = FreeList(100, base=1000)
    with pytest.raises(ValueError, match="size must be positive"):
        fl.alloc(0)
    with pytest.raises(ValueError, match="outside"):
        fl.free(999, 1)
    with pytest.raises(ValueError, match="outside"):
        fl.free(1099, 2)
    a = fl.alloc(10)
    with pytest.raises(ValueError, match="outside"):
        fl.free(a, 0)
    assert a == 1000


def test_allocation_error_text_exact():
    fl = FreeList(1000, what="HBM slice")
    fl.alloc(400)
    b = fl.alloc(200)
    fl.alloc(300)
    fl.free(b, 200)  # free: [400, 600) 200 bytes and [900, 1000) 100 bytes
    with pytest.raises(AllocationError) as info:
        fl.alloc(250)
    assert str(info.value) == ("HBM slice overflow: required 250 bytes, largest free block "
                               "200 bytes (300 bytes free in total)")


# --- VirtualAllocator --------------------------------------------------------------------

@PROPS
@given(st.sampled_from([4 * KiB, 64 * KiB, 2 * MiB]),
       st.lists(st.integers(1, 5 * MiB), min_size=1, max_size=25), st.data())
def test_va_alloc_page_aligned_and_rounded(page, sizes, data):
    base = data.draw(st.integers(1, 64)) * 2 * MiB
    va = VirtualAllocator(va_base=base, va_size=512 * MiB, page_size=page)
    live: list[tuple[int, int]] = []
    for n in sizes:
        rounded = -(-n // page) * page
        try:
            addr = va.alloc(n)
        except VaAllocationError:
            assert rounded > max((s for _, s in va.blocks), default=0)
            continue
        assert addr % page == 0 and addr >= base
        for a, m in live:
            assert addr + rounded <= a or a + m <= addr
        live.append((addr, rounded))
        assert va.used == sum(m for _, m in live)
        assert va.used % page == 0
    # free with the caller's (unrounded) sizes works and restores the whole space
    for addr, rounded in live:
        va.free(addr, rounded - data.draw(st.integers(0, page - 1)))
    assert va.used == 0
    assert va.blocks == [(base, 512 * MiB)]


def test_va_allocator_errors():
    with pytest.raises(ValueError, match="power of two"):
        VirtualAllocator(page_size=3000)
    with pytest.raises(ValueError, match="not aligned"):
        VirtualAllocator(va_base=4096, page_size=2 * MiB)
    va = VirtualAllocator(va_base=0, va_size=4 * MiB, page_size=2 * MiB)
    assert va.alloc(1) == 0
    assert va.used == 2 * MiB
    with pytest.raises(VaAllocationError, match=r"required 4194304 bytes, largest free block "
                                                r"2097152 bytes"):
        va.alloc(2 * MiB + 1)
    assert issubclass(VaAllocationError, AllocationError)


# --- PEMemAllocator ----------------------------------------------------------------------

CFG = AddressConfig(hbm_slice_bytes=6 * 2**30, tcm_bytes=4 * MiB, tcm_reserved_bytes=512 * KiB,
                    sram_bytes=8 * MiB)


@PROPS
@given(st.integers(0, 3), st.integers(0, 15), st.integers(0, 7),
       st.lists(st.integers(1, 300 * KiB), min_size=1, max_size=12))
def test_pe_allocator_round_trip(sip, cube, pe, sizes):
    alloc = PEMemAllocator(sip, cube, pe, CFG)
    hbm, tcm = [], []
    for n in sizes:
        pa = alloc.alloc_hbm(n)
        assert (pa.kind, pa.sip, pa.cube) == ("hbm", sip, cube)
        assert pa.hbm_offset // CFG.hbm_slice_bytes == pe  # inside this PE's slice
        assert pa.hbm_offset % 64 == 0
        hbm.append((pa, n))
        t = alloc.alloc_tcm(n)
        assert (t.kind, t.unit_type, t.pe_id, t.sip, t.cube) == ("pe_resource", UnitType.PE, pe,
                                                                 sip, cube)
        assert t.sub_offset >= CFG.tcm_reserved_bytes  # after the scheduler reservation
        assert t.sub_offset + n <= CFG.tcm_bytes
        tcm.append((t, n))
    assert alloc.hbm_used == sum(sizes) == alloc.tcm_used
    assert hbm[0][0].hbm_offset == pe * CFG.hbm_slice_bytes
    assert tcm[0][0].sub_offset == CFG.tcm_reserved_bytes
    # a PA survives encode/decode and can be freed from the decoded form
    for pa, n in hbm:
        alloc.free_hbm(PhysAddr.decode(pa.encode()), n)
    for t, n in tcm:
        alloc.free_tcm(t, n)
    assert alloc.hbm_used == 0 and alloc.tcm_used == 0
    # everything returned: the next allocation lands at the start again
    assert alloc.alloc_hbm(1).hbm_offset == pe * CFG.hbm_slice_bytes
    assert alloc.alloc_tcm(1).sub_offset == CFG.tcm_reserved_bytes


def test_pe_allocator_rejects_foreign_addresses_and_overflow():
    alloc = PEMemAllocator(0, 1, 2, CFG)
    pa = alloc.alloc_hbm(128)
    with pytest.raises(ValueError, match="not in the HBM of sip0.cube1"):
        alloc.free_hbm(PhysAddr.hbm(0, 2, pa.hbm_offset), 128)
    with pytest.raises(ValueError, match="not in the TCM of PE 2"):
        alloc.free_tcm(PhysAddr.pe_tcm_addr(0, 1, 3, CFG.tcm_reserved_bytes), 64)
    with pytest.raises(ValueError):  # another PE's slice of the same cube
        alloc.free_hbm(PhysAddr.pe_hbm_addr(0, 1, 3, 0, CFG.hbm_slice_bytes), 64)
    allocatable = CFG.tcm_bytes - CFG.tcm_reserved_bytes
    with pytest.raises(AllocationError, match=rf"TCM of sip0.cube1.pe2 overflow: required "
                                              rf"{allocatable + 1} bytes, largest free block "
                                              rf"{allocatable} bytes"):
        alloc.alloc_tcm(allocatable + 1)
    alloc.free_hbm(pa, 128)
    with pytest.raises(ValueError, match="double free"):
        alloc.free_hbm(pa, 128)


# --- PageTableMmu ------------------------------------------------------------------------

PAGE = 4096


@st.composite
def mappings(draw):
    """A run of mapped virtual pages with frames that are sometimes contiguous."""
    n_pages = draw(st.integers(1, 24))
    va0 = draw(st.integers(0, 2**20)) * PAGE
    frames, frame = [], draw(st.integers(0, 2**20))
    for _ in range(n_pages):
        frames.append(frame)
        frame = frame + 1 if draw(st.booleans()) else draw(st.integers(0, 2**30))
    return va0, frames


def _map_all(mmu: PageTableMmu, va0: int, frames: list[int]) -> None:
    for k, f in enumerate(frames):
        mmu.map(va0 + k * PAGE, f * PAGE, PAGE)


@PROPS
@given(mappings(), st.data())
def test_translate_range_segments(mapping, data):
    va0, frames = mapping
    # distinct frames so "contiguous" is unambiguous
    if len(set(frames)) != len(frames):
        frames = list(range(100, 100 + len(frames)))
    mmu = PageTableMmu(PAGE)
    _map_all(mmu, va0, frames)
    assert mmu.mapped_pages == len(frames)
    total = len(frames) * PAGE
    start = data.draw(st.integers(0, total - 1))
    nbytes = data.draw(st.integers(1, total - start))
    va = va0 + start

    segs = mmu.translate_range(va, nbytes)
    assert sum(n for _, n in segs) == nbytes
    assert all(n > 0 for _, n in segs)
    for (pa, n), (nxt, _) in zip(segs, segs[1:], strict=False):
        assert pa + n != nxt  # contiguous pieces would have been merged
    # walking the segments reproduces byte-wise translation at every page boundary
    pos = va
    for pa, n in segs:
        for probe in {pos, pos + n - 1, *range(-(-pos // PAGE) * PAGE, pos + n, PAGE)}:
            assert mmu.translate(probe) == pa + (probe - pos)
        pos += n
    # expected segment count: one per run of physically contiguous pages touched
    first_page, last_page = start // PAGE, (start + nbytes - 1) // PAGE
    runs = 1 + sum(frames[k] + 1 != frames[k + 1] for k in range(first_page, last_page))
    assert len(segs) == runs


@PROPS
@given(mappings(), st.integers(0, PAGE - 1))
def test_map_translate_unmap(mapping, offset):
    va0, frames = mapping
    mmu = PageTableMmu(PAGE)
    _map_all(mmu, va0, frames)
    for k, f in enumerate(frames):
        assert mmu.translate(va0 + k * PAGE + offset) == f * PAGE + offset
    end = va0 + len(frames) * PAGE
    with pytest.raises(MmuFault, match="page fault"):
        mmu.translate(end + offset)
    if va0:
        with pytest.raises(MmuFault, match="is not mapped"):
            mmu.translate(va0 - 1)
    with pytest.raises(MmuFault, match="already mapped"):
        mmu.map(va0 + (len(frames) - 1) * PAGE, 0, 2 * PAGE)
    assert mmu.mapped_pages == len(frames)  # the failed map added nothing
    with pytest.raises(MmuFault, match="page fault"):
        mmu.translate_range(va0, len(frames) * PAGE + 1)
    mmu.unmap(va0, len(frames) * PAGE)
    assert mmu.mapped_pages == 0
    with pytest.raises(MmuFault, match="page fault"):
        mmu.translate(va0 + offset)
    with pytest.raises(MmuFault, match="unmap of unmapped"):
        mmu.unmap(va0, PAGE)


def test_mmu_multi_page_map_and_alignment():
    mmu = PageTableMmu(PAGE)
    mmu.map(0x10000, 0x800000, 3 * PAGE - 100)  # rounds up to 3 pages
    assert mmu.mapped_pages == 3
    assert mmu.translate_range(0x10000 + 10, 3 * PAGE - 10) == [(0x800000 + 10, 3 * PAGE - 10)]
    with pytest.raises(MmuFault, match="page-aligned"):
        mmu.map(0x20001, 0, PAGE)
    with pytest.raises(MmuFault, match="page-aligned"):
        mmu.map(0x20000, 0x100, PAGE)
    with pytest.raises(ValueError, match="power of two"):
        PageTableMmu(3000)
    assert re.search("0x12000", str(_fault(lambda: mmu.map(0x12000, 0, PAGE))))


def _fault(fn) -> MmuFault:
    with pytest.raises(MmuFault) as info:
        fn()
    return info.value


@PROPS
@given(st.lists(st.tuples(st.integers(0, 64), st.integers(0, 2**20), st.integers(-1, 3 * PAGE)),
                min_size=1, max_size=8), st.booleans())
def test_map_many_is_map_of_each(regions, premapped):
    """map_many appends in-order regions at once, and map_batch a batch checked once
    into each MMU; whatever they are given, the table and the errors are those of
    mapping the regions one by one."""
    regions = [(va * PAGE, pa * PAGE, n) for va, pa, n in regions]
    one, many, batched, again = (PageTableMmu(PAGE) for _ in range(4))
    if premapped:
        for mmu in (one, many, batched, again):
            mmu.map(8 * PAGE, 0, PAGE)
    batch = RegionBatch(regions, PAGE)
    errors = []
    for fill in (lambda: [one.map(*r) for r in regions], lambda: many.map_many(regions),
                 lambda: batched.map_batch(batch), lambda: again.map_batch(batch)):
        try:
            fill()
            errors.append(None)
        except MmuFault as exc:
            errors.append(str(exc))
    assert errors[0] == errors[1] == errors[2] == errors[3]
    for mmu in (many, batched, again):
        assert (one._starts, one._ends, one._pas) == (mmu._starts, mmu._ends, mmu._pas)
