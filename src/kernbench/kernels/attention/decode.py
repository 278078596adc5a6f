"""Decode GQA attention, FlashDecoding style: split-KV sweep + reduce to the group root.

Every rank of a KV head's CUBE group holds the G query heads folded into the
GEMM M dimension (Q: [G, d]) and sweeps only its resident KV block (K stored
transposed, K^T: [d, B], V: [B, d], f16 in its PE's HBM slice), keeping the
online-softmax state (m, l, O) in f32. The partial states then meet at the
group root: a binomial tree over the P PEs of each CUBE (ceil(log2 P)
rounds), then a centre-root reduce over the group's CUBEs. Each rank sends as
soon as its own children are merged (no barrier); the root normalises once.

Three ways to drive the per-tile pipeline from PE_CPU (``variant``):

* ``opt1``: load the tile, Q.K^T composite, softmax merge in primitives, P.V
  composite; the softmax waits for its scores and the next load starts only
  then, so the GEMM engine idles meanwhile.
* ``opt3``: software pipelining with primitives: the next tile's Q.K^T is
  issued (into a persistent double buffer) before this tile's softmax, O is
  rescaled and accumulated one tile late (so PE_CPU waits for a P.V issued a
  tile earlier, not the one it just issued), and loads run one tile ahead.
* ``opt2``: two composites per tile, Q.K^T and the ``softmax_merge`` recipe
  feeding P.V accumulated into O, loads one tile ahead; PE_CPU never waits
  inside the sweep.

K^T and V tiles are read into TCM with lazy ``tl.load`` (one DMA each), so
both GEMMs run on TCM operands.

Batched decode (several users) sweeps every user's KV in turn, then reduces
each user's state. With ``fused_reduce`` the users' states sit stacked in one
[users x G]-row buffer and every tree edge carries all of them at once: one
merge per edge instead of one per user, the O rows sent in one-user pieces (a
queue slot holds one user's O). With ``sweep_users`` > 1 (opt3), blocks of users
sweep together, their softmax steps one command per block (``batched.py``).
Design: docs/adr/0026-gqa-attention.md, 0052, 0053.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.kernels.attention.batched import Stacked, sweep_blocks
from kernbench.kernels.attention.helpers import init_running, merge_into, online_update
from kernbench.kernels.attention.kv_tiles import KvTiles

VARIANTS = ("opt1", "opt2", "opt3")


@dataclass(frozen=True)
class UserBlock:
    """One user's buffers on one rank: VAs of Q [G, d], K^T [d, B], V [B, d]; the
    tokens of this rank's block that are valid; O [G, d] (f32) at the root."""

    q: int
    kT: int
    v: int
    valid: int
    o: int | None


@dataclass(frozen=True)
class DecodeRank:
    users: tuple[UserBlock, ...]
    B: int  # slots per rank block (K^T row stride)
    G: int
    d: int
    tile: int
    scale: float
    variant: str
    pe_children: tuple[str, ...]  # receive directions, tree round order
    pe_parent: str | None
    cube_children: tuple[str, ...]
    cube_parent: str | None  # only on a CUBE's root PE
    tile_shape: tuple[int, int, int] | None = None  # composite supertile (None: scheduler's)
    stationary: str = "auto"  # operand the MAC array holds: "b" (K, V), "a" (Q, P), "auto"
    fused_reduce: bool = False  # several users: one stacked merge per tree edge (ADR 0052)
    sweep_users: int = 1  # opt3: users whose KV tiles one sweep takes together (ADR 0053)


def _sweep_opt1(tl, r: DecodeRank, u: UserBlock, q, state) -> None:
    kv = KvTiles(tl, r, u, ahead=0)  # as-is: each tile is read when it is needed
    epi = [{"op": "scale", "factor": r.scale}]
    for j in range(len(kv.todo)):
        k, v = kv.get(j)
        with tl.scratch_scope():
            s = tl.composite("gemm", a=q, b=k, epilogue=epi, tile_shape=r.tile_shape,
                             stationary=r.stationary)
            online_update(tl, state, s, lambda p, v=v: tl.composite(
                "gemm", a=p, b=v, tile_shape=r.tile_shape, stationary=r.stationary))


