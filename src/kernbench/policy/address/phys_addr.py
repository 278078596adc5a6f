"""The 51-bit physical address.

Layout, most significant bit first (see docs/adr/0004-physical-address-layout.md)::

    [50:46] sip      (5 bits, up to 32 SIPs)
    [45:40] cube     (6 bits, up to 64 cubes per SIP)
    [39]    region   0 = HBM, 1 = on-die resource
    HBM:       [38:0]  hbm_offset inside the cube (39 bits, up to 512 GiB)
    resource:  [38:37] unit_type (PE TCM, SRAM, M_CPU)
               [36:32] pe_id (5 bits; 0 for cube-level units)
               [31:0]  sub_offset (32 bits)
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final, NamedTuple

from kernbench.topology import naming as nm

try:  # (the decorator only instructs mypyc, which needs it to compile a tuple subclass)
    from mypy_extensions import mypyc_attr
except ImportError:  # pure Python without mypy installed: nothing to instruct
    def mypyc_attr(*_args, **_kwargs):  # type: ignore[misc]  # (same use, looser types)
        return lambda cls: cls

# (Final: the compiled twin folds them into its code instead of looking them up)
PA_BITS: Final = 51
SIP_BITS: Final = 5
CUBE_BITS: Final = 6
HBM_OFFSET_BITS: Final = 39
UNIT_BITS: Final = 2
PE_BITS: Final = 5
SUB_OFFSET_BITS: Final = 32

_SIP_SHIFT: Final = PA_BITS - SIP_BITS  # 46
_CUBE_SHIFT: Final = _SIP_SHIFT - CUBE_BITS  # 40
_REGION_SHIFT: Final = _CUBE_SHIFT - 1  # 39
_UNIT_SHIFT: Final = _REGION_SHIFT - UNIT_BITS  # 37
_PE_SHIFT: Final = _UNIT_SHIFT - PE_BITS  # 32


class UnitType(IntEnum):
    PE = 0  # a PE's TCM
    SRAM = 1  # the cube's shared SRAM
    MCPU = 2  # the cube's management CPU local memory


def _check(name: str, value: int, bits: int) -> None:
    if not isinstance(value, int) or value < 0 or value >> bits:
        raise ValueError(f"{name}={value!r} does not fit in {bits} bits (0..{(1 << bits) - 1})")


class _Fields(NamedTuple):
    kind: str
    sip: int
    cube: int
    hbm_offset: int = 0
    unit_type: UnitType = UnitType.PE
    pe_id: int = 0
    sub_offset: int = 0


_PE: Final = UnitType.PE  # (a module constant: an enum member looked up per decode costs)
_UNITS: Final = tuple(UnitType)  # by code: indexing beats calling the enum
_HBM_OFFSET_MASK: Final = (1 << HBM_OFFSET_BITS) - 1


@mypyc_attr(native_class=False)
class PhysAddr(_Fields):
    """A decoded physical address. ``kind`` is 'hbm' or 'pe_resource'.

    An immutable value (a validated named tuple: addresses are made on every
    transfer, so construction must be cheap).
    """

    __slots__ = ()

    def __new__(cls, kind: str, sip: int, cube: int, hbm_offset: int = 0,
                unit_type: UnitType | int = UnitType.PE, pe_id: int = 0,
                sub_offset: int = 0) -> PhysAddr:
        if kind == "hbm" and type(sip) is int and type(cube) is int \
                and type(hbm_offset) is int and not pe_id and not sub_offset \
                and 0 <= sip < 1 << SIP_BITS and 0 <= cube < 1 << CUBE_BITS \
                and 0 <= hbm_offset < 1 << HBM_OFFSET_BITS:  # the common case, in one test
            return tuple.__new__(cls, (kind, sip, cube, hbm_offset, UnitType.PE, 0, 0))
        _check("sip", sip, SIP_BITS)
        _check("cube", cube, CUBE_BITS)
        if kind == "hbm":
            _check("hbm_offset", hbm_offset, HBM_OFFSET_BITS)
            if pe_id or sub_offset:
                raise ValueError("an HBM address carries no pe_id/sub_offset")
        elif kind == "pe_resource":
            unit_type = UnitType(unit_type)
            _check("pe_id", pe_id, PE_BITS)
            _check("sub_offset", sub_offset, SUB_OFFSET_BITS)
            if hbm_offset:
                raise ValueError("a resource address carries no hbm_offset")
        else:
            raise ValueError(f"kind must be 'hbm' or 'pe_resource', got {kind!r}")
        return tuple.__new__(cls, (kind, sip, cube, hbm_offset, unit_type, pe_id, sub_offset))

    # -- constructors -------------------------------------------------------
    @classmethod
    def hbm(cls, sip: int, cube: int, offset: int) -> PhysAddr:
        return cls("hbm", sip, cube, hbm_offset=offset)

    @classmethod
    def pe_hbm_addr(cls, sip: int, cube: int, pe: int, local_offset: int,
                    slice_bytes: int) -> PhysAddr:
        """Address ``local_offset`` bytes into PE ``pe``'s HBM slice (n_to_one mapping)."""
        if not 0 <= local_offset < slice_bytes:
            raise ValueError(f"offset {local_offset} outside the {slice_bytes}-byte HBM slice")
        return cls.hbm(sip, cube, pe * slice_bytes + local_offset)

    @classmethod
    def pe_tcm_addr(cls, sip: int, cube: int, pe: int, offset: int) -> PhysAddr:
        return cls("pe_resource", sip, cube, unit_type=UnitType.PE, pe_id=pe, sub_offset=offset)

    @classmethod
    def sram_addr(cls, sip: int, cube: int, offset: int) -> PhysAddr:
        return cls("pe_resource", sip, cube, unit_type=UnitType.SRAM, sub_offset=offset)

    @classmethod
    def mcpu_addr(cls, sip: int, cube: int, offset: int) -> PhysAddr:
        return cls("pe_resource", sip, cube, unit_type=UnitType.MCPU, sub_offset=offset)

    # -- encode / decode ----------------------------------------------------
    def encode(self) -> int:
        head = (self.sip << _SIP_SHIFT) | (self.cube << _CUBE_SHIFT)
        if self.kind == "hbm":
            return head | self.hbm_offset
        return (head | (1 << _REGION_SHIFT) | (int(self.unit_type) << _UNIT_SHIFT)
                | (self.pe_id << _PE_SHIFT) | self.sub_offset)

    def __int__(self) -> int:
        return self.encode()

    @classmethod
    def decode(cls, value: int) -> PhysAddr:
        return decode_pa(value)

    def offset_by(self, nbytes: int) -> PhysAddr:
        """The address ``nbytes`` further on in the same unit."""
        if self.kind == "hbm":
            return PhysAddr.hbm(self.sip, self.cube, self.hbm_offset + nbytes)
        return PhysAddr("pe_resource", self.sip, self.cube, unit_type=self.unit_type,
                        pe_id=self.pe_id, sub_offset=self.sub_offset + nbytes)

    def __str__(self) -> str:
        if self.kind == "hbm":
            return f"hbm({nm.cube_prefix(self.sip, self.cube)}+{self.hbm_offset:#x})"
        return (f"{self.unit_type.name.lower()}({nm.pe_prefix(self.sip, self.cube, self.pe_id)}"
                f"+{self.sub_offset:#x})")


