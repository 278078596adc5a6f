"""One causal prefill of GQA attention over every KV head of a system (Ring Attention).

Each KV head gets a CUBE group of ``C`` CUBEs x ``P`` PEs; the CUBEs are
numbered along a closed tour of the group (``grid_cycle``), ring position i
holding KV block i (ranks i * P .. i * P + P - 1, B = ceil(S / (C P)) slots
K stored transposed) and query heads i * G/C .. (i + 1) * G/C - 1. KV block i
(Sb = ceil(S / C) tokens) is kept tile-major: tile t (``tile`` tokens) lives in
the HBM slice of PE t mod P, so every tile is one contiguous load and the
block's reads spread over all slices of the CUBE. A PE's query blocks of
``q_rows`` rows per head are stored back to back in its slice, and so are its
output rows (f32).
"""

from __future__ import annotations

import numpy as np

from kernbench.ccl.group import grid_cycle
from kernbench.components.builtin.gemm_array import STATIONARY, busy_cycles
from kernbench.errors import UsageError
from kernbench.kernels.attention.helpers import (
    CubeGroup,
    block_len,
    mask_bank,
    place_groups,
    reference_attention,
)
from kernbench.kernels.attention.prefill import KvTile, PrefillRank, QBlock, gqa_prefill
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
# prefill GEMMs are large: composites use 128 x 128 x 128 supertiles (the MAC cycles
# are the scheduler's 32 x 64 x 32 ones summed; only fill granularity differs), which
# divides the tiles to time by 32 (docs/adr/0026-gqa-attention.md)
SUPERTILE = (128, 128, 128)


def ring_cubes(g: CubeGroup) -> list[int]:
    return [g.cubes[y * g.w + x] for x, y in grid_cycle(g.w, g.h)]


def exposed_wait(marks, busy: list[tuple[float, float]]) -> float:
    """Time a PE waited for ring tiles (between its ring_wait and ring_go marks)
    with no compute of its own in progress (no composite between its start and end,
    no fetch, GEMM, math or store op): rotation not hidden by compute."""
    total, since = 0.0, None
    i = 0  # busy is merged and sorted and the waits come in time order: one pass
    for t, label in marks:
        if label == "ring_wait":
            since = t
        elif label == "ring_go" and since is not None:
            while i < len(busy) and busy[i][1] <= since:
                i += 1
            covered, j = 0.0, i
            while j < len(busy) and busy[j][0] < t:
                covered += max(0.0, min(busy[j][1], t) - max(busy[j][0], since))
                j += 1
            total, since = total + (t - since) - covered, None
    return total


def _compute_busy(engine, coord) -> list[tuple[float, float]]:
    owner = engine.pe(*coord).prefix
    log = engine.op_log
    merged: list[tuple[float, float]] = []
    # a composite's span counts whole: its GEMM results drain between engine bookings
    spans = [iv for stage in ("COMPOSITE", "FETCH", "GEMM", "MATH", "STORE")
             for iv in log.stage_intervals(owner, stage)]
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


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


def working_set(rows: int, tile: int, d: int, ring: bool) -> int:
    """Scratch bytes one query block and one KV tile need at once (what the kernel
    holds at its peak): Q, (m, l, O) and O / l; the packed tile and, for the ring,
    three receive buffers; the scores, their mask and the recipe's P and columns."""
    packed = 2 * d * tile * F16
    return (rows * d * F16 + rows * 4 * 2 + 2 * rows * d * 4
            + packed * (4 if ring else 1)
            + 3 * rows * tile * 4 + 4 * rows * 4 + 64 * 32)


def chunk_width(S: int, Sb: int, tile: int, c: int, t: int) -> int:
    """Tokens in tile t of CUBE block c (0 past the end of the context)."""
    return max(0, min(tile, Sb - t * tile, S - c * Sb - t * tile))


def q_blocks_of(S: int, rows: int, pe: int, P: int) -> list[tuple[int, int]]:
    """(q0, rows) of the query blocks PE ``pe`` takes, dealt back and forth (0..P-1,
    P-1..0, ...) so that every PE gets early and late blocks of the causal triangle."""
    out = []
    for b, q0 in enumerate(range(0, S, rows)):
        r = b % (2 * P)
        if (r if r < P else 2 * P - 1 - r) == pe:
            out.append((q0, min(rows, S - q0)))
    return out


def validate(spec, context: int, users: int, C: int, P: int, q_rows: int, tile: int,
             shape: Shape) -> None:
    for name, value in (("context", context), ("users", users), ("C", C), ("P", P),
                        ("q-rows", q_rows), ("tile", tile)):
        check_positive(name, value)
    if shape.G % C:
        raise UsageError(f"--C {C}: prefill gives every CUBE of a group the same number of "
                         f"query heads, so C must divide G = {shape.G}")
    try:
        place_groups(spec, shape.heads, C, P)
    except ValueError as exc:
        raise UsageError(f"--C {C} --P {P} on topology {spec.name!r}: {exc}") from None


