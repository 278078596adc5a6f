"""``tl.scratch_scope`` recycles per-tile kernel scratch.

Covers the bounded peak, correctness with and
without scopes, a long sweep that only fits with scopes, persistent state
across scope exits, nesting) and the use-after-scope error.
"""

from __future__ import annotations

import contextlib
import gc
import math

import numpy as np
import pytest

from kernbench.isa.handles import TensorHandle
from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine import GraphEngine
from kernbench.triton_emu.kernel_runner import KernelError
from kernbench.triton_emu.tl_context import ScratchOverflow, TLContext, run_kernel

F16 = 2
G, D, TILE = 8, 64, 64


def flash_sweep(q, kT, v, o_out, l_out, G, d, S, tile, scale, *, tl, use_scope=True):
    """Online-softmax attention over S keys; K stored transposed ([d, S])."""
    qh = tl.load(q, (G, d), "f16")
    m = tl.full((G, 1), float("-inf"), "f32")
    l = tl.zeros((G, 1), "f32")
    O = tl.zeros((G, d), "f32")
    for j in range(S // tile):
        with tl.scratch_scope() if use_scope else contextlib.nullcontext():
            kt = tl.load(kT + j * tile * F16, (d, tile), "f16", row_stride=S)
            vt = tl.load(v + j * tile * d * F16, (tile, d), "f16")
            s = tl.dot(qh, kt) * scale
            m2 = tl.maximum(m, tl.max(s, -1))
            p = tl.exp(s - m2)
            corr = tl.exp(m - m2)
            l_new = l * corr + tl.sum(p, -1)
            o_new = O * corr + tl.dot(p, vt)
            tl.copy_to(m, m2)
            tl.copy_to(l, l_new)
            tl.copy_to(O, o_new)
    tl.store(o_out, O)
    tl.store(l_out, l)


def _root_cause(exc: BaseException) -> BaseException:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def _cmdlist_peak(n_tiles: int, use_scope: bool, scratch_size: int = 1 << 30) -> int:
    tl = TLContext(executor=None, scratch_size=scratch_size)
    run_kernel(flash_sweep, tl, 0x1000, 0x100000, 0x900000, 0x2000000, 0x2100000, G, D,
               n_tiles * TILE, TILE, 0.125, use_scope=use_scope)
    return tl.peak_scratch


def _inputs(n_tiles: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    S = n_tiles * TILE
    q = rng.standard_normal((G, D)).astype(np.float16)
    k = rng.standard_normal((S, D)).astype(np.float16)
    v = rng.standard_normal((S, D)).astype(np.float16)
    return q, k, v


def _attention(q, k, v):
    s = (q.astype(np.float32) @ k.astype(np.float32).T) / math.sqrt(q.shape[1])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float32)


def _run_sweep(graph, n_tiles: int, use_scope: bool, seed: int = 0):
    q, k, v = _inputs(n_tiles, seed)
    eng = GraphEngine(graph, enable_data=True)
    ctx = RuntimeContext(eng)
    tq, tk, tv = ctx.from_numpy(q), ctx.from_numpy(np.ascontiguousarray(k.T)), ctx.from_numpy(v)
    o, l_ = ctx.empty((G, D), "f32"), ctx.empty((G, 1), "f32")
    ctx.wait(ctx.launch("flash", flash_sweep, tq, tk, tv, o, l_, G, D, n_tiles * TILE, TILE,
                        1.0 / math.sqrt(D), use_scope=use_scope))
    return ctx.to_numpy(o), ctx.to_numpy(l_), _attention(q, k, v)


# -- 1. recycling: peak independent of N -----------------------------------------------------------
def test_peak_scratch_is_bounded_independent_of_the_tile_count():
    n = 4
    scoped = _cmdlist_peak(n, True)
    assert _cmdlist_peak(4 * n, True) == scoped
    # bounded by one tile's footprint: the same as a single unscoped tile
    assert scoped == _cmdlist_peak(1, False)
    # without scopes the footprint grows linearly with N
    grow = _cmdlist_peak(2, False) - _cmdlist_peak(1, False)
    assert grow > 0
    assert _cmdlist_peak(4 * n, False) == pytest.approx(_cmdlist_peak(1, False) + (4 * n - 1) * grow,
                                                        abs=64)


# -- 2. correctness with and without scopes (data mode) -------------------------------------------
def test_sweep_with_scopes_matches_the_sweep_without(small_graph):
    o_s, l_s, ref = _run_sweep(small_graph, 4, True)
    o_n, l_n, _ = _run_sweep(small_graph, 4, False)
    np.testing.assert_allclose(o_s / l_s, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(o_s, o_n)
    np.testing.assert_array_equal(l_s, l_n)


# -- 3. long context ----------------------------------------------------------------------------------------
def _long_tile_count(graph) -> int:
    """A tile count whose unscoped sweep does not fit the PE's kernel scratch."""
    budget = graph.spec.raw["pe"]["tcm"]["kernel_scratch_kb"] * 1024
    base = _cmdlist_peak(1, False)
    per_tile = _cmdlist_peak(2, False) - base
    return (budget - base) // per_tile + 4


def test_long_sweep_overflows_without_scopes_in_command_list_mode(small_graph):
    n = _long_tile_count(small_graph)
    budget = small_graph.spec.raw["pe"]["tcm"]["kernel_scratch_kb"] * 1024
    assert _cmdlist_peak(n, False) > budget
    with pytest.raises(ScratchOverflow, match="scratch_scope"):
        _cmdlist_peak(n, False, scratch_size=budget)
    assert _cmdlist_peak(n, True, scratch_size=budget) <= budget


def test_long_sweep_completes_with_scopes_only(small_graph):
    n = _long_tile_count(small_graph)
    with pytest.raises(KernelError) as info:
        _run_sweep(small_graph, n, False)
    assert isinstance(_root_cause(info.value), ScratchOverflow)
    assert "ScratchOverflow" in str(info.value)
    o, l_, ref = _run_sweep(small_graph, n, True)
    np.testing.assert_allclose(o / l_, ref, rtol=1e-4, atol=1e-5)


# -- 4. persistent vs scoped ------------------------------------------------------------------------------------
R, C, STEPS = 16, 32, 4


def k_persistent(x, o, addr_out, *, tl):
    acc = tl.zeros((R, C), "f32")  # persistent: allocated outside every scope
    addrs = []
    for i in range(STEPS):
        with tl.scratch_scope():
            t = tl.load(x + i * R * C * 4, (R, C), "f32")
            tl.copy_to(acc, acc + t)
            addrs.append(t.addr)
        with tl.scratch_scope():  # scribble over the recycled region
            junk = tl.full((R, C), 1.0e4, "f32")
            tl.copy_to(junk, junk * 3.0)
            addrs.append(junk.addr)
    tl.store(o, acc)
    addr_out.extend(addrs)


def test_persistent_tensors_keep_their_values_across_scope_exits(small_graph):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((STEPS * R, C)).astype(np.float32)
    eng = GraphEngine(small_graph, enable_data=True)
    ctx = RuntimeContext(eng)
    tx, to = ctx.from_numpy(x), ctx.empty((R, C), "f32")
    addrs: list[int] = []
    ctx.wait(ctx.launch("persistent", k_persistent, tx, to, addrs))
    out = ctx.to_numpy(to)
    np.testing.assert_allclose(out, x.reshape(STEPS, R, C).sum(axis=0), rtol=1e-5, atol=1e-5)
    # the scoped region really was recycled: every scope got the same address
    assert len(set(addrs)) == 1


# -- 5. nesting -----------------------------------------------------------------------------------------------------------
def test_nested_scopes_rewind_to_their_own_save_points():
    seen = {}

    def kernel(*, tl):
        seen["a"] = tl.zeros((10, 10), "f32")
        with tl.scratch_scope():
            seen["b"] = tl.zeros((20, 20), "f32")
            with tl.scratch_scope():
                seen["c"] = tl.zeros((30, 30), "f32")
                seen["c2"] = tl.zeros((5, 5), "f32")
            seen["d"] = tl.zeros((8, 8), "f32")  # inner exit: back to where c began
            with tl.scratch_scope():
                seen["e"] = tl.zeros((7, 7), "f32")
            seen["f"] = tl.zeros((6, 6), "f32")
        seen["g"] = tl.zeros((4, 4), "f32")  # outer exit: back to where b began

    tl = TLContext(executor=None)
    run_kernel(kernel, tl)
    a, b, c, c2, d, e, f, g = (seen[k] for k in "a b c c2 d e f g".split())
    assert len({a.addr, b.addr, c.addr, c2.addr}) == 4
    assert d.addr == c.addr
    assert e.addr > d.addr and f.addr == e.addr
    assert g.addr == b.addr
    # the peak is the deepest stack: a + b + c + c2, each rounded up to 64 bytes
    expected_peak = (c2.addr - a.addr) + (-(-5 * 5 * 4 // 64) * 64)
    assert tl.peak_scratch == expected_peak


# -- use after scope ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("use", ["math", "dot", "store", "copy_to", "broadcast", "load_out"])
def test_using_a_handle_after_its_scope_raises(use):
    def kernel(*, tl):
        keep = tl.zeros((8, 8), "f32")
        with tl.scratch_scope():
            dead = tl.zeros((8, 8), "f32")
            tl.exp(dead)  # fine inside the scope
        if use == "math":
            tl.exp(dead)
        elif use == "dot":
            tl.dot(keep, dead)
        elif use == "store":
            tl.store(0x1000, dead)
        elif use == "copy_to":
            tl.copy_to(keep, dead)
        elif use == "broadcast":
            tl.broadcast(dead, (8, 8))
        else:
            tl.load(0x1000, (8, 8), "f32", out=dead)

    with pytest.raises(ValueError, match="scratch_scope"):
        run_kernel(kernel, TLContext(executor=None))


def test_use_after_scope_in_a_running_kernel_names_the_error(small_graph):
    def k_use_after_scope(*, tl):
        with tl.scratch_scope():
            dead = tl.zeros((8, 8), "f32")
        tl.exp(dead)

    eng = GraphEngine(small_graph)
    ctx = RuntimeContext(eng)
    with pytest.raises(KernelError, match="scratch_scope") as info:
        ctx.wait(ctx.launch("use_after_scope", k_use_after_scope))
    assert isinstance(_root_cause(info.value), ValueError)
    assert "use_after_scope" in str(info.value)


@pytest.mark.parametrize("view", [
    "trans",
    "reshape",
])
def test_a_view_of_a_scoped_handle_dies_with_the_scope(view):
    def kernel(*, tl):
        with tl.scratch_scope():
            x = tl.zeros((4, 8), "f32")
            alias = tl.trans(x) if view == "trans" else tl.reshape(x, (8, 4))
        tl.exp(alias)

    with pytest.raises(ValueError, match="scratch_scope"):
        run_kernel(kernel, TLContext(executor=None))


def test_a_dead_handle_as_recipe_operand_raises():
    def kernel(*, tl):
        m = tl.full((8, 1), -1e30, "f32")
        l = tl.zeros((8, 1), "f32")
        O = tl.zeros((8, 16), "f32")
        with tl.scratch_scope():
            s = tl.zeros((8, 32), "f32")
        tl.composite("gemm", b=tl.ref(0x1000, (32, 16), "f16"), out=O,
                     prologue=[{"op": "softmax_merge", "s": s, "m": m, "l": l, "O": O}])

    with pytest.raises(ValueError, match="scratch_scope"):
        run_kernel(kernel, TLContext(executor=None))


# -- in-flight readers of recycled scratch ----------------------------------------------------------------------------------
def k_composite_reads_scoped(a, b, a2, o, *, tl):
    O = tl.zeros((32, 64), "f32")
    # owns O for a while, so the composite below (same O) is queued behind it
    tl.composite("gemm", a=tl.ref(a, (32, 64), "f16"), b=tl.ref(b, (64, 64), "f16"), out=O,
                 epilogue=[{"op": "add", "other": O}])
    with tl.scratch_scope():
        x = tl.load(a2, (32, 64), "f16")
        tl.composite("gemm", a=x, b=tl.ref(b, (64, 64), "f16"), out=O,
                     epilogue=[{"op": "add", "other": O}])
    with tl.scratch_scope():
        tl.full((32, 64), 100.0, "f16")  # reuses x's bytes
    tl.wait()
    tl.store(o, O)


def test_scope_exit_waits_for_in_flight_readers(small_graph):
    rng = np.random.default_rng(9)
    a = rng.standard_normal((32, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    a2 = rng.standard_normal((32, 64)).astype(np.float16)
    eng = GraphEngine(small_graph, enable_data=True)
    ctx = RuntimeContext(eng)
    ta, tb, ta2 = (ctx.from_numpy(x) for x in (a, b, a2))
    to = ctx.empty((32, 64), "f32")
    ctx.wait(ctx.launch("reads_scoped", k_composite_reads_scoped, ta, tb, ta2, to))
    expected = (a.astype(np.float32) + a2.astype(np.float32)) @ b.astype(np.float32)
    np.testing.assert_allclose(ctx.to_numpy(to), expected, rtol=1e-5, atol=1e-3)


# -- 6. a long kernel does not keep what its scopes made ----------------------------------------------------
def _handles_alive_after_sweep(graph, n_tiles: int) -> int:
    """TensorHandles still alive once a timing-mode sweep of ``n_tiles`` has run, its
    engine and context kept: what the simulation itself holds on to."""
    eng = GraphEngine(graph)
    ctx = RuntimeContext(eng)
    tq, tk, tv = ctx.empty((G, D)), ctx.empty((D, n_tiles * TILE)), ctx.empty((n_tiles * TILE, D))
    o, l_ = ctx.empty((G, D), "f32"), ctx.empty((G, 1), "f32")
    ctx.wait(ctx.launch("flash", flash_sweep, tq, tk, tv, o, l_, G, D, n_tiles * TILE, TILE,
                        0.125))
    gc.collect()
    alive = sum(1 for x in gc.get_objects() if isinstance(x, TensorHandle))
    assert eng.env.now > 0.0 and ctx is not None  # both alive up to here
    return alive


def test_handles_of_ended_scopes_are_released(small_graph):
    # each tile's scope allocates about ten handles; none may outlive the kernel's use
    # of it (a table of every handle ever made grew with the tiles: 153 of 709 MB in a
    # 16K-token causal prefill)
    few = _handles_alive_after_sweep(small_graph, 2)
    many = _handles_alive_after_sweep(small_graph, 26)
    assert many - few < 24 * 2, (few, many)
