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

from kernbench.components.builtin.gemm_array import STATIONARY, busy_cycles
from kernbench.errors import UsageError
from kernbench.kernels.attention.decode import VARIANTS, DecodeRank, UserBlock, gqa_decode
from kernbench.kernels.attention.helpers import (
    CubeGroup,
    block_len,
    centre_depth,
    centre_role,
    place_groups,
    reference_attention,
    tree_role,
    tree_rounds,
    valid_len,
)
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api.context import RuntimeContext
from kernbench.sim_engine.engine import GraphEngine
from kernbench.workloads.attention.common import (
    LLAMA3_70B,
    AttentionRun,
    Shape,
    check_positive,
    count_delta,
    families,
    group_grid,
    launch_groups,
    occupancy,
    peak_scratch,
    random_f16,
    span,
)

F16 = 2


def root_of(g: CubeGroup) -> tuple[int, int, int]:
    cx, cy = (g.w - 1) // 2, (g.h - 1) // 2
    return g.sip, g.cubes[cy * g.w + cx], 0


def ipcq_tables(groups: list[CubeGroup]) -> dict:
    """Neighbour tables of both reduce levels for every group."""
    tables: dict = {}

    def link(a, b, send_dir, recv_dir):
        tables.setdefault(a, {})[send_dir] = b
        tables.setdefault(b, {})[recv_dir] = a

    for g in groups:
        for cube in g.cubes:
            for pe in range(g.pes):
                children, _ = tree_role(pe, g.pes)
                for recv_dir, child in children:
                    _, (send_dir, _) = tree_role(child, g.pes)
                    link((g.sip, cube, child), (g.sip, cube, pe), send_dir, recv_dir)
        for i, cube in enumerate(g.cubes):
            _, parent = centre_role(i % g.w, i // g.w, g.w, g.h)
            if parent is not None:
                send_dir, (px, py) = parent
                recv_dir = {"cube_W": "cube_E", "cube_E": "cube_W", "cube_N": "cube_S",
                            "cube_S": "cube_N"}[send_dir]
                link((g.sip, cube, 0), (g.sip, g.cubes[py * g.w + px], 0), send_dir, recv_dir)
    return tables


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


def array_bound_ns(spec, S: int, ranks: int, users: int, tile: int, G: int, d: int,
                   stationary: str) -> float:
    """The least time the busiest rank's array needs: Q.K^T (G x d x t) and P.V
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


def run_decode(graph, context: int, *, users: int = 1, C: int = 2, P: int = 8,
               variant: str = "opt3", tile: int = 256,
               tile_shape: tuple[int, int, int] | None = None, data: bool = False, seed: int = 0,
               shape: Shape = LLAMA3_70B, keep_records: bool = False, progress=None,
               stationary: str = "auto", planned: bool = True) -> AttentionRun:
    if stationary not in STATIONARY:
        raise UsageError(f"--stationary must be one of {', '.join(STATIONARY)}, "
                         f"got {stationary!r}")
    spec = graph.spec
    validate(spec, context, users, C, P, variant, tile, shape)
    groups = place_groups(spec, shape.heads, C, P)
    G, d, S = shape.G, shape.d, context
    n_ranks = C * P
    B = block_len(S, n_ranks)
    engine = GraphEngine(graph, enable_data=data, keep_records=keep_records,
                         planned_composites=planned)
    ctx = RuntimeContext(engine)
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    ranks: dict = {}
    outputs: list[tuple[str, object]] = []
    for g in groups:
        ctx.set_device(g.sip)
        grid = group_grid(g, C, P)
        rep = DPPolicy(cube="replicate", num_cubes=C, cube_start=g.cube_start,
                       pe="replicate", num_pes=P)
        rs, rc, rp = root_of(g)
        blocks = []
        for u in range(users):
            tag = f"{u}_{g.head}" if users > 1 else f"{g.head}"
            name = f"h{g.head}u{u}"
            if data:
                q, k, v = random_f16(rng, (G, d)), random_f16(rng, (S, d)), random_f16(rng, (S, d))
                arrays[f"q_{tag}"], arrays[f"k_{tag}"], arrays[f"v_{tag}"] = q, k, v
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
            outputs.append((f"o_{tag}", to))
            blocks.append((tq, tk, tv, to))
        for cube in g.cubes:
            i = g.cubes.index(cube)
            cube_children, cube_parent = centre_role(i % g.w, i // g.w, g.w, g.h)
            for pe in range(P):
                rank = g.rank(cube, pe)
                pe_children, pe_parent = tree_role(pe, P)
                is_root = (g.sip, cube, pe) == (rs, rc, rp)
                users_here = tuple(
                    UserBlock(tq.ptr(cube, pe, g.sip), tk.ptr(cube, pe, g.sip),
                              tv.ptr(cube, pe, g.sip), valid_len(S, rank, B),
                              to.ptr(rc, 0, g.sip) if is_root else None)
                    for tq, tk, tv, to in blocks)
                ranks[(g.sip, cube, pe)] = DecodeRank(
                    users_here, B, G, d, tile, shape.scale, variant,
                    tuple(dr for dr, _ in pe_children), pe_parent[0] if pe_parent else None,
                    tuple(dr for dr, _ in cube_children) if pe == 0 else (),
                    cube_parent[0] if (pe == 0 and cube_parent) else None, tile_shape,
                    stationary)
    tables = ipcq_tables(groups)
    if tables:
        ctx.install_ipcq(tables, slots=4, slot_bytes=max(4096, G * d * 4))
    before = dict(engine.op_log.counts)
    handles = launch_groups(ctx, groups, "gqa_decode", gqa_decode, ranks, C, P, progress)
    t0, t1 = span(handles)
    counts = count_delta(engine, before)
    max_err = None
    if data:
        max_err = 0.0
        for key, t in outputs:
            out = ctx.to_numpy(t)
            arrays[key] = out
            tag = key[2:]
            ref = reference_attention(arrays[f"q_{tag}"], arrays[f"k_{tag}"], arrays[f"v_{tag}"],
                                      causal=False)
            max_err = max(max_err, float(np.abs(out - ref).max()))
    coords = sorted(ranks)
    kv_bytes = shape.heads * users * S * d * F16 * 2
    bound = kv_bytes / (len(coords) * spec.slice_bw_gbs)
    params = {"C": C, "P": P, "variant": variant, "tile": tile,
              "tile_shape": list(tile_shape) if tile_shape else None, "G": G, "d": d,
              "stationary": stationary,
              "heads": shape.heads, "kv_bytes": kv_bytes,
              "reduce_rounds": tree_rounds(P) + (centre_depth(groups[0].w, groups[0].h)
                                                 if C > 1 else 0)}
    return AttentionRun("decode", spec.name, S, users, params, t1 - t0, bound, "kv_bandwidth",
                        counts, families(counts), occupancy(engine, coords, t1 - t0),
                        len(coords), {"peak_scratch_bytes": peak_scratch(engine, coords),
                                      "array_bound_ns": array_bound_ns(spec, S, n_ranks, users,
                                                                       tile, G, d, stationary)},
                        arrays, max_err, engine)