def run_prefill(graph, context: int, *, users: int = 1, C: int = 8, P: int = 8,
                q_rows: int = 128, tile: int = 256, fused: bool = True,
                tile_shape: tuple[int, int, int] | None = SUPERTILE, causal: bool = True,
                data: bool = False,
                seed: int = 0,
                shape: Shape = LLAMA3_70B, keep_records: bool = False, progress=None,
                stationary: str = "auto", planned: bool = True) -> AttentionRun:
    if stationary not in STATIONARY:
        raise UsageError(f"--stationary must be one of {', '.join(STATIONARY)}, "
                         f"got {stationary!r}")
    spec = graph.spec
    validate(spec, context, users, C, P, q_rows, tile, shape)
    groups = place_groups(spec, shape.heads, C, P)
    G, d, S = shape.G, shape.d, context
    hpc = G // C  # query heads per CUBE
    n_ranks = C * P
    Sb = block_len(S, C)  # tokens of one CUBE's KV block
    n_chunks = -(-Sb // tile)
    B = -(-n_chunks // P) * tile  # KV slots per PE slice (K^T row stride)
    per_pe = max(len(q_blocks_of(S, q_rows, p, P)) for p in range(P))
    slot = max(4096, 2 * d * tile * F16)
    need = working_set(hpc * q_rows, tile, d, C > 1)
    room = spec.pe.tcm_bytes - spec.pe.tcm_reserved_bytes - (2 * slot if C > 1 else 0)
    if need > room:
        raise UsageError(f"--q-rows {q_rows} --tile {tile}: one query block and KV tile need "
                         f"{need // 1024} KiB of TCM scratch, a PE has {room // 1024} KiB "
                         f"beside its queues (use smaller blocks)")
    arena = max(spec.pe.kernel_scratch_bytes, -(-need // 65536) * 65536)
    q_len = per_pe * hpc * q_rows  # rows of one PE's Q shard
    engine = GraphEngine(graph, enable_data=data, keep_records=keep_records,
                         planned_composites=planned)
    ctx = RuntimeContext(engine)
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    ranks: dict = {}
    outputs = []
    for g in groups:
        ctx.set_device(g.sip)
        grid = group_grid(g, C, P)
        rep = DPPolicy(cube="replicate", num_cubes=C, cube_start=g.cube_start,
                       pe="replicate", num_pes=P)
        ring = ring_cubes(g)
        pos_of = {c: i for i, c in enumerate(ring)}
        # shard (cube, pe) of a row_wise tensor is block (cube - start) * P + pe
        shard_rank = [pos_of[g.cube_start + s // P] * P + s % P for s in range(n_ranks)]
        row_sets = sorted({r for p in range(P) for _, r in q_blocks_of(S, q_rows, p, P)})
        banks = {}
        for rows in row_sets:
            bank = np.tile(mask_bank(rows, tile), (hpc, 1))
            t = (ctx.from_numpy(bank, dp=rep, name=f"mask{rows}.h{g.head}") if data else
                 ctx.empty(bank.shape, "f32", dp=rep, name=f"mask{rows}.h{g.head}"))
            banks[rows] = (t, bank.shape[1])
        per_user = []
        for u in range(users):
            tag = f"{u}_{g.head}" if users > 1 else f"{g.head}"
            name = f"h{g.head}u{u}"
            kv_shape, q_shape = (n_ranks * d, B), (n_ranks * q_len, d)
            if data:
                q, k, v = (random_f16(rng, (G, S, d)), random_f16(rng, (S, d)),
                           random_f16(rng, (S, d)))
                arrays[f"q_{tag}"], arrays[f"k_{tag}"], arrays[f"v_{tag}"] = q, k, v
                kt = np.zeros((n_ranks * d, B), np.float16)
                vs = np.zeros((n_ranks * B, d), np.float16)
                for sh in range(n_ranks):
                    c, p = divmod(shard_rank[sh], P)
                    for t in range(p, n_chunks, P):
                        k0, w = c * Sb + t * tile, chunk_width(S, Sb, tile, c, t)
                        at = (t // P) * tile
                        kt[sh * d:(sh + 1) * d, at:at + w] = k[k0:k0 + w].T
                        vs[sh * B + at:sh * B + at + w] = v[k0:k0 + w]
                qs = np.zeros(q_shape, np.float16)
                for s in range(n_ranks):
                    i, p = divmod(shard_rank[s], P)
                    at = s * q_len
                    for q0, rows in q_blocks_of(S, q_rows, p, P):
                        blk = q[i * hpc:(i + 1) * hpc, q0:q0 + rows].reshape(hpc * rows, d)
                        qs[at:at + hpc * rows] = blk
                        at += hpc * rows
                tk = ctx.from_numpy(np.ascontiguousarray(kt), dp=grid, name=f"KT.{name}")
                tv = ctx.from_numpy(vs, dp=grid, name=f"V.{name}")
                tq = ctx.from_numpy(qs, dp=grid, name=f"Q.{name}")
            else:
                tk = ctx.empty(kv_shape, "f16", dp=grid, name=f"KT.{name}")
                tv = ctx.empty((n_ranks * B, d), "f16", dp=grid, name=f"V.{name}")
                tq = ctx.empty(q_shape, "f16", dp=grid, name=f"Q.{name}")
            to = (ctx.zeros if data else ctx.empty)(q_shape, "f32", dp=grid, name=f"O.{name}")
            per_user.append((tq, tk, tv, to))
            outputs.append((tag, g, to))
        for cube in g.cubes:
            for pe in range(P):
                kv = []
                for _, tk, tv, _ in per_user:
                    blocks = []
                    for c in range(C):
                        lane = []
                        for t in range(n_chunks):
                            at = (t // P) * tile
                            lane.append(KvTile(tk.ptr(ring[c], t % P, g.sip) + at * F16,
                                               tv.ptr(ring[c], t % P, g.sip) + at * d * F16,
                                               chunk_width(S, Sb, tile, c, t), c * Sb + t * tile))
                        blocks.append(tuple(lane))
                    kv.append(tuple(blocks))
                qbs, owners = [], []
                for u, (tq, _, _, to) in enumerate(per_user):
                    qa, oa = tq.ptr(cube, pe, g.sip), to.ptr(cube, pe, g.sip)
                    for q0, rows in q_blocks_of(S, q_rows, pe, P):
                        qbs.append(QBlock(qa, oa, q0, rows))
                        owners.append(u)
                        qa += hpc * rows * d * F16
                        oa += hpc * rows * d * 4
                ranks[(g.sip, cube, pe)] = PrefillRank(
                    tuple(qbs), tuple(owners), tuple(kv), pos_of[cube], C, hpc, B, d, tile,
                    shape.scale, {r: (t.ptr(cube, pe, g.sip), w) for r, (t, w) in banks.items()},
                    fused, tile_shape, causal, stationary)
    if C > 1:
        tables: dict = {}
        for g in groups:
            ring = ring_cubes(g)
            for i, cube in enumerate(ring):
                nxt = ring[(i + 1) % C]
                for pe in range(P):
                    tables.setdefault((g.sip, cube, pe), {})["ring_next"] = (g.sip, nxt, pe)
                    tables.setdefault((g.sip, nxt, pe), {})["ring_prev"] = (g.sip, cube, pe)
        ctx.install_ipcq(tables, slots=2, slot_bytes=slot)
    before = dict(engine.op_log.counts)
    handles = launch_groups(ctx, groups, "gqa_prefill", gqa_prefill, ranks, C, P, progress, scratch_bytes=arena)
    t0, t1 = span(handles)
    counts = count_delta(engine, before)
    max_err = None
    if data:
        max_err = 0.0
        for tag, g, to in outputs:
            shards = ctx.to_numpy(to)
            ring = ring_cubes(g)
            o = np.zeros((G, S, d), np.float32)
            for s in range(n_ranks):
                cube, p = g.cube_start + s // P, s % P
                i = ring.index(cube)
                at = s * q_len
                for q0, rows in q_blocks_of(S, q_rows, p, P):
                    blk = shards[at:at + hpc * rows].reshape(hpc, rows, d)
                    o[i * hpc:(i + 1) * hpc, q0:q0 + rows] = blk
                    at += hpc * rows
            arrays[f"o_{tag}"] = o
            ref = reference_attention(arrays[f"q_{tag}"], arrays[f"k_{tag}"], arrays[f"v_{tag}"],
                                      causal=causal)
            max_err = max(max_err, float(np.abs(o - ref).max()))
    coords = sorted(ranks)
    waits = [exposed_wait(engine.pe(*c).cpu.marks, _compute_busy(engine, c)) for c in coords]
    phases = {"ring_wait_mean_ns": sum(waits) / len(waits), "ring_wait_max_ns": max(waits),
              "peak_scratch_bytes": peak_scratch(engine, coords), "scratch_arena_bytes": arena,
              "hops_per_pe": counts.get("ipcq_copy", 0) / len(coords),
              "hop_ns": hop_ns(spec, d, tile),
              "step_compute_ns": step_array_ns(spec, q_rows, d, tile, hpc, stationary)}
    pairs = S * (S + 1) // 2 if causal else S * S
    flops = 4 * d * pairs * shape.heads * G * users
    peak = len(coords) * 2 * spec.pe.gemm.mac_rows * spec.pe.gemm.mac_cols * spec.pe.clock_ghz  # FLOP/ns
    params = {"C": C, "P": P, "q_rows": q_rows, "tile": tile, "fused": fused, "causal": causal,
              "tile_shape": list(tile_shape) if tile_shape else None, "G": G, "d": d,
              "stationary": stationary,
              "heads": shape.heads, "flops": flops}
    return AttentionRun("prefill", spec.name, S, users, params, t1 - t0, flops / peak,
                        "compute", counts, families(counts),
                        occupancy(engine, coords, t1 - t0), len(coords), phases, arrays, max_err,
                        engine)