def _sweep_opt3(tl, r: DecodeRank, u: UserBlock, q, state) -> None:
    kv = KvTiles(tl, r, u, ahead=1)
    todo = kv.todo
    if not todo:
        return
    epi = [{"op": "scale", "factor": r.scale}]
    full = [tl.zeros((r.G, r.tile), "f32"), tl.zeros((r.G, r.tile), "f32")]
    last_w = todo[-1][1]
    last = tl.zeros((r.G, last_w), "f32") if last_w != r.tile else None
    vs: dict[int, object] = {}

    def buffer(j: int):
        return last if (j == len(todo) - 1 and last is not None) else full[j % 2]

    def issue(j: int) -> None:
        k, vs[j] = kv.get(j)
        tl.composite("gemm", a=q, b=k, out=buffer(j), epilogue=epi, tile_shape=r.tile_shape,
                     stationary=r.stationary)

    issue(0)
    m, l, O = state
    # O is updated one tile late, so the update waits for the P.V issued a tile ago
    # (long done) rather than the one just issued: the CPU moves on to the next softmax
    pv = [tl.zeros((r.G, r.d), "f32"), tl.zeros((r.G, r.d), "f32")]
    corrs = [tl.zeros((r.G, 1), "f32"), tl.zeros((r.G, 1), "f32")]

    def fold(j: int) -> None:
        with tl.scratch_scope():
            tl.copy_to(O, O * corrs[j % 2] + pv[j % 2])

    for j in range(len(todo)):
        if j + 1 < len(todo):  # keeps the GEMM engine busy during this tile's softmax
            issue(j + 1)
        with tl.scratch_scope():
            s_j = buffer(j)
            m2 = tl.maximum(m, tl.max(s_j, -1))
            p = tl.exp(s_j - m2)
            tl.copy_to(corrs[j % 2], tl.exp(m - m2))
            tl.copy_to(l, l * corrs[j % 2] + tl.sum(p, -1))
            tl.composite("gemm", a=p, b=vs.pop(j), out=pv[j % 2], tile_shape=r.tile_shape,
                         stationary=r.stationary)
            tl.copy_to(m, m2)
        if j:
            fold(j - 1)
    fold(len(todo) - 1)


def _sweep_opt2(tl, r: DecodeRank, u: UserBlock, q, state) -> None:
    m, l, O = state
    kv = KvTiles(tl, r, u, ahead=1)  # the next tiles' reads overlap this tile's composites
    for j in range(len(kv.todo)):
        k, v = kv.get(j)
        with tl.scratch_scope():
            s = tl.composite("gemm", a=q, b=k, epilogue=[{"op": "scale", "factor": r.scale}],
                             tile_shape=r.tile_shape, stationary=r.stationary)
            tl.composite("gemm", b=v, out=O, tile_shape=r.tile_shape, stationary=r.stationary,
                         prologue=[{"op": "softmax_merge", "s": s, "m": m, "l": l, "O": O}],
                         epilogue=[{"op": "add", "other": O}])
    tl.wait()


SWEEPS = {"opt1": _sweep_opt1, "opt2": _sweep_opt2, "opt3": _sweep_opt3}


def _receive_merge(tl, state, direction: str, G: int, d: int) -> None:
    with tl.scratch_scope():
        m_b = tl.recv(direction, (G, 1), "f32")
        l_b = tl.recv(direction, (G, 1), "f32")
        o_b = tl.recv(direction, (G, d), "f32")
        merge_into(tl, state, m_b, l_b, o_b)


def _send(tl, state, direction: str) -> None:
    for h in state:
        tl.send(direction, h)


def _reduce(r: DecodeRank, receive_merge, send, finish) -> None:
    """Merge the children's states (PE tree, then CUBE tree); send to the parent, or
    finish at the group root."""
    for direction in r.pe_children:
        receive_merge(direction)
    if r.pe_parent is not None:
        send(r.pe_parent)
        return
    for direction in r.cube_children:
        receive_merge(direction)
    if r.cube_parent is not None:
        send(r.cube_parent)
        return
    finish()


def gqa_decode(ranks: dict, *, tl) -> None:
    """One rank of split-KV decode; ``ranks[(sip, cube, pe)]`` is its :class:`DecodeRank`."""
    r: DecodeRank = ranks[(tl.program_id(2), tl.program_id(1), tl.program_id(0))]
    if r.sweep_users > 1 and r.variant != "opt3":
        raise ValueError(f"gqa_decode: sweep_users={r.sweep_users} needs variant opt3, "
                         f"got {r.variant!r}")
    several = len(r.users) > 1
    stacked = Stacked(tl, r) if several and (r.fused_reduce or r.sweep_users > 1) else None
    if stacked is not None and r.sweep_users > 1:
        sweep_blocks(tl, r, stacked)
        states = stacked.users
    else:
        states = [_sweep_user(tl, r, u, stacked.users[i] if stacked else None)
                  for i, u in enumerate(r.users)]
    tl.mark("reduce")
    if stacked is not None and r.fused_reduce:
        _reduce(r, stacked.receive_merge, stacked.send, stacked.finish)
    else:
        for u, state in zip(r.users, states, strict=True):
            _reduce(r, lambda direction, s=state: _receive_merge(tl, s, direction, r.G, r.d),
                    lambda direction, s=state: _send(tl, s, direction),
                    lambda u=u, s=state: tl.store(u.o, s[2] / s[1]))  # normalise at the root
    tl.wait()


def _sweep_user(tl, r: DecodeRank, u: UserBlock, state):
    """One user's sweep (``state``: its stacked rows, or None for a state of its own)."""
    q = tl.load(u.q, (r.G, r.d), "f16")
    state = state if state is not None else init_running(tl, r.G, r.d)
    with tl.scratch_scope():  # tile buffers are reused by the next user
        SWEEPS[r.variant](tl, r, u, q, state)
    return state
