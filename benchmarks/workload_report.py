"""The command line the workload benchmarks share (pe_speed, llm_speed, alltoall_speed,
placement_speed): pick workloads, measure each, report them next to the bare SimPy loop
of the same run, write JSON.

Each workload runs in a fresh interpreter by default, as a pipeline job does: measured
one after another in one process, a Mixtral step took 72 s as the second workload and
60 s alone (the first leaves its caches and heap behind). ``--in-process`` measures them
in this process instead (for a profiler).

Each workload reports ``native``: whether the compiled twins of the hot modules ran
(``kernbench.native``). ``--pure`` runs the workloads as pure Python; ``--compare-pure``
runs each both ways, one after the other, and reports the speed-up of the twins."""

from __future__ import annotations

import argparse
import json
import os
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
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--pure", action="store_true", help="without the compiled twins")
    how.add_argument("--compare-pure", action="store_true",
                     help="each workload with and then without the compiled twins")
    args = ap.parse_args()
    if args.in_process and (args.pure or args.compare_pure):
        ap.error("--pure and --compare-pure start fresh interpreters; drop --in-process "
                 "(or set KERNBENCH_PURE=1 for an in-process pure run)")
    bare = max(bare_simpy(300_000) for _ in range(3))
    names = args.only or list(workloads)
    if args.in_process:
        report = {"bare_simpy_events_per_s": round(bare, 1),
                  "workloads": {name: _with_status(measure(name)) for name in names}}
    else:
        report = {"bare_simpy_events_per_s": round(bare, 1),
                  "workloads": {name: _fresh(measure, name, args.pure) for name in names}}
        if args.compare_pure:
            report["pure"] = {name: _fresh(measure, name, True) for name in names}
            report["speedup"] = {name: round(report["pure"][name]["wall_s"]
                                             / report["workloads"][name]["wall_s"], 3)
                                 for name in names}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        print(json.dumps(report))
        return
    print(f"bare SimPy loop: {bare / 1e6:.2f} M events/s")
    for name, w in report["workloads"].items():
        print(line(name, w), f"[{w['native']}]")
        if "pure" in report:
            print(line(name, report["pure"][name]), f"[{report['pure'][name]['native']}]",
                  f"-> the twins {report['speedup'][name]:.2f}x")


def _with_status(result: dict) -> dict:
    from kernbench import native

    return {**result, "native": native.status()}


def _fresh(measure: Callable[[str], dict], name: str, pure: bool) -> dict:
    """``measure(name)`` in a new interpreter (the benchmark's module imported there)."""
    module = Path(measure.__globals__["__file__"]).stem  # the script, run as __main__ here
    code = (f"import json, workload_report, {module} as m; "
            f"print(json.dumps(workload_report._with_status(m.{measure.__name__}({name!r}))))")
    env = {k: v for k, v in os.environ.items() if k != "KERNBENCH_PURE"}
    if pure:
        env["KERNBENCH_PURE"] = "1"
    proc = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parent, env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"workload {name} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.splitlines()[-1])
