"""The command line the workload benchmarks share (pe_speed, llm_speed, alltoall_speed):
pick workloads, measure each, report them next to the bare SimPy loop of the same run,
write JSON.

Each workload runs in a fresh interpreter by default, as a pipeline job does: measured
one after another in one process, a Mixtral step took 72 s as the second workload and
60 s alone (the first leaves its caches and heap behind). ``--in-process`` measures them
in this process instead (for a profiler)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
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
    ap.add_argument("--in-process", action="store_true",
                    help="measure every workload in this process (default: each in its own)")
    args = ap.parse_args()
    bare = max(bare_simpy(300_000) for _ in range(3))
    one = measure if args.in_process else (lambda name: _fresh(measure, name))
    report = {"bare_simpy_events_per_s": round(bare, 1),
              "workloads": {name: one(name) for name in args.only or workloads}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        print(json.dumps(report))
        return
    print(f"bare SimPy loop: {bare / 1e6:.2f} M events/s")
    for name, w in report["workloads"].items():
        print(line(name, w))


def _fresh(measure: Callable[[str], dict], name: str) -> dict:
    """``measure(name)`` in a new interpreter (the benchmark's module imported there)."""
    module = Path(measure.__globals__["__file__"]).stem  # the script, run as __main__ here
    code = (f"import json, {module} as m; "
            f"print(json.dumps(m.{measure.__name__}({name!r})))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parent,
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"workload {name} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.splitlines()[-1])
