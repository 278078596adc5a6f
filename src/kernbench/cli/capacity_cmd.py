"""``kernbench capacity``: PEs, replicas and systems for a model, axis by axis."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("capacity", help="how many PEs and systems serve a model: weights, "
                                        "KV capacity, decode latency")
    p.add_argument("--model", required=True,
                   help="llama3-8b | llama3-70b | a YAML file (layers, hidden, heads, kv_heads, "
                        "d_head, ffn, b)")
    p.add_argument("--topology", default="default", help="topology name or file (the chip)")
    p.add_argument("--context", type=int, required=True, help="tokens of context per user")
    p.add_argument("--users", type=int, required=True, help="concurrent users to serve")
    p.add_argument("--tpot-ms", type=float, dest="tpot_ms", required=True,
                   help="time-per-output-token target in ms")
    p.add_argument("--table", default="results/tables/gqa.csv",
                   help="the attention study's table (decode efficiency against context)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead")
    p.set_defaults(func=run)


def run(args) -> int:
    from kernbench.capacity.models import load_model
    from kernbench.capacity.planner import Chip, Efficiency, fmt, plan

    result = plan(load_model(args.model), Chip.from_topology(args.topology),
                  Efficiency.from_table(Path(args.table)), args.context, args.users,
                  args.tpot_ms)
    if args.json:
        print(json.dumps(result, sort_keys=True))
        return 0
    print(f"{result['model']} on {result['topology']}: {args.users} users at {args.context} "
          f"tokens, {args.tpot_ms:g} ms per token")
    print(f"decode efficiency eff = {result['efficiency']['value']:.4f}, "
          f"{result['efficiency']['source']}")
    for key, axis in result["axes"].items():
        print(f"\n{key}. {axis['title']}")
        for s in axis["steps"]:
            print(f"  {s['formula']}")
            print(f"    = {s['substituted']}")
            print(f"    = {fmt(s['value'])} {s['unit']}  ({s['meaning']})")
    return 0
