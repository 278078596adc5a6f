"""The gqa study's analytic bounds: what no mapping of the attention step can beat.

* KV bandwidth (decode): every K and V byte of the context read once, over the
  aggregate HBM-slice bandwidth of the participating PEs;
* compute (prefill): the attention FLOPs (the causal triangle, or the full square)
  at the participating PEs' peak MAC rate;
* the array's own bounds under its stated hardware (``gemm_array``): both products
  of every KV tile of the busiest decode rank, one ring step of prefill, and the
  query rows per block at which a ring step's math outlasts a tile's hop.
"""

from __future__ import annotations

from kernbench.components.builtin.gemm_array import busy_cycles
from kernbench.kernels.attention.helpers import block_len

F16 = 2


def work(shape, S: int, users: int, pairs: int) -> dict:
    """The bounds' inputs: K/V bytes of the context and the FLOPs of ``pairs``
    (query, key) pairs per query head."""
    return {"kv_bytes": shape.heads * users * S * shape.d * F16 * 2,
            "flops": 4 * shape.d * pairs * shape.heads * shape.G * users}


def query_key_pairs(S: int, causal: bool) -> int:
    """(query, key) pairs of an S-token prefill: the causal triangle or the square."""
    return S * (S + 1) // 2 if causal else S * S


def kv_bound_ns(spec, kv_bytes: int, pes: int) -> float:
    """Every KV byte once over the PEs' aggregate HBM slice bandwidth."""
    return kv_bytes / (pes * spec.slice_bw_gbs)


def compute_bound_ns(spec, flops: int, pes: int) -> float:
    """The FLOPs at the PEs' peak GEMM rate."""
    pe = spec.pe
    return flops / (pes * 2 * pe.gemm.mac_rows * pe.gemm.mac_cols * pe.clock_ghz)


def array_bound_ns(spec, S: int, ranks: int, users: int, tile: int, G: int, d: int,
                   stationary: str) -> float:
    """The least time the busiest decode rank's array needs: Q.K^T (G x d x t) and P.V
    (G x t x d) of every KV tile of its block, for every user, under the array's stated
    hardware (``gemm_array``) and the kernel's operand choice."""
    array = spec.pe.gemm
    B = block_len(S, ranks)
    cycles = 0
    for t0 in range(0, B, tile):
        t = min(tile, B - t0)
        cycles += (busy_cycles(G, d, t, array, stationary)
                   + busy_cycles(G, t, d, array, stationary))
    return users * cycles / spec.pe.clock_ghz


def hop_ns(spec, d: int, tile: int) -> float:
    """Link time of one KV tile's ring hop (K and V, over the slower of UCIe and NoC)."""
    return 2 * d * tile * F16 / min(spec.ucie.bw_gbs, spec.noc_link_bw_gbs)


def step_array_ns(spec, q_rows: int, d: int, tile: int, heads: int,
                  stationary: str = "auto") -> float:
    """The array's time for one ring step: Q.K^T and P.V of ``heads`` query heads of
    ``q_rows`` rows against one tile, under the array's stated hardware."""
    array = spec.pe.gemm
    cycles = (busy_cycles(q_rows, d, tile, array, stationary)
              + busy_cycles(q_rows, tile, d, array, stationary))
    return heads * cycles / spec.pe.clock_ghz


def overlap_rows_peak(spec) -> float:
    """c = F / B: per-PE peak FLOP/s over the ring hop's bandwidth, the query rows per
    block above which an ideal array's math outlasts a tile's hop."""
    flops = 2 * spec.pe.gemm.mac_rows * spec.pe.gemm.mac_cols * spec.pe.clock_ghz  # FLOP/ns
    return flops / min(spec.ucie.bw_gbs, spec.noc_link_bw_gbs)


def overlap_rows(spec, d: int, tile: int, heads: int = 1, limit: int = 4096) -> int:
    """The fewest query rows per block for which a step keeps this array busy as long as
    the next tile's hop takes (``limit`` if none up to it): the overlap point on the
    modelled array, which a slow weight load moves below the peak-rate ``c = F / B``."""
    hop = hop_ns(spec, d, tile)
    for rows in range(1, limit + 1):
        if step_array_ns(spec, rows, d, tile, heads) >= hop:
            return rows
    return limit
