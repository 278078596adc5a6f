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
                   help="llama3-8b | llama3-70b | a model file: a Hugging Face config.json or "
                        "the same keys in YAML")
    p.add_argument("--topology", default="default", help="topology name or file (the chip)")
    p.add_argument("--context", type=int, required=True, help="tokens of context per user")
    p.add_argument("--users", type=int, required=True, help="concurrent users to serve")
    p.add_argument("--tpot-ms", type=float, dest="tpot_ms", required=True,
                   help="time-per-output-token target in ms")
    p.add_argument("--table",
                   help="the attention study's table (decode efficiency against context) for "
                        "axis C; default results/tables/gqa.csv, and when that is missing axis "
                        "C is reported as unavailable (A and B need no table)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead")
    p.set_defaults(func=run)


def check_args(args) -> Path:
    """Every argument, in the order they are declared, before any file is read; returns
    the topology's file (``--topology`` resolved as every command resolves it)."""
    from kernbench.cli.common import resolve_topology
    from kernbench.models import check_model_name

    check_model_name(args.model)
    topology = resolve_topology(args.topology)
    for flag, value, allowed in (("--context", args.context, "an integer number of tokens"),
                                 ("--users", args.users, "an integer number of users"),
                                 ("--tpot-ms", args.tpot_ms, "a finite number of ms")):
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} {value}: must be positive ({allowed})")
    if args.table is not None and not Path(args.table).is_file():
        raise UsageError(f"--table {args.table}: the attention study's table is missing; "
                         f"build it with `snakemake --cores 2 results/tables/gqa.csv`")
    return topology


def _efficiency(args):
    """(the table's efficiency, or None and why axis C is unavailable)."""
    from kernbench.capacity.planner import TABLE, Efficiency

    table = Path(args.table) if args.table is not None else TABLE
    if table.is_file():
        return Efficiency.from_table(table), ""
    return None, (f"{table}: the attention study's table is missing; build it with "
                  f"`snakemake --cores 2 {TABLE}` (or name one with --table)")


def _simulated_axis(result: dict, model: str, topology: str, args) -> None:
    """Axis C from the llm study's simulated decode steps, when its table has this model
    on this topology (the efficiency estimate stays in ``result['axes']['C_roofline']``)."""
    from kernbench.capacity.steps import TABLE, StepTimes, axis_c

    steps = StepTimes.from_table(TABLE, model, topology) if TABLE.is_file() else None
    if steps is None:
        return
    v = {**result["inputs"], **result["values"]}
    result["axes"]["C_roofline"] = result["axes"]["C"]
    result["axes"]["C"] = {"title": "latency (simulated steps)",
                           **axis_c(steps, v, args.context, args.users, args.tpot_ms / 1e3)}


def run(args) -> int:
    from kernbench.capacity.planner import Chip, fmt, plan
    from kernbench.models import load_model

    topology = check_args(args)
    model, chip = load_model(args.model), Chip.from_topology(topology)
    eff, why = _efficiency(args)
    result = plan(model, chip, eff, args.context, args.users, args.tpot_ms, why)
    _simulated_axis(result, model.name, chip.name, args)
    if args.json:
        print(json.dumps(result, sort_keys=True))
        return 0
    print(f"{result['model']} on {result['topology']}: {args.users} users at {args.context} "
          f"tokens, {args.tpot_ms:g} ms per token")
    if result["efficiency"] is not None:
        print(f"decode efficiency eff = {result['efficiency']['value']:.4f}, "
              f"{result['efficiency']['source']}")
    for key, axis in result["axes"].items():
        print(f"\n{key}. {axis['title']}")
        if "unavailable" in axis:
            print(f"  unavailable: {axis['unavailable']}")
        for s in axis["steps"]:
            print(f"  {s['formula']}")
            print(f"    = {s['substituted']}")
            print(f"    = {fmt(s['value'])} {s['unit']}  ({s['meaning']})")
    return 0
