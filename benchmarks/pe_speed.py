"""PE commands per wall second on the headline workloads, next to a bare SimPy loop.

    python benchmarks/pe_speed.py [--json] [--only NAME ...] [--out PATH]

Workloads (timing mode, each in a fresh process, one core):

- ``gemm_composite``: one PE runs the composite GEMM kernel on 2048x512x512 over
  HBM operands (default topology): one ``tl.composite`` whose supertiles the
  PE_SCHEDULER streams through DMA, the array and back;
- ``decode_128k``: fused GQA decode at 131,072 tokens, C=1, P=8, opt3, tile 1024,
  all 8 KV heads of llama70b_4sip;
- ``prefill_8k`` / ``prefill_32k``: causal ring prefill at 8,192 / 32,768 tokens,
  C=8, P=8, 512 query rows, 256-row KV tiles, all of llama70b_4sip.

A PE command is one command the PE_CPU dispatched (``PeCpu.commands``); inside a
composite the PE_SCHEDULER issues the work, so for ``gemm_composite`` the count is
the composite's supertiles (each a DMA read, a GEMM and its share of the write). The bare
SimPy timeout loop's events per second, measured in the same run, is what makes
figures from different machines comparable. Each workload's simulated time is
reported too, so a speed change that alters results shows. Writes
benchmarks/out/pe_speed.json (or --out); asserts nothing.
"""

from __future__ import annotations

import time
from pathlib import Path

import workload_report

from kernbench.components.tiling import tile_count
from kernbench.experiments.gqa.decode_run import run_decode
from kernbench.experiments.gqa.prefill_run import run_prefill
from kernbench.kernels.gemm import VARIANTS
from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine import GraphEngine
from kernbench.topology import load_topology

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGIES = ROOT / "config" / "topologies"


def _commands(engine) -> int:
    return sum(u.cpu.commands for u in engine.pes.values())


def gemm_composite() -> tuple[int, float]:
    graph = load_topology(TOPOLOGIES / "default.yaml")
    eng = GraphEngine(graph, keep_records=False)
    ctx = RuntimeContext(eng)
    M, K, N = 2048, 512, 512
    a, b, c = ctx.empty((M, K)), ctx.empty((K, N)), ctx.empty((M, N), "f32")
    handle = ctx.wait(ctx.launch("composite", VARIANTS["composite"], a, b, c, M, K, N))
    pe = graph.spec.pe
    return tile_count(M, K, N, pe.tile_m, pe.tile_k, pe.tile_n), handle.kernel_ns


def _attention(run) -> tuple[int, float]:
    r = run(load_topology(TOPOLOGIES / "llama70b_4sip.yaml"))
    return _commands(r.engine), r.latency_ns


WORKLOADS = {
    "gemm_composite": gemm_composite,
    "decode_128k": lambda: _attention(
        lambda g: run_decode(g, 131072, C=1, P=8, variant="opt3", tile=1024)),
    "prefill_8k": lambda: _attention(
        lambda g: run_prefill(g, 8192, C=8, P=8, q_rows=512, tile=256)),
    "prefill_32k": lambda: _attention(
        lambda g: run_prefill(g, 32768, C=8, P=8, q_rows=512, tile=256)),
}


def measure(name: str) -> dict:
    t0 = time.perf_counter()
    commands, simulated_ns = WORKLOADS[name]()
    wall = time.perf_counter() - t0
    return {"pe_commands": commands, "wall_s": round(wall, 3),
            "pe_commands_per_s": round(commands / wall, 1), "simulated_ns": simulated_ns}


def _line(name: str, w: dict) -> str:
    return (f"{name:>15s}: {w['pe_commands']:9d} PE commands in {w['wall_s']:8.2f} s = "
            f"{w['pe_commands_per_s']:10.0f} /s (simulated {w['simulated_ns'] / 1000:.2f} us)")


def main() -> None:
    workload_report.run(__doc__, WORKLOADS, measure, ROOT / "benchmarks" / "out" / "pe_speed.json",
                        _line)


if __name__ == "__main__":
    main()
