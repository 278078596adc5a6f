"""``kernbench capacity``: PEs, replicas and systems for a model, axis by axis."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from kernbench.errors import UsageError


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


def check_args(args) -> None:
    """Every argument, in the order they are declared, before any file is read."""
    from kernbench.capacity.models import PRESETS
    from kernbench.capacity.planner import topology_path

    model = Path(args.model)
    if args.model not in PRESETS and (model.suffix not in (".yaml", ".yml")
                                      or not model.is_file()):
        raise UsageError(f"--model {args.model!r}: not a preset ({', '.join(PRESETS)}) "
                         f"nor a model YAML file")
    topology_path(args.topology)
    for flag, value, allowed in (("--context", args.context, "an integer number of tokens"),
                                 ("--users", args.users, "an integer number of users"),
                                 ("--tpot-ms", args.tpot_ms, "a finite number of ms")):
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} {value}: must be positive ({allowed})")
    if not Path(args.table).is_file():
        raise UsageError(f"--table {args.table}: the attention study's table is missing; "
                         f"build it with `snakemake --cores 2 results/tables/gqa.csv`")


def run(args) -> int:
    from kernbench.capacity.models import load_model
    from kernbench.capacity.planner import Chip, Efficiency, fmt, plan

    check_args(args)
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
