"""Host-side tensors: a virtual address range plus the physical shards behind it."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernbench.policy.address.phys_addr import PhysAddr
from kernbench.policy.placement import DPPolicy, ShardSpec
from kernbench.triton_emu.pe_commands import dtype_bytes, numel


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
    placements: list[Placement] = field(default_factory=list)
    freed: bool = False

    @property
    def nbytes(self) -> int:
        return numel(self.shape) * dtype_bytes(self.dtype)

    def local(self, cube: int, pe: int) -> Placement:
        for p in self.placements:
            if p.shard.cube == cube and p.shard.pe == pe:
                return p
        raise KeyError(f"tensor {self.name!r} has no shard on cube {cube} PE {pe}")

    def ptr(self, cube: int, pe: int) -> int:
        """The virtual address a kernel on (cube, pe) uses for its local shard."""
        return self.local(cube, pe).va

    @property
    def local_shape(self) -> tuple[int, ...]:
        return self.placements[0].shard.shape

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, {self.shape}, {self.dtype}, va={self.va:#x})"
