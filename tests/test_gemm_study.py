"""GEMM study acceptance: the composite tracks the roofline; primitives lose, and why."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from kernbench.experiments import gemm
from kernbench.topology import load_topology

from .conftest import ROOT, TOPOLOGIES

CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
SHAPES = CONFIG["experiments"]["gemm"]["shapes"]


@pytest.fixture(scope="module")
def graph():
    return load_topology(TOPOLOGIES / "default.yaml")


@pytest.fixture(scope="module")
def composite_points(graph):
    return {s["name"]: gemm.run(graph, s, {"kernel": "composite", "pes": 1}) for s in SHAPES}


@pytest.fixture(scope="module")
def ideal_points():
    """The same points on the ideal array (a weight block reloads every cycle)."""
    ideal = load_topology(TOPOLOGIES / "array_ideal.yaml")
    return {s["name"]: gemm.run(ideal, s, {"kernel": "composite", "pes": 1}) for s in SHAPES}


def test_study_has_24_shapes_from_memory_to_compute_bound(ideal_points):
    bounds = {p["prediction"]["bound"] for p in ideal_points.values()}
    assert len(SHAPES) == 24 and bounds == {"memory", "compute"}
    names = {s["name"] for s in SHAPES}
    for model in ("l8b", "l70b"):
        for phase in ("decode", "prefill"):
            assert any(n.startswith(model) and n.endswith(phase) for n in names)


def test_one_weight_row_per_cycle_makes_every_decode_shape_array_bound(composite_points,
                                                                        graph):
    """With the default array (one weight row per cycle) a decode GEMV consumes
    mac_cols weights per cycle: 64 B/ns of f16 against a 256 GB/s slice."""
    pe = graph.spec.pe
    weights_per_ns = pe.gemm.weight_rows_per_cycle * pe.gemm.mac_cols * 2 * pe.clock_ghz
    assert weights_per_ns < graph.spec.slice_bw_gbs
    for s in SHAPES:
        if s["group"] == "decode":
            p = composite_points[s["name"]]
            assert p["prediction"]["bound"] == "compute", s["name"]
            assert p["prediction"]["compute_ns"] >= s["k"] * s["n"] * 2 / weights_per_ns


@pytest.mark.parametrize("which", ["default", "ideal"])
def test_composite_is_within_5_percent_of_roofline_when_compute_bound(
        composite_points, ideal_points, which):
    points = composite_points if which == "default" else ideal_points
    compute = {n: p for n, p in points.items() if p["prediction"]["bound"] == "compute"}
    assert len(compute) >= 10
    for name, p in compute.items():
        assert p["prediction"]["rel_error"] <= 0.05, (name, p["prediction"])
        assert p["metrics"]["latency_ns"] >= p["prediction"]["latency_ns"]  # never beats the bound


def test_composite_streams_memory_bound_shapes_at_the_bandwidth_bound(ideal_points):
    """Every memory-bound shape is within 10 % of bytes / slice bandwidth, and what is
    left is a constant pipeline latency (head + tail): unit slope against the bound."""
    mem = {n: p for n, p in ideal_points.items() if p["prediction"]["bound"] == "memory"}
    assert len(mem) >= 8
    roof = np.array([p["prediction"]["latency_ns"] for p in mem.values()])
    sim = np.array([p["metrics"]["latency_ns"] for p in mem.values()])
    slope, offset = np.polyfit(roof, sim, 1)
    assert 0.99 <= slope <= 1.02, slope
    assert 0 < offset < 0.05 * roof.max()
    for (name, p), r, s in zip(mem.items(), roof, sim, strict=True):
        assert r <= s <= 1.10 * r, (name, p["prediction"]["rel_error"])


# Llama-3 model dimensions (published configs): hidden, FFN, Q heads, KV heads, head dim.
LLAMA3 = {"l8b": (4096, 14336, 32, 8, 128), "l70b": (8192, 28672, 64, 8, 128)}


def _per_cube_shard(model: str, proj: str, cubes: int) -> tuple[int, int]:
    """(k, n) of one CUBE's share: N split over the CUBEs, K/V by whole heads."""
    hidden, ffn, q_heads, kv_heads, head_dim = LLAMA3[model]
    kv_heads_per_cube = max(1, kv_heads // cubes)  # fewer heads than CUBEs: replicate
    return {"q": (hidden, q_heads * head_dim // cubes),
            "kv": (hidden, kv_heads_per_cube * head_dim),
            "o": (hidden, hidden // cubes),
            "gateup": (hidden, ffn // cubes),
            "down": (ffn, hidden // cubes)}[proj]


def test_llama_shapes_are_the_per_cube_shards_of_the_published_models(graph):
    tokens = {"decode": 1, "prefill": 256}
    llama = [s for s in SHAPES if s["group"] in tokens]
    assert len(llama) == 2 * 5 * 2
    for s in llama:
        model, proj, phase = s["name"].split("-")
        k, n = _per_cube_shard(model, proj, graph.spec.cubes_per_sip)
        assert (s["m"], s["k"], s["n"]) == (tokens[phase], k, n), s["name"]


@pytest.mark.parametrize("shape", ["l8b-q-decode", "l70b-q-decode", "l8b-q-prefill", "sq256"])
def test_primitive_variants_are_slower_and_the_breakdown_says_why(graph, shape, composite_points):
    s = next(x for x in SHAPES if x["name"] == shape)
    comp = composite_points[shape]
    prim = gemm.run(graph, s, {"kernel": "primitive", "pes": 1})
    pref = gemm.run(graph, s, {"kernel": "prefetch", "pes": 1})
    assert comp["metrics"]["latency_ns"] < pref["metrics"]["latency_ns"] < prim["metrics"]["latency_ns"]
    for p in (prim, pref):
        # one descriptor per tile step instead of one per kernel ...
        assert p["metrics"]["commands_per_pe"] > 100 * comp["metrics"]["commands_per_pe"]
        assert p["metrics"]["stage_busy_ns"]["PE_CPU"] > 50 * comp["metrics"]["stage_busy_ns"]["PE_CPU"]
        # ... and engines idle while the kernel waits: the GEMM stage fills less of the time
        busy = p["metrics"]["stage_busy_ns"]["GEMM"] / p["metrics"]["latency_ns"]
        comp_busy = comp["metrics"]["stage_busy_ns"]["GEMM"] / comp["metrics"]["latency_ns"]
        assert busy < comp_busy
    # prefetching hides DMA: less time with only DMA in flight than the primitive kernel
    assert pref["metrics"]["latency_ns"] - pref["metrics"]["stage_busy_ns"]["DMA_READ"] < \
        prim["metrics"]["latency_ns"] - prim["metrics"]["stage_busy_ns"]["DMA_READ"]


def test_cube_split_divides_compute_bound_time_by_the_pe_count(graph, composite_points):
    s = next(x for x in SHAPES if x["name"] == "l70b-q-prefill")
    cube = gemm.run(graph, s, {"kernel": "composite", "pes": 8})
    one = composite_points["l70b-q-prefill"]
    assert one["metrics"]["latency_ns"] / cube["metrics"]["latency_ns"] == pytest.approx(8, rel=0.05)
