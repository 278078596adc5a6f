"""Cycles of one product on the weight-stationary MAC array, from its stated hardware.

An (m, k, n) product with B (k x n) held stationary is cut into weight blocks
("folds") of ``mac_rows`` x ``mac_cols``: F = ceil(k / R) * ceil(n / C). Each
fold loads its block, streams the m rows of A through the array, and drains
its partial sums. Three stated properties of the array decide what overlaps
(``pe.gemm`` in the topology, docs/topology-format.md):

* ``weight_rows_per_cycle`` (w): a block loads in L = ceil(R / w) cycles;
* ``double_buffered_weights``: a block loads into shadow registers while the
  previous block (of this product or the one before) computes; otherwise a
  block loads only once the previous one has left the array;
* ``pipelined_folds``: block i+1's first input row follows block i's last
  one, so the fill and skew S = R + C - 2 are paid once per product, after
  the array frees (a latency, not occupancy); otherwise every block pays them.

With P = m (pipelined) or m + S (not), the array is busy for

* double-buffered:     F * max(P, L)   (a block takes its compute or its load,
                                        whichever is longer, in steady state)
* single-buffered:     F * (L + P)

The double-buffered count is the steady state of back-to-back products, as a
composite's supertiles run: the first block's load overlaps the previous
product's last block, which is why each product is charged every load.

and the result appears ``R + C`` cycles after that when folds pipeline (the
last block's fill, as ADR 0008 had it), at once otherwise. w = R with both
overlaps gives F * m (the ideal array); w = 1 with neither gives SCALE-Sim
v3's weight-stationary count F * (2R + C + m - 2) (it reports one less: it
counts from cycle 0).

Either operand may be held stationary: holding A computes C^T = B^T A^T, so
its cost is that of (n, k, m) with B stationary. ``"auto"`` takes the cheaper
mapping, B on a tie.
"""

from __future__ import annotations

import math
from collections import Counter

from kernbench.components.tiling import STREAM, stream_supertile, supertile

STATIONARY = ("b", "a", "auto")


def _busy_b(m: int, k: int, n: int, array) -> int:
    """Busy cycles of (m, k, n) with B stationary."""
    R, C = array.mac_rows, array.mac_cols
    folds = math.ceil(k / R) * math.ceil(n / C)
    load = math.ceil(R / array.weight_rows_per_cycle)
    stream = max(m, 1)
    per_fold = stream if array.pipelined_folds else stream + R + C - 2
    if array.double_buffered_weights:
        return folds * max(per_fold, load)
    return folds * (load + per_fold)


def busy_cycles(m: int, k: int, n: int, array, stationary: str = "b") -> int:
    """Cycles the array is occupied by one (m, k, n) product under ``stationary``."""
    if stationary == "b":
        return _busy_b(m, k, n, array)
    if stationary == "a":
        return _busy_b(n, k, m, array)
    if stationary == "auto":
        return min(_busy_b(m, k, n, array), _busy_b(n, k, m, array))
    raise ValueError(f"stationary must be one of {', '.join(STATIONARY)}, got {stationary!r}")


def resolve(m: int, k: int, n: int, array, stationary: str) -> str:
    """The operand actually held: ``stationary``, or the cheaper one for ``"auto"``."""
    if stationary != "auto":
        return stationary
    return "a" if _busy_b(n, k, m, array) < _busy_b(m, k, n, array) else "b"


def drain_cycles(array) -> int:
    """Cycles from the array freeing to the last result leaving it."""
    return array.mac_rows + array.mac_cols if array.pipelined_folds else 0


def _sizes(total: int, tile: int) -> Counter:
    """How many tiles of each size cover ``total``: full tiles and the remainder."""
    return Counter(min(tile, total - o) for o in range(0, total, tile))


def walk_cycles(M: int, K: int, N: int, tile: tuple[int, int, int], array,
                stationary: str = "b") -> int:
    """Busy cycles of the array over every (m, k, n) supertile of an (M, K, N) product
    (at most two sizes per dimension: full tiles and the remainder)."""
    tm, tk, tn = tile
    return sum(cm * ck * cn * busy_cycles(m, k, n, array, stationary)
               for m, cm in _sizes(M, tm).items() for k, ck in _sizes(K, tk).items()
               for n, cn in _sizes(N, tn).items())


def a_held_tile_n(pe, N: int, a_bytes: int, b_bytes: int, b_pinned: bool) -> int:
    """The widest n tile when A is held: the product's N, or what a tile buffer holds
    beside its A tile when B streams from HBM (``pe``: the topology's ``pe`` block)."""
    if b_pinned:
        return N
    per_tile = pe.tcm_reserved_bytes // pe.max_inflight_tiles
    left = per_tile - pe.tile_m * pe.tile_k * a_bytes
    return max(pe.tile_n, min(N, left // (pe.tile_k * b_bytes)))


def mapping(pe, M: int, K: int, N: int, tile_shape, asked: str, a_bytes: int, b_bytes: int,
            b_pinned: bool) -> tuple[str, tuple | None]:
    """(operand held, supertile or None for the default walk) of a composite's GEMM.

    Holding A streams the product's columns through each A block, so its supertile is
    as wide as the product allows: A's blocks load once per k step, not once per n
    tile. ``"auto"`` takes the cheaper walk, B on a tie.
    """
    if tile_shape == STREAM:
        tile_shape = stream_supertile((pe.tile_m, pe.tile_k, pe.tile_n), pe.stream_tile_bytes,
                                      K, N, b_bytes)
    if asked == "b":
        return "b", tile_shape
    wide = tile_shape or (pe.tile_m, pe.tile_k, a_held_tile_n(pe, N, a_bytes, b_bytes, b_pinned))
    if asked == "a":
        return "a", wide
    if asked != "auto":
        raise ValueError(f"stationary must be one of {', '.join(STATIONARY)}, got {asked!r}")
    narrow = tile_shape or supertile((pe.tile_m, pe.tile_k, pe.tile_n), K, N)
    if walk_cycles(M, K, N, wide, pe.gemm, "a") < walk_cycles(M, K, N, narrow, pe.gemm, "b"):
        return "a", wide
    return "b", tile_shape
