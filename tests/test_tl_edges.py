"""Edge cases of the `tl` and host APIs found while writing their references."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.errors import KernelMisuse, KernelStateError, KernelTypeError
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api import PerSip, RuntimeContext
from kernbench.sim_engine import GraphEngine
from kernbench.triton_emu.kernel_runner import KernelError
from kernbench.triton_emu.tl_context import TLContext, run_kernel


def _data_ctx(graph):
    return RuntimeContext(GraphEngine(graph, enable_data=True))


def test_a_kernel_scope_epilogue_runs_once_over_the_whole_output(small_graph):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((32, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)

    def k(a_ptr, b_ptr, out_ptr, *, tl):
        out = tl.composite("gemm", a=tl.ref(a_ptr, (32, 64)), b=tl.ref(b_ptr, (64, 64)),
                           epilogue=[{"op": "relu", "scope": "kernel"}])
        tl.store(out_ptr, out)

    ctx = _data_ctx(small_graph)
    ta, tb = ctx.from_numpy(a), ctx.from_numpy(b)
    tc = ctx.empty((32, 64), "f32")
    eng = ctx.engine
    ctx.wait(ctx.launch("k", k, ta, tb, tc))
    want = np.maximum(a.astype(np.float32) @ b.astype(np.float32), 0.0)
    np.testing.assert_allclose(ctx.to_numpy(tc), want, rtol=1e-5, atol=1e-5)
    relu = [r for r in eng.op_log.records if r.op_name == "relu"]
    assert len(relu) == 1 and relu[0].params["elements"] == 32 * 64  # once, over everything


def test_a_kernel_scope_epilogue_needs_a_tcm_output():
    def k(*, tl):
        tl.composite("gemm", a=tl.ref(0, (32, 64)), b=tl.ref(1 << 20, (64, 32)), out_ptr=2 << 20,
                     epilogue=[{"op": "relu", "scope": "kernel"}])

    with pytest.raises(KernelMisuse, match="must then be in TCM"):
        run_kernel(k, TLContext())


@pytest.mark.parametrize("item,error", [({"op": "bias", "bias": 1.0}, "must be a tensor"),
                                        ({"op": "scale", "factor": "2"}, "must be a number")])
def test_epilogue_fields_have_the_right_kind(item, error):
    def k(*, tl):
        tl.composite("gemm", a=tl.ref(0, (32, 64)), b=tl.ref(1 << 20, (64, 32)), epilogue=[item])

    with pytest.raises(KernelTypeError, match=error):
        run_kernel(k, TLContext())


def test_where_takes_the_dtype_of_its_values_and_scalars_stay_f32():
    got = {}

    def k(*, tl):
        cond = tl.zeros((4,), "bool")
        a = tl.zeros((4,), "bf16")
        got["where"] = tl.where(cond, a, a).dtype
        x = a * 0.1  # the 0.1 must not be rounded to bf16 before the multiply
        got["mul"] = x.dtype

    tl = TLContext()
    run_kernel(k, tl)
    assert got["where"] == "bf16" and got["mul"] == "bf16"
    mul = [c for c in tl.commands if getattr(c, "op", "") == "mul"][0]
    assert mul.inputs[1].dtype == "f32"


def test_repeat_counts_negative_axes_from_the_end():
    shapes = []

    def k(*, tl):
        shapes.append(tl.repeat(tl.zeros((4,), "f32"), -1, 3).shape)
        shapes.append(tl.repeat(tl.zeros((4, 1), "f32"), -1, 3).shape)
        shapes.append(tl.repeat(tl.zeros((4,), "f32"), 0, 3).shape)

    run_kernel(k, TLContext())
    assert shapes == [(4, 3), (4, 3), (3, 4)]
    with pytest.raises(KernelMisuse, match="out of range"):
        run_kernel(lambda *, tl: tl.repeat(tl.zeros((4,), "f32"), 5, 3), TLContext())


def test_keyword_tensors_and_per_sip_keywords_are_converted(default_graph):
    seen = {}

    def k(*, tl, x, tag):
        seen[tl.program_id(2)] = (x, tag)

    ctx = RuntimeContext(GraphEngine(default_graph))
    t0 = ctx.empty((8,), "f32", name="t0")
    ctx.set_device(1)
    t1 = ctx.empty((8,), "f32", name="t1")
    ctx.wait(ctx.launch("k", k, x=PerSip({0: t0, 1: t1}), tag=PerSip({0: "a", 1: "b"}),
                        sips="all"))
    assert seen == {0: (t0.ptr(0, 0, 0), "a"), 1: (t1.ptr(0, 0, 1), "b")}


def test_launching_onto_a_busy_pe_is_refused_before_anything_is_allocated(small_graph):
    def slow(*, tl):
        tl.cycles(10_000)

    ctx = RuntimeContext(GraphEngine(small_graph))
    ctx.launch("first", slow)
    with pytest.raises(KernelStateError, match="still running 'first'"):
        ctx.launch("second", slow)
    ctx.wait_all()
    ctx.wait(ctx.launch("third", slow))  # fine once the first has finished


def test_an_address_outside_the_placement_is_named_as_such(small_graph):
    ctx = _data_ctx(small_graph)
    x = ctx.from_numpy(np.ones((4, 16), np.float32), dp=DPPolicy(num_pes=1), name="x")

    def k(ptr, *, tl):
        tl.load(ptr, (4, 16), "f32")

    with pytest.raises(KernelError, match="tensor 'x' of this SIP, which this PE does not map"):
        ctx.wait(ctx.launch("k", k, x.va, dp=DPPolicy(num_pes=2)))  # PE 1 has no shard of x


def test_handle_operators_issue_the_tl_op_with_their_operands_in_order():
    """``a - b``, ``2.0 * a`` and ``1.0 / a`` are tl.sub / tl.mul / tl.div (a reflected
    operator keeps the number first); outside a kernel they are a clear error."""

    def kernel(*, tl):
        x = tl.zeros((4, 8), "f32")
        y = tl.zeros((4, 8), "f32")
        x - y
        2.0 * x
        1.0 / x
        x + y

    cmds = run_kernel(kernel, TLContext(executor=None))
    math = [c for c in cmds if type(c).__name__ == "MathCmd"]
    assert [c.op for c in math] == ["sub", "mul", "div", "add"]
    sub, mul, div, _ = math
    assert sub.inputs[0].shape == sub.inputs[1].shape == (4, 8)
    assert mul.inputs[0].shape == (1,) and mul.inputs[1].shape == (4, 8)  # number first
    assert div.inputs[0].shape == (1,) and div.inputs[1].shape == (4, 8)
    handle = math[0].inputs[0]
    with pytest.raises(KernelStateError, match="no active TLContext"):
        handle + handle
