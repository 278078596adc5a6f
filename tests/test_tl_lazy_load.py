"""Lazy ``tl.load`` (issue at once, wait at first use).

Covers real load/compute overlap, auto-wait
data correctness, two loads in flight, one ``dma_read`` record per load, and
no latency change for a load that is used at once.
"""

from __future__ import annotations

import numpy as np
import pytest

from .kernel_helpers import launch_one

PE = "sip0.cube0.pe0"
F16 = 2


def _launch(graph, kernel, inputs, outputs=(), *, data=False, scalars=()):
    """(engine, launch handle, output arrays or None) of one kernel on one PE."""
    eng, handle, _, values = launch_one(graph, kernel, inputs, outputs, scalars=scalars, data=data)
    return eng, handle, values


def _pe_records(eng, unit=None, name=None):
    out = []
    for r in eng.op_log.records:
        if not r.component_id.startswith(PE + "."):
            continue
        if unit is not None and r.component_id != f"{PE}.{unit}":
            continue
        if name is not None and r.op_name != name:
            continue
        out.append(r)
    return out


def _log_tuples(eng):
    return [(r.t_start, r.t_end, r.component_id, r.op_kind, r.op_name, repr(r.params))
            for r in eng.op_log.records]


# -- 1. overlap is real --------------------------------------------------------------------
# A 64 KiB load (~0.36 us) and a 32x128x64 GEMM (8 weight blocks of 32 cycles, ~0.4 us
# with its fetch) have comparable durations.
LOAD_SHAPE = (256, 128)
GM, GK, GN = 32, 128, 64


def k_load_only(x, *, tl):
    h = tl.load(x, LOAD_SHAPE, "f16")
    tl.wait(h)


def k_gemm_only(x, *, tl):
    a, b = tl.zeros((GM, GK)), tl.zeros((GK, GN))
    tl.dot(a, b)


def k_serial(x, *, tl):
    a, b = tl.zeros((GM, GK)), tl.zeros((GK, GN))
    h = tl.load(x, LOAD_SHAPE, "f16")
    tl.wait(h)  # the blocking model: nothing runs while the DMA is in flight
    tl.dot(a, b)


def k_overlap(x, *, tl):
    a, b = tl.zeros((GM, GK)), tl.zeros((GK, GN))
    h = tl.load(x, LOAD_SHAPE, "f16")
    tl.dot(a, b)  # independent of h: runs while the DMA is in flight
    tl.wait(h)


def test_load_overlaps_an_independent_gemm(small_graph):
    times = {}
    for k in (k_load_only, k_gemm_only, k_serial, k_overlap):
        _, h, _ = _launch(small_graph, k, [(LOAD_SHAPE, "f16")])
        times[k.__name__] = h.kernel_ns
    t_load, t_gemm = times["k_load_only"], times["k_gemm_only"]
    t_serial, t_overlap = times["k_serial"], times["k_overlap"]
    # the experiment is meaningful only if both parts take comparable time
    assert 0.5 < t_load / t_gemm < 2.0, times
    # waiting between them serialises: the sum of the parts
    assert t_serial == pytest.approx(t_load + t_gemm, abs=1.0), times
    # lazy load: about max(load, gemm), strictly below the serial sum
    assert t_overlap < t_serial - 0.5 * min(t_load, t_gemm), times
    assert max(t_load, t_gemm) - 1e-6 <= t_overlap <= max(t_load, t_gemm) + 0.1 * min(t_load, t_gemm)


def test_overlap_is_modelled_concurrency_in_the_op_log(small_graph):
    eng, _, _ = _launch(small_graph, k_overlap, [(LOAD_SHAPE, "f16")])
    (dma,) = _pe_records(eng, "pe_dma", "dma_read")
    (gemm,) = _pe_records(eng, "pe_gemm")
    # the GEMM engine is busy while the load's data is still arriving
    assert gemm.t_start < dma.t_end and dma.t_start < gemm.t_end


# -- 2. auto-wait correctness (data mode) -----------------------------------------------------------
X_SHAPE = (64, 64)


def _consume(tl, h, kind, w, o):
    if kind == "store":
        tl.store(o, h)
    elif kind == "math":
        tl.store(o, h * 2.0)
    elif kind == "dot":
        tl.store(o, tl.dot(h, tl.load(w, X_SHAPE, "f16")))
    elif kind == "composite":
        tl.wait(tl.composite("gemm", a=h, b=tl.ref(w, X_SHAPE, "f16"), out_ptr=o))
    else:  # pragma: no cover
        raise AssertionError(kind)


