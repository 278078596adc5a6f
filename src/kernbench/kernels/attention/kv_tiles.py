"""A decode rank's KV tiles streamed from its HBM slice into TCM buffers, in turn.

Shared by the per-user sweeps (``decode.py``) and the sweep over a block of users
(``batched.py``). Design: docs/adr/0026-gqa-attention.md, 0053.
"""

from __future__ import annotations

from kernbench.kernels.attention.helpers import tiles, view_as

F16 = 2


class KvTiles:
    """One user's KV tiles, loaded into persistent TCM buffer pairs in turn.

    ``load(j)`` issues tile j's K^T and V reads (lazy: the composites that use them
    wait, PE_CPU does not), so the GEMMs run on TCM operands. Loading ``ahead``
    tiles in advance keeps the DMA streaming. A new load reuses the buffers of the
    tile before the one being consumed, whose readers have all been issued (opt3
    fetches tile j + 1 + ahead while tile j's P.V is still to come). ``bufs``: the
    (K^T, V) buffer pairs to cycle through, ``ahead + 2`` new ones when None. The
    last, partial tile gets buffers of its own, or with ``bufs`` given the front of
    its slot's (several users' partial tiles would not fit the scratch besides)."""

    def __init__(self, tl, r, u, ahead: int, bufs: list | None = None) -> None:
        self.tl, self.r, self.u, self.ahead = tl, r, u, ahead
        self.todo = tiles(u.valid, r.tile)
        self.shared = bufs is not None
        if bufs is None:
            n = min(ahead + 2, len(self.todo))
            bufs = [pair_buffers(tl, r) for _ in range(n)]
        self.bufs = bufs
        self.loaded: dict[int, tuple] = {}

    def prefetch(self, j: int) -> None:
        """Tile j is about to be used: make sure it and the ``ahead`` after it are loading."""
        for i in range(j, j + self.ahead + 1):
            self.load(i)

    def load(self, j: int) -> None:
        if j >= len(self.todo) or j in self.loaded:
            return
        tl, r, u = self.tl, self.r, self.u
        start, width = self.todo[j]
        kb, vb = self.bufs[j % len(self.bufs)]
        if width != r.tile and self.shared:
            kb, vb = view_as(tl, kb, 0, (r.d, width)), view_as(tl, vb, 0, (width, r.d))
        elif width != r.tile:
            kb, vb = tl.zeros((r.d, width), "f16"), tl.zeros((width, r.d), "f16")
        k = tl.load(u.kT + start * F16, (r.d, width), "f16", row_stride=r.B, out=kb)
        v = tl.load(u.v + start * r.d * F16, (width, r.d), "f16", out=vb)
        self.loaded[j] = (k, v)

    def get(self, j: int) -> tuple:
        self.prefetch(j)
        return self.loaded.pop(j)


def pair_buffers(tl, r) -> tuple:
    """A (K^T [d, tile], V [tile, d]) f16 buffer pair in TCM."""
    return tl.zeros((r.d, r.tile), "f16"), tl.zeros((r.tile, r.d), "f16")
