"""Host-side placement of a decoder layer's tensors (weights, buffers, KV caches).

Per-rank tensors are one tensor per SIP, row-wise over its CUBEs and the
``k`` rank PEs of each, so shard (CUBE, PE) is that rank's block. In data
mode the host writes the global matrices' slices; in timing mode nothing is
written. Buffers the attention group shares (its Q/K, V and O rows) live on
the group root and are mapped by every PE of the SIP.
"""

from __future__ import annotations

import numpy as np

from kernbench.policy.placement import DPPolicy

F16 = np.float16


def row_block(spec, D: int, cols: int) -> int:
    """Token rows a norm + projection kernel takes at once, as many as its scratch
    holds: per row, the f16 input, the rmsnorm recipe's f32 squares and f32 normalised
    row, the f16 operand and an f16 residual, plus an f32 and an f16 output of ``cols``;
    besides, the f32 norm weights and 64 KiB for small tensors and alignment. Every
    block streams the weights once more, so a block is never smaller than it must be
    (docs/adr/0054). A block of more rows than the array's supertile (``tile_m``) is a
    whole number of supertiles: each supertile row band streams the weights again, so
    34 rows would stream them twice, the second time for 2 rows."""
    per_row = D * (2 + 4 + 4 + 2 + 2) + cols * (4 + 2)
    rows = max(1, (spec.pe.kernel_scratch_bytes - 4 * D - 65536) // per_row)
    tile_m = spec.pe.tile_m
    return rows if rows < tile_m else rows // tile_m * tile_m


def ptr(tensors: dict, r) -> int:
    """The VA of rank ``r``'s shard of a {sip: tensor} set."""
    sip, cube, pe = r
    return tensors[sip].ptr(cube, pe, sip)


class Placer:
    """Creates the layer's tensors on one context, following one mapping."""

    def __init__(self, ctx, mapping, data: bool) -> None:
        self.ctx, self.m, self.data = ctx, mapping, data
        spec = ctx.spec
        self.sips, self.cubes = spec.sips.count, spec.cubes_per_sip
        self.rank_dp = DPPolicy(cube="row_wise", num_cubes=self.cubes, pe="row_wise",
                                num_pes=mapping.k)
        self.rep_dp = DPPolicy(cube="replicate", num_cubes=self.cubes, pe="replicate",
                               num_pes=mapping.k)

    def _make(self, sip: int, name: str, shape, dtype: str, dp, array=None, shared=False):
        ctx = self.ctx
        ctx.set_device(sip)
        if self.data and array is not None:
            return ctx.from_numpy(np.ascontiguousarray(array), dtype=dtype, dp=dp, name=name,
                                  shared=shared)
        return ctx.empty(shape, dtype, dp=dp, name=name, shared=shared)

    def per_rank(self, name: str, block, dtype: str, pieces=None) -> dict:
        """{sip: tensor} whose shard on rank r is ``pieces(r)`` (shape ``block``)."""
        out = {}
        for sip in range(self.sips):
            ranks = [r for r in self.m.ranks if r[0] == sip]
            shape = (len(ranks) * block[0], *block[1:])
            array = None
            if self.data and pieces is not None:
                array = np.concatenate([pieces(r) for r in ranks])
            out[sip] = self._make(sip, f"{name}.s{sip}", shape, dtype, self.rank_dp, array)
        return out

    def replicated(self, name: str, array: np.ndarray | None, shape, dtype: str) -> dict:
        """{sip: tensor} with a copy on every rank."""
        return {sip: self._make(sip, f"{name}.s{sip}", shape, dtype, self.rep_dp, array)
                for sip in range(self.sips)}

    def at_root(self, g, name: str, shape, dtype: str, array=None):
        """A buffer on group ``g``'s root PE that every PE of its SIP maps."""
        _, cube, _ = self.m.root(g)
        dp = DPPolicy(num_cubes=1, cube_start=cube, num_pes=1)
        return self._make(g.sip, name, shape, dtype, dp, array, shared=True)

    def kv_cache(self, g, name: str, keys, values, slots: int, d: int):
        """K^T [n d, B] and V [n B, d] of one user over group ``g`` (rank r holds tokens
        r B .. r B + B - 1, K transposed); ``keys``/``values`` [S, d] or None. Mapped by
        the group's PEs only: the root, which appends the new token, is one of them."""
        n = g.ranks
        dp = DPPolicy(cube="row_wise", num_cubes=len(g.cubes), cube_start=g.cube_start,
                      pe="row_wise", num_pes=g.pes)
        kt = vp = None
        if self.data:
            pad = np.zeros((n * slots - keys.shape[0], d), F16)
            kp, vp = np.concatenate([keys, pad]), np.concatenate([values, pad])
            kt = np.concatenate([kp[r * slots:(r + 1) * slots].T for r in range(n)])
        return (self._make(g.sip, f"KT.{name}", (n * d, slots), "f16", dp, kt),
                self._make(g.sip, f"V.{name}", (n * slots, d), "f16", dp, vp))
