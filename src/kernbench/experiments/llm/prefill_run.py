"""A decoder layer's prefill on the system: one prompt of S tokens, causal.

The projections, the FFN and the all-reduces are the decode layer's kernels over
S token rows (a row block at a time, as the scratch holds). Attention is the
gqa study's ring prefill kernel (``gqa_prefill``) unchanged, on the same CUBE
group per KV head, in the layout that study uses (``prefill_layout.Sizes``):

- ``rope`` rotates the group's Q and K rows in place, every group PE a share of
  the rows, then copies its own Q blocks, K^T tiles (transposed on the way) and
  V tiles from the group's row-major buffers into its HBM slice;
- ``attention`` runs ``gqa_prefill``, then each PE copies its output rows into
  the group's [S, G d] buffer that the O projection reads.

Both copies are data movement the ring layout costs; the record names the
layout (``attention``). Design: docs/adr/0039-decoder-layer-mapping.md.
"""

from __future__ import annotations

import numpy as np

from kernbench.errors import UsageError
from kernbench.experiments.gqa.common import Shape, group_grid, launch_groups
from kernbench.experiments.gqa.prefill_layout import Host, Sizes, chunk_width, q_blocks_of
from kernbench.experiments.gqa.prefill_run import SUPERTILE
from kernbench.experiments.llm.layer_run import DecodeLayer
from kernbench.experiments.llm.reference import rope_angles
from kernbench.geometry.groups import ring_cubes, ring_tables
from kernbench.kernels.attention.prefill import gqa_prefill
from kernbench.kernels.layout import copy_blocks, rope_range
from kernbench.kernels.per_rank import per_rank

Q_ROWS, TILE = 128, 256  # the ring kernel's query block and KV tile (the gqa defaults)
F16, F32 = 2, 4


class _LayerHost(Host):
    """The ring layout's tensors on the step's context, filled by the layer's copies."""

    tensors: dict

    def _user(self, g, u, grid, shard_rank) -> tuple:
        sz, ctx = self.sz, self.ctx
        d, name = sz.shape.d, f"ring.h{g.head}"
        make = ctx.zeros if self.data else ctx.empty
        q_shape = (sz.n_ranks * sz.q_len, d)
        t = (make(q_shape, "f16", dp=grid, name=f"Q.{name}"),
             make((sz.n_ranks * d, sz.B), "f16", dp=grid, name=f"KT.{name}"),
             make((sz.n_ranks * sz.B, d), "f16", dp=grid, name=f"V.{name}"),
             make(q_shape, "f32", dp=grid, name=f"O.{name}"))
        self.tensors[g.head] = t
        return t


