"""Fabric accuracy: the analytic engine against the packet-level reference.

    python benchmarks/fabric_reference.py [--json] [--topology PATH] [--packet-bytes 256]
                                          [--hbm slice|channels] [--contended-bytes N]

Runs every probe flow alone at 4 KiB .. 1 MiB and the contended scenarios of
``kernbench.probes.fabric_accuracy`` on both models, with the reference as the
truth. ``--json`` prints one JSON object whose keys ``speedup``,
``uncontended_max_rel_err`` and ``contended`` (``name``, ``flows``,
``makespan_rel_err``, ``mean_completion_rel_err`` per scenario) other tools
read; without it a table is printed. Reports figures; asserts nothing. The
same object, plus every uncontended case, goes to benchmarks/out/fabric_reference.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kernbench.probes.fabric_accuracy import CONTENDED_BYTES, accuracy_report
from kernbench.sim_engine.packet_reference import HBM_MODELS
from kernbench.topology import load_topology
from kernbench.units import format_size

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"uncontended_max_rel_err": 0.01, "makespan_rel_err": 0.05, "speedup": 20.0}


def table(report: dict) -> str:
    """The report as a readable table, with each target marked met or missed."""
    def mark(ok: bool) -> str:
        return "ok" if ok else "MISSED"

    worst = report["uncontended_worst_case"]
    sizes = ", ".join(format_size(n) for n in report["uncontended_sizes"])
    lines = [
        f"topology {report['topology']}, {report['packet_bytes']} B packets, "
        f"HBM model {report['hbm_model']!r}",
        f"uncontended ({len(report['uncontended'])} flows, {sizes}): max rel err "
        f"{report['uncontended_max_rel_err']:.2e} "
        f"[{mark(report['uncontended_max_rel_err'] <= TARGETS['uncontended_max_rel_err'])}]"
        f"  worst {worst['name']} {format_size(worst['nbytes'])}",
        f"contended ({format_size(report['contended_bytes_per_flow'])} per flow):",
        f"  {'scenario':22s} {'flows':>5s} {'shared':>6s} {'analytic ns':>12s} "
        f"{'reference ns':>12s} {'makespan err':>12s} {'mean err':>9s}",
    ]
    for s in report["contended"]:
        ok = s["makespan_rel_err"] <= TARGETS["makespan_rel_err"]
        lines.append(f"  {s['name']:22s} {s['flows']:5d} {s['shared_links']:6d} "
                     f"{s['analytic_makespan_ns']:12.1f} {s['reference_makespan_ns']:12.1f} "
                     f"{100 * s['makespan_rel_err']:11.2f}% {100 * s['mean_completion_rel_err']:8.2f}%"
                     f"  [{mark(ok)}]")
    lines.append(f"wall: analytic {report['analytic_wall_s']:.3f} s, reference "
                 f"{report['reference_wall_s']:.1f} s, speedup {report['speedup']:.0f}x "
                 f"[{mark(report['speedup'] >= TARGETS['speedup'])}]")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    ap.add_argument("--topology", default=str(ROOT / "config/topologies/default.yaml"))
    ap.add_argument("--packet-bytes", type=int, default=256)
    ap.add_argument("--hbm", choices=HBM_MODELS, default="slice",
                    help="packet-level HBM model of the reference (default: slice)")
    ap.add_argument("--contended-bytes", type=int, default=CONTENDED_BYTES,
                    help="bytes per flow in the contended scenarios")
    args = ap.parse_args()
    graph = load_topology(args.topology)
    report = accuracy_report(graph, packet_bytes=args.packet_bytes, hbm=args.hbm,
                             contended_bytes=args.contended_bytes)
    out = ROOT / "benchmarks" / "out" / "fabric_reference.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        summary = {k: v for k, v in report.items() if k != "uncontended"}
        print(json.dumps(summary, indent=2))
    else:
        print(table(report))


if __name__ == "__main__":
    main()
