"""Tile plans for composites: how PE_SCHEDULER walks a GEMM in supertiles.

Loop order is (m tile, group of n tiles, k tile, n tile): an A tile is loaded
once per group and reused against every B tile of the group, whose
accumulators stay in the scheduler's reserved TCM. For a skinny GEMM (one m
tile, the decode case) this reads A and B exactly once.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Final

_TILE_FIELDS: Final = ("mi", "ni", "ki", "m0", "k0", "n0", "m", "k", "n", "load_a", "first_k",
                       "last_k")


class GemmTile:
    """One supertile of the walk. Read-only by convention (``Final``): the walk is
    cached and shared. A plain class, not a frozen dataclass: compiled, building one
    sets twelve fields directly, where the frozen ``__init__`` went through
    ``object.__setattr__`` per field (8,192 tiles of a 2048x512x512 GEMM cost
    about 11 ms that way)."""

    __slots__ = _TILE_FIELDS

    def __init__(self, mi: int, ni: int, ki: int, m0: int, k0: int, n0: int, m: int, k: int,
                 n: int, load_a: bool, first_k: bool, last_k: bool) -> None:
        self.mi: Final = mi
        self.ni: Final = ni
        self.ki: Final = ki
        self.m0: Final = m0  # element offsets of the tile
        self.k0: Final = k0
        self.n0: Final = n0
        self.m: Final = m  # tile sizes (edge tiles are smaller)
        self.k: Final = k
        self.n: Final = n
        self.load_a: Final = load_a  # first use of this A tile in its n group
        self.first_k: Final = first_k
        self.last_k: Final = last_k

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in _TILE_FIELDS)
        return f"GemmTile({fields})"


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
                                          j == 0, ki == 0, ki == kt - 1))
    return tuple(tiles)


def tile_count(M: int, K: int, N: int, tile_m: int, tile_k: int, tile_n: int) -> int:
    return math.ceil(M / tile_m) * math.ceil(K / tile_k) * math.ceil(N / tile_n)


def chunks(numel: int, chunk: int) -> list[tuple[int, int]]:
    """(offset, length) element chunks for elementwise composites."""
    return [(o, min(chunk, numel - o)) for o in range(0, numel, chunk)]
