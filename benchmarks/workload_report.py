"""The command line both workload benchmarks share (pe_speed, llm_speed): pick workloads,
measure each, report them next to the bare SimPy loop of the same run, write JSON."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from engine_speed import bare_simpy


def run(doc: str, workloads: dict, measure: Callable[[str], dict], default_out: Path,
        line: Callable[[str, dict], str]) -> None:
    """Parse ``--json --only --out``, measure, write the report, print it."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--only", nargs="+", choices=sorted(workloads), metavar="NAME",
                    help=f"run only these workloads ({', '.join(workloads)})")
    ap.add_argument("--out", type=Path, default=default_out)
    args = ap.parse_args()
    bare = max(bare_simpy(300_000) for _ in range(3))
    report = {"bare_simpy_events_per_s": round(bare, 1),
              "workloads": {name: measure(name) for name in args.only or workloads}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        print(json.dumps(report))
        return
    print(f"bare SimPy loop: {bare / 1e6:.2f} M events/s")
    for name, w in report["workloads"].items():
        print(line(name, w))
