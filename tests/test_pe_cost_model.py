"""PE_CPU dispatch cost ``FIXED(type) + logical_bytes x R`` (docs/adr/0011-pe-dispatch-cost.md).

Covers the formula identity, the opt3/opt2 per-tile ratio, the topology
override, the ``tl.cycles`` bypass, no double count, determinism,
command-list/greenlet parity, the descriptor cap, R sensitivity and per-op
summation of descriptor bytes (no handle de-duplication).
"""

from __future__ import annotations

import math
import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml

from kernbench.components.builtin.pe_cost_model import PeCostModel
from kernbench.isa.commands import (
    BroadcastCmd,
    CompositeCmd,
    CopyCmd,
    DmaReadCmd,
    DmaWriteCmd,
    GemmCmd,
    MathCmd,
    PeCpuOverheadCmd,
)
from kernbench.isa.handles import TensorHandle
from kernbench.isa.ops import OpSpec, Scope
from kernbench.kernels.attention_decode import decode_opt2, decode_opt3
from kernbench.kernels.gemm import gemm_composite, gemm_prefetch, gemm_primitive
from kernbench.sim_engine import GraphEngine
from kernbench.topology import load_topology
from kernbench.triton_emu.kernel_runner import KernelError
from kernbench.triton_emu.tl_context import TLContext, run_kernel

from .kernel_helpers import launch_one

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGIES = ROOT / "config" / "topologies"
PE = "sip0.cube0.pe0"
OVERRIDE = {"fixed_per_cmd_cycles": 100, "fixed_per_single_op_cmd_cycles": 20,
            "byte_cycles_recip": 0.5, "max_composite_logical_bytes": 512}


def _small_doc(name: str) -> dict:
    return {"schema_version": 1, "extends": str(TOPOLOGIES / "default.yaml"), "name": name,
            "description": "cost-model test topology",
            "system": {"sips": {"count": 1, "topology": "ring_1d", "w": 1, "h": 1}},
            "sip": {"cube_mesh": {"w": 2, "h": 2}}}


def _write(dirpath: Path, name: str, doc: dict) -> Path:
    path = dirpath / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    # same cube geometry as small_2x2: reuse its mesh instead of regenerating it
    shutil.copy(TOPOLOGIES / "small_2x2.cube_mesh.yaml", dirpath / f"{name}.cube_mesh.yaml")
    return path


@pytest.fixture(scope="module")
def topo_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cost_model_topologies")


@pytest.fixture(scope="module")
def override_graph(topo_dir):
    doc = _small_doc("cm_override")
    doc["pe"] = {"pe_cost_model": dict(OVERRIDE)}
    return load_topology(_write(topo_dir, "cm_override", doc))


@pytest.fixture(scope="module")
def graphs(small_graph, override_graph):
    return {"default": small_graph, "override": override_graph}


# -- helpers -------------------------------------------------------------------------------------
def _run(graph, kernel, inputs, scalars=(), kwargs=None, data=False):
    eng, h, ts, _ = launch_one(graph, kernel, inputs, scalars=scalars, kwargs=kwargs, data=data)
    return eng, h, ts


def _dispatches(eng):
    return [r for r in eng.op_log.records
            if r.component_id == f"{PE}.pe_cpu" and r.op_name == "dispatch"]


def _log(eng):
    return [(r.t_start, r.t_end, r.component_id, r.op_kind, r.op_name, repr(r.params))
            for r in eng.op_log.records]


# -- kernels for the formula identity --------------------------------------------------------------------
M, K, N = 64, 128, 64
G_, T_, D_ = 8, 64, 32


def k_gemm_1op(a, b, c, *, tl):
    tl.wait(tl.composite("gemm", a=tl.ref(a, (M, K)), b=tl.ref(b, (K, N)), out_ptr=c))


