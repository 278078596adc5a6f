"""Pieces every GQA attention kernel shares: placement arithmetic, the online
softmax state and its log-sum-exp merge, reduce-tree directions, causal masks.

Pure arithmetic on the host side (placement, trees, masks) and ``tl`` helpers
on the kernel side (``init_running``, ``merge``). Design: docs/adr/0026-gqa-attention.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# The running max starts at a large finite negative instead of -inf: a rank
# whose KV block is empty then merges as (m, 0, 0) without producing NaN
# (exp(-inf - -inf)), and every real score beats it.
NEG = -1.0e30


# -- placement --------------------------------------------------------------------------
@dataclass(frozen=True)
class CubeGroup:
    """The ``C`` CUBEs x ``P`` PEs of one SIP that own one KV head.

    ``cubes`` lists the group's CUBE ids in rank order (cube_local 0..C-1);
    ``w`` x ``h`` is the rectangle they form in the SIP's CUBE mesh.
    """

    head: int
    sip: int
    cube_start: int
    cubes: tuple[int, ...]
    pes: int
    w: int
    h: int

    @property
    def ranks(self) -> int:
        return len(self.cubes) * self.pes

    def rank(self, cube: int, pe: int) -> int:
        """rank = cube_local * P + pe_local (the contiguous-block order)."""
        return self.cubes.index(cube) * self.pes + pe

    def coords(self) -> list[tuple[int, int, int]]:
        return [(self.sip, c, p) for c in self.cubes for p in range(self.pes)]


def group_shape(C: int, mesh_w: int) -> tuple[int, int]:
    """The rectangle of ``C`` CUBEs: whole rows of the mesh when C >= its width
    (a 4 x 2 block for C = 8 on a 4 x 4 mesh), else a 1-row strip."""
    if C <= mesh_w:
        return C, 1
    if C % mesh_w:
        raise ValueError(f"C={C} CUBEs do not form whole rows of a {mesh_w}-wide CUBE mesh")
    return mesh_w, C // mesh_w


def place_groups(spec, heads: int, C: int, P: int) -> list[CubeGroup]:
    """One CUBE group per KV head, spread evenly over every SIP of ``spec``.

    Each SIP takes ``heads / sips`` groups; group ``k`` of a SIP starts at CUBE
    ``k * cubes_per_sip / groups_per_sip`` (``cube_start``), so two groups per
    SIP sit in the two halves of the mesh whatever ``C`` is. With fewer heads
    than SIPs (a small study), the first ``heads`` SIPs take one group each.
    """
    sips, w, hh = spec.sips.count, spec.cube_w, spec.cube_h
    cubes_per_sip, pes = w * hh, spec.pes_per_cube
    if heads >= sips and heads % sips:
        raise ValueError(f"{heads} KV heads do not spread evenly over {sips} SIPs")
    per_sip = max(1, heads // sips)
    if P < 1 or P > pes:
        raise ValueError(f"P={P} must be in 1..{pes} (PEs per CUBE)")
    if C < 1 or C * per_sip > cubes_per_sip:
        raise ValueError(f"C={C}: {per_sip} groups of C CUBEs do not fit the "
                         f"{cubes_per_sip} CUBEs of a SIP")
    gw, gh = group_shape(C, w)
    stride = cubes_per_sip // per_sip
    out = []
    for head in range(heads):
        sip, k = divmod(head, per_sip)
        start = k * stride
        x0, y0 = start % w, start // w
        if x0 + gw > w or y0 + gh > hh:
            raise ValueError(f"C={C}: the group at CUBE {start} leaves the {w}x{hh} mesh")
        cubes = tuple((y0 + y) * w + x0 + x for y in range(gh) for x in range(gw))
        out.append(CubeGroup(head, sip, start, cubes, P, gw, gh))
    return out


def block_len(S: int, ranks: int) -> int:
    """B = ceil(S / ranks): every rank's KV block holds B slots (the last ones fewer tokens)."""
    return -(-S // ranks)


def valid_len(S: int, rank: int, B: int) -> int:
    """How many of rank ``rank``'s B slots hold tokens when the counter stands at S."""
    return max(0, min(B, S - rank * B))


def tiles(n: int, tile: int) -> list[tuple[int, int]]:
    """(start, width) of the tiles covering ``n`` tokens, the last one partial."""
    return [(s, min(tile, n - s)) for s in range(0, n, tile)]


# -- reduce directions --------------------------------------------------------------------
# Level 2 (PEs of a CUBE): binomial tree round r uses the r-th pair; a child sends
# toward UP[r], its parent receives from DOWN[r]. Level 1 (CUBEs of a group): the
# centre-root mesh uses the physical cube_* directions.
TREE_UP = ("ring_prev", "row_prev", "col_prev", "W")
TREE_DOWN = ("ring_next", "row_next", "col_next", "E")


def tree_rounds(P: int) -> int:
    return max(0, math.ceil(math.log2(P))) if P > 1 else 0


def tree_role(pe: int, P: int) -> tuple[list[tuple[str, int]], tuple[str, int] | None]:
    """Binomial reduce-to-root over PEs 0..P-1: (children as (receive direction,
    peer) in round order, parent as (send direction, peer) or None at the root)."""
    children, parent = [], None
    for r in range(tree_rounds(P)):
        step = 1 << r
        if pe % (2 * step) == 0:
            if pe + step < P:
                children.append((TREE_DOWN[r], pe + step))
        elif pe % (2 * step) == step:
            parent = (TREE_UP[r], pe - step)
            break
    return children, parent


def centre_role(x: int, y: int, w: int, h: int
                ) -> tuple[list[tuple[str, tuple[int, int]]], tuple[str, tuple[int, int]] | None]:
    """Centre-root reduce over a w x h CUBE rectangle: rows converge on the centre
    column, then that column on the centre CUBE. Returns (children as (receive
    direction, (x, y)), parent as (send direction, (x, y)) or None at the centre)."""
    cx, cy = (w - 1) // 2, (h - 1) // 2
    children: list[tuple[str, tuple[int, int]]] = []
    if x == cx:
        if y < h - 1 and y >= cy:
            children.append(("cube_S", (x, y + 1)))
        if 0 < y <= cy:
            children.append(("cube_N", (x, y - 1)))
    if x >= cx and x < w - 1:
        children.append(("cube_E", (x + 1, y)))
    if 0 < x <= cx:
        children.append(("cube_W", (x - 1, y)))
    if x > cx:
        parent = ("cube_W", (x - 1, y))
    elif x < cx:
        parent = ("cube_E", (x + 1, y))
    elif y > cy:
        parent = ("cube_N", (x, y - 1))
    elif y < cy:
        parent = ("cube_S", (x, y + 1))
    else:
        parent = None
    return children, parent


def centre_depth(w: int, h: int) -> int:
    """Rounds on the critical path of the centre-root reduce (its tree height)."""
    cx, cy = (w - 1) // 2, (h - 1) // 2
    return max(cx, w - 1 - cx) + max(cy, h - 1 - cy)


# -- causal masks -------------------------------------------------------------------------
def all_future(q0: int, q_len: int, k0: int) -> bool:
    """Every key of a block starting at k0 comes after every query row [q0, q0+q_len)."""
    return k0 > q0 + q_len - 1


def partial(q0: int, k0: int, k_len: int) -> bool:
    """Some key of [k0, k0+k_len) comes after some query row starting at q0."""
    return k0 + k_len - 1 > q0


def mask_bank(q_len: int, tile: int) -> np.ndarray:
    """An additive f32 [q_len, q_len + 2 tile] bank: the causal mask of any partial
    (q block, KV tile) pair is its column window starting at (k0 - q0) + tile."""
    cols = np.arange(q_len + 2 * tile)[None, :]
    rows = np.arange(q_len)[:, None]
    return np.where(cols - tile > rows, np.float32(NEG), np.float32(0.0)).astype(np.float32)


def mask_column(q0: int, k0: int, tile: int) -> int:
    return k0 - q0 + tile


# -- kernel side --------------------------------------------------------------------------
def init_running(tl, rows: int, d: int):
    """(m, l, O) of the online softmax for ``rows`` query rows, in f32."""
    return tl.full((rows, 1), NEG, "f32"), tl.zeros((rows, 1), "f32"), tl.zeros((rows, d), "f32")


def merge_into(tl, state, m_b, l_b, o_b) -> None:
    """Fold a received (m, l, O) into ``state`` in place (log-sum-exp merge)."""
    m_a, l_a, o_a = state
    with tl.scratch_scope():
        m = tl.maximum(m_a, m_b)
        sa = tl.exp(m_a - m)
        sb = tl.exp(m_b - m)
        tl.copy_to(l_a, l_a * sa + l_b * sb)
        tl.copy_to(o_a, o_a * sa + o_b * sb)
        tl.copy_to(m_a, m)


def online_update(tl, state, s, pv_fn) -> None:
    """One online-softmax step with score tile ``s``: ``pv_fn(p)`` returns P.V."""
    m, l, O = state
    m2 = tl.maximum(m, tl.max(s, -1))
    p = tl.exp(s - m2)
    corr = tl.exp(m - m2)
    l_new = l * corr + tl.sum(p, -1)
    o_new = O * corr + pv_fn(p)
    tl.copy_to(m, m2)
    tl.copy_to(l, l_new)
    tl.copy_to(O, o_new)


# -- numpy reference ----------------------------------------------------------------------
def reference_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool,
                        q_offset: int = 0) -> np.ndarray:
    """Plain softmax attention in float64: q [..., T, d], k and v [S, d]; with
    ``causal`` row i (global position q_offset + i) sees keys 0..q_offset + i."""
    qd, kd, vd = (a.astype(np.float64) for a in (q, k, v))
    s = qd @ kd.T / math.sqrt(q.shape[-1])
    if causal:
        rows = np.arange(q.shape[-2])[:, None] + q_offset
        s = np.where(np.arange(k.shape[0])[None, :] > rows, -np.inf, s)
    s -= s.max(-1, keepdims=True)
    p = np.exp(s)
    return (p / p.sum(-1, keepdims=True)) @ vd
