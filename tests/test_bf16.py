"""bf16 end to end: one dtype table, exact byte counts, numpy round trips, GEMM accuracy."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from kernbench.errors import KernbenchError
from kernbench.isa import TensorHandle, dtype_bytes, dtype_name, np_dtype
from kernbench.isa.dtypes import DTYPE_NAMES
from kernbench.kernels.gemm import gemm_composite, gemm_prefetch, gemm_primitive
from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine import GraphEngine

BF16 = np.dtype(ml_dtypes.bfloat16)


def test_one_table_gives_names_numpy_dtypes_and_sizes():
    assert np_dtype("bf16") == BF16 and dtype_bytes("bf16") == 2
    for name in DTYPE_NAMES:
        assert dtype_bytes(name) == np_dtype(name).itemsize
        assert dtype_name(np_dtype(name)) == name
    h = TensorHandle("h", 0, (64,), "bf16", "tcm", True)
    assert h.nbytes == 128
    with pytest.raises(KernbenchError, match="unknown dtype 'bf8'"):
        dtype_bytes("bf8")
    with pytest.raises(KernbenchError, match="has no device dtype"):
        dtype_name(np.complex64)


def test_bf16_tensors_round_trip_with_their_real_byte_counts(small_graph):
    eng = GraphEngine(small_graph, enable_data=True)
    ctx = RuntimeContext(eng)
    values = (np.arange(64, dtype=np.float32) / 7.0).astype(BF16)
    t = ctx.from_numpy(values)
    assert t.dtype == "bf16" and t.nbytes == 128
    writes = [r for r in eng.op_log.records if r.op_name == "h2d_write"]
    assert sum(r.params["nbytes"] for r in writes) == 128
    back = ctx.to_numpy(t)
    assert back.dtype == BF16
    assert back.view(np.uint16).tolist() == values.view(np.uint16).tolist()
    # a float32 array deployed as bf16 is rounded to the nearest bf16 value
    f = np.linspace(-3, 3, 32, dtype=np.float32)
    np.testing.assert_array_equal(ctx.to_numpy(ctx.from_numpy(f, dtype="bf16")), f.astype(BF16))


@pytest.mark.parametrize("kernel", [gemm_composite, gemm_primitive, gemm_prefetch],
                         ids=lambda k: k.__name__)
def test_a_bf16_gemm_matches_numpy(small_graph, kernel):
    M, K, N = 32, 256, 64
    rng = np.random.default_rng(11)
    a64, b64 = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    a, b = a64.astype(BF16), b64.astype(BF16)
    ctx = RuntimeContext(GraphEngine(small_graph, enable_data=True))
    ta, tb = ctx.from_numpy(a), ctx.from_numpy(b)
    tc = ctx.empty((M, N), "f32")
    ctx.wait(ctx.launch("g", kernel, ta, tb, tc, M, K, N, dtype="bf16"))
    c = ctx.to_numpy(tc)
    # the products of the bf16 operands, accumulated in f32 (the order may differ)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5,
                               atol=1e-4)
    # and against the unrounded operands, within what bf16 inputs allow
    eps = float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps)
    bound = 2 * eps * np.abs(a64) @ np.abs(b64)
    assert np.all(np.abs(c - a64 @ b64) <= bound)
