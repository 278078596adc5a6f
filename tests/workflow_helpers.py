"""Helpers for tests that run Snakemake in a scratch copy of the workflow."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


def snakemake(cwd: Path, *args: str, timeout: int = 900,
              env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(SNAKEMAKE + list(args), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def planned_jobs(cwd: Path, *args: str, env: dict | None = None) -> set[tuple[str, str]]:
    """(rule, first output) of every job a dry run would execute."""
    proc = snakemake(cwd, "-n", *args, env=env)
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


def shared_dir(tmp_path_factory) -> Path:
    """A folder every pytest-xdist worker of this run shares (the parent of the workers'
    base temp folders; the base temp folder itself without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def build_once(tmp_path_factory, name: str, build) -> Path:
    """``build(folder)`` run once per test session, whichever worker asks first; the
    others wait for it (a file lock) and get the same finished folder. A failed build
    is not retried: every caller fails with its message."""
    shared = shared_dir(tmp_path_factory)
    folder, done, failed = (shared / name, shared / f"{name}.done", shared / f"{name}.failed")
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists() and not failed.exists():
                shutil.rmtree(folder, ignore_errors=True)
                try:
                    build(folder)
                except BaseException as exc:
                    failed.write_text(f"{type(exc).__name__}: {exc}")
                    raise
                done.touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    if failed.exists():
        pytest.fail(f"the shared {name} build failed: {failed.read_text()[-3000:]}")
    return folder


def build_smoke(folder: Path) -> None:
    """The whole smoke workflow (config/smoke.yaml): every record, table, figure, the
    paper, the site and the HTML report."""
    copy_workflow(folder)
    proc = snakemake(folder, "--cores", "2", "--configfile", "config/smoke.yaml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def clone_run(src: Path, dst: Path) -> Path:
    """A private copy of a finished run that Snakemake sees as the same finished workflow,
    for tests that run Snakemake in it again: modification times are kept, and the
    run's own folder in the recorded job parameters becomes the copy's (the site rule's
    parameters hold absolute caption paths, so a moved run would rebuild its site)."""
    shutil.copytree(src, dst, symlinks=True,
                    ignore=shutil.ignore_patterns("pycache", "locks", "kernbench-pids"))
    old, new = str(src.resolve()), str(dst.resolve())
    for meta in (dst / ".snakemake" / "metadata").iterdir():
        text = meta.read_text()
        if old in text:
            stat = meta.stat()
            meta.write_text(text.replace(old, new))
            os.utime(meta, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    return dst
