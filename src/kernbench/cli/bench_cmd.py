"""``kernbench list`` and ``kernbench run``."""

from __future__ import annotations

import argparse
import sys

from kernbench.cli.common import check_output_path, resolve_topology


def add_parser(sub: argparse._SubParsersAction) -> None:
    ls = sub.add_parser("list", help="list registered benches (index, name, description)")
    ls.set_defaults(func=list_benches)
    run = sub.add_parser("run", help="run one bench and print a summary")
    run.add_argument("--topology", default=None, help="topology file or name (default: default)")
    run.add_argument("--bench", required=True, help="bench name or index (see `kernbench list`)")
    study = run.add_argument_group("study benches (milestone-*: one study through the workflow)")
    study.add_argument("--cores", type=int, help="Snakemake --cores (default: all)")
    study.add_argument("--configfile", help="workflow config (default: config/config.yaml)")
    study.add_argument("-n", "--dry-run", action="store_true", help="list the jobs only")
    run.add_argument("--device", type=int, default=0, help="SIP to run on (default 0)")
    run.add_argument("--data", action="store_true", help="data mode (compute real values)")
    run.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto timeline")
    run.set_defaults(func=run_bench_cmd)


def list_benches(args: argparse.Namespace) -> int:
    from kernbench.benches.registry import list_all
    from kernbench.cli.study_cmd import seed_names

    for spec in list_all():
        print(f"{spec.index:3d}  {spec.name:24s} {spec.description}")
    for bench, experiment in seed_names():
        print(f"  -  {bench:24s} the {experiment} study's table and figures (runs the workflow)")
    return 0


def run_bench_cmd(args: argparse.Namespace) -> int:
    from kernbench.benches.registry import resolve
    from kernbench.cli.study_cmd import run_study, study_of
    from kernbench.runtime_api.bench_runner import run_bench
    from kernbench.sim_engine.chrome_trace import write_chrome_trace
    from kernbench.topology import load_topology

    check_output_path("--trace", args.trace)
    exp = study_of(args.bench.strip())
    if exp is not None:
        return run_study(exp, args)
    spec = resolve(args.bench)
    graph = load_topology(resolve_topology(args.topology or "default"))
    result = run_bench(graph, spec, args.device, enable_data=args.data)
    out = sys.stdout
    out.write(f"bench {spec.name} on {graph.spec.name} (device {args.device}): "
              f"{'ok' if result.ok else 'FAILED ' + str(result.error_code)}\n")
    out.write(f"  simulated time {result.sim_ns:,.1f} ns\n")
    for launch in result.launches:
        out.write(f"  kernel {launch['name']} on {launch['pes']} PE(s): kernel {launch['kernel_ns']:,.1f} ns,"
                  f" host-observed {launch['host_ns']:,.1f} ns\n")
    out.write("  op counts: " + ", ".join(f"{k} {v}" for k, v in result.op_counts.items()) + "\n")
    for pe, occ in result.occupancy.items():
        out.write(f"  {pe} busy %: " + ", ".join(f"{k} {v:.1f}" for k, v in occ.items()) + "\n")
    if args.trace:
        write_chrome_trace([(None, result.engine.op_log.records)], args.trace)
        out.write(f"  trace written to {args.trace}\n")
    return 0 if result.ok else 1
