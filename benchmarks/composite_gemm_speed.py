"""Simulation speed of a single-PE composite GEMM of 2048 supertiles.

    python benchmarks/composite_gemm_speed.py [--m 512 --k 512 --n 512]

Reports wall time on one core (one process), simulated SimPy events and
events per second, and, for comparison, the primitive kernel on the same
shape. Reports figures; asserts nothing. Results: benchmarks/out/composite_gemm_speed.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from kernbench.components.tiling import tile_count
from kernbench.kernels.gemm import VARIANTS
from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine import GraphEngine
from kernbench.topology import load_topology

ROOT = Path(__file__).resolve().parents[1]


def run(graph, kernel: str, M: int, K: int, N: int) -> dict:
    eng = GraphEngine(graph, keep_records=False)
    scheduled = [0]
    schedule = eng.env.schedule

    def counting(event, priority=1, delay=0):
        scheduled[0] += 1
        schedule(event, priority, delay)

    eng.env.schedule = counting
    ctx = RuntimeContext(eng)
    a, b, c = ctx.empty((M, K)), ctx.empty((K, N)), ctx.empty((M, N), "f32")
    t0 = time.perf_counter()
    handle = ctx.wait(ctx.launch(kernel, VARIANTS[kernel], a, b, c, M, K, N))
    wall = time.perf_counter() - t0
    return {"kernel": kernel, "wall_s": wall, "events": scheduled[0],
            "events_per_s": scheduled[0] / wall, "simulated_ns": handle.kernel_ns,
            "commands": eng.pe(0, 0, 0).cpu.commands}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=512)
    ap.add_argument("--k", type=int, default=512)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--topology", default=str(ROOT / "config/topologies/default.yaml"))
    args = ap.parse_args()
    graph = load_topology(args.topology)
    spec = graph.spec.pe
    tiles = tile_count(args.m, args.k, args.n, spec.tile_m, spec.tile_k, spec.tile_n)
    rows = [min((run(graph, kernel, args.m, args.k, args.n) for _ in range(3)),
                key=lambda r: r["wall_s"]) for kernel in ("composite", "prefetch", "primitive")]
    print(f"GEMM {args.m}x{args.k}x{args.n} on one PE = {tiles} supertiles "
          f"({spec.tile_m}x{spec.tile_k}x{spec.tile_n})")
    print(f"{'kernel':10s} {'wall s':>8s} {'events':>9s} {'events/s':>10s} {'commands':>9s} {'sim us':>9s}")
    for r in rows:
        print(f"{r['kernel']:10s} {r['wall_s']:8.3f} {r['events']:9d} {r['events_per_s']:10,.0f} "
              f"{r['commands']:9d} {r['simulated_ns'] / 1000:9.1f}")
    out = ROOT / "benchmarks" / "out" / "composite_gemm_speed.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"shape": [args.m, args.k, args.n], "supertiles": tiles,
                               "runs": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
