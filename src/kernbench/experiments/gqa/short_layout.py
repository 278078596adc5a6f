"""Host layouts of the short-context mappings: where every KV head's group sits,
the tensors each SIP holds, the rank records of its PEs, and reading O back.

Every tensor is split row_wise over the SIP's launched CUBEs and all P PEs,
shard (cube, pe) being that PE's own data (see ``short_run``).
"""

from __future__ import annotations

import numpy as np

from kernbench.experiments.gqa.common import random_f16
from kernbench.geometry.groups import row_tree
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
)
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api.context import RuntimeContext
from kernbench.sim_engine.engine import GraphEngine

MAPPINGS = {"A1": 1, "A2": 2, "A4": 4, "B": 8}
F16, F32 = 2, 4


def cubes_of(spec, C: int) -> list[tuple[int, int]]:
    """(SIP, CUBE id) of the C CUBEs: ceil(C / sips) per SIP, from CUBE 0 up."""
    per_sip = -(-C // spec.sips.count)
    return [(c // per_sip, c % per_sip) for c in range(C)]


class Setup:
    """What both phases build: engine, context, placement and the per-head bookkeeping."""

    def __init__(self, graph, mapping, tier, context, users, tile, q_rows, data, seed, shape,
                 keep_records):
        spec = graph.spec
        self.spec, self.users, self.tile, self.data, self.shape = spec, users, tile, data, shape
        self.tier, self.S, self.q_rows = tier, context, q_rows
        self.mapping, self.kv = mapping, MAPPINGS[mapping]
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


def decode_layout(st: Setup) -> list:
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
                up, down = row_tree(i, n)
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


def _mask_banks(st: Setup, sip: int, nc: int, rows_set: list[int]) -> dict:
    """The causal mask bank of every Q-tile height, replicated on the SIP's PEs."""
    rep = DPPolicy(cube="replicate", num_cubes=nc, pe="replicate", num_pes=st.P)
    banks = {}
    for rows in rows_set:
        bank = np.tile(mask_bank(rows, st.tile), (st.shape.G, 1))
        name = f"mask{rows}.s{sip}"
        t = (st.ctx.from_numpy(bank, dp=rep, name=name) if st.data else
             st.ctx.empty(bank.shape, "f32", dp=rep, name=name))
        banks[rows] = (t, bank.shape[1])
    return banks


def _prefill_inputs(st: Setup, u: int, heads, plan, hosts) -> None:
    """Random Q, K, V of user ``u`` of every head, staged as the shards hold them: K^T
    and V on the group root, each PE's query rows of every Q tile back to back."""
    kts, vs, qs = hosts
    G, d, S, n = st.shape.G, st.shape.d, st.S, st.n
    for h, cube, p0 in heads:
        q, k, v = st.inputs(u, h, (G, S, d))
        kts[cube, p0], vs[cube, p0] = k.T, v
        for i in range(n):
            at = 0
            for _, parts in plan:
                q0, r = parts[i]
                qs[cube, p0 + i, at:at + G * r] = q[:, q0:q0 + r].reshape(G * r, d)
                at += G * r


def prefill_layout(st: Setup) -> list:
    G, d, S, n, P, tile = st.shape.G, st.shape.d, st.S, st.n, st.P, st.tile
    plan = q_tile_plan(S, st.q_rows, n, tile)
    q_len = G * max(sum(parts[i][1] for _, parts in plan) for i in range(n))
    widths = tuple(sorted({w for _, w in tiles(S, tile)}))
    rows_set = sorted({r for _, parts in plan for _, r in parts if r})
    outputs = []
    for sip in st.sips:
        st.ctx.set_device(sip)
        nc, heads = st.cubes_on(sip), st.heads_on(sip)
        banks = _mask_banks(st, sip, nc, rows_set)
        per_user = []
        for u in range(st.users):
            kts, vs, qs = (st.host(s) for s in ((nc, P, d, S), (nc, P, S, d), (nc, P, q_len, d)))
            if st.data:
                _prefill_inputs(st, u, heads, plan, (kts, vs, qs))
            name = f"s{sip}u{u}"
            tk = st.tensor(sip, (nc * P * d, S), "f16", f"KT.{name}", kts)
            tv = st.tensor(sip, (nc * P * S, d), "f16", f"V.{name}", vs)
            tq = st.tensor(sip, (nc * P * q_len, d), "f16", f"Q.{name}", qs)
            to = st.tensor(sip, (nc * P * q_len, d), "f32", f"O.{name}", zeros=True)
            per_user.append((tq, tk, tv, to))
            outputs += [(st.tag(u, h), to, (nc, P, q_len, d), (cube, p0)) for h, cube, p0 in heads]
        for _h, cube, p0 in heads:
            for i in range(n):
                up, down = row_tree(i, n)
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


def _prefill_stats(st: Setup, plan) -> None:
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


def _unpack(phase: str, st: Setup, arr: np.ndarray, shape, at, plan) -> np.ndarray:
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


def verify(st: Setup, phase: str, outputs) -> float:
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
