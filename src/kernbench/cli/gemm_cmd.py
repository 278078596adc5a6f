"""``kernbench gemm``: one GEMM on one PE as a single ``tl.dot``, with the array's cycles."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gemm", help="run one GEMM on one PE as a single tl.dot and print the "
                                    "MAC array's busy cycles, the PE time and its stages")
    p.add_argument("--m", type=int, required=True, help="rows of A and C")
    p.add_argument("--k", type=int, required=True, help="columns of A, rows of B")
    p.add_argument("--n", type=int, required=True, help="columns of B and C")
    p.add_argument("--topology", default="default", help="topology file or name")
    p.add_argument("--dtype", default="f16", help="input dtype: f16 | bf16 | f32 | i8 "
                                                  "(C is f32)")
    p.add_argument("--stationary", default="b",
                   help="operand the array holds: b (weights) | a | auto (the cheaper)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead")
    p.set_defaults(func=run, exit_at_once=True)


def run(args: argparse.Namespace) -> int:
    from kernbench.cli.common import resolve_topology
    from kernbench.topology import load_topology
    from kernbench.workloads.gemm_single import run_single_gemm

    graph = load_topology(resolve_topology(args.topology))
    r = run_single_gemm(graph, args.m, args.k, args.n, args.dtype, args.stationary)
    array = graph.spec.pe.gemm
    out = sys.stdout
    if args.json:
        out.write(json.dumps(r.summary(array), sort_keys=True) + "\n")
        return 0
    out.write(f"# gemm ({r.m}, {r.k}, {r.n}) {r.dtype} on {r.topology}: one tl.dot on one PE, "
              f"{r.held.upper()} stationary; array {array.mac_rows} x {array.mac_cols}, "
              f"{array.weight_rows_per_cycle} weight row(s)/cycle, "
              f"{'double-buffered' if array.double_buffered_weights else 'single-buffered'}, "
              f"folds {'pipelined' if array.pipelined_folds else 'not pipelined'}\n")
    out.write(f"array cycles {r.array_cycles}   PE time {r.pe_ns / 1000:.3f} us\n")
    out.write("# stage busy (us): " + ", ".join(
        f"{s} {v / 1000:.3f}" for s, v in r.stage_busy_ns.items()) + "\n")
    return 0
