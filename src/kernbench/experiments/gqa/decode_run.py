"""One decode step of GQA attention over every KV head of a system (split-KV).

Each KV head gets a CUBE group (``C`` CUBEs x ``P`` PEs, ``place_groups``);
its context of ``S`` tokens is cut into contiguous blocks of B = ceil(S / (C P))
slots, block r on rank r = cube_local * P + pe_local, K stored transposed.
Q [G, d] is replicated on every rank of the group; O [G, d] (f32) lands on the
group root (PE 0 of the group's centre CUBE). Every user of a batch has its
own Q, KV and O on the same ranks.
"""

from __future__ import annotations

import numpy as np

from kernbench.errors import UsageError
from kernbench.experiments.gqa.bounds import array_bound_ns, kv_bound_ns, work
from kernbench.experiments.gqa.common import (
    LLAMA3_70B,
    AttentionRun,
    Shape,
    check_positive,
    check_stationary,
    count_delta,
    families,
    group_grid,
    launch_groups,
    occupancy,
    peak_scratch,
    random_f16,
    span,
    user_tag,
)
from kernbench.geometry.groups import (
    CubeGroup,
    centre_depth,
    place_groups,
    reduce_directions,
    reduce_tables,
    root_of,
    tree_rounds,
)
from kernbench.kernels.attention.decode import VARIANTS, DecodeRank, UserBlock, gqa_decode
from kernbench.kernels.attention.helpers import block_len, reference_attention, valid_len
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api.context import RuntimeContext
from kernbench.sim_engine.engine import GraphEngine