def k_gemm_5op(a, b, c, bias, r, *, tl):
    bias_h = tl.load(bias, (1, N), "f32")
    r_h = tl.load(r, (M, N), "f32")
    out = tl.composite("gemm", a=tl.ref(a, (M, K)), b=tl.ref(b, (K, N)), out_ptr=c,
                       epilogue=[{"op": "bias", "bias": bias_h}, {"op": "scale", "factor": 0.5},
                                 {"op": "relu"}, {"op": "add", "other": r_h}])
    tl.wait(out)


def k_math_5op(x, y, *, tl):
    xh = tl.load(x, (M, N), "f32")
    yh = tl.load(y, (M, N), "f32")
    out = tl.composite("math", math_op="exp", a=xh,
                       epilogue=[{"op": "scale", "factor": 2.0}, {"op": "relu"},
                                 {"op": "add", "other": yh}, {"op": "gelu"}])
    tl.wait(out)


def k_recipe_10op(pm, pl, po, ps, pv, *, tl):
    m = tl.load(pm, (G_, 1), "f32")
    l = tl.load(pl, (G_, 1), "f32")
    O = tl.load(po, (G_, D_), "f32")
    s = tl.load(ps, (G_, T_), "f32")
    tl.composite("gemm", b=tl.ref(pv, (T_, D_)), out=O,
                 prologue=[{"op": "softmax_merge", "s": s, "m": m, "l": l, "O": O}],
                 epilogue=[{"op": "add", "other": O}])
    tl.wait()


# Descriptor sizes by the field table (framing 4, opcode 1, enum 1, handle 8, scalar 4,
# tuple length 1). An OpSpec is opcode + scope + len + 8/operand + 8 if out + len + extras.
_GEMM_OP = 1 + 1 + 1 + 2 * 8 + 8 + 1 + 3 * 4  # a, b, out, m/k/n           = 40
_BIAS = 1 + 1 + 1 + 8 + 1  # operand bias                                    = 12
_SCALE = 1 + 1 + 1 + 1 + 4  # extra factor                                   = 8
_UNARY_EPI = 1 + 1 + 1 + 1  # relu / gelu: opcode, scope, operand len, extra len  = 4
_ADD = 1 + 1 + 1 + 8 + 1  # operand other                                    = 12
_EXP_HEAD = 1 + 1 + 1 + 8 + 8 + 1  # operand a + out                         = 20
_RMAX = 1 + 1 + 1 + 8 + 8 + 1 + 4  # src, out, reduce_axis                   = 24
_BIN = 1 + 1 + 1 + 16 + 8 + 1  # src_a, src_b, out                           = 28
_FMA = 1 + 1 + 1 + 24 + 8 + 1  # src_a, src_b, src_c, out                    = 36
_COPY = 1 + 1 + 1 + 8 + 8 + 1  # src, out                                    = 20
_RECIPE = _RMAX + _BIN + _BIN + (_BIN + 4) + _RMAX + _FMA + (_BIN + 4) + _COPY


def _composite_bytes(ops_bytes: int, n_rw: int) -> int:
    return 4 + 1 + ops_bytes + 1 + 8 * n_rw


COMPOSITE_CASES = {
    "gemm_1op": (k_gemm_1op, [((M, K), "f16"), ((K, N), "f16"), ((M, N), "f32")], 1,
                 _composite_bytes(_GEMM_OP, 0)),
    "gemm_5op": (k_gemm_5op, [((M, K), "f16"), ((K, N), "f16"), ((M, N), "f32"), ((1, N), "f32"),
                              ((M, N), "f32")], 5,
                 _composite_bytes(_GEMM_OP + _BIAS + _SCALE + _UNARY_EPI + _ADD, 0)),
    "math_5op": (k_math_5op, [((M, N), "f32"), ((M, N), "f32")], 5,
                 _composite_bytes(_EXP_HEAD + _SCALE + _UNARY_EPI + _ADD + _UNARY_EPI, 0)),
    "recipe_10op": (k_recipe_10op, [((G_, 1), "f32"), ((G_, 1), "f32"), ((G_, D_), "f32"),
                                    ((G_, T_), "f32"), ((T_, D_), "f16")], 10,
                    _composite_bytes(_RECIPE + _GEMM_OP + _ADD, 3)),
}


