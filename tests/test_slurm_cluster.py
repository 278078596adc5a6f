"""The slurm profile against a real single-node Slurm (scripts/slurm-single-node).

Slow (minutes, and it installs Debian's slurm-wlm and munge if they are missing):
    scripts/tests -m slow tests/test_slurm_cluster.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from .workflow_helpers import ROOT, SNAKEMAKE, copy_workflow, records, snakemake

pytestmark = pytest.mark.slow

CLUSTER = ROOT / "scripts" / "slurm-single-node"
PACKAGES = ["slurm-wlm", "munge"]
COMMANDS = ["munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scancel", "sinfo"]
SLURM_RUN_TIMEOUT = 900  # seconds; `timeout` kills a hung Snakemake, the test then fails


def privileged() -> list[str] | None:
    """Command prefix that runs as root ([] or sudo), or None if we cannot."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"],
                                               capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    return None


def ensure_slurm_installed(root: list[str]) -> None:
    if all(shutil.which(c) for c in COMMANDS):
        return
    if not shutil.which("apt-get"):
        pytest.skip(f"needs Slurm and munge ({', '.join(PACKAGES)}) and there is no apt-get")
    install = [*root, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q",
               *PACKAGES]
    if subprocess.run(install, capture_output=True).returncode != 0:
        subprocess.run([*root, "apt-get", "update", "-q"], capture_output=True, check=True)
        subprocess.run(install, capture_output=True, check=True)
    assert all(shutil.which(c) for c in COMMANDS), "apt-get did not install " + " ".join(PACKAGES)


@pytest.fixture
def slurm_env(request):
    """Start a fresh single-node cluster; yield the environment its clients need."""
    root = privileged()
    if root is None:
        pytest.skip("needs root or passwordless sudo (apt-get install slurm-wlm munge; "
                    "munged and slurmd run as root)")
    ensure_slurm_installed(root)
    # Not under pytest's tmp_path: its base is 0700, and munged (user munge) must be able to
    # traverse to its socket. A short path also keeps slurmd's unix sockets under 108 bytes.
    state = Path(tempfile.mkdtemp(prefix="kb-slurm-"))

    def stop():
        proc = subprocess.run([*root, str(CLUSTER), "stop", str(state)],
                              capture_output=True, text=True, timeout=180)
        shutil.rmtree(state, ignore_errors=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    request.addfinalizer(stop)  # before `start`, so a half-started cluster is stopped too
    proc = subprocess.run([*root, str(CLUSTER), "start", str(state)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dict(os.environ, SLURM_CONF=str(state / "etc" / "slurm.conf"),
                PATH=f"{state / 'bin'}{os.pathsep}{os.environ['PATH']}")


def test_slurm_profile_gives_the_records_of_a_local_run(tmp_path, slurm_env):
    on_slurm = copy_workflow(tmp_path / "slurm")
    proc = subprocess.run(
        ["timeout", "-k", "30", str(SLURM_RUN_TIMEOUT), *SNAKEMAKE,
         "--configfile", "config/smoke.yaml", "--profile", "workflow/profiles/slurm",
         "--slurm-init-seconds-before-status-checks", "5"],  # first poll after 5 s, not 40 s
        cwd=on_slurm, env=slurm_env, capture_output=True, text=True,
        timeout=SLURM_RUN_TIMEOUT + 60)
    assert proc.returncode == 0, (f"exit {proc.returncode} (124: timed out)\n"
                                  + proc.stdout[-3000:] + proc.stderr[-6000:])

    # Slurm really ran the simulations: few bundled jobs, all completed, default partition.
    jobs = subprocess.run(["squeue", "--states=all", "--noheader", "--format=%P|%T"],
                          env=slurm_env, capture_output=True, text=True, check=True)
    rows = [line.split("|") for line in jobs.stdout.split()]
    assert rows and all(row == ["debug", "COMPLETED"] for row in rows), rows

    local = copy_workflow(tmp_path / "local")
    proc = snakemake(local, "--cores", "2", "--configfile", "config/smoke.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]

    on_slurm_records, local_records = records(on_slurm), records(local)
    from kernbench.experiments.sweep import load_sweep_file

    sweep = load_sweep_file(ROOT / "config/smoke.yaml", ROOT,
                            ROOT / "workflow/schemas/config.schema.yaml", "results/raw")
    assert len(local_records) == len(sweep.jobs)  # every point of smoke.yaml
    assert len(rows) < len(local_records)  # simulate jobs were grouped, not one each
    assert sorted(on_slurm_records) == sorted(local_records)
    differ = [name for name in local_records if on_slurm_records[name] != local_records[name]]
    assert not differ, f"records differ between slurm and local runs: {differ}"
    assert (on_slurm / "report" / "build" / "paper.pdf").exists()
