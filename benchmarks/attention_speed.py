"""Simulation speed of the attention headline points, against a bare SimPy loop.

    python benchmarks/attention_speed.py [--json] [--decode 131072] [--prefill 1024]
                                         [--plans-baseline 2048]

Runs decode (C=1, P=8, opt3, tile 1024) and causal ring prefill (C=8, P=8,
query blocks of 512 rows, KV tiles of 256) on
the full llama70b_4sip placement (all 8 KV heads, all 4 SIPs) in timing mode,
one core, and reports wall seconds, simulated microseconds, PE_CPU commands per
wall second, and the bare SimPy timeout loop's events per second measured in
the same run (the ratio is what compares across machines). ``--plans-baseline N``
also times prefill at N tokens with composite plans off (every composite tile by
tile) and on, the speed-up of docs/adr/0027 and 0028 measured in one run. Results
also go to benchmarks/out/attention_speed.json. Reports figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from engine_speed import bare_simpy

from kernbench.experiments.gqa.decode_run import run_decode
from kernbench.experiments.gqa.prefill_run import run_prefill
from kernbench.topology import load_topology

ROOT = Path(__file__).resolve().parents[1]


def _point(label: str, fn) -> dict:
    t0 = time.perf_counter()
    r = fn()
    wall = time.perf_counter() - t0
    commands = sum(u.cpu.commands for u in r.engine.pes.values())
    return {"point": label, "wall_s": wall, "simulated_us": r.latency_ns / 1000,
            "bound_pct": 100 * r.bound_ns / r.latency_ns, "commands": commands,
            "commands_per_s": commands / wall, "pes": r.pes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--decode", type=int, default=131072, help="decode context (tokens)")
    ap.add_argument("--prefill", type=int, default=1024, help="prefill context (tokens)")
    ap.add_argument("--plans-baseline", type=int, default=0, metavar="N",
                    help="also time prefill at N tokens with composite plans off and on")
    args = ap.parse_args()
    graph = load_topology(ROOT / "config/topologies/llama70b_4sip.yaml")
    bare = max(bare_simpy(300_000) for _ in range(3))
    points = [
        _point(f"decode {args.decode}", lambda: run_decode(graph, args.decode, C=1, P=8,
                                                           variant="opt3", tile=1024)),
        _point(f"prefill {args.prefill}", lambda: run_prefill(graph, args.prefill, C=8, P=8,
                                                             q_rows=512, tile=256)),
    ]
    if args.plans_baseline:
        def prefill(planned: bool):
            return run_prefill(graph, args.plans_baseline, C=8, P=8, q_rows=512, tile=256,
                               planned=planned)

        off = _point(f"prefill {args.plans_baseline}, plans off", lambda: prefill(False))
        on = _point(f"prefill {args.plans_baseline}, plans on", lambda: prefill(True))
        points += [off, on]
    report = {"bare_simpy_events_per_s": bare, "points": points}
    out = ROOT / "benchmarks" / "out" / "attention_speed.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        print(json.dumps(report))
        return
    print(f"bare SimPy loop: {bare / 1e6:.2f} M events/s")
    for p in points:
        print(f"{p['point']:>28s}: {p['wall_s']:7.1f} s wall, {p['simulated_us']:10.1f} us "
              f"simulated ({p['bound_pct']:.1f} % of bound), {p['commands']} commands, "
              f"{p['commands_per_s']:.0f} commands/s")
    if args.plans_baseline:
        off, on = points[-2], points[-1]
        rel = abs(on["simulated_us"] - off["simulated_us"]) / off["simulated_us"]
        print(f"plans on vs off: {off['wall_s'] / on['wall_s']:.2f}x faster; simulated times "
              f"differ by {rel:.1e} (relative)")


if __name__ == "__main__":
    main()
