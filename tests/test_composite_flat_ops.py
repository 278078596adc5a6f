"""Flat-ops ``CompositeCmd`` and the ``softmax_merge`` recipe (docs/adr/0021-tl-kernel-api.md).

Covers plain lowering, recipe lowering,
K-before-V, strict FIFO, DMA insertion from ``pinned``, opt2/opt3 parity,
dispatch ratio, GEMM count, size cap, auto-bind conflict, TCM-only prologue
operands) and the composite output contract (returned handle, TCM vs HBM
write-back).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from kernbench.components.builtin.pe_cost_model import PeCostModel
from kernbench.isa.commands import CompositeCmd
from kernbench.isa.ops import OpSpec, Scope
from kernbench.kernels.attention_decode import decode_opt2, decode_opt3
from kernbench.triton_emu.tl_context import TLContext, run_kernel

from .kernel_helpers import launch_one

PE = "sip0.cube0.pe0"
RECIPE_KINDS = ["rmax", "max_elem", "exp_diff", "exp_diff", "rsum", "fma", "mul_bcast", "copy"]


def _run(graph, kernel, inputs, outputs=(), scalars=(), data=False):
    return launch_one(graph, kernel, inputs, outputs, scalars=scalars, data=data)


def _records(eng, name=None, unit=None):
    return [r for r in eng.op_log.records if r.component_id.startswith(PE + ".")
            and (name is None or r.op_name == name)
            and (unit is None or r.component_id == f"{PE}.{unit}")]


def _log(eng):
    return [(r.t_start, r.t_end, r.component_id, r.op_kind, r.op_name, repr(r.params))
            for r in eng.op_log.records]


def _composites(eng):
    return sorted((r for r in eng.op_log.records if r.op_name.startswith("composite_")),
                  key=lambda r: r.t_start)


# -- 1. legacy dict epilogue == explicit OpSpec epilogue -----------------------------------------------
M, K, N = 64, 128, 64


def _make_epilogue_kernel(explicit: bool):
    def kernel(a, b, bias, c, *, tl):
        bias_h = tl.load(bias, (1, N), "f32")
        if explicit:
            epi = [OpSpec("bias", Scope.OUTPUT_TILE, {"bias": bias_h}),
                   OpSpec("scale", Scope.OUTPUT_TILE, {}, {"factor": 0.5}),
                   OpSpec("relu", Scope.OUTPUT_TILE)]
        else:
            epi = [{"op": "bias", "bias": bias_h}, {"op": "scale", "factor": 0.5}, {"op": "relu"}]
        tl.wait(tl.composite("gemm", a=tl.ref(a, (M, K)), b=tl.ref(b, (K, N)), out_ptr=c,
                             epilogue=epi))

    kernel.__name__ = "epi_explicit" if explicit else "epi_dict"
    return kernel


def test_dict_and_explicit_opspec_epilogues_lower_identically(small_graph):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    bias = rng.standard_normal((1, N)).astype(np.float32)
    runs = [_run(small_graph, _make_epilogue_kernel(x), [a, b, bias], [((M, N), "f32")], data=True)
            for x in (False, True)]
    (e_dict, h_dict, _, (c_dict,)), (e_expl, h_expl, _, (c_expl,)) = runs
    assert _log(e_dict) == _log(e_expl)
    assert h_dict.kernel_ns == h_expl.kernel_ns
    np.testing.assert_array_equal(c_dict, c_expl)
    expected = np.maximum((a.astype(np.float32) @ b.astype(np.float32) + bias) * 0.5, 0)
    np.testing.assert_allclose(c_dict, expected, rtol=1e-5, atol=1e-4)
    # the lowered commands carry the same ops
    cmds = {}
    for explicit in (False, True):
        (_, cmd) = run_kernel(_make_epilogue_kernel(explicit), TLContext(executor=None),
                              0x1000, 0x100000, 0x200000, 0x300000)
        cmds[explicit] = [(o.kind, o.scope, sorted(o.operands), o.extra) for o in cmd.ops]
    assert cmds[False] == cmds[True]
    assert [k for k, *_ in cmds[False]] == ["gemm", "bias", "scale", "relu"]


# -- 2 + 9 + 10 + 11. recipe lowering and its validation -------------------------------------------------------
G, T, D = 8, 64, 32


def _recipe_state(tl):
    m = tl.full((G, 1), -1.0e30, "f32")
    l = tl.zeros((G, 1), "f32")
    O = tl.zeros((G, D), "f32")
    s = tl.zeros((G, T), "f32")
    return m, l, O, s


def test_softmax_merge_lowers_to_ten_flat_ops():
    seen = {}

    def kernel(*, tl):
        m, l, O, s = _recipe_state(tl)
        v = tl.ref(0x1000, (T, D))
        out = tl.composite("gemm", b=v, out=O,
                           prologue=[{"op": "softmax_merge", "s": s, "m": m, "l": l, "O": O}],
                           epilogue=[{"op": "add", "other": O}])
        seen.update(m=m, l=l, O=O, s=s, v=v, out=out)

    (cmd,) = run_kernel(kernel, TLContext(executor=None))
    assert isinstance(cmd, CompositeCmd)
    assert [o.kind for o in cmd.ops] == RECIPE_KINDS + ["gemm", "add"]
    assert len(cmd.rw_handles) == 3
    assert all(x is y for x, y in zip(cmd.rw_handles, (seen["m"], seen["l"], seen["O"]), strict=True))
    assert seen["out"] is seen["O"]
    gemm = cmd.ops[cmd.gemm_index]
    assert cmd.gemm_index == 8
    # the primary output P (last write of exp_diff on s) is auto-bound to the GEMM's a
    p = cmd.ops[3].out
    assert gemm.operands["a"] is p and gemm.operands["b"] is seen["v"] and gemm.out is seen["O"]
    assert p.shape == seen["s"].shape and p.space == "tcm" and p.pinned
    assert cmd.ops[0].operands["src"] is seen["s"]
    assert cmd.ops[5].out is seen["l"] and cmd.ops[6].out is seen["O"] and cmd.ops[7].out is seen["m"]
    assert all(o.scope is Scope.KERNEL for o in cmd.ops[:8])
    # 9. it fits the descriptor cap
    assert cmd.logical_bytes < 1024
    assert cmd.logical_bytes < PeCostModel().max_composite_logical_bytes


def test_auto_bind_conflict_raises():
    def kernel(*, tl):
        m, l, O, s = _recipe_state(tl)
        tl.composite("gemm", a=tl.zeros((G, T), "f32"), b=tl.ref(0x1000, (T, D)), out=O,
                     prologue=[{"op": "softmax_merge", "s": s, "m": m, "l": l, "O": O}])

    tl = TLContext(executor=None)
    with pytest.raises(ValueError, match="auto-bind"):
        run_kernel(kernel, tl)
    assert tl.commands == []


@pytest.mark.parametrize("operand", ["s", "m", "l", "O"])
def test_prologue_recipe_operand_in_hbm_raises(operand):
    def kernel(*, tl):
        m, l, O, s = _recipe_state(tl)
        ops = {"s": s, "m": m, "l": l, "O": O}
        ops[operand] = tl.ref(0x5000, ops[operand].shape, "f32")
        tl.composite("gemm", b=tl.ref(0x1000, (T, D)), out=O,
                     prologue=[{"op": "softmax_merge", **ops}])

    tl = TLContext(executor=None)
    with pytest.raises(ValueError, match="TCM"):
        run_kernel(kernel, tl)
    assert tl.commands == []


def k_math_head_from_hbm(x, o, *, tl):
    tl.wait(tl.composite("math", math_op="exp", a=tl.ref(x, (64, 64), "f32"), out_ptr=o))


def test_the_head_op_may_stream_from_hbm(small_graph):
    x = np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32)
    eng, _, _, (out,) = _run(small_graph, k_math_head_from_hbm, [x], [((64, 64), "f32")], data=True)
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-6)
    assert _records(eng, "TileToken/DMA_READ") and _records(eng, "TileToken/DMA_WRITE")


# -- 8. at most one GEMM ------------------------------------------------------------------------------------------------------
def test_two_gemm_opspecs_raise():
    def kernel(*, tl):
        a, b = tl.zeros((32, 64), "f16"), tl.zeros((64, 32), "f16")
        out2 = tl.zeros((32, 32), "f32")
        second = OpSpec("gemm", Scope.KERNEL, {"a": a, "b": b}, {"m": 32, "k": 64, "n": 32}, out2)
        tl.composite("gemm", a=a, b=b, epilogue=[second])

    tl = TLContext(executor=None)
    with pytest.raises(ValueError, match="one GEMM"):
        run_kernel(kernel, tl)
    assert tl.commands == []


# -- 3. K before V in decode opt2 -----------------------------------------------------------------------------------------------
DG, DD, DTILE = 8, 128, 64


def _decode_run(graph, kernel, n_tiles, data=False, seed=0, d=DD):
    S = n_tiles * DTILE
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((DG, d)).astype(np.float16)
    k = rng.standard_normal((S, d)).astype(np.float16)
    v = rng.standard_normal((S, d)).astype(np.float16)
    inputs = [q, np.ascontiguousarray(k.T), v] if data else \
        [((DG, d), "f16"), ((d, S), "f16"), ((S, d), "f16")]
    outputs = [((DG, 1), "f32"), ((DG, 1), "f32"), ((DG, d), "f32")]
    eng, h, ins, vals = _run(graph, kernel, inputs, outputs,
                             (DG, d, S, DTILE, 1.0 / math.sqrt(d)), data=data)
    return eng, ins, vals, (q, k, v)


def test_opt2_never_starts_a_v_dma_before_its_prologue_ends(small_graph):
    n_tiles = 6
    eng, ins, _, _ = _decode_run(small_graph, decode_opt2, n_tiles)
    v_va = ins[2].ptr(0, 0)
    tile_bytes = DTILE * DD * 2
    merges = [r for r in _composites(eng) if r.params["ops"][0] == "rmax"]
    assert len(merges) == n_tiles
    recipe_ops = _records(eng, unit="pe_math")
    recipe_ops = [r for r in recipe_ops if r.params.get("recipe_op")]
    v_dmas = [r for r in _records(eng, "TileToken/DMA_READ")
              if v_va <= r.params["va"] < v_va + n_tiles * tile_bytes]
    assert all(r.params["operand"] == "b" for r in v_dmas)
    for j, comp in enumerate(merges):
        assert comp.params["src_b_addr"] == v_va + j * tile_bytes
        mine = sorted((r for r in recipe_ops if comp.t_start <= r.t_start <= comp.t_end),
                      key=lambda r: r.t_start)
        assert [r.op_name for r in mine] == RECIPE_KINDS
        prologue_end = max(r.t_end for r in mine)
        tile_dmas = [r for r in v_dmas
                     if v_va + j * tile_bytes <= r.params["va"] < v_va + (j + 1) * tile_bytes]
        assert tile_dmas, f"no V DMA for tile {j}"
        assert min(r.t_start for r in tile_dmas) >= prologue_end


# -- 4. strict FIFO on shared read-write handles --------------------------------------------------------------------------------
FM, FK, FN = 32, 128, 64


def k_fifo(a, b1, b2, b3, *, tl):
    x = tl.load(a, (FM, FK), "f16")
    O = tl.zeros((FM, FN), "f32")
    O2 = tl.zeros((FM, FN), "f32")
    acc = [{"op": "add", "other": O}]
    tl.composite("gemm", a=x, b=tl.ref(b1, (FK, FN)), out=O, epilogue=acc)   # owns O
    tl.composite("gemm", a=x, b=tl.ref(b2, (FK, FN)), out=O, epilogue=acc)   # shares O
    tl.composite("gemm", a=x, b=tl.ref(b3, (FK, FN)), out=O2)                # independent
    tl.composite("math", math_op="relu", a=O)                                  # only reads O
    tl.wait()


def test_composites_sharing_a_rw_handle_run_in_order(small_graph):
    shape = ((FK, FN), "f16")
    eng, _, ins, _ = _run(small_graph, k_fifo, [((FM, FK), "f16"), shape, shape, shape])
    b1, b2, b3 = (t.ptr(0, 0) for t in ins[1:])
    comps = _composites(eng)
    by_b = {r.params.get("src_b_addr"): r for r in comps}
    c1, c2, c3 = by_b[b1], by_b[b2], by_b[b3]
    (c4,) = [r for r in comps if r.op_name == "composite_relu"]
    # the second owner of O starts only once the first has completed, and finishes after it
    assert c2.t_start >= c1.t_end
    assert c2.t_end > c1.t_end
    for r in _records(eng, "TileToken/DMA_READ"):
        if b2 <= r.params["va"] < b2 + FK * FN * 2:
            assert r.t_start >= c1.t_end
    # a reader of O waits for every in-flight writer of O
    assert c4.t_start >= c2.t_end
    # a composite sharing nothing may overlap the first
    assert c3.t_start < c1.t_end
    assert any(r.t_start < c1.t_end for r in _records(eng, "TileToken/DMA_READ")
               if b3 <= r.params["va"] < b3 + FK * FN * 2)


# -- 5. DMA insertion from `pinned` ------------------------------------------------------------------------------------------------
def _make_pinning_kernel(a_pinned: bool, b_pinned: bool):
    def kernel(a, b, *, tl):
        ah = tl.load(a, (FM, FK), "f16") if a_pinned else tl.ref(a, (FM, FK))
        bh = tl.load(b, (FK, FN), "f16") if b_pinned else tl.ref(b, (FK, FN))
        assert ah.pinned is a_pinned and bh.pinned is b_pinned
        tl.wait(tl.composite("gemm", a=ah, b=bh))

    kernel.__name__ = f"pinned_{a_pinned}_{b_pinned}"
    return kernel


@pytest.mark.parametrize("a_pinned,b_pinned", [(True, False), (False, False), (True, True),
                                               (False, True)])
def test_dma_reads_are_inserted_only_for_unpinned_operands(small_graph, a_pinned, b_pinned):
    eng, _, _, _ = _run(small_graph, _make_pinning_kernel(a_pinned, b_pinned),
                        [((FM, FK), "f16"), ((FK, FN), "f16")])
    by_operand = Counter(r.params.get("operand") for r in _records(eng, "TileToken/DMA_READ"))
    assert (by_operand["a"] > 0) is (not a_pinned)
    assert (by_operand["b"] > 0) is (not b_pinned)
    assert len(_records(eng, "dma_read")) == a_pinned + b_pinned
    # every byte of an unpinned operand is streamed
    nbytes = Counter()
    for r in _records(eng, "TileToken/DMA_READ"):
        nbytes[r.params["operand"]] += r.params["nbytes"]
    if not a_pinned:
        assert nbytes["a"] >= FM * FK * 2
    if not b_pinned:
        assert nbytes["b"] == FK * FN * 2


# -- 6. opt2 / opt3 numeric parity -----------------------------------------------------------------------------------------------------
def _reference(q, k, v):
    s = (q.astype(np.float32) @ k.astype(np.float32).T) / math.sqrt(q.shape[1])
    m = s.max(axis=1, keepdims=True)
    p = np.exp(s - m)
    l_ = p.sum(axis=1, keepdims=True)
    return m, l_, p @ v.astype(np.float32)


@pytest.mark.parametrize("d,n_tiles", [
    (128, 4),
    (64, 4),
    (128, 16),
    (64, 16),
])
def test_opt2_matches_opt3_and_numpy(small_graph, d, n_tiles):
    _, _, (m2, l2, o2), (q, k, v) = _decode_run(small_graph, decode_opt2, n_tiles, True, d=d)
    _, _, (m3, l3, o3), _ = _decode_run(small_graph, decode_opt3, n_tiles, True, d=d)
    m_ref, l_ref, o_ref = _reference(q, k, v)
    np.testing.assert_allclose(m2, m3, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(l2, l3, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o2, o3, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m2, m_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o2 / l2, o_ref / l_ref, rtol=1e-5, atol=1e-5)


# -- 7. per-tile dispatch ratio -------------------------------------------------------------------------------------------------------------
def _per_tile_dispatch(kernel, model: PeCostModel, n: int = 4) -> float:
    def total(tiles):
        tl = TLContext(executor=None, cost_model=model)
        cmds = run_kernel(kernel, tl, 0x1000, 0x100000, 0x800000, 0x1000000, 0x1001000,
                          0x1002000, DG, DD, tiles * DTILE, DTILE, 0.125)
        return sum(model.dispatch_cycles(c) for c in cmds)

    return total(n + 1) - total(n)


def test_opt3_dispatches_more_than_twice_opt2_per_tile():
    model = PeCostModel()
    opt3 = _per_tile_dispatch(decode_opt3, model)
    opt2 = _per_tile_dispatch(decode_opt2, model)
    assert opt3 > 2 * opt2, (opt3, opt2)


def test_measured_per_tile_dispatch_matches_the_command_stream(small_graph):
    """The engine's PE_CPU pays what the command-list stream predicts, per tile."""
    model = PeCostModel()
    cycles = {}
    for kernel in (decode_opt3, decode_opt2):
        per_n = []
        for n in (4, 5):
            eng, _, _, _ = _decode_run(small_graph, kernel, n)
            per_n.append(eng.pe(0, 0, 0).cpu.dispatch_cycles)
        cycles[kernel.__name__] = per_n[1] - per_n[0]
        assert cycles[kernel.__name__] == pytest.approx(_per_tile_dispatch(kernel, model))
    assert cycles["decode_opt3"] > 2 * cycles["decode_opt2"]