def _make_load_kernel(kind: str, blocking: bool, busy: bool):
    def kernel(x, w, o, *, tl):
        h = tl.load(x, X_SHAPE, "f16")
        if blocking:
            tl.wait(h)
        if busy:  # independent work between the load and its first use
            tl.dot(tl.zeros((32, 64)), tl.zeros((64, 64)))
            tl.exp(tl.zeros((32, 32), "f32"))
        _consume(tl, h, kind, w, o)

    kernel.__name__ = f"lazy_{kind}_{'blocking' if blocking else 'lazy'}"
    return kernel


_OUT_DTYPE = {"store": "f16", "math": "f16", "dot": "f32", "composite": "f32"}


@pytest.mark.parametrize("kind", ["store", "math", "dot", "composite"])
def test_auto_wait_reads_the_loaded_bytes(small_graph, kind):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(X_SHAPE).astype(np.float16)
    w = rng.standard_normal(X_SHAPE).astype(np.float16)
    expected = {
        "store": x,
        "math": (x.astype(np.float32) * 2).astype(np.float16),
        "dot": x.astype(np.float32) @ w.astype(np.float32),
        "composite": x.astype(np.float32) @ w.astype(np.float32),
    }[kind]
    results = {}
    for blocking in (False, True):
        k = _make_load_kernel(kind, blocking, busy=True)
        _, _, (out,) = _launch(small_graph, k, [x, w], [(X_SHAPE, _OUT_DTYPE[kind])], data=True)
        np.testing.assert_allclose(out.astype(np.float32), expected.astype(np.float32),
                                   rtol=1e-5, atol=1e-4)
        results[blocking] = out
    # lazy and blocking loads deliver the same bytes
    np.testing.assert_array_equal(results[False], results[True])


# -- 3. two loads in flight ------------------------------------------------------------------------------
TWO_SHAPE = (128, 128)  # 32 KiB each


def k_two_loads(x1, x2, o1, o2, *, tl):
    h1 = tl.load(x1, TWO_SHAPE, "f16")
    h2 = tl.load(x2, TWO_SHAPE, "f16")
    tl.exp(tl.zeros((32, 32), "f32"))  # unrelated work while both are in flight
    tl.store(o1, h2)  # consumed later, in the other order
    tl.store(o2, h1)


def test_two_loads_in_flight_resolve_to_their_own_data(small_graph):
    rng = np.random.default_rng(3)
    x1 = rng.standard_normal(TWO_SHAPE).astype(np.float16)
    x2 = rng.standard_normal(TWO_SHAPE).astype(np.float16)
    _, _, (o1, o2) = _launch(small_graph, k_two_loads, [x1, x2],
                             [(TWO_SHAPE, "f16"), (TWO_SHAPE, "f16")], data=True)
    np.testing.assert_array_equal(o1, x2)
    np.testing.assert_array_equal(o2, x1)


def test_two_loads_serialise_on_the_read_channel(small_graph):
    eng, _, _ = _launch(small_graph, k_two_loads, [(TWO_SHAPE, "f16")] * 2,
                        [(TWO_SHAPE, "f16")] * 2)
    reads = sorted(_pe_records(eng, "pe_dma", "dma_read"), key=lambda r: r.t_start)
    assert len(reads) == 2
    first, second = reads
    dma = eng.pe(0, 0, 0).dma
    # both are in flight at once: the second is issued before the first completes
    assert second.t_start < first.t_end
    # read-channel bookings [start, start + hold) are disjoint
    assert second.t_start >= first.t_start + dma.hold_ns - 1e-9
    assert dma.read_ch.ops == 2 and dma.read_ch.busy_ns == 2 * dma.hold_ns
    assert dma.read_ch.busy_ns == pytest.approx(2 * dma.hold_ns)
    # their data share the PE's link: together they take two transfers' time on it
    # (interleaved packets: they end together, not a transfer apart)
    nbytes = TWO_SHAPE[0] * TWO_SHAPE[1] * F16
    link_bw = small_graph.spec.raw["pe"]["link"]["bw_gbs"]
    assert max(first.t_end, second.t_end) - second.t_start >= 0.99 * 2 * nbytes / link_bw
    assert abs(second.t_end - first.t_end) < 0.5 * nbytes / link_bw


