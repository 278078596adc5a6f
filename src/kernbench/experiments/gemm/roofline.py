"""Roofline of a GEMM on one PE, from topology numbers alone.

Compute time: the cycles the weight-stationary array is busy for each (m, k, n)
supertile, from its stated hardware (``gemm_array``), summed over the supertile
grid the composite walks (at most two sizes per dimension: full tiles and the
remainder), with the operand it holds. Memory
time: the minimum traffic (A and B read once, C written once) at the PE's
HBM-slice bandwidth. The roofline is the larger of the two; the ideal MAC time
M*K*N / (R*C*clock) is what "utilisation" is measured against.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.components.builtin.gemm_array import mapping, walk_cycles
from kernbench.components.tiling import supertile


@dataclass(frozen=True)
class GemmRoofline:
    compute_ns: float
    memory_ns: float
    ideal_mac_ns: float
    bytes: int

    @property
    def roofline_ns(self) -> float:
        return max(self.compute_ns, self.memory_ns)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_ns >= self.memory_ns else "memory"

    @property
    def intensity(self) -> str:
        """The bound the shape's arithmetic intensity sets against the machine balance:
        what an ideal array (every MAC busy every cycle) would be held by. It does not
        depend on how the array loads its weights, so it names the shape families."""
        return "compute" if self.ideal_mac_ns >= self.memory_ns else "memory"

    @property
    def util_pct(self) -> float:
        """Best MAC utilisation the roofline allows."""
        return 100.0 * self.ideal_mac_ns / self.roofline_ns


def array_cycles(spec, M: int, K: int, N: int, tile: tuple[int, int, int] | None = None,
                 stationary: str = "b", in_bytes: int = 2) -> int:
    """Busy cycles of the array over the composite's supertile walk, with the operand
    and supertile its planner would choose (``gemm_array.mapping``; B streamed)."""
    pe = spec.pe
    held, shape = mapping(pe, M, K, N, tile, stationary, in_bytes, in_bytes, False)
    shape = shape or supertile((pe.tile_m, pe.tile_k, pe.tile_n), K, N)
    return walk_cycles(M, K, N, shape, pe.gemm, held)


def gemm_roofline(spec, M: int, K: int, N: int, tile: tuple[int, int, int] | None = None,
                  in_bytes: int = 2, out_bytes: int = 4, stationary: str = "b") -> GemmRoofline:
    pe = spec.pe
    R, C = pe.gemm.mac_rows, pe.gemm.mac_cols
    cycles = array_cycles(spec, M, K, N, tile, stationary, in_bytes)
    nbytes = (M * K + K * N) * in_bytes + M * N * out_bytes
    return GemmRoofline(
        compute_ns=cycles / pe.clock_ghz,
        memory_ns=nbytes / spec.slice_bw_gbs,
        ideal_mac_ns=M * K * N / (R * C * pe.clock_ghz),
        bytes=nbytes,
    )