# -- composite output handle and write-back -----------------------------------------------------------------------------------------
def k_out_tcm(a, b, o, *, tl):
    out = tl.composite("gemm", a=tl.ref(a, (FM, FK)), b=tl.ref(b, (FK, FN)))
    assert out.space == "tcm" and out.shape == (FM, FN) and out.dtype == "f32"
    tl.store(o, out)  # auto-waits for the composite


def k_out_hbm(a, b, o, *, tl):
    out = tl.composite("gemm", a=tl.ref(a, (FM, FK)), b=tl.ref(b, (FK, FN)), out_ptr=o)
    assert out.space == "hbm" and out.addr == o and out.shape == (FM, FN)
    tl.wait(out)


def k_out_given(a, b, o, *, tl):
    buf = tl.zeros((FM, FN), "f32")
    out = tl.composite("gemm", a=tl.ref(a, (FM, FK)), b=tl.ref(b, (FK, FN)), out=buf)
    assert out is buf
    tl.store(o, out)


@pytest.mark.parametrize("kernel,hbm_out", [(k_out_tcm, False), (k_out_hbm, True),
                                            (k_out_given, False)])
def test_composite_output_handle_and_write_back(small_graph, kernel, hbm_out):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((FM, FK)).astype(np.float16)
    b = rng.standard_normal((FK, FN)).astype(np.float16)
    eng, _, _, (out,) = _run(small_graph, kernel, [a, b], [((FM, FN), "f32")], data=True)
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32),
                               rtol=1e-5, atol=1e-4)
    writes = _records(eng, "TileToken/DMA_WRITE")
    if hbm_out:
        assert writes and sum(r.params["nbytes"] for r in writes) == FM * FN * 4
        assert not _records(eng, "dma_write")
    else:
        assert not writes
        assert len(_records(eng, "dma_write")) == 1  # only the explicit tl.store
    (comp,) = _composites(eng)
    assert comp.params["out_space"] == ("hbm" if hbm_out else "tcm")
