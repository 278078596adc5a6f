"""The ``gemm`` experiment: shapes x kernel variants (primitive, prefetch, composite),
on one PE or split by columns over the PEs of a CUBE.

Workload = a GEMM shape (the per-CUBE shard of a Llama-3 projection, or a
synthetic one); variant = kernel, PE count and the operand the array holds. Each point reports the kernel
time, the busy time of every pipeline stage, MAC utilisation, PE_CPU
dispatch, and the roofline prediction (``roofline.py``) with its relative
error. Tables, figures and values live in ``post.py``, the paper text next
to this file.
"""

from __future__ import annotations

import sys

from kernbench.components.tiling import supertile, tile_count
from kernbench.errors import ConfigError
from kernbench.experiments.gemm.roofline import gemm_roofline
from kernbench.experiments.registry import (
    Experiment,
    package_files,
    package_schema,
    package_text,
    register,
)
from kernbench.kernels.gemm import VARIANTS
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api.context import RuntimeContext
from kernbench.sim_engine.engine import GraphEngine
from kernbench.topology.graph import TopologyGraph
from kernbench.topology.spec import TopologySpec

NAME = "gemm"
STAGES = ("DMA_READ", "FETCH", "GEMM", "MATH", "STORE", "DMA_WRITE", "PE_CPU")


def expand(block: dict, spec: TopologySpec, source: str) -> tuple[list[tuple[str, dict]],
                                                                  list[tuple[str, dict]]]:
    workloads = [(shape["name"], dict(shape)) for shape in block["shapes"]]
    variants = []
    for vid, v in block["variants"].items():
        pes = v["pes"]
        if pes > spec.pes_per_cube:
            raise ConfigError(source, f"experiments.{NAME}.variants.{vid}.pes",
                              f"{pes} exceeds the {spec.pes_per_cube} PEs of a CUBE in {spec.name}")
        for i, shape in enumerate(block["shapes"]):
            if shape["n"] % pes:
                raise ConfigError(source, f"experiments.{NAME}.shapes[{i}].n",
                                  f"{shape['n']} does not split over the {pes} PEs of variant {vid}")
        variants.append((vid, dict(v)))
    return workloads, variants


def batch(shape_id: str, shape: dict) -> str:
    """Every shape of a group (decode, prefill, synthetic) runs in one job per variant:
    most shapes simulate in well under the second a process start costs."""
    return f"{shape.get('group') or 'other'}-shapes"


def run(graph: TopologyGraph, workload: dict, variant: dict) -> dict:
    spec = graph.spec
    M, K, N = int(workload["m"]), int(workload["k"]), int(workload["n"])
    kernel, pes = variant["kernel"], int(variant["pes"])
    engine = GraphEngine(graph, keep_records=False)
    ctx = RuntimeContext(engine)
    split = DPPolicy(pe="column_wise", num_pes=pes) if pes > 1 else DPPolicy()
    a = ctx.empty((M, K), "f16", dp=DPPolicy(num_pes=pes), name="A")
    b = ctx.empty((K, N), "f16", dp=split, name="B")
    c = ctx.empty((M, N), "f32", dp=split, name="C")
    stationary = variant.get("stationary", "b")
    handle = ctx.wait(ctx.launch(f"gemm-{kernel}", VARIANTS[kernel], a, b, c, M, K, N // pes,
                                 stationary=stationary, dp=DPPolicy(num_pes=pes)))
    kernel_ns = handle.kernel_ns
    busy = engine.op_log.stage_busy()
    units = [engine.pe(0, 0, p) for p in range(pes)]
    stage_ns = {s: sum(busy.get(u.prefix, {}).get(s, 0.0) for u in units) / pes for s in STAGES}
    roof = gemm_roofline(spec, M, K, N // pes, stationary=stationary)
    tile = supertile((spec.pe.tile_m, spec.pe.tile_k, spec.pe.tile_n), K, N // pes)
    peak_macs_per_ns = spec.pe.gemm.mac_rows * spec.pe.gemm.mac_cols * spec.pe.clock_ghz * pes
    util = 100.0 * M * K * N / (kernel_ns * peak_macs_per_ns)
    cycles = sum(u.cpu.dispatch_cycles for u in units) / pes
    commands = sum(u.cpu.commands for u in units) / pes
    return {
        "metrics": {
            "latency_ns": kernel_ns,
            "host_ns": handle.host_ns,
            "mac_util_pct": util,
            "stage_busy_ns": stage_ns,
            "dispatch_cycles_per_pe": cycles,
            "commands_per_pe": commands,
            "tflops": 2.0 * M * K * N / kernel_ns / 1000.0,
            "supertile": list(tile),
            "supertiles_per_pe": tile_count(M, K, N // pes, *tile),
        },
        "prediction": {
            "model": "roofline: max(array cycles, minimum bytes / slice bandwidth)",
            "latency_ns": roof.roofline_ns,
            "compute_ns": roof.compute_ns,
            "memory_ns": roof.memory_ns,
            "bound": roof.bound,
            "intensity": roof.intensity,
            "util_pct": roof.util_pct,
            "rel_error": abs(kernel_ns - roof.roofline_ns) / roof.roofline_ns,
        },
        "op_counts": dict(sorted(engine.op_log.counts.items())),
        "occupancy": {u.prefix: {k: 100.0 * v / kernel_ns for k, v in u.engine_busy_ns().items()}
                      for u in units[:1]},
        "labels": {"shape": workload["name"], "m": M, "k": K, "n": N, "kernel": kernel, "pes": pes,
                   "group": workload.get("group", ""), "stationary": stationary},
    }


register(Experiment(
    name=NAME,
    title="GEMM acceleration via the composite command",
    topic="GEMM on one PE and one CUBE",
    schema=package_schema(__name__),
    expand=expand,
    run=run,
    post=f"{__name__}.post",
    figures=("gemm_breakdown", "gemm_util", "gemm_util_vs_roofline"),
    tables=("gemm_table",),
    section=package_text(__name__, "section.tex"),
    abstract=package_text(__name__, "abstract.tex"),
    conclusion=package_text(__name__, "conclusion.tex"),
    order=20,
    seed_benches=("milestone-1h-gemm",),
    batch=batch,
    files=package_files(sys.modules[__name__]),
))
