"""Seed bench names that regenerate one study through the workflow.

``kernbench run --bench milestone-1h-gemm`` (and the other names an experiment
lists in ``seed_benches``) used to run a self-contained sweep-and-plot bench.
The study now lives in the workflow, so the command asks Snakemake for that
study's table and figure rule: the same jobs, records and figures as
``snakemake --cores N``, and nothing of the other studies.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from kernbench.errors import UsageError


def study_of(bench: str):
    """The experiment that owns the seed bench name ``bench``, or None."""
    from kernbench.experiments.registry import all_experiments

    for exp in all_experiments():
        if bench in exp.seed_benches:
            return exp
    return None


def seed_names() -> list[tuple[str, str]]:
    """(seed bench name, experiment name) of every experiment, sorted."""
    from kernbench.experiments.registry import all_experiments

    return sorted((b, e.name) for e in all_experiments() for b in e.seed_benches)


def workflow_root(start: Path | None = None) -> Path:
    """The nearest directory holding a Snakefile, from the current one upwards; else
    the checkout this kernbench was installed from."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "Snakefile").is_file():
            return d
    checkout = Path(__file__).resolve().parents[3]
    if (checkout / "Snakefile").is_file():
        return checkout
    raise UsageError(f"no Snakefile in {here} or above, nor in {checkout}: run from a "
                     f"KernBench checkout")


def targets(exp) -> list[str]:
    """The workflow targets of one study: its table and its figure rule."""
    return [f"results/tables/{exp.name}.csv", f"figures_{exp.name}"]


def run_study(exp, args: argparse.Namespace) -> int:
    if args.topology is not None:
        raise UsageError(f"--topology: {args.bench} runs the configured study (topologies "
                         f"come from the config; pass another with --configfile)")
    root = workflow_root()
    # targets first: --configfile takes every word after it
    cmd = [sys.executable, "-m", "snakemake", *targets(exp),
           "--cores", str(args.cores or os.cpu_count() or 1)]
    if args.dry_run:
        cmd.append("-n")
    if args.configfile:
        cmd += ["--configfile", str(Path(args.configfile).resolve())]
    print(f"kernbench: {args.bench} -> the {exp.name} study: {' '.join(cmd[3:])} (in {root})",
          file=sys.stderr)
    return subprocess.run(cmd, cwd=root).returncode