# -- 4. op-log compatibility -----------------------------------------------------------------------------------
N_LOADS = 5


def _make_n_loads(blocking: bool):
    def kernel(x, o, *, tl):
        acc = tl.zeros((16, 16), "f32")
        for i in range(N_LOADS):
            h = tl.load(x + i * 16 * 16 * F16, (16, 16), "f16")
            if blocking:
                tl.wait(h)
            acc = acc + h
        tl.store(o, acc)

    kernel.__name__ = f"n_loads_{blocking}"
    return kernel


def test_each_load_logs_exactly_one_dma_read(small_graph):
    counts = {}
    for blocking in (False, True):
        eng, _, _ = _launch(small_graph, _make_n_loads(blocking), [((N_LOADS * 16, 16), "f16")],
                            [((16, 16), "f32")])
        reads = _pe_records(eng, "pe_dma", "dma_read")
        assert len(reads) == N_LOADS
        assert all(r.op_kind == "memory" and r.params["nbytes"] == 16 * 16 * F16 for r in reads)
        assert not _pe_records(eng, name="TileToken/DMA_READ")
        counts[blocking] = eng.op_log.counts["dma_read"]
    assert counts[False] == counts[True] == N_LOADS


# -- 5. no overlap, no change ---------------------------------------------------------------------------------------
def k_use_at_once(x, o, *, tl):
    h = tl.load(x, X_SHAPE, "f16")
    y = tl.exp(h)  # auto-wait fires here
    tl.store(o, y)


def k_explicit_wait(x, o, *, tl):
    h = tl.load(x, X_SHAPE, "f16")
    tl.wait(h)
    y = tl.exp(h)
    tl.store(o, y)


def _ops_without_times(eng):
    return [(r.component_id, r.op_kind, r.op_name, repr(r.params)) for r in eng.op_log.records]


def test_load_then_immediate_use_issues_the_same_ops_as_a_blocking_load(small_graph):
    runs = [_launch(small_graph, k, [(X_SHAPE, "f16")], [(X_SHAPE, "f16")])
            for k in (k_use_at_once, k_explicit_wait)]
    (eng_a, h_a, _), (eng_b, h_b, _) = runs
    assert sorted(_ops_without_times(eng_a)) == sorted(_ops_without_times(eng_b))
    # the consumer really waited for the data, and laziness never costs time
    for eng in (eng_a, eng_b):
        (dma,) = _pe_records(eng, "pe_dma", "dma_read")
        (exp,) = _pe_records(eng, "pe_math", "exp")
        assert exp.t_start >= dma.t_end
    assert h_a.kernel_ns <= h_b.kernel_ns


def test_load_then_immediate_use_costs_the_same_as_a_blocking_load(small_graph):
    runs = [_launch(small_graph, k, [(X_SHAPE, "f16")], [(X_SHAPE, "f16")])
            for k in (k_use_at_once, k_explicit_wait)]
    (eng_a, h_a, _), (eng_b, h_b, _) = runs
    assert h_a.kernel_ns == pytest.approx(h_b.kernel_ns, abs=1e-6)
    assert _log_tuples(eng_a) == _log_tuples(eng_b)


# -- reusing a load buffer (out=) ------------------------------------------------------------------------------------------
def k_reload_into_buffer(a, b, a2, o, *, tl):
    O = tl.zeros((32, 64), "f32")
    # a long composite that owns O, so the next one (same O) queues behind it
    tl.composite("gemm", a=tl.ref(a, (32, 64), "f16"), b=tl.ref(b, (64, 64), "f16"), out=O,
                 epilogue=[{"op": "add", "other": O}])
    x = tl.load(a, (32, 64), "f16")
    tl.composite("gemm", a=x, b=tl.ref(b, (64, 64), "f16"), out=O,
                 epilogue=[{"op": "add", "other": O}])  # still has to read x
    tl.load(a2, (32, 64), "f16", out=x)  # reuse x's buffer for the next step
    tl.wait()
    tl.store(o, O)


def test_load_into_a_buffer_waits_for_its_readers(small_graph):
    rng = np.random.default_rng(11)
    a = rng.standard_normal((32, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    a2 = rng.standard_normal((32, 64)).astype(np.float16)
    _, _, (out,) = _launch(small_graph, k_reload_into_buffer, [a, b, a2], [((32, 64), "f32")],
                           data=True)
    expected = 2 * (a.astype(np.float32) @ b.astype(np.float32))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-3)
