"""Roofline of a GEMM on one PE, from topology numbers alone.

Compute time: the weight-stationary R x C array takes ceil(k/R) * ceil(n/C)
* max(m, 1) cycles per (m, k, n) supertile; summed over the supertile grid
this factorises into (sum over m tiles) x (sum over k tiles) x (sum over n
tiles). Memory time: the minimum traffic (A and B read once, C written once)
at the PE's HBM-slice bandwidth. The roofline is the larger of the two; the
ideal MAC time M*K*N / (R*C*clock) is what "utilisation" is measured against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


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


def _sizes(total: int, tile: int) -> list[int]:
    return [min(tile, total - o) for o in range(0, total, tile)]


def gemm_roofline(spec, M: int, K: int, N: int, tile: tuple[int, int, int] | None = None,
                  in_bytes: int = 2, out_bytes: int = 4) -> GemmRoofline:
    pe = spec.pe
    tm, tk, tn = tile or (pe.tile_m, pe.tile_k, pe.tile_n)
    R, C = pe.mac_rows, pe.mac_cols
    cycles = (sum(max(m, 1) for m in _sizes(M, tm))
              * sum(math.ceil(k / R) for k in _sizes(K, tk))
              * sum(math.ceil(n / C) for n in _sizes(N, tn)))
    nbytes = (M * K + K * N) * in_bytes + M * N * out_bytes
    return GemmRoofline(
        compute_ns=cycles / pe.clock_ghz,
        memory_ns=nbytes / spec.slice_bw_gbs,
        ideal_mac_ns=M * K * N / (R * C * pe.clock_ghz),
        bytes=nbytes,
    )
