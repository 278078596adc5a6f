"""``kernbench topology {validate,show,render}``."""

from __future__ import annotations

import argparse
import sys

from kernbench.cli.common import check_output_path, resolve_topology


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topology", help="validate, summarise or draw a topology")
    tsub = p.add_subparsers(dest="topology_cmd", required=True)
    v = tsub.add_parser("validate", help="check a topology file against the schema")
    v.add_argument("topology")
    v.set_defaults(func=validate)
    s = tsub.add_parser("show", help="print node/edge counts and key numbers")
    s.add_argument("topology")
    s.set_defaults(func=show)
    r = tsub.add_parser("render", help="write system/sip/cube/pe views as SVG")
    r.add_argument("topology")
    r.add_argument("--out", default="results/topology", help="output folder")
    r.add_argument("--views", nargs="+", default=None,
                   help="subset of: system sip cube pe (default: all four)")
    r.set_defaults(func=render)


def validate(args: argparse.Namespace) -> int:
    from kernbench.topology import load_topology

    g = load_topology(resolve_topology(args.topology))
    print(f"{args.topology}: valid ({len(g.nodes)} nodes, {len(g.edges)} edges)")
    return 0


def show(args: argparse.Namespace) -> int:
    from collections import Counter

    from kernbench.topology import load_topology

    g = load_topology(resolve_topology(args.topology))
    s = g.spec
    print(f"topology {s.name}: {s.description}")
    print(f"  SIPs {s.sips.count} ({s.sips.topology} {s.sips.w}x{s.sips.h}), CUBEs per SIP "
          f"{s.cube_w}x{s.cube_h}, PEs per CUBE {s.pes_per_cube}")
    print(f"  router grid {g.mesh.n_rows}x{g.mesh.n_cols}, HBM {s.hbm.pseudo_channels} x "
          f"{s.hbm.pseudo_channel_bw_gbs:g} GB/s per CUBE, slice {s.slice_bw_gbs:g} GB/s")
    print(f"  nodes {len(g.nodes)}, edges {len(g.edges)}")
    for kind, n in sorted(Counter(e.kind for e in g.edges).items()):
        print(f"    edges {kind:22s} {n}")
    return 0


def render(args: argparse.Namespace) -> int:
    from kernbench.topology import load_topology
    from kernbench.topology.svg import emit_diagrams

    topology = resolve_topology(args.topology)
    check_output_path("--out", args.out, folder=True)
    g = load_topology(topology)
    for path in emit_diagrams(g, args.out, args.views):
        sys.stdout.write(f"wrote {path}\n")
    return 0