def decode_pa(value: int) -> PhysAddr:
    """The :class:`PhysAddr` an encoded address names (``PhysAddr.decode``). A function:
    compiled callers reach it directly, where the class method of a non-native class
    is found by name on every call (~3 k instructions a DMA)."""
    if type(value) is not int or value < 0 or value >> PA_BITS:
        _check("physical address", value, PA_BITS)  # (raises unless an int subclass)
    sip = value >> _SIP_SHIFT
    cube = (value >> _CUBE_SHIFT) & ((1 << CUBE_BITS) - 1)
    if not (value >> _REGION_SHIFT) & 1:  # (in range by the check above: no re-check)
        return tuple.__new__(PhysAddr, ("hbm", sip, cube, value & _HBM_OFFSET_MASK, _PE, 0, 0))
    unit = (value >> _UNIT_SHIFT) & ((1 << UNIT_BITS) - 1)
    if unit >= len(_UNITS):
        raise ValueError(f"physical address {value:#x} has reserved unit type {unit}")
    return tuple.__new__(PhysAddr, ("pe_resource", sip, cube, 0, _UNITS[unit],
                                    (value >> _PE_SHIFT) & ((1 << PE_BITS) - 1),
                                    value & ((1 << SUB_OFFSET_BITS) - 1)))
