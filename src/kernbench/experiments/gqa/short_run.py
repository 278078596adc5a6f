"""Short-context GQA attention over every KV head of a system (ADR 0036 mappings).

Mapping ``A1``/``A2``/``A4``/``B`` puts ``kv_per_cube`` = 1/2/4/8 KV heads in
each CUBE: KV head h lives in CUBE h // kv_per_cube and is served by the
group of ``group_size = P / kv_per_cube`` PEs starting at PE
(h % kv_per_cube) * group_size. The C = heads / kv_per_cube CUBEs are dealt
to the SIPs in order, ceil(C / sips) per SIP from CUBE 0 up; CUBEs never
exchange data, so where they sit does not matter.

Host layouts (every tensor is split row_wise over the launched CUBEs and all
P PEs, shard (cube, pe) being that PE's own data):

* decode: Q [G, d] on every PE of the group, the PE's context slice of
  B = ceil(S / group_size) slots as K^T [d, B] and V [B, d], O [G, d] f32
  written by the group root;
* prefill: K^T [d, S] and V [S, d] on the group root only (it streams them to
  the group), each PE's query rows of every Q tile back to back as
  [G * rows, d] head-major, O rows the same in f32; the causal mask banks are
  replicated on every PE.
"""

from __future__ import annotations

from kernbench.errors import UsageError
from kernbench.experiments.gqa.bounds import (
    compute_bound_ns,
    kv_bound_ns,
    query_key_pairs,
    work,
)
from kernbench.experiments.gqa.common import (
    LLAMA3_70B,
    AttentionRun,
    Shape,
    check_positive,
    count_delta,
    families,
    occupancy,
    span,
)
from kernbench.experiments.gqa.short_layout import (
    MAPPINGS,
    Setup,
    decode_layout,
    prefill_layout,
    verify,
)
from kernbench.geometry.groups import row_tree, row_tree_depth, row_tree_tables
from kernbench.kernels.attention.helpers import block_len, tiles, valid_len
from kernbench.kernels.attention.short import (
    DecodeShard,
    PrefillUser,
    QTile,
    ShortDecodeRank,
    ShortPrefillRank,
    gqa_short_decode,
    gqa_short_prefill,
)
from kernbench.triton_emu.tl_context import TLContext, run_kernel

TIERS = (1, 2, 3)
PHASES = ("decode", "prefill")
IPCQ_SLOTS = 4  # receive slots per queue: a tile pair in flight while the next one lands
F16, F32 = 2, 4


