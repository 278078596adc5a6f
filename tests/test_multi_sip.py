"""One system, several SIPs: unified virtual addresses, set_device, per-SIP launches."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.errors import UsageError
from kernbench.policy.address import VirtualAllocator
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api import PerSip, RuntimeContext
from kernbench.runtime_api.system import SystemRuntime
from kernbench.sim_engine import GraphEngine
from kernbench.topology import load_topology
from kernbench.triton_emu.kernel_runner import KernelError
from kernbench.units import GiB

from .conftest import TOPOLOGIES

ROWS, COLS = 16, 64


def affine(x, y, rows, cols, *, tl):
    """y = 2 x + (program ids): the result shows which PE, CUBE and SIP computed it."""
    t = tl.load(x, (rows, cols), "f32")
    bias = 100.0 * tl.program_id(2) + 10.0 * tl.program_id(1) + tl.program_id(0)
    tl.store(y, t * 2.0 + bias)


def run_on(graph, sip: int, data: np.ndarray):
    ctx = RuntimeContext(GraphEngine(graph, enable_data=True))
    ctx.set_device(sip)
    dp = DPPolicy(pe="row_wise", num_pes=4)
    x = ctx.from_numpy(data, dp=dp)
    y = ctx.empty(data.shape, "f32", dp=dp)
    handle = ctx.wait(ctx.launch("affine", affine, x, y, ROWS // 4, COLS, dp=dp))
    return handle, ctx.to_numpy(y), ctx


def expected(data: np.ndarray, sip: int, pes: int = 4) -> np.ndarray:
    out = 2.0 * data
    for p in range(pes):
        out[p * ROWS // pes:(p + 1) * ROWS // pes] += 100.0 * sip + p
    return out


@pytest.fixture(scope="module")
def four_sips():
    return load_topology(TOPOLOGIES / "llama70b_4sip.yaml")


def test_the_same_kernel_on_sip0_and_sip1_gives_the_same_latency_and_its_own_data(default_graph):
    data = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    h0, y0, _ = run_on(default_graph, 0, data)
    h1, y1, ctx1 = run_on(default_graph, 1, data)
    assert h0.kernel_ns == h1.kernel_ns and h0.host_ns == h1.host_ns  # a symmetric topology
    assert h1.sips == [1] and all(s == 1 for s, _, _ in h1.pes)
    np.testing.assert_array_equal(y0, expected(data, 0))
    np.testing.assert_array_equal(y1, expected(data, 1))
    # the work really ran on SIP 1: its PEs exist in the engine, SIP 0's do not
    assert {key[0] for key in ctx1.engine.pes} == {1}


def test_one_launch_on_every_sip_gives_each_its_own_result(four_sips):
    ctx = RuntimeContext(GraphEngine(four_sips, enable_data=True))
    dp = DPPolicy(pe="row_wise", num_pes=4)
    inputs, outputs = {}, {}
    rng = np.random.default_rng(3)
    for sip in range(ctx.device_count()):
        ctx.set_device(sip)
        inputs[sip] = rng.standard_normal((ROWS, COLS)).astype(np.float32)
        outputs[sip] = ctx.empty((ROWS, COLS), "f32", dp=dp, name=f"y{sip}")
        inputs[sip] = (inputs[sip], ctx.from_numpy(inputs[sip], dp=dp, name=f"x{sip}"))
    xs = {s: t for s, (_, t) in inputs.items()}
    handle = ctx.wait(ctx.launch("affine", affine, PerSip(xs), PerSip(outputs), ROWS // 4, COLS, dp=dp,
                                 sips="all"))
    assert handle.sips == [0, 1, 2, 3] and len(handle.pes) == 16
    for sip, (data, _) in inputs.items():
        np.testing.assert_allclose(ctx.to_numpy(outputs[sip]), expected(data, sip), rtol=1e-6)
    # VAs are unique across the system even though every SIP holds the same tensors
    vas = sorted((t.va, t.va + t.va_bytes) for t in list(xs.values()) + list(outputs.values()))
    assert all(a[1] <= b[0] for a, b in zip(vas, vas[1:], strict=False))


def test_a_kernel_given_another_sips_address_fails_with_one_line(default_graph):
    ctx = RuntimeContext(GraphEngine(default_graph, enable_data=True))
    x0 = ctx.from_numpy(np.ones((ROWS, COLS), np.float32), name="weights")  # on SIP 0
    ctx.set_device(1)
    y1 = ctx.empty((ROWS, COLS), "f32", name="out")
    with pytest.raises(KernelError) as info:
        ctx.wait(ctx.launch("affine", affine, x0.va, y1, ROWS, COLS))
    msg = str(info.value)
    assert "\n" not in msg
    assert "kernel 'affine'" in msg and "sip1.cube0.pe0" in msg
    assert f"{x0.va:#x}" in msg and "SIP 0" in msg and "'weights'" in msg


def test_a_composite_that_reads_another_sips_memory_fails_the_same_way(default_graph):
    from kernbench.kernels.gemm import gemm_composite

    ctx = RuntimeContext(GraphEngine(default_graph))
    a = ctx.empty((32, 64), name="A")
    ctx.set_device(1)
    b, c = ctx.empty((64, 32), name="B"), ctx.empty((32, 32), "f32", name="C")
    with pytest.raises(KernelError, match=r"sip1\.cube0\.pe0.*not mapped on this PE.*SIP 0, tensor 'A'"):
        ctx.wait(ctx.launch("gemm", gemm_composite, a.va, b, c, 32, 64, 32))


def test_a_composite_failing_while_its_kernel_waits_on_other_work_names_the_kernel(
        default_graph):
    """The fault happens while the kernel is blocked on a long load, not on the composite:
    the kernel sees it at its next wait for the composite, with its own context."""
    ctx = RuntimeContext(GraphEngine(default_graph))
    a = ctx.empty((32, 64), name="A")  # on SIP 0
    ctx.set_device(1)
    b, c = ctx.empty((64, 32), name="B"), ctx.empty((32, 32), "f32", name="C")
    big = ctx.empty((1024, 1024), name="big")

    def kernel(a, b, c, big, *, tl):
        out = tl.composite("gemm", a=tl.ref(a, (32, 64), "f16"), b=tl.ref(b, (64, 32), "f16"),
                           out_ptr=c, out_dtype="f32")
        tl.wait(tl.load(big, (1024, 1024), "f16"))  # 2 MiB: the composite fails meanwhile
        tl.wait(out)

    with pytest.raises(KernelError, match=r"kernel 'k' on sip1\.cube0\.pe0.*tl\.wait\(out\).*"
                                          r"not mapped on this PE.*SIP 0, tensor 'A'"):
        ctx.wait(ctx.launch("k", kernel, a.va, b, c, big))


def test_devices_are_checked(default_graph):
    ctx = RuntimeContext(GraphEngine(default_graph))
    assert ctx.device_count() == 2 and ctx.current_device() == 0
    with pytest.raises(UsageError, match=r"device 2 does not exist \(SIPs 0..1\)"):
        ctx.set_device(2)
    with pytest.raises(UsageError, match="distinct SIP ids"):
        ctx.launch("k", affine, 0, 0, 1, 1, sips=[1, 1])
    with pytest.raises(UsageError, match="no entry for SIP 1"):
        ctx.launch("k", affine, PerSip({0: 0}), 0, 1, 1, sips=[1])


def test_program_id_2_is_the_sip_and_num_programs_2_the_sip_count(four_sips):
    seen = []

    def k(*, tl):
        seen.append((tl.program_id(2), tl.num_programs(2), tl.program_id(1), tl.program_id(0)))

    ctx = RuntimeContext(GraphEngine(four_sips))
    ctx.wait(ctx.launch("ids", k, sips=[3, 1]))
    assert sorted(seen) == [(1, 4, 0, 0), (3, 4, 0, 0)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3 << 20), st.booleans()),
                min_size=1, max_size=40))
def test_virtual_addresses_are_unique_across_sips(ops):
    """Random allocations and frees on random SIPs: live ranges never overlap, and the
    directory names the SIP that owns every address."""
    graph = _FOUR_SIPS[0] or load_topology(TOPOLOGIES / "llama70b_4sip.yaml")
    _FOUR_SIPS[0] = graph
    system = SystemRuntime(GraphEngine(graph))
    live: list[tuple[int, int, int]] = []
    for sip, nbytes, free in ops:
        if free and live:
            va, size, _ = live.pop(len(live) // 2)
            system.release(va, size)
            continue
        va = system.reserve(nbytes, sip, f"t{len(live)}")
        live.append((va, nbytes, sip))
        spans = sorted((v, v + n) for v, n, _ in live)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
        for v, n, s in live:
            assert system.owner(v)[0] == s and system.owner(v + n - 1)[0] == s
    assert [(s, e) for s, e, _ in system.allocations()] == sorted(
        (v, v + n) for v, n, _ in live)


_FOUR_SIPS = [None]


def test_a_finished_run_frees_its_engine_and_runtime(default_graph):
    """The registry of system runtimes holds its engines weakly: once the caller drops a
    run, a collection frees the engine and its runtime. A runtime that referred back to
    its engine kept every run of a long process (the tests, in-process jobs) alive."""
    handle, _, ctx = run_on(default_graph, 0, np.ones((ROWS, COLS), np.float32))
    engine, runtime = weakref.ref(ctx.engine), weakref.ref(SystemRuntime.of(ctx.engine))
    del handle, ctx
    gc.collect()
    assert engine() is None and runtime() is None


def test_the_address_space_holds_what_the_system_s_memory_holds(default_graph):
    """llama70b_4sip has 3 TiB of HBM: a 70B prefill of 8K tokens keeps a 128 MiB
    residual row block on each of its 512 ranks twice over, 32 GiB per SIP in eight
    tensors, past the old fixed 64 GiB of VA. The larger space hands out the same first
    addresses (first fit from the base), so nothing placed before moves."""
    graph = _FOUR_SIPS[0] or load_topology(TOPOLOGIES / "llama70b_4sip.yaml")
    _FOUR_SIPS[0] = graph
    ctx = RuntimeContext(GraphEngine(graph))
    rows = DPPolicy(cube="row_wise", num_cubes=16, pe="row_wise", num_pes=8)
    for name in ("x", "r"):
        for sip in range(4):
            ctx.set_device(sip)
            ctx.empty((128 * 8192, 8192), "f16", dp=rows, name=f"{name}{sip}")
    spec = graph.spec
    hbm = spec.sips.count * spec.cubes_per_sip * spec.hbm.total_bytes
    assert SystemRuntime.of(ctx.engine).va.used == 2 * 4 * 16 * GiB <= hbm
    small = SystemRuntime(GraphEngine(default_graph))
    fixed = VirtualAllocator(page_size=default_graph.spec.pe.page_size)
    for nbytes in (5, 3 << 20, 1 << 30, 7):
        assert small.va.alloc(nbytes) == fixed.alloc(nbytes)
