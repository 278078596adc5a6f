"""Engine speed: simulated transfers per second, and engine events/s relative to
a bare SimPy timeout loop measured in the same process (runs alternate; the
median of the pair ratios is reported).

    python benchmarks/engine_speed.py [--transfers N] [--repeats R] [--json] [--topology PATH]

Reports figures; asserts nothing. Results also go to benchmarks/out/engine_speed.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import simpy

from kernbench.policy.address import PhysAddr
from kernbench.sim_engine import GraphEngine
from kernbench.sim_engine.engine import count_steps
from kernbench.topology import load_topology

ROOT = Path(__file__).resolve().parents[1]


def bare_simpy(n: int) -> float:
    """Events/s of a process doing nothing but `yield env.timeout(1)`."""
    env = simpy.Environment()

    def loop(env):
        for _ in range(n):
            yield env.timeout(1)

    env.process(loop(env))
    t0 = time.perf_counter()
    env.run()
    return n / (time.perf_counter() - t0)


def engine_closed_loop(graph, n: int, streams: int) -> tuple[float, float]:
    """``streams`` processes each issue PE DMA transfers back to back (wait for each).

    Returns (transfers/s, engine events/s). Events are counted by SimPy's own
    step() so process resumptions are included, not only completions.
    """
    eng = GraphEngine(graph)
    sb = graph.spec.hbm_slice_bytes
    pes = graph.spec.pes_per_cube
    per_stream = n // streams
    counter = count_steps(eng.env)

    def stream(env, k):
        cube, pe = k // pes % graph.spec.cubes_per_sip, k % pes
        dst_cube = (cube + k) % graph.spec.cubes_per_sip
        for i in range(per_stream):
            pa = PhysAddr.pe_hbm_addr(0, dst_cube, (pe + i) % pes, (i * 4096) % (1 << 30), sb)
            if i % 2:
                yield eng.pe_dma_write(0, cube, pe, pa, 4096)
            else:
                yield eng.pe_dma_read(0, cube, pe, pa, 4096)

    for k in range(streams):
        eng.env.process(stream(eng.env, k))
    t0 = time.perf_counter()
    eng.run()
    dt = time.perf_counter() - t0
    done = eng.submitted  # every one has completed: the queue is empty
    return done / dt, counter[0] / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transfers", type=int, default=40_000)
    ap.add_argument("--topology", default=str(ROOT / "config/topologies/default.yaml"))
    ap.add_argument("--repeats", type=int, default=5, help="bare/engine pairs per stream count")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args()
    graph = load_topology(args.topology)
    rows = []
    bares = []
    for streams in (1, 8, 128):
        # bare and engine runs alternate, so a change of machine speed during the
        # benchmark affects both sides of each ratio; the median pair is reported
        pairs = []
        for _ in range(args.repeats):
            bare = bare_simpy(200_000)
            tps, eps = engine_closed_loop(graph, args.transfers, streams)
            pairs.append((eps / bare, tps, eps, bare))
        ratio, tps, eps, bare = sorted(pairs)[len(pairs) // 2]
        bares.append(bare)
        rows.append({"streams": streams, "transfers_per_s": tps, "events_per_s": eps,
                     "events_ratio_vs_bare_simpy": ratio,
                     "ratios": [round(p[0], 4) for p in pairs]})
    bare = statistics.median(bares)
    report = {"topology": graph.spec.name, "bare_simpy_events_per_s": bare, "runs": rows}
    out = ROOT / "benchmarks" / "out" / "engine_speed.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"bare SimPy timeout loop: {bare:,.0f} events/s (median)")
    print(f"{'streams':>8} {'transfers/s':>12} {'events/s':>12} {'ratio':>7}")
    for r in rows:
        print(f"{r['streams']:8d} {r['transfers_per_s']:12,.0f} {r['events_per_s']:12,.0f} "
              f"{r['events_ratio_vs_bare_simpy']:7.3f}  (pairs: "
              + ", ".join(f"{x:.3f}" for x in r["ratios"]) + ")")


if __name__ == "__main__":
    main()
