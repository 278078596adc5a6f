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

import numpy as np

from kernbench.errors import UsageError
from kernbench.kernels.attention.helpers import (
    all_future,
    block_len,
    mask_bank,
    partial,
    reference_attention,
    tiles,
    valid_len,
)
from kernbench.kernels.attention.short import (
    DecodeShard,
    PrefillUser,
    QTile,
    ShortDecodeRank,
    ShortPrefillRank,
    gqa_short_decode,
    gqa_short_prefill,
)
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api.context import RuntimeContext
from kernbench.sim_engine.engine import GraphEngine
from kernbench.triton_emu.tl_context import TLContext, run_kernel
from kernbench.workloads.attention.common import (
    LLAMA3_70B,
    AttentionRun,
    Shape,
    check_positive,
    count_delta,
    families,
    occupancy,
    random_f16,
    span,
)

MAPPINGS = {"A1": 1, "A2": 2, "A4": 4, "B": 8}
TIERS = (1, 2, 3)
PHASES = ("decode", "prefill")
IPCQ_SLOTS = 4  # receive slots per queue: a tile pair in flight while the next one lands
PE_ROW = 4  # PEs per row of a group's tree (a CUBE's PEs as a 2 x 4 mesh)
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
    links = max((len(tree_links(i, n)[1]) + (tree_links(i, n)[0] is not None)
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
    down = tuple(dr for dr, _ in tree_links(0, n)[1])
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


def cubes_of(spec, C: int) -> list[tuple[int, int]]:
    """(SIP, CUBE id) of the C CUBEs: ceil(C / sips) per SIP, from CUBE 0 up."""
    per_sip = -(-C // spec.sips.count)
    return [(c // per_sip, c % per_sip) for c in range(C)]


def tree_links(i: int, n: int) -> tuple[str | None, list[tuple[str, int]]]:
    """Group tree of ``n`` PEs in rows of PE_ROW: each row chains toward its first
    PE (E/W), the first PEs chain toward PE 0 (S/N). Returns the direction toward
    the parent and (direction, PE) of each child, the row neighbour first."""
    x, y = i % PE_ROW, i // PE_ROW
    up = "W" if x else ("N" if y else None)
    down = [("E", i + 1)] if x + 1 < PE_ROW and i + 1 < n else []
    if x == 0 and i + PE_ROW < n:
        down.append(("S", i + PE_ROW))
    return up, down


def tree_depth(n: int) -> int:
    """Hops from the farthest PE of the tree to its root."""
    return min(n, PE_ROW) - 1 + (-(-n // PE_ROW) - 1)


def ipcq_tables(cubes, kv: int, n: int) -> dict:
    """Neighbour tables of every group tree, mirrored (a child's W/N is its parent)."""
    peer = {"E": 1, "W": -1, "S": PE_ROW, "N": -PE_ROW}
    tables: dict = {}
    for sip, cube in cubes:
        for base in range(0, kv * n, n):
            for i in range(n):
                up, down = tree_links(i, n)
                for direction in [up, *(dr for dr, _ in down)]:
                    if direction is not None:
                        tables.setdefault((sip, cube, base + i), {})[direction] = (
                            sip, cube, base + i + peer[direction])
    return tables


# -- the two phases ---------------------------------------------------------------------------
class _Setup:
    """What both phases build: engine, context, placement and the per-head bookkeeping."""

    def __init__(self, graph, mapping, tier, context, users, tile, q_rows, data, seed, shape,
                 keep_records):
        spec = graph.spec
        self.spec, self.users, self.tile, self.data, self.shape = spec, users, tile, data, shape
        self.tier, self.S, self.q_rows = tier, context, q_rows
        self.kv = MAPPINGS[mapping]
        self.P = spec.pes_per_cube
        self.n = self.P // self.kv  # group size
        self.C = shape.heads // self.kv
        self.cubes = cubes_of(spec, self.C)
        self.sips = sorted({s for s, _ in self.cubes})
        self.engine = GraphEngine(graph, enable_data=data, keep_records=keep_records)
        self.ctx = RuntimeContext(self.engine)
        self.rng = np.random.default_rng(seed)
        self.arrays: dict[str, np.ndarray] = {}
        self.ranks: dict = {}
        self.stats = {"hbm_read_bytes": 0, "hbm_write_bytes": 0, "ipcq_bytes": 0}

    def heads_on(self, sip: int) -> list[tuple[int, int, int]]:
        """(head, CUBE, first PE of its group) of the KV heads on ``sip``."""
        return [(h, self.cubes[h // self.kv][1], (h % self.kv) * self.n)
                for h in range(self.shape.heads) if self.cubes[h // self.kv][0] == sip]

    def cubes_on(self, sip: int) -> int:
        return sum(1 for s, _ in self.cubes if s == sip)

    def grid(self, sip: int) -> DPPolicy:
        return DPPolicy(cube="row_wise", num_cubes=self.cubes_on(sip), pe="row_wise",
                        num_pes=self.P)

    def tag(self, u: int, h: int) -> str:
        return f"{u}_{h}" if self.users > 1 else f"{h}"

    def host(self, shape) -> np.ndarray | None:
        """A host staging array for a tensor's shards (data mode only)."""
        return np.zeros(shape, np.float16) if self.data else None

    def tensor(self, sip, shape, dtype, name, array=None, zeros=False):
        """A row_wise tensor of the SIP: ``array`` in data mode, else empty."""
        ctx, dp = self.ctx, self.grid(sip)
        if array is not None:
            return ctx.from_numpy(array.reshape(shape), dp=dp, name=name)
        return (ctx.zeros if zeros and self.data else ctx.empty)(shape, dtype, dp=dp, name=name)

    def inputs(self, u: int, h: int, q_shape) -> tuple[np.ndarray, ...]:
        """Random Q, K, V of one (user, head), kept under their dump keys."""
        kv_shape = (self.S, self.shape.d)
        q, k, v = (random_f16(self.rng, s) for s in (q_shape, kv_shape, kv_shape))
        t = self.tag(u, h)
        self.arrays[f"q_{t}"], self.arrays[f"k_{t}"], self.arrays[f"v_{t}"] = q, k, v
        return q, k, v


def _decode(st: _Setup) -> list:
    G, d, S, n, P, tile = st.shape.G, st.shape.d, st.S, st.n, st.P, st.tile
    B = block_len(S, n)
    widths = tuple(sorted({w for i in range(n) for _, w in tiles(valid_len(S, i, B), tile)}))
    outputs = []
    for sip in st.sips:
        st.ctx.set_device(sip)
        nc, heads = st.cubes_on(sip), st.heads_on(sip)
        per_user = []
        for u in range(st.users):
            qs, kts, vs = (st.host(s) for s in ((nc, P, G, d), (nc, P, d, B), (nc, P, B, d)))
            if st.data:
                for h, cube, p0 in heads:
                    q, k, v = st.inputs(u, h, (G, d))
                    pad = np.zeros((n * B - S, d), np.float16)
                    kp, vp = np.concatenate([k, pad]), np.concatenate([v, pad])
                    for i in range(n):
                        qs[cube, p0 + i] = q
                        kts[cube, p0 + i] = kp[i * B:(i + 1) * B].T
                        vs[cube, p0 + i] = vp[i * B:(i + 1) * B]
            name = f"s{sip}u{u}"
            tq = st.tensor(sip, (nc * P * G, d), "f16", f"Q.{name}", qs)
            tk = st.tensor(sip, (nc * P * d, B), "f16", f"KT.{name}", kts)
            tv = st.tensor(sip, (nc * P * B, d), "f16", f"V.{name}", vs)
            to = st.tensor(sip, (nc * P * G, d), "f32", f"O.{name}", zeros=True)
            per_user.append((tq, tk, tv, to))
            outputs += [(st.tag(u, h), to, (nc, P, G, d), (cube, p0)) for h, cube, p0 in heads]
        for _h, cube, p0 in heads:
            for i in range(n):
                up, down = tree_links(i, n)
                pe = p0 + i
                shards = tuple(DecodeShard(tq.ptr(cube, pe, sip), tk.ptr(cube, pe, sip),
                                           tv.ptr(cube, pe, sip), valid_len(S, i, B),
                                           to.ptr(cube, pe, sip) if up is None else None)
                               for tq, tk, tv, to in per_user)
                st.ranks[(sip, cube, pe)] = ShortDecodeRank(
                    shards, B, G, d, tile, st.shape.scale, st.tier, widths, up,
                    tuple(dr for dr, _ in down))
    hu = st.shape.heads * st.users
    st.stats["hbm_read_bytes"] = hu * (n * G * d * F16 + 2 * S * d * F16)
    st.stats["hbm_write_bytes"] = hu * G * d * F32
    st.stats["ipcq_bytes"] = hu * (n - 1) * (2 * G + G * d) * F32
    return outputs


def q_tile_plan(S: int, q_rows: int, n: int, tile: int) -> list[tuple[int, list[tuple[int, int]]]]:
    """Q tiles of ``q_rows * n`` positions: (KV tiles the tile needs, (q0, rows) of each
    of the n PEs). A tile's positions are split in contiguous, floor-balanced runs
    (the first PEs take the remainder): all PEs then need the same causal KV
    prefix, so the split is balanced up to the boundary tile."""
    plan, T = [], q_rows * n
    for start in range(0, S, T):
        rows = min(T, S - start)
        base, extra = divmod(rows, n)
        parts, q0 = [], start
        for i in range(n):
            r = base + (i < extra)
            parts.append((q0, r))
            q0 += r
        plan.append((-(-(start + rows) // tile), parts))
    return plan


def _prefill(st: _Setup) -> list:
    G, d, S, n, P, tile = st.shape.G, st.shape.d, st.S, st.n, st.P, st.tile
    plan = q_tile_plan(S, st.q_rows, n, tile)
    q_len = G * max(sum(parts[i][1] for _, parts in plan) for i in range(n))
    widths = tuple(sorted({w for _, w in tiles(S, tile)}))
    rows_set = sorted({r for _, parts in plan for _, r in parts if r})
    outputs = []
    for sip in st.sips:
        st.ctx.set_device(sip)
        nc, heads = st.cubes_on(sip), st.heads_on(sip)
        rep = DPPolicy(cube="replicate", num_cubes=nc, pe="replicate", num_pes=P)
        banks = {}
        for rows in rows_set:
            bank = np.tile(mask_bank(rows, tile), (G, 1))
            name = f"mask{rows}.s{sip}"
            t = (st.ctx.from_numpy(bank, dp=rep, name=name) if st.data else
                 st.ctx.empty(bank.shape, "f32", dp=rep, name=name))
            banks[rows] = (t, bank.shape[1])
        per_user = []
        for u in range(st.users):
            kts, vs, qs = (st.host(s) for s in ((nc, P, d, S), (nc, P, S, d), (nc, P, q_len, d)))
            if st.data:
                for h, cube, p0 in heads:
                    q, k, v = st.inputs(u, h, (G, S, d))
                    kts[cube, p0], vs[cube, p0] = k.T, v
                    for i in range(n):
                        at = 0
                        for _, parts in plan:
                            q0, r = parts[i]
                            qs[cube, p0 + i, at:at + G * r] = q[:, q0:q0 + r].reshape(G * r, d)
                            at += G * r
            name = f"s{sip}u{u}"
            tk = st.tensor(sip, (nc * P * d, S), "f16", f"KT.{name}", kts)
            tv = st.tensor(sip, (nc * P * S, d), "f16", f"V.{name}", vs)
            tq = st.tensor(sip, (nc * P * q_len, d), "f16", f"Q.{name}", qs)
            to = st.tensor(sip, (nc * P * q_len, d), "f32", f"O.{name}", zeros=True)
            per_user.append((tq, tk, tv, to))
            outputs += [(st.tag(u, h), to, (nc, P, q_len, d), (cube, p0)) for h, cube, p0 in heads]
        for _h, cube, p0 in heads:
            for i in range(n):
                up, down = tree_links(i, n)
                pe = p0 + i
                users = []
                for tq, tk, tv, to in per_user:
                    qa, oa, qts = tq.ptr(cube, pe, sip), to.ptr(cube, pe, sip), []
                    for n_kv, parts in plan:
                        q0, r = parts[i]
                        qts.append(QTile(qa, oa, q0, r, n_kv))
                        qa += G * r * d * F16
                        oa += G * r * d * F32
                    root = up is None
                    users.append(PrefillUser(tk.ptr(cube, pe, sip) if root else None,
                                             tv.ptr(cube, pe, sip) if root else None,
                                             tuple(qts)))
                st.ranks[(sip, cube, pe)] = ShortPrefillRank(
                    tuple(users), S, G, d, tile, st.shape.scale, st.tier, widths, up,
                    tuple(dr for dr, _ in down),
                    {r: (t.ptr(cube, pe, sip), w) for r, (t, w) in banks.items()})
    _prefill_stats(st, plan)
    return outputs


def _prefill_stats(st: _Setup, plan) -> None:
    """HBM and IPCQ bytes the plan moves (every load, store and send is in the plan)."""
    G, d, S, n, tile = st.shape.G, st.shape.d, st.S, st.n, st.tile
    kv = mask = 0
    for n_kv, parts in plan:
        streamed = sum(min(tile, S - t * tile) for t in range(n_kv))
        kv += 2 * d * streamed * F16
        for q0, r in parts:
            for t in range(n_kv):
                k0, w = t * tile, min(tile, S - t * tile)
                if r and not all_future(q0, r, k0) and partial(q0, k0, w):
                    mask += G * r * w * F32
    hu = st.shape.heads * st.users
    st.stats["hbm_read_bytes"] = hu * (G * S * d * F16 + kv + mask)
    st.stats["hbm_write_bytes"] = hu * G * S * d * F32
    st.stats["ipcq_bytes"] = hu * (n - 1) * kv


def _unpack(phase: str, st: _Setup, arr: np.ndarray, shape, at, plan) -> np.ndarray:
    """The logical O of one head from its SIP's O tensor."""
    cube, p0 = at
    blocks = arr.reshape(shape)
    if phase == "decode":
        return blocks[cube, p0]
    G, d = st.shape.G, st.shape.d
    o = np.zeros((G, st.S, d), np.float32)
    for i in range(st.n):
        at_row = 0
        for _, parts in plan:
            q0, r = parts[i]
            blk = blocks[cube, p0 + i, at_row:at_row + G * r]
            o[:, q0:q0 + r] = blk.reshape(G, r, d)
            at_row += G * r
    return o


def _verify(st: _Setup, phase: str, outputs) -> float:
    """Read every head's O back, keep it under o_<tag> and return the largest
    deviation from the float64 reference."""
    plan = q_tile_plan(st.S, st.q_rows, st.n, st.tile) if phase == "prefill" else None
    cache: dict = {}
    worst = 0.0
    for tag, to, shp, at in outputs:
        if id(to) not in cache:
            cache[id(to)] = st.ctx.to_numpy(to)
        o = _unpack(phase, st, cache[id(to)], shp, at, plan)
        st.arrays[f"o_{tag}"] = o
        a = st.arrays
        ref = reference_attention(a[f"q_{tag}"], a[f"k_{tag}"], a[f"v_{tag}"],
                                  causal=phase == "prefill")
        worst = max(worst, float(np.abs(o - ref).max()))
    return worst


def _work(phase: str, shape: Shape, S: int, users: int) -> dict:
    """The bounds' inputs: K/V bytes of the context and the attention FLOPs (the
    causal triangle for prefill, one query row per head for decode)."""
    pairs = S * (S + 1) // 2 if phase == "prefill" else S
    return {"kv_bytes": shape.heads * users * S * shape.d * F16 * 2,
            "flops": 4 * shape.d * pairs * shape.heads * shape.G * users}


def _bound(spec, phase: str, work: dict, pes: int) -> tuple[float, str]:
    """Decode: every KV byte once over the PEs' aggregate HBM slice bandwidth;
    prefill: the causal FLOPs at the PEs' peak GEMM rate."""
    if phase == "decode":
        return work["kv_bytes"] / (pes * spec.slice_bw_gbs), "kv_bandwidth"
    pe = spec.pe
    return work["flops"] / (pes * 2 * pe.gemm.mac_rows * pe.gemm.mac_cols * pe.clock_ghz), "compute"


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
    st = _Setup(graph, mapping, tier, context, users, tile, q_rows, data, seed, shape,
                keep_records)
    outputs = (_decode if phase == "decode" else _prefill)(st)
    ctx, engine = st.ctx, st.engine
    tables = ipcq_tables(st.cubes, st.kv, st.n)
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
    max_err = _verify(st, phase, outputs) if data else None
    work = _work(phase, shape, context, users)
    bound, kind = _bound(spec, phase, work, len(coords))
    G, d, S = shape.G, shape.d, context
    params = {"phase": phase, "mapping": mapping, "kv_per_cube": st.kv, "tier": tier,
              "tile": tile, "q_rows": q_rows if phase == "prefill" else None, "C": st.C,
              "group_size": st.n, "G": G, "d": d, "heads": shape.heads,
              "tree_depth": tree_depth(st.n), **work, **st.stats,
              "math_ops": sum(engine.pe(*c).math.ops for c in coords),
              "kv_cache_per_cube_bytes": st.kv * users * 2 * S * d * F16,
              "slice_bw_gbs": spec.slice_bw_gbs}
    return AttentionRun("short", spec.name, S, users, params, t1 - t0, bound, kind, counts,
                        families(counts), occupancy(engine, coords, t1 - t0), len(coords), {},
                        st.arrays, max_err, engine)


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
