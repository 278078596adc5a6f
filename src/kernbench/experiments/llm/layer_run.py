"""A decoder layer on the simulated system, step by step (decode: one token per user).

Each step is a launch the host waits for, so the steps' spans add up to the
layer: ``qkv`` (Q/K/V projections on every rank), ``rope`` (rotation and
KV-cache append on each group root), ``attention`` (the gqa study's fused
split-KV decode kernel, its users stacked and its GEMMs in streaming supertiles:
ADR 0052, 0053, 0041), ``o_proj``, ``allreduce_attn``, ``ffn`` (SwiGLU) and
``allreduce_ffn``. The two RMSNorms run fused as the prologues of the QKV and FFN
composites; ``norms`` is their time (the slowest rank's prologues in each launch),
taken out of those two spans. The residual stream lives in two per-rank f16
buffers; the rank that carries the residual adds it in its projection's epilogue,
so each all-reduce leaves the next residual on every rank.
"""

from __future__ import annotations

import numpy as np

from kernbench.experiments.llm.moe_ep import moe_ffn
from kernbench.experiments.llm.moe_run import MoeWeights
from kernbench.experiments.llm.row_blocks import RowBlocks
from kernbench.experiments.llm.tensors import Placer, ptr, row_block
from kernbench.geometry.groups import reduce_directions, root_of
from kernbench.kernels.attention.batched import users_per_sweep
from kernbench.kernels.attention.decode import DecodeRank, UserBlock, gqa_decode
from kernbench.kernels.attention.helpers import block_len, valid_len
from kernbench.kernels.decoder import STREAM, o_project, qkv_project, rope_append, swiglu_ffn
from kernbench.kernels.per_rank import per_rank
from kernbench.policy.placement import DPPolicy

PHASES = ("norms", "qkv", "rope", "attention", "o_proj", "allreduce_attn", "ffn",
          "allreduce_ffn")
FUSED_NORMS = ("qkv", "ffn")  # the launches whose composites run an RMSNorm prologue
COMM = ("rope", "allreduce_attn", "allreduce_ffn")  # steps that only move data
ATTN_TILE = 256
FOLD = 16  # a last KV tile of at most ATTN_TILE / FOLD tokens joins the one before it


