"""Host layout of the ring prefill: the sizes a run derives from its knobs, where
every user's Q, K^T, V and O shards sit, and the PrefillRank each PE is given.

Shard (cube, pe) of a row_wise tensor is block (cube - cube_start) * P + pe; the
CUBE at ring position i holds KV block i tile-major (tile t on PE t mod P) and
query heads i * G/C .. (i + 1) * G/C - 1 (see ``prefill_run``).
"""

from __future__ import annotations

import numpy as np

from kernbench.errors import UsageError
from kernbench.experiments.gqa.bounds import F16
from kernbench.experiments.gqa.common import Shape, group_grid, random_f16, user_tag
from kernbench.geometry.groups import CubeGroup, ring_cubes
from kernbench.kernels.attention.helpers import block_len, mask_bank, reference_attention
from kernbench.kernels.attention.prefill import KvTile, PrefillRank, QBlock
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api.context import RuntimeContext
from kernbench.sim_engine.engine import GraphEngine


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


class Sizes:
    """What a prefill derives from its knobs: blocks, slots, queue and scratch bytes.
    A query block and KV tile that do not fit a PE's TCM beside its queues is the
    user's error, before anything is allocated."""

    def __init__(self, spec, S: int, C: int, P: int, q_rows: int, tile: int,
                 shape: Shape) -> None:
        self.S, self.C, self.P, self.q_rows, self.tile, self.shape = S, C, P, q_rows, tile, shape
        d = shape.d
        self.hpc = shape.G // C  # query heads per CUBE
        self.n_ranks = C * P
        self.Sb = block_len(S, C)  # tokens of one CUBE's KV block
        self.n_chunks = -(-self.Sb // tile)
        self.B = -(-self.n_chunks // P) * tile  # KV slots per PE slice (K^T row stride)
        per_pe = max(len(q_blocks_of(S, q_rows, p, P)) for p in range(P))
        self.slot = max(4096, 2 * d * tile * F16)
        need = working_set(self.hpc * q_rows, tile, d, C > 1)
        room = spec.pe.tcm_bytes - spec.pe.tcm_reserved_bytes - (2 * self.slot if C > 1 else 0)
        if need > room:
            raise UsageError(f"--q-rows {q_rows} --tile {tile}: one query block and KV tile "
                             f"need {need // 1024} KiB of TCM scratch, a PE has "
                             f"{room // 1024} KiB beside its queues (use smaller blocks)")
        self.arena = max(spec.pe.kernel_scratch_bytes, -(-need // 65536) * 65536)
        self.q_len = per_pe * self.hpc * q_rows  # rows of one PE's Q shard

    def shard_rank(self, g: CubeGroup) -> list[int]:
        """Ring rank (position * P + pe) of every shard of a row_wise tensor of ``g``."""
        pos_of = {c: i for i, c in enumerate(ring_cubes(g))}
        P = self.P
        return [pos_of[g.cube_start + s // P] * P + s % P for s in range(self.n_ranks)]

    def pack(self, q, k, v, shard_rank: list[int]) -> tuple[np.ndarray, ...]:
        """K^T, V and Q of one user as the shards hold them (tiles and query blocks)."""
        P, d, B, tile, Sb, S = self.P, self.shape.d, self.B, self.tile, self.Sb, self.S
        n_ranks, hpc = self.n_ranks, self.hpc
        kt = np.zeros((n_ranks * d, B), np.float16)
        vs = np.zeros((n_ranks * B, d), np.float16)
        for sh in range(n_ranks):
            c, p = divmod(shard_rank[sh], P)
            for t in range(p, self.n_chunks, P):
                k0, w = c * Sb + t * tile, chunk_width(S, Sb, tile, c, t)
                at = (t // P) * tile
                kt[sh * d:(sh + 1) * d, at:at + w] = k[k0:k0 + w].T
                vs[sh * B + at:sh * B + at + w] = v[k0:k0 + w]
        qs = np.zeros((n_ranks * self.q_len, d), np.float16)
        for s in range(n_ranks):
            i, p = divmod(shard_rank[s], P)
            at = s * self.q_len
            for q0, rows in q_blocks_of(S, self.q_rows, p, P):
                qs[at:at + hpc * rows] = q[i * hpc:(i + 1) * hpc, q0:q0 + rows].reshape(
                    hpc * rows, d)
                at += hpc * rows
        return kt, vs, qs

    def unpack(self, g: CubeGroup, shards: np.ndarray) -> np.ndarray:
        """The logical O [G, S, d] of one user of ``g`` from its O shards."""
        P, d, hpc, S = self.P, self.shape.d, self.hpc, self.S
        ring = ring_cubes(g)
        o = np.zeros((self.shape.G, S, d), np.float32)
        for s in range(self.n_ranks):
            cube, p = g.cube_start + s // P, s % P
            i = ring.index(cube)
            at = s * self.q_len
            for q0, rows in q_blocks_of(S, self.q_rows, p, P):
                blk = shards[at:at + hpc * rows].reshape(hpc, rows, d)
                o[i * hpc:(i + 1) * hpc, q0:q0 + rows] = blk
                at += hpc * rows
        return o

    def kv_lanes(self, g: CubeGroup, tk, tv) -> tuple:
        """Every ring position's KV tiles of one user (the same for every PE)."""
        P, d, tile, Sb, S = self.P, self.shape.d, self.tile, self.Sb, self.S
        ring = ring_cubes(g)
        blocks = []
        for c in range(self.C):
            lane = []
            for t in range(self.n_chunks):
                at = (t // P) * tile
                lane.append(KvTile(tk.ptr(ring[c], t % P, g.sip) + at * F16,
                                   tv.ptr(ring[c], t % P, g.sip) + at * d * F16,
                                   chunk_width(S, Sb, tile, c, t), c * Sb + t * tile))
            blocks.append(tuple(lane))
        return tuple(blocks)


class Host:
    """The engine, the host context and what the host keeps of every user's tensors."""

    def __init__(self, graph, sz: Sizes, users: int, data: bool, seed: int,
                 keep_records: bool, planned: bool = True, ctx=None) -> None:
        """On a new engine, or on ``ctx``'s (the whole-model step's)."""
        self.sz, self.users, self.data = sz, users, data
        if ctx is None:
            ctx = RuntimeContext(GraphEngine(graph, enable_data=data, keep_records=keep_records,
                                             planned_composites=planned))
        self.ctx, self.engine = ctx, ctx.engine
        self.rng = np.random.default_rng(seed)
        self.arrays: dict[str, np.ndarray] = {}
        self.outputs: list = []

    def _banks(self, g: CubeGroup, rep: DPPolicy) -> dict:
        """The causal mask bank of every query-block height, replicated on the group."""
        sz = self.sz
        row_sets = sorted({r for p in range(sz.P) for _, r in q_blocks_of(sz.S, sz.q_rows, p,
                                                                          sz.P)})
        banks = {}
        for rows in row_sets:
            bank = np.tile(mask_bank(rows, sz.tile), (sz.hpc, 1))
            name = f"mask{rows}.h{g.head}"
            t = (self.ctx.from_numpy(bank, dp=rep, name=name) if self.data else
                 self.ctx.empty(bank.shape, "f32", dp=rep, name=name))
            banks[rows] = (t, bank.shape[1])
        return banks

    def _user(self, g: CubeGroup, u: int, grid: DPPolicy, shard_rank: list[int]) -> tuple:
        """(Q, K^T, V, O) of user ``u`` of ``g`` (data mode: random inputs, kept)."""
        sz, ctx = self.sz, self.ctx
        G, d, S = sz.shape.G, sz.shape.d, sz.S
        tag, name = user_tag(u, g.head, self.users), f"h{g.head}u{u}"
        kv_shape, q_shape = (sz.n_ranks * d, sz.B), (sz.n_ranks * sz.q_len, d)
        if self.data:
            q, k, v = (random_f16(self.rng, (G, S, d)), random_f16(self.rng, (S, d)),
                       random_f16(self.rng, (S, d)))
            self.arrays[f"q_{tag}"], self.arrays[f"k_{tag}"], self.arrays[f"v_{tag}"] = q, k, v
            kt, vs, qs = sz.pack(q, k, v, shard_rank)
            tk = ctx.from_numpy(np.ascontiguousarray(kt), dp=grid, name=f"KT.{name}")
            tv = ctx.from_numpy(vs, dp=grid, name=f"V.{name}")
            tq = ctx.from_numpy(qs, dp=grid, name=f"Q.{name}")
        else:
            tk = ctx.empty(kv_shape, "f16", dp=grid, name=f"KT.{name}")
            tv = ctx.empty((sz.n_ranks * sz.B, d), "f16", dp=grid, name=f"V.{name}")
            tq = ctx.empty(q_shape, "f16", dp=grid, name=f"Q.{name}")
        to = (ctx.zeros if self.data else ctx.empty)(q_shape, "f32", dp=grid, name=f"O.{name}")
        self.outputs.append((tag, g, to))
        return tq, tk, tv, to

    def group_ranks(self, g: CubeGroup, knobs: tuple) -> dict:
        """Place group ``g``'s masks and tensors; the PrefillRank of each of its PEs."""
        fused, tile_shape, causal, stationary = knobs
        sz = self.sz
        P, d, hpc = sz.P, sz.shape.d, sz.hpc
        rep = DPPolicy(cube="replicate", num_cubes=sz.C, cube_start=g.cube_start,
                       pe="replicate", num_pes=P)
        pos_of = {c: i for i, c in enumerate(ring_cubes(g))}
        banks = self._banks(g, rep)
        grid, shard_rank = group_grid(g, sz.C, P), sz.shard_rank(g)
        per_user = [self._user(g, u, grid, shard_rank) for u in range(self.users)]
        kv = tuple(sz.kv_lanes(g, tk, tv) for _, tk, tv, _ in per_user)
        ranks = {}
        for cube in g.cubes:
            for pe in range(P):
                qbs, owners = [], []
                for u, (tq, _, _, to) in enumerate(per_user):
                    qa, oa = tq.ptr(cube, pe, g.sip), to.ptr(cube, pe, g.sip)
                    for q0, rows in q_blocks_of(sz.S, sz.q_rows, pe, P):
                        qbs.append(QBlock(qa, oa, q0, rows))
                        owners.append(u)
                        qa += hpc * rows * d * F16
                        oa += hpc * rows * d * 4
                ranks[(g.sip, cube, pe)] = PrefillRank(
                    tuple(qbs), tuple(owners), kv, pos_of[cube], sz.C, hpc, sz.B, d, sz.tile,
                    sz.shape.scale, {r: (t.ptr(cube, pe, g.sip), w) for r, (t, w) in banks.items()},
                    fused, tile_shape, causal, stationary)
        return ranks

    def max_error(self, causal: bool) -> float:
        """Read every O back (kept as o_<tag>); the largest deviation from numpy."""
        worst = 0.0
        for tag, g, to in self.outputs:
            o = self.sz.unpack(g, self.ctx.to_numpy(to))
            self.arrays[f"o_{tag}"] = o
            a = self.arrays
            ref = reference_attention(a[f"q_{tag}"], a[f"k_{tag}"], a[f"v_{tag}"], causal=causal)
            worst = max(worst, float(np.abs(o - ref).max()))
        return worst