# -- configuration --------------------------------------------------------------------------
def validate_config(spec, phase: str, mapping: str, tier: int, context: int, shape: Shape, *,
                    users: int = 1, tile: int = 128, q_rows: int = 16) -> None:
    """Reject an inconsistent configuration with one line, before anything is allocated:
    unknown phase, mapping or tier; non-positive sizes; a G that is not an integer;
    a kv_per_cube that does not divide the PEs of a CUBE or the KV heads; fewer
    CUBEs than C; a PE's kernel scratch or IPCQ receive slots beyond its TCM."""
    if phase not in PHASES:
        raise UsageError(f"--phase must be one of {', '.join(PHASES)}, got {phase!r}")
    if mapping not in MAPPINGS:
        raise UsageError(f"--mapping must be one of {', '.join(MAPPINGS)}, got {mapping!r}")
    if tier not in TIERS or isinstance(tier, bool):
        raise UsageError(f"--tier must be one of {', '.join(map(str, TIERS))}, got {tier!r}")
    for name, value in (("context", context), ("users", users), ("tile", tile),
                        ("q-rows", q_rows), ("heads", shape.heads), ("d", shape.d)):
        check_positive(name, value)
    check_positive("G", shape.G, "a positive integer (query heads per KV head, h_q / h_kv)")
    kv, P = MAPPINGS[mapping], spec.pes_per_cube
    if P % kv:
        raise UsageError(f"--mapping {mapping}: kv_per_cube={kv} does not divide the {P} PEs "
                         f"per CUBE of topology {spec.name!r} (allowed: a divisor of {P})")
    if shape.heads % kv:
        raise UsageError(f"--heads {shape.heads} with --mapping {mapping}: C = heads / "
                         f"kv_per_cube must be an integer (heads a multiple of {kv})")
    C, have = shape.heads // kv, spec.sips.count * spec.cubes_per_sip
    if C > have:
        raise UsageError(f"--mapping {mapping} needs C = {C} CUBEs for {shape.heads} KV heads; "
                         f"topology {spec.name!r} has {have}")
    need, cap = scratch_need(phase, tier, shape, context, users, tile, q_rows, P // kv), \
        spec.pe.kernel_scratch_bytes
    if need > cap:
        what = " ".join([f"--tile {tile}"] + [f"--q-rows {q_rows}"] * (phase == "prefill")
                        + [f"--users {users}"] * (users > 1))
        raise UsageError(f"{what}: a {phase} PE needs {need // 1024} KiB of kernel scratch, "
                         f"topology {spec.name!r} has {cap // 1024} KiB (lower them)")
    n = P // kv
    links = max((len(row_tree(i, n)[1]) + (row_tree(i, n)[0] is not None)
                 for i in range(n)), default=0) if n > 1 else 0
    slots = links * IPCQ_SLOTS * slot_bytes(phase, shape, tile)
    free = spec.pe.tcm_bytes - spec.pe.tcm_reserved_bytes - spec.pe.kernel_scratch_bytes
    if slots > free:
        what = f"--tile {tile}" if phase == "prefill" else f"G x d = {shape.G} x {shape.d}"
        raise UsageError(f"{what}: the IPCQ receive slots of a {phase} PE need {slots // 1024} "
                         f"KiB of TCM, topology {spec.name!r} leaves {free // 1024} KiB")


def slot_bytes(phase: str, shape: Shape, tile: int) -> int:
    """One IPCQ message: an O partial [G, d] f32 (decode) or a K^T / V tile (prefill)."""
    raw = shape.G * shape.d * F32 if phase == "decode" else shape.d * tile * F16
    return max(4096, -(-raw // 64) * 64)


def scratch_need(phase: str, tier: int, shape: Shape, S: int, users: int, tile: int,
                 q_rows: int, n: int) -> int:
    """Peak kernel scratch of one PE, measured by running the kernel in command-list
    mode on a one-step plan with the real tile shapes (the persistent buffers plus
    the largest step: a full, masked tile and, for decode, every user's state)."""
    G, d = shape.G, shape.d
    down = tuple(dr for dr, _ in row_tree(0, n)[1])
    if phase == "decode":
        B = block_len(S, n)
        widths = tuple(sorted({w for i in range(n) for _, w in tiles(valid_len(S, i, B), tile)}))
        users_ = tuple(DecodeShard(0, 0, 0, min(B, tile), 0) for _ in range(users))
        rank = ShortDecodeRank(users_, B, G, d, tile, shape.scale, tier, widths, None, down)
        kernel = gqa_short_decode
    else:
        rows = min(q_rows, -(-S // n))  # the most query positions a PE takes per Q tile
        widths = tuple(sorted({w for _, w in tiles(S, tile)}))
        user = PrefillUser(0, 0, (QTile(0, 0, 0, rows, 1),))
        rank = ShortPrefillRank((user,), S, G, d, tile, shape.scale, tier, widths, None, down,
                                {rows: (0, rows + 2 * tile)})
        kernel = gqa_short_prefill
    tl = TLContext(scratch_size=1 << 62)
    run_kernel(kernel, tl, {(0, 0, 0): rank})
    return tl.peak_scratch


# -- entry point ----------------------------------------------------------------------------
def run_short(graph, phase: str, context: int, *, mapping: str = "A2", tier: int = 3,
              users: int = 1, tile: int = 128, q_rows: int = 16, data: bool = False,
              seed: int = 0, shape: Shape = LLAMA3_70B, keep_records: bool = False,
              progress=None) -> AttentionRun:
    """One short-context attention step (decode or causal prefill) of every KV head.

    ``tile``: KV tokens per tile; ``q_rows``: query positions per PE per Q tile
    (prefill; a Q tile spans ``q_rows * group_size`` positions); ``progress``: an
    optional ``Progress`` line watching the launches."""
    spec = graph.spec
    validate_config(spec, phase, mapping, tier, context, shape, users=users, tile=tile,
                    q_rows=q_rows)
    st = Setup(graph, mapping, tier, context, users, tile, q_rows, data, seed, shape,
               keep_records)
    outputs = (decode_layout if phase == "decode" else prefill_layout)(st)
    ctx, engine = st.ctx, st.engine
    tables = row_tree_tables(st.cubes, st.kv, st.n)
    if tables:
        ctx.install_ipcq(tables, slots=IPCQ_SLOTS, slot_bytes=slot_bytes(phase, shape, tile))
    kernel = gqa_short_decode if phase == "decode" else gqa_short_prefill
    before = dict(engine.op_log.counts)
    handles = []
    for sip in st.sips:
        ctx.set_device(sip)
        handles.append(ctx.launch(f"gqa_short_{phase}.s{sip}", kernel, st.ranks,
                                  dp=st.grid(sip)))
    if progress is not None:
        progress.watch(engine, handles)
    for h in handles:
        ctx.wait(h)
    t0, t1 = span(handles)
    counts = count_delta(engine, before)
    coords = sorted(st.ranks)
    max_err = verify(st, phase, outputs) if data else None
    return AttentionRun("short", spec.name, context, users, _params(st, phase, coords),
                        t1 - t0, *_bound(spec, phase, st, len(coords)), counts,
                        families(counts), occupancy(engine, coords, t1 - t0), len(coords), {},
                        st.arrays, max_err, engine)


def _work(phase: str, st: Setup) -> dict:
    """K/V bytes of the context and the attention FLOPs (the causal triangle for
    prefill, one query row per head for decode)."""
    pairs = query_key_pairs(st.S, True) if phase == "prefill" else st.S
    return work(st.shape, st.S, st.users, pairs)


def _bound(spec, phase: str, st: Setup, pes: int) -> tuple[float, str]:
    """Decode: the KV-bandwidth bound; prefill: the compute bound (``bounds``)."""
    w = _work(phase, st)
    if phase == "decode":
        return kv_bound_ns(spec, w["kv_bytes"], pes), "kv_bandwidth"
    return compute_bound_ns(spec, w["flops"], pes), "compute"


def _params(st: Setup, phase: str, coords) -> dict:
    shape, spec, engine = st.shape, st.spec, st.engine
    return {"phase": phase, "mapping": st.mapping, "kv_per_cube": st.kv, "tier": st.tier,
            "tile": st.tile, "q_rows": st.q_rows if phase == "prefill" else None, "C": st.C,
            "group_size": st.n, "G": shape.G, "d": shape.d, "heads": shape.heads,
            "tree_depth": row_tree_depth(st.n), **_work(phase, st), **st.stats,
            "math_ops": sum(engine.pe(*c).math.ops for c in coords),
            "kv_cache_per_cube_bytes": st.kv * st.users * 2 * st.S * shape.d * F16,
            "slice_bw_gbs": spec.slice_bw_gbs}


def metrics(run: AttentionRun) -> dict:
    """The ADR 0036 metric set of a short-context run, all from the run record:

    * ``wall_us``: launch-to-finish span (first kernel start to last kernel end);
    * ``n_pe``: PEs that ran the kernel (C CUBEs x P);
    * ``gemm_util``: mean PE_GEMM busy share over those PEs (%, from occupancy);
    * ``math_count``: PE_MATH operations over those PEs (every primitive vector
      op and every MATH pass of a composite, the engines' op counters);
    * ``math_pipeline_us``: mean PE_MATH busy time per PE (occupancy x wall);
    * ``hbm_read_mb`` / ``hbm_write_kb``: bytes the plan reads from / writes to HBM
      (Q, K/V tiles and mask windows; O), summed over the system (MiB / KiB);
    * ``hbm_bw_util``: those bytes over wall time and the PEs' aggregate HBM slice
      bandwidth (%);
    * ``ipcq_kb``: IPCQ payload sent between PEs (KiB): the (m, l, O) partials of
      the decode reduce, the K/V tiles of the prefill broadcast;
    * ``kv_cache_per_cube_mb``: K and V bytes of the kv_per_cube heads (x users)
      resident in one CUBE (MiB).
    """
    p, wall = run.params, run.latency_ns
    hbm = p["hbm_read_bytes"] + p["hbm_write_bytes"]
    return {"wall_us": wall / 1e3, "n_pe": run.pes, "gemm_util": run.occupancy["gemm"],
            "math_count": p["math_ops"],
            "math_pipeline_us": run.occupancy["math"] / 100.0 * wall / 1e3,
            "hbm_bw_util": 100.0 * hbm / (wall * run.pes * p["slice_bw_gbs"]),
            "hbm_read_mb": p["hbm_read_bytes"] / 2**20,
            "hbm_write_kb": p["hbm_write_bytes"] / 2**10,
            "ipcq_kb": p["ipcq_bytes"] / 2**10,
            "kv_cache_per_cube_mb": p["kv_cache_per_cube_bytes"] / 2**20}
