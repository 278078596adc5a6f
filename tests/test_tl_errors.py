"""Kernel misuse fails early and says what is wrong, where.

Emit-time validation of ``tl`` calls, :class:`KernelError` naming the kernel,
the PE and the source line, deadlock detection naming the blocked PE, and the
scratch-overflow hint.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from kernbench.errors import SimulationError
from kernbench.isa.handles import Completion
from kernbench.runtime_api import DPPolicy, RuntimeContext
from kernbench.sim_engine import GraphEngine
from kernbench.triton_emu.kernel_runner import KernelError
from kernbench.triton_emu.tl_context import ScratchOverflow, TLContext, run_kernel


def _emit(kernel, **ctx_kwargs):
    tl = TLContext(executor=None, **ctx_kwargs)
    run_kernel(kernel, tl)
    return tl


def _root_cause(exc: BaseException) -> BaseException:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


# -- emit-time validation -------------------------------------------------------------------------------
CASES = {
    "dot_on_hbm_refs": (lambda tl: tl.dot(tl.ref(0x1000, (32, 64)), tl.ref(0x2000, (64, 32))),
                        "TCM"),
    "dot_on_one_hbm_ref": (lambda tl: tl.dot(tl.zeros((32, 64)), tl.ref(0x2000, (64, 32))),
                           "TCM"),
    "dot_shapes_do_not_chain": (lambda tl: tl.dot(tl.zeros((32, 64)), tl.zeros((32, 64))),
                                "do not chain"),
    "dot_bad_acc": (lambda tl: tl.dot(tl.zeros((8, 4)), tl.zeros((4, 8)),
                                      acc=tl.zeros((8, 4), "f32")), "acc"),
    "math_shapes_do_not_broadcast": (lambda tl: tl.add(tl.zeros((4, 8)), tl.zeros((4, 3))),
                                     "do not broadcast"),
    "math_on_hbm_ref": (lambda tl: tl.exp(tl.ref(0x1000, (4, 8))), "TCM"),
    "reduce_axis_out_of_range": (lambda tl: tl.sum(tl.zeros((4, 8)), axis=2), "axis"),
    "copy_to_shape_mismatch": (lambda tl: tl.copy_to(tl.zeros((4, 8)), tl.zeros((8, 4))),
                               "equal shapes"),
    "reshape_changes_size": (lambda tl: tl.reshape(tl.zeros((4, 8)), (5, 6)), "element counts"),
    "trans_needs_2d": (lambda tl: tl.trans(tl.zeros((2, 4, 8))), "2-D"),
    "store_of_hbm_view": (lambda tl: tl.store(0x2000, tl.ref(0x1000, (4, 8))), "TCM"),
    "load_out_wrong_shape": (lambda tl: tl.load(0x1000, (4, 8), "f16", out=tl.zeros((8, 4))),
                             "out="),
    "unknown_dtype": (lambda tl: tl.load(0x1000, (4, 8), "f64"), "dtype"),
    "bad_row_stride": (lambda tl: tl.ref(0x1000, (4, 8), row_stride=4), "row_stride"),
    "unknown_epilogue_op": (lambda tl: tl.composite(
        "gemm", a=tl.zeros((32, 64)), b=tl.zeros((64, 32)), epilogue=[{"op": "tanh"}]),
        "unknown epilogue op"),
    "epilogue_missing_field": (lambda tl: tl.composite(
        "gemm", a=tl.zeros((32, 64)), b=tl.zeros((64, 32)), epilogue=[{"op": "bias"}]),
        "needs field"),
    "epilogue_unknown_field": (lambda tl: tl.composite(
        "gemm", a=tl.zeros((32, 64)), b=tl.zeros((64, 32)),
        epilogue=[{"op": "scale", "factor": 2.0, "bias": 1.0}]), "unknown field"),
    "epilogue_not_a_dict": (lambda tl: tl.composite(
        "gemm", a=tl.zeros((32, 64)), b=tl.zeros((64, 32)), epilogue=["relu"]), "'op'"),
    "epilogue_bad_scope": (lambda tl: tl.composite(
        "gemm", a=tl.zeros((32, 64)), b=tl.zeros((64, 32)),
        epilogue=[{"op": "relu", "scope": "forever"}]), "scope"),
    "unknown_composite_op": (lambda tl: tl.composite("conv", a=tl.zeros((32, 64))),
                             "'gemm' or 'math'"),
    "composite_math_op_not_unary": (lambda tl: tl.composite(
        "math", math_op="add", a=tl.zeros((4, 8))), "unary"),
    "composite_gemm_missing_b": (lambda tl: tl.composite("gemm", a=tl.zeros((32, 64))),
                                 "needs a and b"),
    "composite_shapes_do_not_chain": (lambda tl: tl.composite(
        "gemm", a=tl.zeros((32, 64)), b=tl.zeros((32, 64))), "do not chain"),
    "composite_out_and_out_ptr": (lambda tl: tl.composite(
        "gemm", a=tl.zeros((32, 64)), b=tl.zeros((64, 32)), out=tl.zeros((32, 32), "f32"),
        out_ptr=0x1000), "not both"),
    "composite_out_wrong_shape": (lambda tl: tl.composite(
        "gemm", a=tl.zeros((32, 64)), b=tl.zeros((64, 32)), out=tl.zeros((32, 8), "f32")),
        "shape"),
    "unknown_recipe": (lambda tl: tl.composite(
        "gemm", b=tl.zeros((64, 32)), prologue=[{"op": "layernorm"}]), "unknown prologue recipe"),
    "recipe_unknown_operand": (lambda tl: tl.composite(
        "gemm", b=tl.zeros((64, 32)), prologue=[{"op": "softmax_merge", "x": tl.zeros((4, 4))}]),
        "unknown operand"),
    "recipe_missing_operand": (lambda tl: tl.composite(
        "gemm", b=tl.zeros((64, 32)), prologue=[{"op": "softmax_merge", "s": tl.zeros((4, 64))}]),
        "needs operand"),
    "program_id_axis": (lambda tl: tl.program_id(3), "axis"),
    "program_id_negative_axis": (lambda tl: tl.program_id(-1), "axis"),
    "num_programs_axis": (lambda tl: tl.num_programs(3), "axis"),
    "negative_cycles": (lambda tl: tl.cycles(-1), "n >= 0"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_misuse_raises_a_clear_value_error_at_emit(name):
    body, message = CASES[name]

    def kernel(*, tl):
        body(tl)

    tl = TLContext(executor=None)
    with pytest.raises(ValueError, match=message):
        run_kernel(kernel, tl)
    assert tl.commands == []  # nothing reached the PE


def test_wrong_argument_types_raise_type_errors():
    with pytest.raises(TypeError, match="tensor"):
        _emit(lambda *, tl: tl.exp(3.0))
    with pytest.raises(TypeError, match="tensor handle"):
        _emit(lambda *, tl: tl.dot(tl.zeros((4, 4)), "b"))


def test_tl_wait_rejects_other_objects_in_a_running_kernel(small_graph):
    def k_bad_wait(*, tl):
        tl.wait("soon")

    ctx = RuntimeContext(GraphEngine(small_graph))
    with pytest.raises(KernelError, match="tl.wait takes") as info:
        ctx.wait(ctx.launch("bad-wait", k_bad_wait))
    assert isinstance(_root_cause(info.value), TypeError)


def test_operators_outside_a_kernel_have_no_context(small_graph):
    eng = GraphEngine(small_graph)
    ctx = RuntimeContext(eng)
    ctx.wait(ctx.launch("finished", lambda *, tl: tl.cycles(3)))
    before = eng.pe(0, 0, 0).cpu.commands
    x = TLContext(executor=None).zeros((4, 4))
    try:
        with pytest.raises(RuntimeError, match="no active TLContext"):
            _ = x + x
    finally:
        assert eng.pe(0, 0, 0).cpu.commands == before


def test_program_ids_follow_the_launch_grid(small_graph):
    seen = []

    def k_ids(*, tl):
        seen.append((tl.program_id(0), tl.num_programs(0), tl.program_id(1), tl.num_programs(1)))

    ctx = RuntimeContext(GraphEngine(small_graph))
    ctx.wait(ctx.launch("ids", k_ids, dp=DPPolicy(num_pes=4)))
    assert sorted(seen) == [(pe, 4, 0, 1) for pe in range(4)]


# -- KernelError names kernel, PE and source line -------------------------------------------------------------
def k_raises(x, *, tl):
    a = tl.zeros((32, 64))
    tl.dot(a, a)  # shapes do not chain


def test_kernel_error_names_the_kernel_pe_and_line(small_graph):
    ctx = RuntimeContext(GraphEngine(small_graph))
    lines, start = inspect.getsourcelines(k_raises)
    bad_line = start + next(i for i, ln in enumerate(lines) if "tl.dot(a, a)" in ln)
    with pytest.raises(KernelError) as info:
        ctx.wait(ctx.launch("my-broken-kernel", k_raises, 7))
    msg = str(info.value)
    assert "'my-broken-kernel'" in msg
    assert "sip0.cube0.pe0" in msg
    assert f"{Path(__file__).name}:{bad_line}" in msg
    assert "KernelMisuse" in msg and "do not chain" in msg
    assert isinstance(info.value, SimulationError)
    assert isinstance(_root_cause(info.value), ValueError)


def test_kernel_error_names_the_failing_pe_of_a_grid(small_graph):
    def k_pe3_fails(*, tl):
        if tl.program_id(0) == 3:
            raise RuntimeError("only PE 3 breaks")
        tl.cycles(10)

    ctx = RuntimeContext(GraphEngine(small_graph))
    with pytest.raises(KernelError, match=r"sip0\.cube0\.pe3") as info:
        ctx.wait(ctx.launch("grid", k_pe3_fails, dp=DPPolicy(num_pes=4)))
    assert "only PE 3 breaks" in str(info.value)
    assert "RuntimeError" in str(info.value)


# -- deadlock -------------------------------------------------------------------------------------------------------------------------
def test_a_kernel_waiting_forever_is_a_deadlock_naming_the_pe(small_graph):
    eng = GraphEngine(small_graph)
    ctx = RuntimeContext(eng)

    def k_waits_forever(*, tl):
        tl.cycles(5)
        tl.wait(Completion(event=eng.env.event(), label="never"))

    with pytest.raises(SimulationError, match="deadlock") as info:
        ctx.wait(ctx.launch("stuck", k_waits_forever, dp=DPPolicy(num_pes=2)))
    msg = str(info.value)
    assert "sip0.cube0.pe0" in msg and "sip0.cube0.pe1" in msg and "stuck" in msg
    assert "2 kernel(s)" in msg
    assert not isinstance(info.value, KernelError)


def test_only_the_blocked_pe_is_named(small_graph):
    eng = GraphEngine(small_graph)
    ctx = RuntimeContext(eng)

    def k_pe1_waits(*, tl):
        tl.cycles(5)
        if tl.program_id(0) == 1:
            tl.wait(Completion(event=eng.env.event(), label="never"))

    with pytest.raises(SimulationError, match="deadlock") as info:
        ctx.wait(ctx.launch("half-stuck", k_pe1_waits, dp=DPPolicy(num_pes=2)))
    msg = str(info.value)
    assert "sip0.cube0.pe1" in msg and "sip0.cube0.pe0" not in msg
    assert "1 kernel(s)" in msg


# -- scratch overflow -------------------------------------------------------------------------------------------------------------------
def test_scratch_overflow_points_at_scratch_scope():
    def kernel(*, tl):
        for _ in range(20):
            tl.zeros((64, 64), "f32")  # 16 KiB each

    with pytest.raises(ScratchOverflow, match=r"tl\.scratch_scope") as info:
        _emit(kernel, scratch_size=64 * 1024)
    assert "65536" in str(info.value)


def test_scratch_overflow_in_a_running_kernel(small_graph):
    budget = small_graph.spec.raw["pe"]["tcm"]["kernel_scratch_kb"] * 1024

    def k_too_big(*, tl):
        tl.zeros((budget // 4 + 16,), "f32")

    ctx = RuntimeContext(GraphEngine(small_graph))
    with pytest.raises(KernelError, match="scratch_scope") as info:
        ctx.wait(ctx.launch("too-big", k_too_big))
    assert isinstance(_root_cause(info.value), ScratchOverflow)
    assert "sip0.cube0.pe0" in str(info.value)
