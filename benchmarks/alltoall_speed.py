"""Wall time of one all-to-all, against the MoE issue's target.

    python benchmarks/alltoall_speed.py [--json] [--only NAME ...] [--out PATH]

Workloads (timing mode, each in a fresh process, one core): 1.5 MiB per SIP (96 KiB sent by
each of 96 ranks) on six SIPs of 16 CUBEs, on each six-SIP topology and with each
all-to-all algorithm (target: <= 10 s wall). Each reports wall seconds (engine,
kernel and model; the topology load apart), the simulated and predicted times, the
messages sent, and the bare SimPy events per second of the same run, so machines
compare. Writes benchmarks/out/alltoall_speed.json (or --out); asserts nothing.
"""

from __future__ import annotations

import time
from pathlib import Path

import workload_report

from kernbench.topology import load_topology
from kernbench.workloads.alltoall_run import run_alltoall

ROOT = Path(__file__).resolve().parents[1]
SIZE = 96 * 1024
WORKLOADS = {f"{t}_{a.removeprefix('a2a_')}": (t, a)
             for t in ("sips6_mesh", "sips6_torus", "sips6_ring")
             for a in ("a2a_hierarchical", "a2a_direct")}


def measure(name: str) -> dict:
    topology, algorithm = WORKLOADS[name]
    graph = load_topology(ROOT / "config" / "topologies" / f"{topology}.yaml")
    t0 = time.perf_counter()
    r = run_alltoall(graph, algorithm, SIZE)
    wall = time.perf_counter() - t0
    return {"topology": topology, "algorithm": algorithm, "ranks": len(r.ranks),
            "bytes_per_rank": SIZE, "wall_s": round(wall, 2),
            "simulated_us": round(r.time_ns / 1000, 3),
            "predicted_us": round(r.predicted_ns / 1000, 3),
            "messages": r.op_counts.get("ipcq_send", 0)}


def _line(name: str, w: dict) -> str:
    return (f"{name:>24s}: {w['wall_s']:6.2f} s wall, {w['simulated_us']:8.3f} us simulated, "
            f"{w['predicted_us']:8.3f} us predicted, {w['messages']} messages")


def main() -> None:
    workload_report.run(__doc__, WORKLOADS, measure,
                        ROOT / "benchmarks" / "out" / "alltoall_speed.json", _line)


if __name__ == "__main__":
    main()