# -- 1 + 3. formula identity (default and overridden model) ------------------------------------------------
@pytest.mark.parametrize("which", ["default", "override"])
@pytest.mark.parametrize("case", sorted(COMPOSITE_CASES))
def test_dispatch_recorded_equals_fixed_plus_bytes_times_r(graphs, which, case):
    kernel, inputs, n_ops, expected_bytes = COMPOSITE_CASES[case]
    eng, _, _ = _run(graphs[which], kernel, inputs)
    model = PeCostModel() if which == "default" else PeCostModel(**OVERRIDE)
    clock = graphs[which].spec.raw["pe"]["clock_ghz"]
    records = _dispatches(eng)
    composites = [r for r in records if r.params["cmd"] == "CompositeCmd"]
    assert len(composites) == 1
    (rec,) = composites
    assert len([r for r in eng.op_log.records if r.op_name.startswith("composite_")]) == 1
    comp_log = next(r for r in eng.op_log.records if r.op_name.startswith("composite_"))
    assert len(comp_log.params["ops"]) == n_ops
    assert rec.params["logical_bytes"] == expected_bytes
    expected = model.fixed_per_cmd_cycles + expected_bytes * model.byte_cycles_recip
    assert rec.params["cycles"] == pytest.approx(expected, abs=1e-9)
    assert rec.duration == pytest.approx(expected / clock, abs=1e-9)
    for r in records:  # every other command pays the single-op FIXED
        if r.params["cmd"] != "CompositeCmd":
            single = (model.fixed_per_single_op_cmd_cycles
                      + r.params["logical_bytes"] * model.byte_cycles_recip)
            assert r.params["cycles"] == pytest.approx(single, abs=1e-9)
    assert eng.pe(0, 0, 0).cpu.dispatch_cycles == pytest.approx(
        sum(r.params["cycles"] for r in records), abs=1e-9)


def test_single_op_commands_follow_the_d2_table():
    h = TensorHandle("x", 0, (8, 8), "f32", "tcm", True)
    cases = [
        (DmaReadCmd(h, h), 4 + 1 + 2 * 8 + 4),  # framing, op, src, dst, nbytes
        (DmaWriteCmd(h, h), 4 + 1 + 2 * 8 + 4),
        (GemmCmd(h, h, h), 4 + 1 + 3 * 8 + 3 * 4 + 1),  # a, b, out, m/k/n, accumulate flag
        (MathCmd("add", (h, h), h), 4 + 1 + 1 + 2 * 8 + 8 + 1),  # op, kind, ins, out, scalars len
        (MathCmd("sum", (h,), h, axis=-1), 4 + 1 + 1 + 8 + 8 + 4 + 1),
        (MathCmd("fma", (h, h, h), h, scalars=(1.0, 2.0)), 4 + 1 + 1 + 3 * 8 + 8 + 1 + 2 * 4),
        (CopyCmd(h, h), 4 + 1 + 2 * 8 + 4),
        (BroadcastCmd(h, h, (4, 2, 8)), 4 + 1 + 2 * 8 + 1 + 3 * 4),
        (PeCpuOverheadCmd(7), 0),
    ]
    model = PeCostModel()
    for cmd, expected in cases:
        assert cmd.logical_bytes == expected, type(cmd).__name__
        if not isinstance(cmd, PeCpuOverheadCmd):
            assert model.dispatch_cycles(cmd) == pytest.approx(
                model.fixed_per_single_op_cmd_cycles + expected * model.byte_cycles_recip)


