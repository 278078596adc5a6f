"""Weight-streaming supertiles (``tile_shape="stream"``, ADR 0041): the tile the rule
picks, the DMAs a composite then issues, the time it takes, and bad input."""

from __future__ import annotations

import math

import pytest

from kernbench.components.tiling import stream_supertile
from kernbench.errors import ConfigError
from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine import GraphEngine
from kernbench.triton_emu.kernel_runner import KernelError

TILE = (32, 64, 32)
SHAPES = [(4096, 24), (4096, 8), (16, 4096), (56, 4096), (4096, 501), (8192, 2), (112, 8192),
          (300, 70), (64, 64)]


def _best(K: int, N: int, budget: int) -> tuple[int, int]:
    """Independent search: all of K if an A tile of 32 rows that deep fits the budget,
    else the deepest multiple of 64 that does (at least 64); then the widest n (a
    multiple of 32, at most N rounded up, at least 32) whose weight tile fits beside it."""
    depths = [k for k in range(64, K + 1, 64) if 32 * k * 2 <= budget] or [64]
    tk = K if 32 * K * 2 <= budget or K <= 64 else max(depths)
    widths = [n for n in range(32, math.ceil(N / 32) * 32 + 1, 32) if tk * n * 2 <= budget]
    return tk, max(widths or [32])


@pytest.mark.parametrize("K,N", SHAPES)
@pytest.mark.parametrize("kib", [4, 16, 32])
def test_stream_supertile_is_the_largest_tile_in_budget(K, N, kib):
    tm, tk, tn = stream_supertile(TILE, kib * 1024, K, N)
    assert tm == 32
    assert (tk, tn) == _best(K, N, kib * 1024)
    assert tk * min(tn, N) * 2 <= max(kib * 1024, 64 * 32 * 2)


def _gemm(a, w, o, M: int, K: int, N: int, tile_shape, *, tl):
    x = tl.load(a, (M, K), "f16")
    tl.wait(tl.composite("gemm", a=x, b=tl.ref(w, (K, N), "f16"), out_ptr=o,
                         out_dtype="f32", tile_shape=tile_shape))


def _run(graph, M, K, N, tile_shape, data=False):
    import numpy as np

    eng = GraphEngine(graph, keep_records=False, enable_data=data)
    ctx = RuntimeContext(eng)
    rng = np.random.default_rng(1)
    av = rng.standard_normal((M, K)).astype(np.float16)
    wv = rng.standard_normal((K, N)).astype(np.float16)
    if data:
        a, w = ctx.from_numpy(av), ctx.from_numpy(wv)
    else:
        a, w = ctx.empty((M, K)), ctx.empty((K, N))
    o = ctx.empty((M, N), "f32")
    h = ctx.wait(ctx.launch("gemm", _gemm, a, w, o, M, K, N, tile_shape))
    out = ctx.to_numpy(o) if data else None
    return h.kernel_ns, dict(eng.op_log.counts), out, av.astype(np.float32) @ wv.astype(
        np.float32)


@pytest.mark.parametrize("M,K,N", [(2, 1024, 96), (1, 16, 4096), (5, 4096, 24)])
def test_streaming_gemm_reads_one_dma_per_stream_tile(default_graph, M, K, N):
    spec = default_graph.spec.pe
    _, tk, tn = stream_supertile(TILE, spec.stream_tile_bytes, K, N)
    ns, counts, _, _ = _run(default_graph, M, K, N, "stream")
    tiles = math.ceil(K / tk) * math.ceil(N / tn)
    assert counts["TileToken/DMA_READ"] == tiles
    # never faster than the weight over the PE's HBM link, nor than its MAC cycles
    weight_ns = K * N * 2 / spec.link.bw_gbs
    assert ns >= weight_ns and ns >= math.ceil(K / 32) * math.ceil(N / 32) * M
    ns_default, counts_default, _, _ = _run(default_graph, M, K, N, None)
    assert counts_default["TileToken/DMA_READ"] > tiles
    assert ns == pytest.approx(ns_default, rel=0.25)  # same work, other fill granularity


def test_streaming_gemm_equals_numpy(small_graph):
    _, _, out, ref = _run(small_graph, 3, 300, 70, "stream", data=True)
    assert abs(out - ref).max() <= 2e-3 * abs(ref).max()


@pytest.mark.parametrize("bad", [(32, 64), (0, 64, 32), "wide", (32.0, 64, 32)])
def test_bad_tile_shape_is_a_kernel_misuse(small_graph, bad):
    with pytest.raises(KernelError, match="KernelMisuse: tl.composite: tile_shape"):
        _run(small_graph, 2, 64, 64, bad)


def test_stream_tiles_must_fit_the_reserved_tcm(tmp_path):
    from kernbench.topology import load_topology

    from .conftest import ROOT

    (tmp_path / "t.yaml").write_text(
        f"extends: {ROOT / 'config/topologies/default.yaml'}\nname: t\n"
        "pe: {scheduler: {stream_tile_kb: 64}}\n")
    with pytest.raises(ConfigError, match="pe.scheduler.stream_tile_kb"):
        load_topology(tmp_path / "t.yaml")