class RingAttention:
    """The ring prefill of every KV head's group, on the step's context."""

    def __init__(self, ctx, m, dims, S: int, data: bool) -> None:
        if dims.G % m.C:
            raise UsageError(f"prefill: the ring gives each of the C = {m.C} CUBEs of a KV "
                             f"head's group the same number of its G = {dims.G} query heads; "
                             f"C must divide G")
        self.ctx, self.m, self.dims, self.S = ctx, m, dims, S
        self.sz = Sizes(ctx.spec, S, m.C, m.P, Q_ROWS, TILE, Shape(dims.Hkv, dims.G, dims.d))
        self.host = _LayerHost(None, self.sz, 1, data, 0, False, ctx=ctx)
        self.host.tensors = {}
        self.ranks: dict = {}
        for g in m.groups:
            ctx.set_device(g.sip)
            self.ranks.update(self.host.group_ranks(g, (True, SUPERTILE, True, "auto")))

    def ipcq(self) -> tuple:
        """(tables, slots, slot bytes) of the ring's queues: one packed K^T + V tile each."""
        return ring_tables(list(self.m.groups)), 2, self.sz.slot

    def layout(self) -> dict:
        return {"kernel": "gqa_prefill", "q_rows": Q_ROWS, "tile": TILE,
                "supertile": list(SUPERTILE)}

    def plans(self, qk: dict, v: dict, o: dict) -> tuple[dict, dict]:
        """Per group PE: its copies into the ring layout and of its output back."""
        ins, outs = {}, {}
        for g in self.m.groups:
            pos_of = {c: i for i, c in enumerate(ring_cubes(g))}
            bufs = (qk[g.head].va, v[g.head].va, o[g.head].va)
            for cube in g.cubes:
                for pe in range(g.pes):
                    ins[(g.sip, cube, pe)], outs[(g.sip, cube, pe)] = self._copies(
                        g, cube, pe, pos_of[cube], bufs)
        return ins, outs

    def _copies(self, g, cube: int, pe: int, i: int, bufs: tuple) -> tuple:
        """(into the ring layout, back out) of the PE at ring position ``i``; the tuples
        are ``copy_blocks`` entries. Q blocks and K^T / V tiles go where
        ``Sizes.pack`` puts them, O blocks where ``Sizes.unpack`` reads them."""
        sz, dims = self.sz, self.dims
        d, G, hpc, P = dims.d, dims.G, sz.hpc, sz.P
        width = (G + 1) * d  # a row of the group's Q/K buffer: G query heads, then K
        qk, v, o = bufs
        tq, tk, tv, to = self.host.tensors[g.head]
        qa, oa = tq.ptr(cube, pe, g.sip), to.ptr(cube, pe, g.sip)
        into, back = [], []
        for q0, rows in q_blocks_of(self.S, Q_ROWS, pe, P):
            for j in range(hpc):
                head = i * hpc + j
                into.append((qk + (q0 * width + head * d) * F16, width,
                             qa + j * rows * d * F16, d, rows, d, "f16", False))
                back.append((oa + j * rows * d * F32, d, o + (q0 * G * d + head * d) * F32,
                             G * d, rows, d, "f32", False))
            qa += hpc * rows * d * F16
            oa += hpc * rows * d * F32
        kt, vt = tk.ptr(cube, pe, g.sip), tv.ptr(cube, pe, g.sip)
        for t in range(pe, sz.n_chunks, P):
            w = chunk_width(self.S, sz.Sb, sz.tile, i, t)
            if w == 0:
                continue
            k0, at = i * sz.Sb + t * sz.tile, (t // P) * sz.tile
            into.append((qk + (k0 * width + G * d) * F16, width, kt + at * F16, sz.B, w, d,
                         "f16", True))
            into.append((v + k0 * d * F16, d, vt + at * d * F16, d, w, d, "f16", False))
        return (tuple(into),), (tuple(back),)

    def run(self) -> None:
        m = self.m
        launch_groups(self.ctx, m.groups, "attention", gqa_prefill, self.ranks, m.C, m.P,
                      scratch_bytes=self.sz.arena)


def _rope_block(spec, heads: int, d: int) -> int:
    """Rows RoPE rotates at once: f16 halves in, about six f32 temporaries per element."""
    return max(1, spec.pe.kernel_scratch_bytes // 2 // (heads * d * (F16 + 6 * F32)))


class PrefillLayer(DecodeLayer):
    """The decode layer's projections over S rows, with ring attention between them."""

    def __init__(self, ctx, all_reduce, place, dims, S: int, ring: RingAttention,
                 use_queues=None, moe=None, row_blocks=None) -> None:
        super().__init__(ctx, all_reduce, place, dims, S, S, use_queues=use_queues, moe=moe,
                         row_blocks=row_blocks)
        self.ring = ring
        self.into, self.back = ring.plans(self.qk, self.v, self.o)
        cos = sin = None
        if place.data:
            cos, sin = (a.astype(np.float32) for a in rope_angles(np.arange(S), dims.d,
                                                                   dims.theta))
        shape = (S, dims.d // 2)
        # each group's angle rows sit with its Q/K buffer, mapped by the SIP's PEs
        self.angles = {g.head: (place.at_root(g, f"cos.h{g.head}", shape, "f32", cos),
                                place.at_root(g, f"sin.h{g.head}", shape, "f32", sin))
                       for g in self.m.groups}

    def _on_groups(self, name: str, fn, plan: dict) -> None:
        ctx, handles = self.ctx, []
        for g in self.m.groups:
            ctx.set_device(g.sip)
            handles.append(ctx.launch(f"{name}.h{g.head}", per_rank, fn, plan,
                                      dp=group_grid(g, len(g.cubes), g.pes)))
        for h in handles:
            ctx.wait(h)

    def _rope(self, caches, angles: dict) -> None:
        """Rotate Q and K in place (each group PE a share of the rows, angles from its
        group's tables), then copy them and V into the ring layout."""
        dims, S = self.dims, self.S
        heads = dims.G + 1
        block = _rope_block(self.ctx.spec, heads, dims.d)
        plan = {}
        for g in self.m.groups:
            share = -(-S // g.ranks)
            for cube in g.cubes:
                for pe in range(g.pes):
                    r0 = min(S, g.rank(cube, pe) * share)
                    cos, sin = self.angles[g.head]
                    plan[(g.sip, cube, pe)] = (self.qk[g.head].va, cos.va, sin.va, r0,
                                               min(share, S - r0), heads, dims.d, block)
        self._on_groups("rope", rope_range, plan)
        self._on_groups("to_ring", copy_blocks, self.into)

    def _attention(self, caches) -> None:
        self.use_queues("attention")
        self.ring.run()
        self._on_groups("from_ring", copy_blocks, self.back)