# -- per-op summation, no de-duplication ------------------------------------------------------------------
def test_logical_bytes_count_every_handle_reference():
    def h(name):
        return TensorHandle(name, 0, (8, 8), "f32", "tcm", True)

    O, x, y, z = h("O"), h("x"), h("y"), h("z")
    with_o = CompositeCmd((OpSpec("mul", Scope.KERNEL, {"src_a": O, "src_b": x}),
                           OpSpec("add", Scope.KERNEL, {"src_a": O, "src_b": y}),
                           OpSpec("sub", Scope.KERNEL, {"src_a": O, "src_b": z})), (O,))
    without_o = CompositeCmd((OpSpec("mul", Scope.KERNEL, {"src_b": x}),
                              OpSpec("add", Scope.KERNEL, {"src_b": y}),
                              OpSpec("sub", Scope.KERNEL, {"src_b": z})), ())
    assert with_o.logical_bytes - without_o.logical_bytes == 4 * 8
    distinct = CompositeCmd((OpSpec("mul", Scope.KERNEL, {"src_a": h("O1"), "src_b": x}),
                             OpSpec("add", Scope.KERNEL, {"src_a": h("O2"), "src_b": y}),
                             OpSpec("sub", Scope.KERNEL, {"src_a": h("O3"), "src_b": z})),
                            (h("O4"),))
    assert with_o.logical_bytes == distinct.logical_bytes
    # an out that is also an operand is counted twice within one OpSpec
    in_place = OpSpec("mul_bcast", Scope.KERNEL, {"src_a": O, "src_b": x}, {}, O)
    assert in_place.logical_bytes == 1 + 1 + 1 + 2 * 8 + 8 + 1


# -- 2, 9. per-tile dispatch ratio opt3 / opt2 and its sensitivity to R ------------------------------------------
DG, DD, DTILE = 8, 128, 64  # the decode bench's defaults


def _decode_cmds(kernel, n_tiles: int, model: PeCostModel):
    tl = TLContext(executor=None, cost_model=model)
    return run_kernel(kernel, tl, 0x1000, 0x100000, 0x800000, 0x1000000, 0x1001000, 0x1002000,
                      DG, DD, n_tiles * DTILE, DTILE, 1.0 / math.sqrt(DD))


def per_tile_dispatch(kernel, model: PeCostModel, n: int = 4) -> float:
    """Dispatch cycles of the commands one more KV tile adds."""
    def total(tiles):
        return sum(model.dispatch_cycles(c) for c in _decode_cmds(kernel, tiles, model))

    return total(n + 1) - total(n)


def test_per_tile_stream_is_the_same_for_every_tile():
    model = PeCostModel()
    for kernel in (decode_opt3, decode_opt2):
        assert per_tile_dispatch(kernel, model, 2) == pytest.approx(
            per_tile_dispatch(kernel, model, 6))


def _per_tile_kinds(kernel, model, n=4):
    def kinds(tiles):
        return Counter(type(c).__name__ for c in _decode_cmds(kernel, tiles, model))

    return kinds(n + 1) - kinds(n)


def test_opt2_adds_two_composites_per_tile_and_opt3_many_single_ops():
    model = PeCostModel()
    assert _per_tile_kinds(decode_opt2, model) == Counter({"CompositeCmd": 2})
    opt3 = _per_tile_kinds(decode_opt3, model)
    assert opt3["CompositeCmd"] == 2
    assert sum(opt3.values()) > 2 * 2


def test_opt3_per_tile_dispatch_exceeds_twice_opt2():
    model = PeCostModel()
    opt3, opt2 = per_tile_dispatch(decode_opt3, model), per_tile_dispatch(decode_opt2, model)
    print(f"per-tile dispatch (default model): opt3 {opt3:.3f}, opt2 {opt2:.3f} cycles, "
          f"ratio {opt3 / opt2:.3f}")
    assert opt3 > 2 * opt2


