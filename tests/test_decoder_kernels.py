"""The decoder-layer kernels of ``kernbench.kernels.decoder``, one PE each, in data mode,
against numpy written out here (float64; operands rounded to f16 where the kernel
rounds them)."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.kernels.decoder import (
    embed,
    lm_head,
    o_project,
    qkv_project,
    rope_append,
    swiglu_ffn,
)
from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine import GraphEngine
from kernbench.topology import load_topology

from .conftest import ROOT

T, D, EPS = 4, 128, 1e-5


@pytest.fixture()
def ctx():
    graph = load_topology(ROOT / "config/topologies/small_2x2.yaml")
    return RuntimeContext(GraphEngine(graph, enable_data=True))


def f16(a):
    return np.asarray(a, np.float16)


def norm(x, w):
    x = np.asarray(x, np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * w


def close(got, want, tol=1e-2):
    want = np.asarray(want, np.float64)
    assert np.abs(got - want).max() <= tol * max(1.0, np.abs(want).max())


def run(ctx, fn, *args):
    ctx.wait(ctx.launch(fn.__name__, fn, *args))


def test_lm_head_is_rmsnorm_then_the_projection(ctx):
    rng = np.random.default_rng(0)
    x = f16(rng.standard_normal((T, D)))
    g = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    w = f16(rng.standard_normal((D, 48)) / np.sqrt(D))
    out = ctx.empty((T, 48), "f32")
    run(ctx, lm_head, ctx.from_numpy(x), ctx.from_numpy(g), ctx.from_numpy(w), out, T, D, 48,
        EPS, 3)  # rows 0-2, then row 3
    close(ctx.to_numpy(out), f16(norm(x, g)).astype(np.float64) @ w)


def test_qkv_project_writes_its_columns_into_both_buffers(ctx):
    rng = np.random.default_rng(1)
    x = f16(rng.standard_normal((T, D)))
    g = np.ones(D, np.float32)
    wqk, wv = f16(rng.standard_normal((D, 8)) / 11), f16(rng.standard_normal((D, 4)) / 11)
    qk, v = ctx.zeros((T, 24), "f16"), ctx.zeros((T, 12), "f16")
    run(ctx, qkv_project, ctx.from_numpy(x), ctx.from_numpy(g), ctx.from_numpy(wqk),
        ctx.from_numpy(wv), qk, v, T, D, 8, 4, 24, 12, 16, 4, EPS, 3)
    n = f16(norm(x, g)).astype(np.float64)
    got_qk, got_v = ctx.to_numpy(qk), ctx.to_numpy(v)
    close(got_qk[:, 16:24], n @ wqk)
    close(got_v[:, 4:8], n @ wv)
    assert not got_qk[:, :16].any() and not got_v[:, :4].any() and not got_v[:, 8:].any()


def test_swiglu_ffn_with_the_residual(ctx):
    rng = np.random.default_rng(2)
    F = 64
    h = f16(rng.standard_normal((T, D)))
    g = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    wg, wu = f16(rng.standard_normal((D, F)) / 11), f16(rng.standard_normal((D, F)) / 11)
    wd = f16(rng.standard_normal((F, D)) / 8)
    H = ctx.from_numpy(h)
    out = ctx.empty((T, D), "f16")
    run(ctx, swiglu_ffn, H, ctx.from_numpy(g), ctx.from_numpy(wg), ctx.from_numpy(wu),
        ctx.from_numpy(wd), out, H, T, D, F, EPS, 3)
    n = f16(norm(h, g)).astype(np.float64)
    a, b = n @ wg, n @ wu
    act = f16(a / (1 + np.exp(-a)) * b).astype(np.float64)
    close(ctx.to_numpy(out), h.astype(np.float64) + act @ wd)


def test_rope_append_rotates_and_fills_the_cache_slot(ctx):
    rng = np.random.default_rng(3)
    heads, d, slots, col = 3, 16, 8, 5  # two query heads and the key head
    qk = f16(rng.standard_normal((T, heads * d)))
    v = f16(rng.standard_normal((T, d)))
    pos = np.arange(T) + 7.0
    t = pos[:, None] * 10000.0 ** (-2 * np.arange(d // 2) / d)
    cos, sin = np.cos(t).astype(np.float32), np.sin(t).astype(np.float32)
    QK, V = ctx.from_numpy(qk), ctx.from_numpy(v)
    caches = [(ctx.zeros((d, slots), "f16"), ctx.zeros((slots, d), "f16")) for _ in range(T)]
    plan = tuple((kt.va, vt.va, col, slots) for kt, vt in caches)
    run(ctx, rope_append, QK, V, ctx.from_numpy(cos), ctx.from_numpy(sin), T, heads, d, plan)
    x = qk.astype(np.float64).reshape(T, heads, d)
    a, b = x[..., :d // 2], x[..., d // 2:]
    c, s = np.cos(t)[:, None, :], np.sin(t)[:, None, :]
    want = np.concatenate([a * c - b * s, b * c + a * s], -1)
    got = ctx.to_numpy(QK).reshape(T, heads, d)
    close(got, want)
    for u, (kt, vt) in enumerate(caches):
        np.testing.assert_array_equal(ctx.to_numpy(kt)[:, col], got[u, -1])
        np.testing.assert_array_equal(ctx.to_numpy(vt)[col], v[u])


def test_o_project_casts_the_attention_rows_and_adds_the_residual(ctx):
    rng = np.random.default_rng(4)
    width, rows = 32, 16
    o = rng.standard_normal((T, width)).astype(np.float32)
    wo = f16(rng.standard_normal((rows, D)) / 4)
    x = f16(rng.standard_normal((T, D)))
    O = ctx.from_numpy(o)
    out, X = ctx.empty((T, D), "f16"), ctx.from_numpy(x)
    run(ctx, o_project, O.va + 8 * 4, ctx.from_numpy(wo), out, X, T, rows, width, D, 2)
    close(ctx.to_numpy(out), x.astype(np.float64) + f16(o[:, 8:8 + rows]).astype(np.float64) @ wo)
    run(ctx, o_project, 0, ctx.from_numpy(wo), out, None, T, 0, width, D, 2)
    assert not ctx.to_numpy(out).any()  # a rank without rows contributes zeros


def test_embed_gathers_only_the_rows_of_its_shard(ctx):
    rng = np.random.default_rng(5)
    table = f16(rng.standard_normal((10, D)))
    out = ctx.empty((T, D), "f16")
    run(ctx, embed, ctx.from_numpy(table), out, T, D, ((0, 3), (2, 9)))
    want = np.zeros((T, D))
    want[0], want[2] = table[3], table[9]
    np.testing.assert_array_equal(ctx.to_numpy(out), want)
