"""The Llama decoder layer in numpy (float64): what data mode is checked against.

Written from the definition in docs/host-api.md ("Decoder layers"), not from
the kernels: pre-norm block, rotate-half RoPE, grouped-query attention that is
causal over the cache plus the new tokens, SwiGLU FFN.
"""

from __future__ import annotations

import numpy as np


def rope_angles(positions: np.ndarray, d: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of t = pos * theta^(-2i/d), i = 0..d/2-1: [len(positions), d/2]."""
    inv = theta ** (-2.0 * np.arange(d // 2) / d)
    t = np.asarray(positions, np.float64)[:, None] * inv[None, :]
    return np.cos(t), np.sin(t)


def rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate the halves (a, b) of every head vector of x [T, H, d]."""
    h = x.shape[-1] // 2
    a, b = x[..., :h], x[..., h:]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def rmsnorm(v: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + eps) * w


def silu(v: np.ndarray) -> np.ndarray:
    return v / (1.0 + np.exp(-v))


def _attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """q [T, Hq, d] over k, v [S', Hkv, d]; ``visible`` [T, S'] masks keys."""
    T, Hq, d = q.shape
    G = Hq // k.shape[1]
    out = np.empty_like(q)
    for i in range(Hq):
        s = q[:, i, :] @ k[:, i // G, :].T / np.sqrt(d)
        s = np.where(visible, s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        out[:, i, :] = (p / p.sum(-1, keepdims=True)) @ v[:, i // G, :]
    return out


def layer(x: np.ndarray, w: dict, dims, positions: np.ndarray, cache=None) -> np.ndarray:
    """One layer on x [T, D]. Prefill (``cache`` None): the T tokens attend causally to
    each other. Decode: row u is user u's new token, which sees ``cache[0][u]`` /
    ``cache[1][u]`` ([S, Hkv, d] keys and values) and itself."""
    f = {k: np.asarray(v, np.float64) for k, v in w.items()}
    x = np.asarray(x, np.float64)
    T, d = x.shape[0], dims.d
    n = rmsnorm(x, f["attn_norm"], dims.eps)
    cos, sin = rope_angles(positions, d, dims.theta)
    q = rope((n @ f["wq"]).reshape(T, dims.Hq, d), cos, sin)
    k = rope((n @ f["wk"]).reshape(T, dims.Hkv, d), cos, sin)
    v = (n @ f["wv"]).reshape(T, dims.Hkv, d)
    if cache is None:
        a = _attend(q, k, v, np.tril(np.ones((T, T), bool)))
    else:
        kc, vc = (np.asarray(c, np.float64) for c in cache)
        a = np.empty_like(q)
        for u in range(T):
            keys = np.concatenate([kc[u], k[u:u + 1]])
            vals = np.concatenate([vc[u], v[u:u + 1]])
            a[u:u + 1] = _attend(q[u:u + 1], keys, vals, np.ones((1, keys.shape[0]), bool))
    h = x + a.reshape(T, dims.Hq * d) @ f["wo"]
    m = rmsnorm(h, f["ffn_norm"], dims.eps)
    if "router" not in f:
        return h + (silu(m @ f["w_gate"]) * (m @ f["w_up"])) @ f["w_down"]
    return h + moe_ffn(m, f, dims.experts, dims.top_k)


def moe_ffn(m: np.ndarray, f: dict, experts: int, k: int) -> np.ndarray:
    """sum over each token's k largest router logits (ties to the lower expert) of the
    softmax of those k logits times that expert's SwiGLU."""
    logits = m @ f["router"]
    out = np.zeros_like(m)
    for t in range(m.shape[0]):
        chosen = sorted(range(experts), key=lambda e: (-logits[t, e], e))[:k]
        z = np.exp(logits[t, chosen] - logits[t, chosen].max())
        for e, w in zip(chosen, z / z.sum(), strict=True):
            v = m[t:t + 1]
            ffn = (silu(v @ f[f"e{e}.w_gate"]) * (v @ f[f"e{e}.w_up"])) @ f[f"e{e}.w_down"]
            out[t] += w * ffn[0]
    return out
