"""``tl.broadcast`` / ``tl.repeat`` replicate data on chip.

Covers: one ``math/broadcast`` op of
S*G*d elements and no HBM read, data equal to ``numpy.broadcast_to`` that a
downstream ``tl.dot`` can consume, and a clear emit-time error for shapes
that do not broadcast.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernbench.isa.commands import BroadcastCmd
from kernbench.triton_emu.tl_context import TLContext, run_kernel

from .kernel_helpers import launch_one

PE = "sip0.cube0.pe0"
S, G, D = 16, 8, 32


def _run(graph, kernel, inputs, outputs=(), data=False):
    eng, h, _, values = launch_one(graph, kernel, inputs, outputs, data=data)
    return eng, h, values


def _pe_records(eng):
    return [r for r in eng.op_log.records if r.component_id.startswith(PE + ".")]


# -- 1. timing: one math/broadcast op, no HBM read ----------------------------------------------------
def k_broadcast_only(*, tl):
    x = tl.reshape(tl.arange(0, S * D, "f32"), (S, 1, D))  # made on chip, no DMA
    y = tl.broadcast(x, (S, G, D))
    assert y.shape == (S, G, D) and y.nbytes == S * G * D * 4 and y.space == "tcm"


def test_broadcast_logs_one_math_op_of_all_output_elements(small_graph):
    eng, _, _ = _run(small_graph, k_broadcast_only, [])
    recs = _pe_records(eng)
    bcast = [r for r in recs if r.op_name == "broadcast"]
    assert len(bcast) == 1
    (r,) = bcast
    assert r.op_kind == "math" and r.component_id == f"{PE}.pe_math"
    assert r.params["elements"] == S * G * D
    # the vector engine's cost of writing S*G*d elements
    spec = small_graph.spec.raw["pe"]
    expected = (math.ceil(S * G * D / spec["math"]["vector_width"]) / spec["clock_ghz"]
                + spec["overhead_ns"]["pe_math"])
    assert r.duration == pytest.approx(expected)
    assert not [x for x in recs if x.op_kind == "memory" and "dma" in x.op_name.lower()]
    assert eng.op_log.counts["dma_read"] == 0


def test_broadcast_emits_one_broadcast_command():
    tl = TLContext(executor=None)
    (cmd,) = run_kernel(k_broadcast_only, tl)
    assert isinstance(cmd, BroadcastCmd)
    assert cmd.new_shape == (S, G, D) and cmd.out.shape == (S, G, D)
    assert cmd.src.shape == (S, 1, D)


# -- 2. data: numpy broadcast_to, consumable by tl.dot ---------------------------------------------------
def k_broadcast_store(x, o, *, tl):
    xh = tl.load(x, (S, 1, D), "f16")
    y = tl.broadcast(xh, (S, G, D))
    tl.store(o, tl.reshape(y, (S * G, D)))


def k_repeat_store(x, o, *, tl):
    xh = tl.load(x, (S, D), "f16")
    y = tl.repeat(xh, 1, G)  # insert a group axis and expand it
    assert y.shape == (S, G, D)
    tl.store(o, tl.reshape(y, (S * G, D)))


@pytest.mark.parametrize("kernel,src_shape", [(k_broadcast_store, (S, 1, D)),
                                              (k_repeat_store, (S, D))])
def test_broadcast_data_equals_numpy(small_graph, kernel, src_shape):
    x = np.random.default_rng(0).standard_normal(src_shape).astype(np.float16)
    eng, _, (out,) = _run(small_graph, kernel, [x], [((S * G, D), "f16")], data=True)
    expected = np.broadcast_to(x.reshape(S, 1, D), (S, G, D)).reshape(S * G, D)
    np.testing.assert_array_equal(out, expected)
    assert eng.op_log.counts["broadcast"] == 1


def k_broadcast_dot(x, w, o, *, tl):
    xh = tl.load(x, (S, 1, D), "f16")
    y = tl.reshape(tl.broadcast(xh, (S, G, D)), (S * G, D))
    wh = tl.load(w, (D, 16), "f16")
    tl.store(o, tl.dot(y, wh))


def test_a_dot_consumes_the_broadcast(small_graph):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((S, 1, D)).astype(np.float16)
    w = rng.standard_normal((D, 16)).astype(np.float16)
    _, _, (out,) = _run(small_graph, k_broadcast_dot, [x, w], [((S * G, 16), "f32")], data=True)
    xb = np.broadcast_to(x, (S, G, D)).reshape(S * G, D).astype(np.float32)
    np.testing.assert_allclose(out, xb @ w.astype(np.float32), rtol=1e-5, atol=1e-4)


def k_broadcast_row(x, o, *, tl):
    xh = tl.load(x, (1, D), "f32")
    tl.store(o, tl.broadcast(xh, (G, D)) * 2.0)


def test_broadcast_along_the_first_axis(small_graph):
    x = np.random.default_rng(2).standard_normal((1, D)).astype(np.float32)
    _, _, (out,) = _run(small_graph, k_broadcast_row, [x], [((G, D), "f32")], data=True)
    np.testing.assert_array_equal(out, np.broadcast_to(x * 2, (G, D)))


# -- 4. incompatible shapes fail at emit ---------------------------------------------------------------------
@pytest.mark.parametrize("src,dst", [
    ((S, 3, D), (S, 8, D)),   # axis of size 3 cannot become 8
    ((S, 1, D), (S, G)),      # rank change
    ((S, 1, D), (S, G, 2 * D)),
])
def test_incompatible_broadcast_raises_at_emit(src, dst):
    def kernel(*, tl):
        tl.broadcast(tl.zeros(src, "f16"), dst)

    tl = TLContext(executor=None)
    with pytest.raises(ValueError, match="broadcast"):
        run_kernel(kernel, tl)
    assert tl.commands == []


def test_broadcast_of_an_hbm_view_raises():
    def kernel(*, tl):
        tl.broadcast(tl.ref(0x1000, (S, 1, D)), (S, G, D))

    with pytest.raises(ValueError, match="TCM"):
        run_kernel(kernel, TLContext(executor=None))