def test_opt3_beats_opt2_across_r_and_the_ratio_grows_as_r_falls():
    ratios = []
    for r in (0.25, 0.0625, 0.03125):
        model = PeCostModel(byte_cycles_recip=r)
        opt3, opt2 = per_tile_dispatch(decode_opt3, model), per_tile_dispatch(decode_opt2, model)
        assert opt3 > opt2, r
        ratios.append(opt3 / opt2)
    print("opt3/opt2 per-tile ratio at R = 0.25, 0.0625, 0.03125:",
          ", ".join(f"{x:.3f}" for x in ratios))
    assert ratios[0] < ratios[1] < ratios[2]


# -- 3. override path --------------------------------------------------------------------------------------------------
def test_override_block_sets_the_engine_model(graphs):
    assert GraphEngine(graphs["override"]).cost_model == PeCostModel(**OVERRIDE)
    assert GraphEngine(graphs["default"]).cost_model == PeCostModel()


def test_override_changes_the_recorded_dispatch(graphs):
    kernel, inputs, _, nbytes = COMPOSITE_CASES["gemm_1op"]
    cycles = {}
    for which in ("default", "override"):
        eng, _, _ = _run(graphs[which], kernel, inputs)
        (rec,) = [r for r in _dispatches(eng) if r.params["cmd"] == "CompositeCmd"]
        cycles[which] = rec.params["cycles"]
    assert cycles["default"] == pytest.approx(40 + nbytes * 0.0625)
    assert cycles["override"] == pytest.approx(100 + nbytes * 0.5)


def test_defaults_come_back_without_the_block(topo_dir):
    # a topology whose whole extends chain has no pe_cost_model block
    doc = yaml.safe_load((TOPOLOGIES / "default.yaml").read_text(encoding="utf-8"))
    del doc["pe"]["pe_cost_model"]
    doc["name"] = "cm_noblock"
    doc["system"]["sips"].update(count=1, w=1, h=1)
    doc["sip"]["cube_mesh"] = {"w": 2, "h": 2}
    g = load_topology(_write(topo_dir, "cm_noblock", doc))
    assert "pe_cost_model" not in g.spec.raw["pe"]
    assert GraphEngine(g).cost_model == PeCostModel()
    # missing keys fall back to the defaults
    doc["pe"]["pe_cost_model"] = {"byte_cycles_recip": 0.25}
    doc["name"] = "cm_partial"
    g2 = load_topology(_write(topo_dir, "cm_partial", doc))
    assert GraphEngine(g2).cost_model == PeCostModel(byte_cycles_recip=0.25)


# -- 4. tl.cycles bypass ------------------------------------------------------------------------------------------------------
def k_cycles(*, tl):
    tl.cycles(123)


def k_cycles_then_math(*, tl):
    tl.cycles(50)
    tl.exp(tl.zeros((8, 8), "f32"))


@pytest.mark.parametrize("which", ["default", "override"])
def test_tl_cycles_charges_exactly_n(graphs, which):
    eng, h, _ = _run(graphs[which], k_cycles, [])
    (rec,) = _dispatches(eng)
    assert rec.params["cmd"] == "PeCpuOverheadCmd"
    assert rec.params["cycles"] == 123
    assert eng.pe(0, 0, 0).cpu.dispatch_cycles == 123
    clock = graphs[which].spec.raw["pe"]["clock_ghz"]
    assert h.kernel_ns == pytest.approx(123 / clock)
    eng2, _, _ = _run(graphs[which], k_cycles_then_math, [])
    model = eng2.cost_model
    math_cmd = MathCmd("exp", (TensorHandle("a", 0, (8, 8), "f32", "tcm", True),),
                       TensorHandle("b", 0, (8, 8), "f32", "tcm", True))
    assert eng2.pe(0, 0, 0).cpu.dispatch_cycles == pytest.approx(50 + model.dispatch_cycles(math_cmd))


