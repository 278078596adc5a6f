"""Seed bench names (`kernbench run --bench milestone-*`) regenerate one study's table
and figures through the workflow's own targets, and nothing of the other studies."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from kernbench.cli.main import main
from kernbench.cli.study_cmd import seed_names, targets
from kernbench.experiments.registry import get

from .workflow_helpers import clone_run, copy_workflow

SEEDS = {"milestone-1h-gemm": "gemm", "milestone-1h-ccl": "allreduce",
         "milestone-gqa-headline": "gqa"}


def test_every_seed_name_belongs_to_its_study():
    assert dict(seed_names()) == SEEDS


def kb(cwd, *args):
    return subprocess.run([sys.executable, "-m", "kernbench.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("bench", sorted(SEEDS))
def test_dry_run_plans_only_that_study(tmp_path, bench):
    work = copy_workflow(tmp_path)
    proc = kb(work, "run", "--bench", bench, "-n", "--cores", "2",
              "--configfile", "config/smoke.yaml")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    name = SEEDS[bench]
    assert f"rule figures_{name}:" in proc.stdout or f"localrule figures_{name}:" in proc.stdout
    planned = {line.split()[-1].rstrip(":") for line in proc.stdout.splitlines()
               if line.startswith(("rule ", "localrule "))}
    assert planned == {"simulate", "aggregate", f"figures_{name}"}, planned
    for other in set(SEEDS.values()) - {name}:
        assert f"results/raw/{other}/" not in proc.stdout


def test_gemm_seed_bench_builds_the_gemm_table_and_figures(tmp_path, smoke_build):
    """From the smoke run's records (the dry runs above check that the bench plans its
    simulations) with every table, figure and the paper removed: the bench builds the
    gemm table and figures again, and nothing of the other studies."""
    work = clone_run(smoke_build, tmp_path / "run")
    for built in ("results/tables", "results/figures", "results/site", "report/generated",
                  "report/build"):
        shutil.rmtree(work / built)
    records = {p: p.stat().st_mtime_ns for p in (work / "results/raw").rglob("*.json")}
    proc = kb(work, "run", "--bench", "milestone-1h-gemm", "--cores", "2",
              "--configfile", "config/smoke.yaml")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (work / "results/tables/gemm.csv").stat().st_size > 100
    for stem in get("gemm").figures:
        for ext in ("pdf", "png"):
            assert (work / f"results/figures/{stem}.{ext}").stat().st_size > 1000
    assert sorted(p.name for p in (work / "results/tables").iterdir()) == ["gemm.csv"]
    assert not (work / "report/build/paper.pdf").exists()
    assert {p: p.stat().st_mtime_ns for p in records} == records  # no point ran again
    assert targets(get("gemm")) == ["results/tables/gemm.csv", "figures_gemm"]


def test_a_topology_with_a_study_bench_is_one_line(capsys):
    assert main(["run", "--bench", "milestone-1h-ccl", "--topology", "default"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("kernbench: error: --topology: milestone-1h-ccl")
