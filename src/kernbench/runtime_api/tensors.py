"""Host-side tensors: a virtual address range plus the physical shards behind it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kernbench.isa.dtypes import dtype_bytes
from kernbench.isa.handles import numel
from kernbench.policy.address.phys_addr import PhysAddr
from kernbench.policy.placement import DPPolicy, ShardSpec


@dataclass
class Placement:
    """One physical copy of one shard."""

    shard: ShardSpec
    pa: PhysAddr
    va: int  # virtual address of this shard's data
    nbytes: int


@dataclass
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    dp: DPPolicy
    va: int
    va_bytes: int
    sip: int = 0  # the device (SIP) the tensor lives on
    placements: list[Placement] = field(default_factory=list)
    freed: bool = False
    mapped_by: list[tuple[int, int]] = field(default_factory=list)  # (cube, pe) that map it

    @property
    def nbytes(self) -> int:
        return numel(self.shape) * dtype_bytes(self.dtype)

    def local(self, cube: int, pe: int, sip: int | None = None) -> Placement:
        if sip is None or sip == self.sip:
            for p in self.placements:
                if p.shard.cube == cube and p.shard.pe == pe:
                    return p
        where = f"SIP {self.sip if sip is None else sip} cube {cube} PE {pe}"
        raise KeyError(f"tensor {self.name!r} (on SIP {self.sip}) has no shard on {where}")

    def ptr(self, cube: int, pe: int, sip: int | None = None) -> int:
        """The virtual address a kernel on (sip, cube, pe) uses for its local shard."""
        return self.local(cube, pe, sip).va

    def chunk(self, offset: int, nbytes: int) -> Tensor:
        """A view of bytes ``offset .. offset + nbytes`` of every shard (1-D, same
        dtype): how a buffer too large for one collective is reduced in pieces."""
        size = dtype_bytes(self.dtype)
        shard = self.placements[0].nbytes
        if offset % size or nbytes % size or offset < 0 or nbytes < size \
                or offset + nbytes > shard:
            raise ValueError(f"chunk({offset}, {nbytes}) of {self.name!r}: whole "
                             f"{self.dtype} elements within its {shard}-byte shards")
        places = [Placement(replace(p.shard, shape=(nbytes // size,)),
                            p.pa._replace(hbm_offset=p.pa.hbm_offset + offset), p.va + offset,
                            nbytes) for p in self.placements]
        return Tensor(f"{self.name}[{offset}:{offset + nbytes}]", (nbytes // size,),
                      self.dtype, self.dp, self.va + offset, nbytes, self.sip, places,
                      self.freed, list(self.mapped_by))

    @property
    def local_shape(self) -> tuple[int, ...]:
        return self.placements[0].shard.shape

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, {self.shape}, {self.dtype}, sip{self.sip}, va={self.va:#x})"