def validate(spec, context: int, users: int, C: int, P: int, variant: str, tile: int,
             shape: Shape) -> None:
    check_positive("context", context)
    check_positive("users", users)
    check_positive("C", C)
    check_positive("P", P)
    check_positive("tile", tile)
    if variant not in VARIANTS:
        raise UsageError(f"--variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    try:
        place_groups(spec, shape.heads, C, P)
    except ValueError as exc:
        raise UsageError(f"--C {C} --P {P} on topology {spec.name!r}: {exc}") from None


class _Host:
    """The engine, the host context and what the host keeps of every user's tensors."""

    def __init__(self, graph, S: int, C: int, P: int, users: int, shape: Shape, data: bool,
                 seed: int, keep_records: bool, planned: bool = True) -> None:
        self.S, self.C, self.P, self.users, self.shape, self.data = S, C, P, users, shape, data
        self.B = block_len(S, C * P)
        self.engine = GraphEngine(graph, enable_data=data, keep_records=keep_records,
                                  planned_composites=planned)
        self.ctx = RuntimeContext(self.engine)
        self.rng = np.random.default_rng(seed)
        self.arrays: dict[str, np.ndarray] = {}
        self.outputs: list[tuple[str, object]] = []

    def tensors(self, g: CubeGroup) -> list[tuple]:
        """(Q, K^T, V, O) of every user of group ``g``: Q replicated on its ranks, K^T
        and V row_wise (rank r's block), O on the group root (data mode: random inputs)."""
        ctx, C, P, B, S = self.ctx, self.C, self.P, self.B, self.S
        G, d, n_ranks = self.shape.G, self.shape.d, C * P
        grid = group_grid(g, C, P)
        rep = DPPolicy(cube="replicate", num_cubes=C, cube_start=g.cube_start,
                       pe="replicate", num_pes=P)
        rc = root_of(g)[1]
        blocks = []
        for u in range(self.users):
            tag, name = user_tag(u, g.head, self.users), f"h{g.head}u{u}"
            if self.data:
                rng = self.rng
                q, k, v = random_f16(rng, (G, d)), random_f16(rng, (S, d)), random_f16(rng, (S, d))
                self.arrays[f"q_{tag}"], self.arrays[f"k_{tag}"], self.arrays[f"v_{tag}"] = q, k, v
                pad = np.zeros((n_ranks * B - S, d), np.float16)
                kp, vp = np.concatenate([k, pad]), np.concatenate([v, pad])
                kt = np.concatenate([kp[r * B:(r + 1) * B].T for r in range(n_ranks)])
                tq = ctx.from_numpy(q, dp=rep, name=f"Q.{name}")
                tk = ctx.from_numpy(np.ascontiguousarray(kt), dp=grid, name=f"KT.{name}")
                tv = ctx.from_numpy(vp, dp=grid, name=f"V.{name}")
            else:
                tq = ctx.empty((G, d), "f16", dp=rep, name=f"Q.{name}")
                tk = ctx.empty((n_ranks * d, B), "f16", dp=grid, name=f"KT.{name}")
                tv = ctx.empty((n_ranks * B, d), "f16", dp=grid, name=f"V.{name}")
            to = ctx.empty((G, d), "f32", dp=DPPolicy(num_cubes=1, cube_start=rc), name=f"O.{name}")
            self.outputs.append((f"o_{tag}", to))
            blocks.append((tq, tk, tv, to))
        return blocks

    def max_error(self) -> float:
        """Read every O back (kept under its dump key); the largest deviation from numpy."""
        worst = 0.0
        for key, t in self.outputs:
            out = self.ctx.to_numpy(t)
            self.arrays[key] = out
            tag = key[2:]
            a = self.arrays
            ref = reference_attention(a[f"q_{tag}"], a[f"k_{tag}"], a[f"v_{tag}"], causal=False)
            worst = max(worst, float(np.abs(out - ref).max()))
        return worst


def _group_ranks(g: CubeGroup, blocks: list[tuple], h: _Host, knobs: tuple) -> dict:
    """The DecodeRank of every PE of group ``g``: its users' blocks and its place in
    both reduce levels (PE tree in its CUBE; centre mesh over CUBEs, on PE 0)."""
    variant, tile, tile_shape, stationary, fused_reduce, sweep_users = knobs
    G, d, S, B, P = h.shape.G, h.shape.d, h.S, h.B, h.P
    root = root_of(g)
    rc = root[1]
    ranks = {}
    for cube in g.cubes:
        for pe in range(P):
            rank = g.rank(cube, pe)
            is_root = (g.sip, cube, pe) == root
            users_here = tuple(
                UserBlock(tq.ptr(cube, pe, g.sip), tk.ptr(cube, pe, g.sip),
                          tv.ptr(cube, pe, g.sip), valid_len(S, rank, B),
                          to.ptr(rc, 0, g.sip) if is_root else None)
                for tq, tk, tv, to in blocks)
            ranks[(g.sip, cube, pe)] = DecodeRank(
                users_here, B, G, d, tile, h.shape.scale, variant,
                *reduce_directions(g, cube, pe), tile_shape, stationary, fused_reduce,
                sweep_users)
    return ranks


def run_decode(graph, context: int, *, users: int = 1, C: int = 2, P: int = 8,
               variant: str = "opt3", tile: int = 256,
               tile_shape: tuple[int, int, int] | None = None, data: bool = False, seed: int = 0,
               shape: Shape = LLAMA3_70B, keep_records: bool = False, progress=None,
               stationary: str = "auto", planned: bool = True,
               fused_reduce: bool = False, sweep_users: int = 1) -> AttentionRun:
    check_stationary(stationary)
    spec = graph.spec
    validate(spec, context, users, C, P, variant, tile, shape)
    groups = place_groups(spec, shape.heads, C, P)
    h = _Host(graph, context, C, P, users, shape, data, seed, keep_records, planned)
    ctx, engine = h.ctx, h.engine
    ranks: dict = {}
    for g in groups:
        ctx.set_device(g.sip)
        blocks = h.tensors(g)
        ranks.update(_group_ranks(g, blocks, h,
                                  (variant, tile, tile_shape, stationary, fused_reduce,
                                   sweep_users)))
    tables = reduce_tables(groups)
    if tables:
        ctx.install_ipcq(tables, slots=4, slot_bytes=max(4096, shape.G * shape.d * 4))
    before = dict(engine.op_log.counts)
    handles = launch_groups(ctx, groups, "gqa_decode", gqa_decode, ranks, C, P, progress)
    t0, t1 = span(handles)
    counts = count_delta(engine, before)
    max_err = h.max_error() if data else None
    coords = sorted(ranks)
    kv_bytes = work(shape, context, users, context)["kv_bytes"]
    params = {"C": C, "P": P, "variant": variant, "tile": tile,
              "tile_shape": list(tile_shape) if tile_shape else None, "G": shape.G,
              "d": shape.d, "stationary": stationary, "heads": shape.heads,
              "kv_bytes": kv_bytes,
              "reduce_rounds": tree_rounds(P) + (centre_depth(groups[0].w, groups[0].h)
                                                 if C > 1 else 0)}
    phases = {"peak_scratch_bytes": peak_scratch(engine, coords),
              "array_bound_ns": array_bound_ns(spec, context, C * P, users, tile, shape.G,
                                               shape.d, stationary)}
    return AttentionRun("decode", spec.name, context, users, params, t1 - t0,
                        kv_bound_ns(spec, kv_bytes, len(coords)), "kv_bandwidth", counts,
                        families(counts), occupancy(engine, coords, t1 - t0), len(coords),
                        phases, h.arrays, max_err, engine)