def attention_tile(slots: int) -> int:
    """The KV tile of a decode rank holding ``slots`` tokens: ATTN_TILE, unless that
    leaves a last tile of a few tokens -- the step's new token past a whole number of
    tiles, as at 32K: 513 slots per rank -- which would cost a whole tile step of
    loads and softmax; then as many tiles one fewer, evenly wide (513: 2 x 257, not
    256 + 256 + 1). Design: docs/adr/0055-decode-tiles-without-a-token-tail.md."""
    count = -(-slots // ATTN_TILE)
    tail = slots - (count - 1) * ATTN_TILE
    if count == 1 or tail > ATTN_TILE // FOLD:
        return ATTN_TILE
    return -(-slots // (count - 1))


def _scaled(rng, shape, fan_in: int) -> np.ndarray:
    return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float16)


class LayerWeights:
    """One layer's weights: global matrices (data mode) and their per-rank shards."""

    NAMES = ("attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w_gate", "w_up", "w_down")

    def __init__(self, place: Placer, dims, l: int, rng, layout=None,
                 attention: bool = True) -> None:
        """``attention`` False: the FFN half's weights only (``DecodeLayer.ffn_block``)."""
        m, D, F = place.m, dims.D, dims.F
        self.arrays: dict[str, np.ndarray] = {}
        a = self.arrays
        if place.data:
            a["attn_norm"] = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
            if attention:
                a["wq"] = _scaled(rng, (D, dims.Hq * dims.d), D)
                a["wk"] = _scaled(rng, (D, dims.Hkv * dims.d), D)
                a["wv"] = _scaled(rng, (D, dims.Hkv * dims.d), D)
                a["wo"] = _scaled(rng, (dims.Hq * dims.d, D), dims.Hq * dims.d)
            a["ffn_norm"] = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
            if not dims.experts:
                a["w_gate"], a["w_up"] = _scaled(rng, (D, F), D), _scaled(rng, (D, F), D)
                a["w_down"] = _scaled(rng, (F, D), F)
        if attention:
            self._attention(place, dims, l)
        cf = m.ffn_cols
        idx = {r: i for i, r in enumerate(m.ranks)}
        cols = lambda r: slice(idx[r] * cf, (idx[r] + 1) * cf)  # noqa: E731
        self.moe = MoeWeights(place, dims, l, rng, a, layout) if dims.experts else None
        if not dims.experts:
            self.wg = place.per_rank(f"wg{l}", (D, cf), "f16", lambda r: a["w_gate"][:, cols(r)])
            self.wu = place.per_rank(f"wu{l}", (D, cf), "f16", lambda r: a["w_up"][:, cols(r)])
            self.wd = place.per_rank(f"wd{l}", (cf, D), "f16", lambda r: a["w_down"][cols(r)])
        self.attn_norm = place.replicated(f"attn_norm{l}", a.get("attn_norm"), (D,), "f32")
        self.ffn_norm = place.replicated(f"ffn_norm{l}", a.get("ffn_norm"), (D,), "f32")

    def _attention(self, place: Placer, dims, l: int) -> None:
        """Each rank's Q/K columns, V columns and O rows of its heads (zeros on a rank
        without a slice)."""
        a, sl, D, d, G = self.arrays, place.m.slices, dims.D, dims.d, dims.G
        any_slice = next(iter(sl.values()))
        qk, v, o = any_slice.qk, any_slice.v, any_slice.o

        def head_cols(r, which):
            s = sl.get(r)
            if s is None:
                width = qk if which == "qk" else v
                return np.zeros((D, width), np.float16)
            h = s.group.head
            if which == "qk":
                full = np.concatenate([a["wq"][:, h * G * d:(h + 1) * G * d],
                                       a["wk"][:, h * d:(h + 1) * d]], axis=1)
                return full[:, s.qk0:s.qk0 + s.qk]
            return a["wv"][:, h * d + s.v0:h * d + s.v0 + s.v]

        def o_rows(r):
            s = sl.get(r)
            if s is None:
                return np.zeros((o, D), np.float16)
            base = s.group.head * G * d + s.o0
            return a["wo"][base:base + s.o]

        self.wqk = place.per_rank(f"wqk{l}", (D, qk), "f16", lambda r: head_cols(r, "qk"))
        self.wv = place.per_rank(f"wv{l}", (D, v), "f16", lambda r: head_cols(r, "v"))
        self.wo = place.per_rank(f"wo{l}", (o, D), "f16", o_rows)


class DecodeLayer:
    """Runs decode layers on one host context; ``step`` times one and returns its spans."""

    def __init__(self, ctx, all_reduce, place: Placer, dims, users: int, context: int,
                 variant: str = "opt3", use_queues=None, moe=None,
                 row_blocks: RowBlocks | None = None) -> None:
        """``row_blocks``: how projection launches of many row blocks run (None: as is)."""
        self.ctx, self.all_reduce, self.place, self.dims = ctx, all_reduce, place, dims
        self.row_blocks = row_blocks or RowBlocks(ctx.engine, count=False)
        self.use_queues = use_queues  # switches PE_IPCQ to the attention's queue set
        self.m, self.T, self.S, self.variant = place.m, users, context, variant
        m, d, G, T = self.m, dims.d, dims.G, users
        self.slots = block_len(context + 1, m.C * m.P)
        self.qk = {g.head: place.at_root(g, f"qk.h{g.head}", (T, (G + 1) * d), "f16")
                   for g in m.groups}
        self.v = {g.head: place.at_root(g, f"v.h{g.head}", (T, d), "f16") for g in m.groups}
        self.o = {g.head: place.at_root(g, f"o.h{g.head}", (T, G * d), "f32")
                  for g in m.groups}
        self.moe = moe_ffn(self, moe) if dims.experts else None  # ``moe``: MoeSettings

    def caches(self, l: int, rng) -> tuple[dict, dict]:
        """Every (head, user) K^T and V of layer ``l`` (random keys and values in data
        mode, dumped as ``k_cache``/``v_cache`` [B, S, Hkv, d])."""
        dims, S, T = self.dims, self.S, self.T
        kc = vc = None
        if self.place.data:
            kc = rng.standard_normal((T, S, dims.Hkv, dims.d)).astype(np.float16)
            vc = rng.standard_normal((T, S, dims.Hkv, dims.d)).astype(np.float16)
        out = {}
        for g in self.m.groups:
            for u in range(T):
                keys = kc[u, :, g.head] if kc is not None else None
                vals = vc[u, :, g.head] if vc is not None else None
                out[(g.head, u)] = self.place.kv_cache(g, f"l{l}h{g.head}u{u}", keys, vals,
                                                       self.slots, dims.d)
        arrays = {} if kc is None else {"k_cache": kc, "v_cache": vc}
        return out, arrays

    def launch(self, name: str, fn, plan: dict, sips="all", dp=None) -> None:
        """Launch a per-rank kernel on every rank and wait for it."""
        ctx = self.ctx
        ctx.wait(ctx.launch(name, per_rank, fn, plan, dp=dp or self.place.rank_dp, sips=sips))

    def blocked(self, name: str, fn, plan_of, rows: dict) -> tuple | None:
        """A projection launch over the layer's T rows, ``rows[rank]`` at a time; its
        (span, norm time) when :class:`RowBlocks` counted blocks instead of simulating
        them, else None."""
        return self.row_blocks.run(lambda plan: self.launch(name, fn, plan), plan_of,
                                   self.T, rows, self._prologues)

    def _qkv(self, w: LayerWeights, x: dict) -> tuple | None:
        dims, slices = self.dims, self.m.slices
        rows = {r: row_block(self.ctx.spec, dims.D, s.qk) for r, s in slices.items()}

        def plan_of(T: int) -> dict:
            return {r: (ptr(x, r), ptr(w.attn_norm, r), ptr(w.wqk, r), ptr(w.wv, r),
                        self.qk[s.group.head].va, self.v[s.group.head].va, T, dims.D, s.qk,
                        s.v, (dims.G + 1) * dims.d, dims.d, s.qk0, s.v0, dims.eps, rows[r])
                    for r, s in slices.items()}
        return self.blocked("qkv", qkv_project, plan_of, rows)

    def _rope(self, caches: dict, angles: dict) -> None:
        dims, T, ctx = self.dims, self.T, self.ctx
        owner, col = divmod(self.S, self.slots)
        handles = []
        for g in self.m.groups:
            root = root_of(g)
            oc, op = g.cubes[owner // g.pes], owner % g.pes
            slots = tuple((caches[(g.head, u)][0].ptr(oc, op, g.sip),
                           caches[(g.head, u)][1].ptr(oc, op, g.sip), col, self.slots)
                          for u in range(T))
            plan = {root: (self.qk[g.head].va, self.v[g.head].va, ptr(angles["cos"], root),
                           ptr(angles["sin"], root), T, dims.G + 1, dims.d, slots)}
            ctx.set_device(g.sip)
            handles.append(ctx.launch(f"rope.h{g.head}", per_rank, rope_append, plan,
                                      dp=DPPolicy(num_cubes=1, cube_start=root[1])))
        for h in handles:
            ctx.wait(h)

    def _attention(self, caches: dict) -> None:
        ctx, m = self.ctx, self.m
        self.use_queues("attention")
        ranks = {}
        for g in m.groups:
            ranks.update(self._group_ranks(g, caches))
        handles = []
        for g in m.groups:
            ctx.set_device(g.sip)
            dp = DPPolicy(cube="row_wise", num_cubes=len(g.cubes), cube_start=g.cube_start,
                          pe="row_wise", num_pes=g.pes)
            handles.append(ctx.launch(f"attention.h{g.head}", gqa_decode, ranks, dp=dp))
        for h in handles:
            ctx.wait(h)

    def _group_ranks(self, g, caches: dict) -> dict:
        """Each group PE's :class:`DecodeRank` over the cache plus the new token."""
        dims, T, B = self.dims, self.T, self.slots
        G, d = dims.G, dims.d
        root = root_of(g)
        tile = attention_tile(B)
        sweep = users_per_sweep(self.ctx.spec.pe.kernel_scratch_bytes, T, G, d, tile)
        ranks = {}
        for cube in g.cubes:
            for pe in range(g.pes):
                rank = g.rank(cube, pe)
                users = tuple(
                    UserBlock(self.qk[g.head].va + u * (G + 1) * d * 2,
                              caches[(g.head, u)][0].ptr(cube, pe, g.sip),
                              caches[(g.head, u)][1].ptr(cube, pe, g.sip),
                              valid_len(self.S + 1, rank, B),
                              self.o[g.head].va + u * G * d * 4
                              if (g.sip, cube, pe) == root else None)
                    for u in range(T))
                ranks[(g.sip, cube, pe)] = DecodeRank(
                    users, B, G, d, tile, 1.0 / np.sqrt(d), self.variant,
                    *reduce_directions(g, cube, pe), tile_shape=STREAM, fused_reduce=True,
                    sweep_users=sweep)
        return ranks

    def _o_proj(self, w: LayerWeights, x: dict, partial: dict) -> tuple | None:
        dims, first, slices = self.dims, self.m.ranks[0], self.m.slices
        o_rows = {r: slices[r].o if r in slices else 0 for r in self.m.ranks}
        rows = {r: row_block(self.ctx.spec, dims.D, o_rows[r]) for r in self.m.ranks}

        def plan_of(T: int) -> dict:
            return {r: (self.o[slices[r].group.head].va + slices[r].o0 * 4 if o_rows[r] else 0,
                        ptr(w.wo, r), ptr(partial, r), ptr(x, r) if r == first else None, T,
                        o_rows[r], dims.G * dims.d, dims.D, rows[r])
                    for r in self.m.ranks}
        return self.blocked("o_proj", o_project, plan_of, rows)

    def _ffn(self, w: LayerWeights, h: dict, partial: dict) -> tuple | None:
        dims, first = self.dims, self.m.ranks[0]
        block = row_block(self.ctx.spec, dims.D, 2 * self.m.ffn_cols)
        if self.moe is not None:
            self.moe.run(w, h, partial, block)
            return None

        def plan_of(T: int) -> dict:
            return {r: (ptr(h, r), ptr(w.ffn_norm, r), ptr(w.wg, r), ptr(w.wu, r),
                        ptr(w.wd, r), ptr(partial, r), ptr(h, r) if r == first else None, T,
                        dims.D, self.m.ffn_cols, dims.eps, block)
                    for r in self.m.ranks}
        return self.blocked("ffn", swiglu_ffn, plan_of, dict.fromkeys(self.m.ranks, block))

    def step(self, w: LayerWeights, caches: dict, bufs: tuple, angles: dict) -> dict:
        """Run one layer from ``bufs[0]`` (x) back into ``bufs[0]``; {phase: ns}."""
        x, other = bufs
        return self._run(
            (("qkv", lambda: self._qkv(w, x)), ("rope", lambda: self._rope(caches, angles)),
             ("attention", lambda: self._attention(caches)),
             ("o_proj", lambda: self._o_proj(w, x, other)),
             ("allreduce_attn", lambda: self.all_reduce(other)),
             ("ffn", lambda: self._ffn(w, other, x)),
             ("allreduce_ffn", lambda: self.all_reduce(x))))

    def ffn_block(self, w: LayerWeights, bufs: tuple) -> dict:
        """The layer's second half alone, as ``step`` runs it: ``bufs[0]`` (h) through the
        FFN's norm, the (MoE) FFN and its all-reduce into ``bufs[1]``; {phase: ns}."""
        h, out = bufs
        return self._run((("ffn", lambda: self._ffn(w, h, out)),
                          ("allreduce_ffn", lambda: self.all_reduce(out))))

    def _run(self, steps) -> dict:
        """Each (name, run) in turn, timed; the fused norms' time taken out of its step.
        A run that returns (span, norm time) was counted, not simulated: those stand."""
        env = self.ctx.engine.env
        spans = {}
        norms = 0.0
        for name, run in steps:
            t, before = env.now, self._prologues() if name in FUSED_NORMS else None
            counted = run()
            if counted is not None:
                span, norm = counted
            else:
                span, norm = env.now - t, 0.0
                if before is not None:
                    after = self._prologues()
                    norm = max(after[r] - before[r] for r in after)
            norm = norm if name in FUSED_NORMS else 0.0
            spans[name] = span - norm
            norms += norm
        return {"norms": norms, **spans}

    def _prologues(self) -> dict:
        """Each rank's composite-prologue time so far (``CompositeFeeder.prologue_ns``)."""
        engine = self.ctx.engine
        return {r: engine.pe(*r).scheduler.feeder.prologue_ns for r in self.m.ranks}
