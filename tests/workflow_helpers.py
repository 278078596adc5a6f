"""Helpers for tests that run Snakemake in a scratch copy of the workflow."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
_JOB = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):")


def copy_workflow(dst: Path) -> Path:
    """Copy what a run needs (not results, builds or mesh caches) into ``dst``."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "config", "workflow", "report", "profiles"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=shutil.ignore_patterns(
                "generated", "build", "*.cube_mesh.yaml", "__pycache__"))
        else:
            shutil.copy2(src, dst / name)
    return dst


def snakemake(cwd: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(SNAKEMAKE + list(args), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def planned_jobs(cwd: Path, *args: str) -> set[tuple[str, str]]:
    """(rule, first output) of every job a dry run would execute."""
    proc = snakemake(cwd, "-n", *args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs, rule = set(), None
    for line in proc.stdout.splitlines():
        m = _JOB.match(line)
        if m:
            rule = m.group(1)
            if rule == "all":
                jobs.add(("all", ""))
            continue
        if rule and line.strip().startswith("output:"):
            jobs.add((rule, line.split(":", 1)[1].strip().split(",")[0]))
            rule = None
    return jobs


def records(cwd: Path) -> dict[str, bytes]:
    raw = cwd / "results" / "raw"
    return {str(p.relative_to(raw)): p.read_bytes() for p in sorted(raw.rglob("*.json"))}
