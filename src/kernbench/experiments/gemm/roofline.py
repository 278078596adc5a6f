"""Roofline of a GEMM on one PE, from topology numbers alone.

Compute time: the cycles the weight-stationary array is busy for each (m, k, n)
supertile, from its stated hardware (``gemm_array``), summed over the supertile
grid (at most two sizes per dimension: full tiles and the remainder). Memory
time: the minimum traffic (A and B read once, C written once) at the PE's
HBM-slice bandwidth. The roofline is the larger of the two; the ideal MAC time
M*K*N / (R*C*clock) is what "utilisation" is measured against.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kernbench.components.builtin.gemm_array import busy_cycles


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
    def util_pct(self) -> float:
        """Best MAC utilisation the roofline allows."""
        return 100.0 * self.ideal_mac_ns / self.roofline_ns


def _sizes(total: int, tile: int) -> Counter:
    """How many tiles of each size cover ``total``: full tiles and the remainder."""
    return Counter(min(tile, total - o) for o in range(0, total, tile))


def array_cycles(spec, M: int, K: int, N: int, tile: tuple[int, int, int],
                 stationary: str = "b") -> int:
    """Busy cycles of the array over every (m, k, n) supertile of the product."""
    tm, tk, tn = tile
    return sum(cm * ck * cn * busy_cycles(m, k, n, spec.pe.gemm, stationary)
               for m, cm in _sizes(M, tm).items() for k, ck in _sizes(K, tk).items()
               for n, cn in _sizes(N, tn).items())


def gemm_roofline(spec, M: int, K: int, N: int, tile: tuple[int, int, int] | None = None,
                  in_bytes: int = 2, out_bytes: int = 4) -> GemmRoofline:
    pe = spec.pe
    R, C = pe.gemm.mac_rows, pe.gemm.mac_cols
    cycles = array_cycles(spec, M, K, N, tile or (pe.tile_m, pe.tile_k, pe.tile_n))
    nbytes = (M * K + K * N) * in_bytes + M * N * out_bytes
    return GemmRoofline(
        compute_ns=cycles / pe.clock_ghz,
        memory_ns=nbytes / spec.slice_bw_gbs,
        ideal_mac_ns=M * K * N / (R * C * pe.clock_ghz),
        bytes=nbytes,
    )
