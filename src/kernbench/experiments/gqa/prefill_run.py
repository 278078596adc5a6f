"""One causal prefill of GQA attention over every KV head of a system (Ring Attention).

Each KV head gets a CUBE group of ``C`` CUBEs x ``P`` PEs; the CUBEs are
numbered along a closed tour of the group (``grid_cycle``), ring position i
holding KV block i (ranks i * P .. i * P + P - 1, B = ceil(S / (C P)) slots
K stored transposed) and query heads i * G/C .. (i + 1) * G/C - 1. KV block i
(Sb = ceil(S / C) tokens) is kept tile-major: tile t (``tile`` tokens) lives in
the HBM slice of PE t mod P, so every tile is one contiguous load and the
block's reads spread over all slices of the CUBE. A PE's query blocks of
``q_rows`` rows per head are stored back to back in its slice, and so are its
output rows (f32). The host layout of those tensors is ``prefill_layout``.
"""

from __future__ import annotations

from kernbench.errors import UsageError
from kernbench.experiments.gqa.bounds import (
    compute_bound_ns,
    hop_ns,
    query_key_pairs,
    step_array_ns,
    work,
)
from kernbench.experiments.gqa.common import (
    LLAMA3_70B,
    AttentionRun,
    Shape,
    check_positive,
    check_stationary,
    count_delta,
    families,
    launch_groups,
    occupancy,
    peak_scratch,
    span,
)
from kernbench.experiments.gqa.prefill_layout import Host, Sizes
from kernbench.geometry.groups import place_groups, ring_tables
from kernbench.kernels.attention.prefill import gqa_prefill

# prefill GEMMs are large: composites use 128 x 128 x 128 supertiles (the MAC cycles
# are the scheduler's 32 x 64 x 32 ones summed; only fill granularity differs), which
# divides the tiles to time by 32 (docs/adr/0026-gqa-attention.md)
SUPERTILE = (128, 128, 128)


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
    # a composite's span counts whole: its GEMM results drain between engine bookings
    return engine.op_log.busy_intervals(engine.pe(*coord).prefix,
                                        ("COMPOSITE", "FETCH", "GEMM", "MATH", "STORE"))


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
    check_stationary(stationary)
    spec = graph.spec
    validate(spec, context, users, C, P, q_rows, tile, shape)
    groups = place_groups(spec, shape.heads, C, P)
    sz = Sizes(spec, context, C, P, q_rows, tile, shape)
    h = Host(graph, sz, users, data, seed, keep_records, planned)
    ctx, engine = h.ctx, h.engine
    ranks: dict = {}
    for g in groups:
        ctx.set_device(g.sip)
        ranks.update(h.group_ranks(g, (fused, tile_shape, causal, stationary)))
    if C > 1:
        ctx.install_ipcq(ring_tables(groups), slots=2, slot_bytes=sz.slot)
    before = dict(engine.op_log.counts)
    handles = launch_groups(ctx, groups, "gqa_prefill", gqa_prefill, ranks, C, P, progress,
                            scratch_bytes=sz.arena)
    t0, t1 = span(handles)
    counts = count_delta(engine, before)
    max_err = h.max_error(causal) if data else None
    coords = sorted(ranks)
    waits = [exposed_wait(engine.pe(*c).cpu.marks, _compute_busy(engine, c)) for c in coords]
    phases = {"ring_wait_mean_ns": sum(waits) / len(waits), "ring_wait_max_ns": max(waits),
              "peak_scratch_bytes": peak_scratch(engine, coords), "scratch_arena_bytes": sz.arena,
              "hops_per_pe": counts.get("ipcq_copy", 0) / len(coords),
              "hop_ns": hop_ns(spec, shape.d, tile),
              "step_compute_ns": step_array_ns(spec, q_rows, shape.d, tile, sz.hpc, stationary)}
    flops = work(shape, context, users, query_key_pairs(context, causal))["flops"]
    params = {"C": C, "P": P, "q_rows": q_rows, "tile": tile, "fused": fused, "causal": causal,
              "tile_shape": list(tile_shape) if tile_shape else None, "G": shape.G,
              "d": shape.d, "stationary": stationary, "heads": shape.heads, "flops": flops}
    return AttentionRun("prefill", spec.name, context, users, params, t1 - t0,
                        compute_bound_ns(spec, flops, len(coords)), "compute", counts,
                        families(counts), occupancy(engine, coords, t1 - t0), len(coords),
                        phases, h.arrays, max_err, engine)