# -- 5. no double count ---------------------------------------------------------------------------------------------------------
def _engine_durations(eng, units):
    out = {}
    for r in eng.op_log.records:
        if r.component_id in {f"{PE}.{u}" for u in units}:
            out.setdefault((r.component_id, r.op_name), []).append(round(r.duration, 9))
    return {k: sorted(v) for k, v in out.items()}


@pytest.mark.parametrize("kernel", [gemm_primitive, gemm_composite])
def test_engine_latencies_do_not_depend_on_the_cost_model(graphs, kernel):
    inputs = [((M, K), "f16"), ((K, N), "f16"), ((M, N), "f32")]
    units = ("pe_gemm", "pe_math", "pe_fetch_store")
    durs = {}
    for which in ("default", "override"):
        eng, _, _ = _run(graphs[which], kernel, inputs, (M, K, N))
        durs[which] = _engine_durations(eng, units)
        dispatch = sum(r.duration for r in _dispatches(eng))
        assert dispatch > 0
    assert durs["default"] == durs["override"]
    assert durs["default"], "no engine ops were recorded"
    # and they are the engines' own formulas
    # and they are the array's cycles: with m >= the array's rows every weight block of
    # the default (one row per cycle, double-buffered, pipelined) array takes m cycles
    spec = graphs["default"].spec.raw["pe"]
    rows, cols, clock = spec["gemm"]["mac_rows"], spec["gemm"]["mac_cols"], spec["clock_ghz"]
    ovh = spec["overhead_ns"]["pe_gemm"]
    eng, _, _ = _run(graphs["default"], kernel, inputs, (M, K, N))
    for r in eng.op_log.records:
        if r.component_id == f"{PE}.pe_gemm":
            m, k, n = r.params["m"], r.params["k"], r.params["n"]
            blocks = -(-k // rows) * -(-n // cols)
            expected = blocks * max(m, rows) / clock
            assert r.duration == pytest.approx(expected + ovh)


def k_load_store(x, o, *, tl):
    tl.store(o, tl.load(x, (128, 128), "f16"))


def test_dma_latency_does_not_depend_on_the_cost_model(graphs):
    durs = {}
    for which in ("default", "override"):
        eng, _, _ = _run(graphs[which], k_load_store, [((128, 128), "f16"), ((128, 128), "f16")])
        durs[which] = _engine_durations(eng, ("pe_dma",))
    assert set(durs["default"]) == {(f"{PE}.pe_dma", "dma_read"), (f"{PE}.pe_dma", "dma_write")}
    assert durs["default"] == durs["override"]


# -- 6. determinism -------------------------------------------------------------------------------------------------------------
def _decode_inputs():
    S = 4 * DTILE
    return [((DG, DD), "f16"), ((DD, S), "f16"), ((S, DD), "f16"), ((DG, 1), "f32"),
            ((DG, 1), "f32"), ((DG, DD), "f32")], (DG, DD, S, DTILE, 1.0 / math.sqrt(DD))


@pytest.mark.parametrize("kernel", [decode_opt2, decode_opt3])
def test_two_runs_give_identical_op_logs_and_latency(small_graph, kernel):
    inputs, scalars = _decode_inputs()
    runs = [_run(small_graph, kernel, inputs, scalars) for _ in range(2)]
    (e1, h1, _), (e2, h2, _) = runs
    assert _log(e1) == _log(e2)
    assert (h1.kernel_ns, h1.host_ns) == (h2.kernel_ns, h2.host_ns)
    assert e1.op_log.counts == e2.op_log.counts
    assert e1.pe(0, 0, 0).cpu.dispatch_cycles == e2.pe(0, 0, 0).cpu.dispatch_cycles


# -- 7. path parity --------------------------------------------------------------------------------------------------------------
PARITY = {
    "decode_opt3": (decode_opt3, "decode"),
    "decode_opt2": (decode_opt2, "decode"),
    "gemm_primitive": (gemm_primitive, "gemm"),
    "gemm_prefetch": (gemm_prefetch, "gemm"),
    "gemm_composite": (gemm_composite, "gemm"),
}


@pytest.mark.parametrize("which", ["default", "override"])
@pytest.mark.parametrize("name", sorted(PARITY))
def test_command_list_and_greenlet_paths_account_identically(graphs, which, name):
    kernel, kind = PARITY[name]
    if kind == "decode":
        inputs, scalars = _decode_inputs()
    else:
        inputs, scalars = [((M, K), "f16"), ((K, N), "f16"), ((M, N), "f32")], (M, K, N)
    eng, _, _ = _run(graphs[which], kernel, inputs, scalars)
    model = eng.cost_model
    fake_ptrs = [0x100000 * (i + 1) for i in range(len(inputs))]
    cmds = run_kernel(kernel, TLContext(executor=None, cost_model=model), *fake_ptrs, *scalars)
    cpu = eng.pe(0, 0, 0).cpu
    assert cpu.commands == len(cmds)
    assert cpu.dispatch_cycles == pytest.approx(sum(model.dispatch_cycles(c) for c in cmds),
                                                abs=1e-9)
    recorded = [(r.params["cmd"], r.params["logical_bytes"], r.params["cycles"])
                for r in sorted(_dispatches(eng), key=lambda r: r.t_start)]
    listed = [(type(c).__name__, c.logical_bytes, model.dispatch_cycles(c)) for c in cmds]
    assert recorded == listed


# -- 8. descriptor cap ---------------------------------------------------------------------------------------------------------------
def test_composite_over_the_cap_raises_at_emit():
    def kernel(*, tl):
        a, b = tl.ref(0x1000, (32, 64)), tl.ref(0x2000, (64, 32))
        other = tl.zeros((32, 32), "f32")
        epi = [OpSpec("add", Scope.OUTPUT_TILE, {"other": other}) for _ in range(100)]
        tl.composite("gemm", a=a, b=b, epilogue=epi)

    tl = TLContext(executor=None)
    with pytest.raises(ValueError, match="1024"):
        run_kernel(kernel, tl)
    assert tl.commands == []  # nothing was emitted


def test_cap_is_inclusive_and_configurable():
    nbytes = _composite_bytes(_GEMM_OP, 0)

    def kernel(*, tl):
        tl.composite("gemm", a=tl.ref(0x1000, (32, 64)), b=tl.ref(0x2000, (64, 32)))

    ok = TLContext(executor=None, cost_model=PeCostModel(max_composite_logical_bytes=nbytes))
    (cmd,) = run_kernel(kernel, ok)
    assert cmd.logical_bytes == nbytes
    tight = TLContext(executor=None, cost_model=PeCostModel(max_composite_logical_bytes=nbytes - 1))
    with pytest.raises(ValueError, match="max_composite_logical_bytes"):
        run_kernel(kernel, tight)
    assert tight.commands == []


def test_engine_model_cap_applies_in_a_running_kernel(override_graph):
    inputs, scalars = _decode_inputs()
    # the override caps descriptors at 512 bytes: the decode composites (<= 306) still fit
    eng, _, _ = _run(override_graph, decode_opt2, inputs, scalars)
    composites = [r for r in _dispatches(eng) if r.params["cmd"] == "CompositeCmd"]
    assert composites, "decode_opt2 issues composites"
    assert max(r.params["logical_bytes"] for r in composites) <= 512

    def k_big(*, tl):
        other = tl.zeros((32, 32), "f32")
        tl.composite("gemm", a=tl.zeros((32, 64), "f16"), b=tl.zeros((64, 32), "f16"),
                     epilogue=[OpSpec("add", Scope.OUTPUT_TILE, {"other": other})] * 45)

    with pytest.raises(KernelError, match="512"):
        _run(override_graph, k_big, [])
