"""Data mode: kernels compute the values numpy computes, and data never changes timing.

GEMM kernels (primitive, prefetch, composite; 1 PE and a composite split over
8 PEs), the ``softmax_merge`` recipe against a numpy online-softmax update,
``tl.trans`` + ``tl.store``, composite epilogues, and identical timing with
data on and off.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.kernels.gemm import gemm_composite, gemm_prefetch, gemm_primitive
from kernbench.runtime_api import DPPolicy, RuntimeContext
from kernbench.sim_engine import GraphEngine

RTOL, ATOL = 1e-5, 1e-4
SHAPES = [(64, 64, 64), (40, 100, 70)]  # square, and not a multiple of the 32x64x32 tiles


def _gemm_inputs(M, K, N, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    return a, b, a.astype(np.float32) @ b.astype(np.float32)


def _log(eng):
    return [(r.t_start, r.t_end, r.component_id, r.op_kind, r.op_name, repr(r.params))
            for r in eng.op_log.records]


# -- GEMM on one PE ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kernel", [gemm_primitive, gemm_prefetch, gemm_composite],
                         ids=lambda k: k.__name__)
def test_gemm_on_one_pe_equals_numpy(small_graph, kernel, shape):
    M, K, N = shape
    a, b, expected = _gemm_inputs(M, K, N)
    eng = GraphEngine(small_graph, enable_data=True)
    ctx = RuntimeContext(eng)
    ta, tb, tc = ctx.from_numpy(a), ctx.from_numpy(b), ctx.empty((M, N), "f32")
    ctx.wait(ctx.launch(kernel.__name__, kernel, ta, tb, tc, M, K, N))
    out = ctx.to_numpy(tc)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=RTOL, atol=ATOL)


# -- composite GEMM over the 8 PEs of a cube -------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(64, 64, 64), (40, 100, 72), (64, 64, 256)],
                         ids=lambda s: "x".join(map(str, s)))
def test_composite_gemm_split_over_eight_pes_equals_numpy(small_graph, shape):
    M, K, N = shape
    pes = 8
    a, b, expected = _gemm_inputs(M, K, N, seed=1)
    eng = GraphEngine(small_graph, enable_data=True)
    ctx = RuntimeContext(eng)
    split = DPPolicy(pe="column_wise", num_pes=pes)
    ta = ctx.from_numpy(a, dp=DPPolicy(num_pes=pes))
    tb = ctx.from_numpy(b, dp=split)
    tc = ctx.empty((M, N), "f32", dp=split)
    h = ctx.wait(ctx.launch("gemm8", gemm_composite, ta, tb, tc, M, K, N // pes,
                            dp=DPPolicy(num_pes=pes)))
    assert len(h.pes) == pes
    np.testing.assert_allclose(ctx.to_numpy(tc), expected, rtol=RTOL, atol=ATOL)
    # every PE did its own share of the work
    busy = {pe for pe, unit in eng.pes.items() if unit.cpu.commands}
    assert len(busy) == pes


# -- softmax_merge recipe, once ---------------------------------------------------------------------------------------------
G, T, D = 8, 64, 32


def k_merge_once(pm, pl, po, ps, pv, om, ol, oo, *, tl):
    m = tl.load(pm, (G, 1), "f32")
    l = tl.load(pl, (G, 1), "f32")
    O = tl.load(po, (G, D), "f32")
    s = tl.load(ps, (G, T), "f32")
    out = tl.composite("gemm", b=tl.ref(pv, (T, D)), out=O,
                       prologue=[{"op": "softmax_merge", "s": s, "m": m, "l": l, "O": O}],
                       epilogue=[{"op": "add", "other": O}])
    assert out is O
    tl.wait()
    tl.store(om, m)
    tl.store(ol, l)
    tl.store(oo, O)


def k_merge_once_no_wait(pm, pl, po, ps, pv, om, ol, oo, *, tl):
    m = tl.load(pm, (G, 1), "f32")
    l = tl.load(pl, (G, 1), "f32")
    O = tl.load(po, (G, D), "f32")
    s = tl.load(ps, (G, T), "f32")
    tl.composite("gemm", b=tl.ref(pv, (T, D)), out=O,
                 prologue=[{"op": "softmax_merge", "s": s, "m": m, "l": l, "O": O}],
                 epilogue=[{"op": "add", "other": O}])
    tl.store(om, m)  # first use after the composite: must see the merged value
    tl.store(ol, l)
    tl.store(oo, O)


def _merge_case(seed=3):
    rng = np.random.default_rng(seed)
    m0 = rng.standard_normal((G, 1)).astype(np.float32)
    l0 = rng.uniform(0.5, 2.0, (G, 1)).astype(np.float32)
    o0 = rng.standard_normal((G, D)).astype(np.float32)
    s = (2 * rng.standard_normal((G, T))).astype(np.float32)
    v = rng.standard_normal((T, D)).astype(np.float16)
    # the online-softmax update of (m, l, O) by one score tile
    m1 = np.maximum(m0, s.max(axis=1, keepdims=True))
    corr = np.exp(m0 - m1)
    p = np.exp(s - m1)
    l1 = l0 * corr + p.sum(axis=1, keepdims=True)
    o1 = o0 * corr + p @ v.astype(np.float32)
    return (m0, l0, o0, s, v), (m1, l1, o1)


def _run_merge(graph, kernel):
    inputs, expected = _merge_case()
    eng = GraphEngine(graph, enable_data=True)
    ctx = RuntimeContext(eng)
    ts = [ctx.from_numpy(x) for x in inputs]
    outs = [ctx.empty((G, 1), "f32"), ctx.empty((G, 1), "f32"), ctx.empty((G, D), "f32")]
    ctx.wait(ctx.launch(kernel.__name__, kernel, *ts, *outs))
    return [ctx.to_numpy(t) for t in outs], expected


def test_softmax_merge_once_equals_numpy_online_softmax(small_graph):
    (m, l_, o), (m1, l1, o1) = _run_merge(small_graph, k_merge_once)
    np.testing.assert_allclose(m, m1, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(l_, l1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(o, o1, rtol=1e-5, atol=1e-4)


def test_recipe_state_auto_waits_like_the_output(small_graph):
    (m, l_, o), (m1, l1, o1) = _run_merge(small_graph, k_merge_once_no_wait)
    np.testing.assert_allclose(o, o1, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(m, m1, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(l_, l1, rtol=1e-5, atol=1e-5)


# -- tl.trans ----------------------------------------------------------------------------------------------------------------
def k_trans_store(x, o, *, tl):
    xh = tl.load(x, (24, 40), "f32")
    t = tl.trans(xh)
    assert t.shape == (40, 24)
    tl.store(o, t)


def k_trans_then_math(x, o, *, tl):
    xh = tl.load(x, (24, 40), "f32")
    tl.store(o, tl.trans(xh) + 1.0)


@pytest.mark.parametrize("kernel,offset", [(k_trans_store, 0.0), (k_trans_then_math, 1.0)])
def test_trans_then_store_is_the_transpose(small_graph, kernel, offset):
    x = np.arange(24 * 40, dtype=np.float32).reshape(24, 40)  # not symmetric
    eng = GraphEngine(small_graph, enable_data=True)
    ctx = RuntimeContext(eng)
    tx, to = ctx.from_numpy(x), ctx.empty((40, 24), "f32")
    ctx.wait(ctx.launch(kernel.__name__, kernel, tx, to))
    np.testing.assert_array_equal(ctx.to_numpy(to), x.T + offset)


def k_dot_trans(a, b, o, *, tl):
    ah = tl.load(a, (32, 16), "f16")  # stored as A^T
    bh = tl.load(b, (32, 24), "f16")
    tl.store(o, tl.dot(tl.trans(ah), bh))


def test_dot_of_a_transposed_view(small_graph):
    rng = np.random.default_rng(6)
    at = rng.standard_normal((32, 16)).astype(np.float16)
    b = rng.standard_normal((32, 24)).astype(np.float16)
    eng = GraphEngine(small_graph, enable_data=True)
    ctx = RuntimeContext(eng)
    ta, tb, to = ctx.from_numpy(at), ctx.from_numpy(b), ctx.empty((16, 24), "f32")
    ctx.wait(ctx.launch("dot_trans", k_dot_trans, ta, tb, to))
    np.testing.assert_allclose(ctx.to_numpy(to), at.T.astype(np.float32) @ b.astype(np.float32),
                               rtol=RTOL, atol=ATOL)


# -- data on / off: identical timing -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", [gemm_prefetch, gemm_composite], ids=lambda k: k.__name__)
def test_timing_and_op_log_do_not_depend_on_data(small_graph, kernel):
    M, K, N = 40, 100, 70
    a, b, _ = _gemm_inputs(M, K, N)
    runs = []
    for data in (False, True):
        eng = GraphEngine(small_graph, enable_data=data)
        ctx = RuntimeContext(eng)
        ta, tb = ctx.from_numpy(a), ctx.from_numpy(b)  # the same host traffic either way
        tc = ctx.empty((M, N), "f32")
        h = ctx.wait(ctx.launch(kernel.__name__, kernel, ta, tb, tc, M, K, N))
        runs.append((eng, h))
    (e_off, h_off), (e_on, h_on) = runs
    assert e_off.store is None and e_on.store is not None
    assert (h_off.kernel_ns, h_off.host_ns) == (h_on.kernel_ns, h_on.host_ns)
    assert _log(e_off) == _log(e_on)
    assert e_off.op_log.counts == e_on.op_log.counts


# -- composite epilogues ------------------------------------------------------------------------------------------------------------
EM, EK, EN = 40, 100, 70
EPILOGUES = {
    "bias": lambda acc, bias, other: acc + bias,
    "scale": lambda acc, bias, other: acc * np.float32(0.25),
    "relu": lambda acc, bias, other: np.maximum(acc, 0),
    "bias_scale_relu": lambda acc, bias, other: np.maximum((acc + bias) * np.float32(-0.5), 0),
    "add": lambda acc, bias, other: acc + other,
    "k_tile_scale": lambda acc, bias, other: acc * np.float32(3.0),
}


def _epilogue_items(name, bias_h, other_h):
    return {
        "bias": [{"op": "bias", "bias": bias_h}],
        "scale": [{"op": "scale", "factor": 0.25}],
        "relu": [{"op": "relu"}],
        "bias_scale_relu": [{"op": "bias", "bias": bias_h}, {"op": "scale", "factor": -0.5},
                            {"op": "relu"}],
        "add": [{"op": "add", "other": other_h}],
        "k_tile_scale": [{"op": "scale", "factor": 3.0, "scope": "k_tile"}],
    }[name]


@pytest.mark.parametrize("name", sorted(EPILOGUES))
def test_composite_epilogues_equal_numpy(small_graph, name):
    rng = np.random.default_rng(8)
    a, b, acc = _gemm_inputs(EM, EK, EN, seed=8)
    bias = rng.standard_normal((1, EN)).astype(np.float32)
    other = rng.standard_normal((EM, EN)).astype(np.float32)

    def kernel(pa, pb, pbias, pother, pc, *, tl):
        bias_h = tl.load(pbias, (1, EN), "f32")
        other_h = tl.load(pother, (EM, EN), "f32")
        tl.wait(tl.composite("gemm", a=tl.ref(pa, (EM, EK)), b=tl.ref(pb, (EK, EN)), out_ptr=pc,
                             epilogue=_epilogue_items(name, bias_h, other_h)))

    eng = GraphEngine(small_graph, enable_data=True)
    ctx = RuntimeContext(eng)
    ts = [ctx.from_numpy(x) for x in (a, b, bias, other)]
    tc = ctx.empty((EM, EN), "f32")
    ctx.wait(ctx.launch(f"epi_{name}", kernel, *ts, tc))
    np.testing.assert_allclose(ctx.to_numpy(tc), EPILOGUES[name](acc, bias, other),
                               rtol=RTOL, atol=ATOL)


def k_math_composite_scaled(x, o, *, tl):
    xh = tl.load(x, (16, 64), "f32")
    tl.store(o, tl.composite("math", math_op="exp", a=xh, epilogue=[{"op": "scale", "factor": 2.0}]))


def k_math_composite(x, o, *, tl):
    xh = tl.load(x, (16, 64), "f32")
    tl.store(o, tl.composite("math", math_op="exp", a=xh))


def _run_math(graph, kernel):
    x = np.random.default_rng(9).standard_normal((16, 64)).astype(np.float32)
    eng = GraphEngine(graph, enable_data=True)
    ctx = RuntimeContext(eng)
    tx, to = ctx.from_numpy(x), ctx.empty((16, 64), "f32")
    ctx.wait(ctx.launch(kernel.__name__, kernel, tx, to))
    return x, ctx.to_numpy(to)


def test_math_composite_equals_numpy(small_graph):
    x, out = _run_math(small_graph, k_math_composite)
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-6)


def test_math_composite_epilogue_is_applied(small_graph):
    x, out = _run_math(small_graph, k_math_composite_scaled)
    np.testing.assert_allclose(out, 2.0 * np.exp(x), rtol=1e-6)


# -- 1-D tensors ------------------------------------------------------------------------------------------------------------------------
def k_load_store_1d(x, o, *, tl):
    tl.store(o, tl.load(x, (256,), "f32") * 2.0)


def test_one_dimensional_load_and_store(small_graph):
    x = np.random.default_rng(10).standard_normal(256).astype(np.float32)
    eng = GraphEngine(small_graph, enable_data=True)
    ctx = RuntimeContext(eng)
    tx, to = ctx.from_numpy(x), ctx.empty((256,), "f32")
    ctx.wait(ctx.launch("load_1d", k_load_store_1d, tx, to))
    np.testing.assert_array_equal(ctx.to_numpy(to), x * 2)
