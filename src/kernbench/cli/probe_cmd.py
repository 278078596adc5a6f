"""``kernbench probe``: run the traffic-pattern catalog and check invariants."""

from __future__ import annotations

import argparse
import json
import sys

from kernbench.cli.common import check_output_path, resolve_topology


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("probe", help="single-flow latency probes vs the analytic formula",
                       description="Run the H2D / D2H / PE DMA / M_CPU DMA probe catalog, print "
                                   "Actual vs Ovhd + Wire + Drain, a size sweep, per-hop routes and "
                                   "[v]/[x] invariant checks.")
    p.add_argument("--topology", default="default", help="topology file or name (default: default)")
    p.add_argument("--case", default="all", help="run only this case (default: all)")
    p.add_argument("--json", action="store_true", help="print a machine-readable JSON report")
    p.add_argument("--strict", action="store_true", help="exit 1 if any invariant fails")
    p.add_argument("--trace", metavar="OUT.json",
                   help="also write a Chrome/Perfetto trace of the 32 KiB runs")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kernbench.probes.probe import format_report, run_probe

    path = resolve_topology(args.topology)
    check_output_path("--trace", args.trace)
    report = run_probe(path, args.case, trace_path=args.trace)
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(format_report(report))
    return 1 if (args.strict and not report.ok) else 0
