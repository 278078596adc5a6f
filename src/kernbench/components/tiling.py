"""Tile plans for composites: how PE_SCHEDULER walks a GEMM in supertiles.

Loop order is (m tile, group of n tiles, k tile, n tile): an A tile is loaded
once per group and reused against every B tile of the group, whose
accumulators stay in the scheduler's reserved TCM. For a skinny GEMM (one m
tile, the decode case) this reads A and B exactly once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True, slots=True)
class GemmTile:
    mi: int
    ni: int
    ki: int
    m0: int  # element offsets of the tile
    k0: int
    n0: int
    m: int  # tile sizes (edge tiles are smaller)
    k: int
    n: int
    load_a: bool  # first use of this A tile in its n group
    first_k: bool
    last_k: bool


def supertile(tile: tuple[int, int, int], K: int, N: int) -> tuple[int, int, int]:
    """The supertile for a GEMM: narrow outputs get deeper K tiles so DMAs keep their size."""
    tm, tk, tn = tile
    if N < tn:
        tk = min(max(K, tk), tk * (tn // N))
        tn = N
    return tm, tk, tn


STREAM = "stream"  # tile_shape a composite passes to ask for stream_supertile


def stream_supertile(tile: tuple[int, int, int], tile_bytes: int, K: int, N: int,
                     elem: int = 2) -> tuple[int, int, int]:
    """The supertile of a weight-streaming GEMM (few rows against a whole weight, the
    decode projections): the weight tile grows to about ``tile_bytes`` so the weight
    streams in a few large DMAs, not thousands of small ones; the A tile (``tm`` rows
    of the same depth) stays within the same bytes. Depth first, then width, each a
    whole number of the scheduler's tiles where the GEMM is that large."""
    tm, tk0, tn0 = tile
    tk = min(K, max(tk0, tile_bytes // (elem * tm) // tk0 * tk0))
    room = tile_bytes // (elem * tk)  # weight columns that fit beside that depth
    tn = min(-(-N // tn0) * tn0, max(tn0, room // tn0 * tn0))
    return tm, tk, tn


def n_group(n_tiles: int, tile_m: int, tile_n: int, acc_budget_bytes: int,
            acc_bpe: int = 4) -> int:
    """How many output tiles' accumulators fit in the budget (at least one)."""
    per_tile = tile_m * tile_n * acc_bpe
    return max(1, min(n_tiles, acc_budget_bytes // per_tile))


@lru_cache(maxsize=256)
def gemm_tiles(M: int, K: int, N: int, tile_m: int, tile_k: int, tile_n: int,
               group: int) -> tuple[GemmTile, ...]:
    """The supertile walk, in loop order. Cached: a kernel issues the same shapes over
    and over, and the tiles are immutable."""
    mt, kt, nt = math.ceil(M / tile_m), math.ceil(K / tile_k), math.ceil(N / tile_n)
    tiles: list[GemmTile] = []
    for mi in range(mt):
        m0 = mi * tile_m
        m = min(tile_m, M - m0)
        for g0 in range(0, nt, group):
            group_n = range(g0, min(nt, g0 + group))
            for ki in range(kt):
                k0 = ki * tile_k
                k = min(tile_k, K - k0)
                for j, ni in enumerate(group_n):
                    n0 = ni * tile_n
                    tiles.append(GemmTile(mi, ni, ki, m0, k0, n0, m, k, min(tile_n, N - n0),
                                          load_a=(j == 0), first_k=(ki == 0),
                                          last_k=(ki == kt - 1)))
    return tuple(tiles)


def tile_count(M: int, K: int, N: int, tile_m: int, tile_k: int, tile_n: int) -> int:
    return math.ceil(M / tile_m) * math.ceil(K / tile_k) * math.ceil(N / tile_n)


def chunks(numel: int, chunk: int) -> list[tuple[int, int]]:
    """(offset, length) element chunks for elementwise composites."""
    return [(o, min(chunk, numel - o)) for o in range(0, numel, chunk)]
