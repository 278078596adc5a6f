"""Pieces every GQA attention kernel shares: KV block arithmetic, the online
softmax state and its log-sum-exp merge, causal masks.

Pure arithmetic on the host side (blocks, masks) and ``tl`` helpers on the
kernel side (``init_running``, ``merge``). Where a group's ranks sit and the
trees they reduce over are group geometry (``kernbench.geometry.groups``).
Design: docs/adr/0026-gqa-attention.md.
"""

from __future__ import annotations

import math

import numpy as np

# The running max starts at a large finite negative instead of -inf: a rank
# whose KV block is empty then merges as (m, 0, 0) without producing NaN
# (exp(-inf - -inf)), and every real score beats it.
NEG = -1.0e30


# -- KV blocks ----------------------------------------------------------------------------
def block_len(S: int, ranks: int) -> int:
    """B = ceil(S / ranks): every rank's KV block holds B slots (the last ones fewer tokens)."""
    return -(-S // ranks)


def valid_len(S: int, rank: int, B: int) -> int:
    """How many of rank ``rank``'s B slots hold tokens when the counter stands at S."""
    return max(0, min(B, S - rank * B))


def tiles(n: int, tile: int) -> list[tuple[int, int]]:
    """(start, width) of the tiles covering ``n`` tokens, the last one partial."""
    return [(s, min(tile, n - s)) for s in range(0, n, tile)]


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
def view_as(tl, x, start: int, shape: tuple[int, int]):
    """Elements ``start ..`` of contiguous 2-D TCM tensor ``x`` seen as a ``shape``
    tensor: a view, no command (a block of rows, or the front of a larger buffer)."""
    flat = tl.reshape(x, (x.shape[0] * x.shape[1],))
    return tl.reshape(tl.view(flat, start, shape[0] * shape[1]), shape)


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
