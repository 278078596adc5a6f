"""Decode GQA attention, FlashDecoding style: split-KV sweep + reduce to the group root.

Every rank of a KV head's CUBE group holds the G query heads folded into the
GEMM M dimension (Q: [G, d]) and sweeps only its resident KV block (K stored
transposed, K^T: [d, B], V: [B, d], f16 in its PE's HBM slice), keeping the
online-softmax state (m, l, O) in f32. The partial states then meet at the
group root: a binomial tree over the P PEs of each CUBE (ceil(log2 P)
rounds), then a centre-root reduce over the group's CUBEs. Each rank sends as
soon as its own children are merged (no barrier); the root normalises once.

Three ways to drive the per-tile pipeline from PE_CPU (``variant``):

* ``opt1``: Q.K^T composite, softmax merge in primitives, P.V composite; the
  softmax waits for its scores, so the GEMM engine idles meanwhile.
* ``opt3``: software pipelining: the next tile's Q.K^T is issued into a
  persistent double buffer before this tile's softmax.
* ``opt2``: two composites per tile, Q.K^T and the ``softmax_merge`` recipe
  feeding P.V accumulated into O; PE_CPU never waits inside the sweep.

Batched decode (several users) sweeps every user's KV in turn, then reduces
each user's state. Design: docs/adr/0026-gqa-attention.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.kernels.attention.helpers import init_running, merge_into, online_update, tiles

F16 = 2
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


def _k_ref(tl, u: UserBlock, B: int, d: int, start: int, width: int):
    return tl.ref(u.kT + start * F16, (d, width), "f16", row_stride=B)


def _v_ref(tl, u: UserBlock, d: int, start: int, width: int):
    return tl.ref(u.v + start * d * F16, (width, d), "f16")


def _sweep_opt1(tl, r: DecodeRank, u: UserBlock, q, state) -> None:
    epi = [{"op": "scale", "factor": r.scale}]
    for start, width in tiles(u.valid, r.tile):
        with tl.scratch_scope():
            s = tl.composite("gemm", a=q, b=_k_ref(tl, u, r.B, r.d, start, width), epilogue=epi)
            online_update(tl, state, s, lambda p, start=start, width=width: tl.composite(
                "gemm", a=p, b=_v_ref(tl, u, r.d, start, width)))


def _sweep_opt3(tl, r: DecodeRank, u: UserBlock, q, state) -> None:
    todo = tiles(u.valid, r.tile)
    if not todo:
        return
    epi = [{"op": "scale", "factor": r.scale}]
    full = [tl.zeros((r.G, r.tile), "f32"), tl.zeros((r.G, r.tile), "f32")]
    last_w = todo[-1][1]
    last = tl.zeros((r.G, last_w), "f32") if last_w != r.tile else None

    def buffer(j: int):
        return last if (j == len(todo) - 1 and last is not None) else full[j % 2]

    def issue(j: int) -> None:
        start, width = todo[j]
        tl.composite("gemm", a=q, b=_k_ref(tl, u, r.B, r.d, start, width), out=buffer(j),
                     epilogue=epi)

    issue(0)
    for j, (start, width) in enumerate(todo):
        if j + 1 < len(todo):  # keeps the GEMM engine busy during this tile's softmax
            issue(j + 1)
        with tl.scratch_scope():
            online_update(tl, state, buffer(j), lambda p, start=start, width=width: tl.composite(
                "gemm", a=p, b=_v_ref(tl, u, r.d, start, width)))


def _sweep_opt2(tl, r: DecodeRank, u: UserBlock, q, state) -> None:
    m, l, O = state
    for start, width in tiles(u.valid, r.tile):
        with tl.scratch_scope():
            s = tl.composite("gemm", a=q, b=_k_ref(tl, u, r.B, r.d, start, width),
                             epilogue=[{"op": "scale", "factor": r.scale}])
            tl.composite("gemm", b=_v_ref(tl, u, r.d, start, width), out=O,
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


def gqa_decode(ranks: dict, *, tl) -> None:
    """One rank of split-KV decode; ``ranks[(sip, cube, pe)]`` is its :class:`DecodeRank`."""
    r: DecodeRank = ranks[(tl.program_id(2), tl.program_id(1), tl.program_id(0))]
    sweep = SWEEPS[r.variant]
    states = []
    for u in r.users:
        q = tl.load(u.q, (r.G, r.d), "f16")
        state = init_running(tl, r.G, r.d)
        sweep(tl, r, u, q, state)
        states.append(state)
    tl.mark("reduce")
    for u, state in zip(r.users, states, strict=True):
        for direction in r.pe_children:
            _receive_merge(tl, state, direction, r.G, r.d)
        if r.pe_parent is not None:
            _send(tl, state, r.pe_parent)
            continue
        for direction in r.cube_children:
            _receive_merge(tl, state, direction, r.G, r.d)
        if r.cube_parent is not None:
            _send(tl, state, r.cube_parent)
            continue
        m, l, O = state
        tl.store(u.o, O / l)  # normalise once, at the group root
    tl.wait()
