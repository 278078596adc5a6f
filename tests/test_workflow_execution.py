"""Batch execution through the cluster-generic emulator, and SIGKILL recovery.
(The HTML report is checked on the smoke run, in test_workflow.py.)"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import pytest
import yaml

from .workflow_helpers import SNAKEMAKE, copy_workflow, records, snakemake

SMALL = {
    "batch_points": False,  # a job per point: these tests need many jobs to kill and resume
    "topologies": {"small_2x2": "config/topologies/small_2x2.yaml",
                   "small_2x3": "config/topologies/small_2x3.yaml"},
    "experiments": {"transfer": {
        "topologies": ["small_2x2", "small_2x3"],
        "flows": ["h2d-1hop", "pe-local-hbm"],
        "sizes": ["4KiB"],
        "variants": {"single": {"concurrent_flows": 1}, "contention": {"concurrent_flows": 2}},
    }},
}


def scratch(tmp_path, config):
    root = copy_workflow(tmp_path)
    (root / "config" / "test.yaml").write_text(yaml.safe_dump(config))
    return root


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Records of an uninterrupted local run (outside git, like the scratch runs)."""
    root = scratch(tmp_path_factory.mktemp("reference"), SMALL)
    proc = snakemake(root, "--cores", "2", "--configfile", "config/test.yaml",
                     "--until", "simulate")
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = records(root)
    assert len(recs) == 2 * 2 * 2  # a record per topology x flow x variant
    return recs


def test_cluster_generic_batch_jobs_match_a_local_run(tmp_path, reference):
    # a flow and a variant suffice: each point still becomes its own batch job, one per
    # topology (each batch job runs Snakemake again, so a job costs a few seconds)
    config = {**SMALL, "experiments": {"transfer": {**SMALL["experiments"]["transfer"],
                                                   "flows": ["pe-local-hbm"],
                                                   "variants": {"single": {
                                                       "concurrent_flows": 1}}}}}
    batch = scratch(tmp_path / "batch", config)
    # the local run (``reference``) only made the records to compare; this run builds all
    proc = snakemake(batch, "--profile", "workflow/profiles/cluster-generic",
                     "--configfile", "config/test.yaml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = sorted((batch / ".snakemake" / "batch-emulator" / "jobs").iterdir())
    assert len(jobs) == 2  # every simulation point was its own batch job
    assert all((j / "exitcode").read_text().strip() == "0" for j in jobs)
    ours = records(batch)
    assert len(ours) == len(jobs)
    assert ours == {name: rec for name, rec in reference.items() if name in ours}
    assert (batch / "report" / "build" / "paper.pdf").exists()


def test_sigkill_mid_run_then_restart_gives_identical_records(tmp_path, reference):
    root = scratch(tmp_path, SMALL)
    raw = root / "results" / "raw"
    proc = subprocess.Popen(SNAKEMAKE + ["--cores", "2", "--configfile", "config/test.yaml",
                                         "--until", "simulate"],
                            cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and len(list(raw.rglob("*.json"))) < 3:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(list(raw.rglob("*.json")))
    assert 3 <= done < len(reference), "the kill must land mid-run"
    restart = snakemake(root, "--cores", "2", "--configfile", "config/test.yaml",
                        "--until", "simulate")
    assert restart.returncode == 0, restart.stdout[-6000:] + "\n---\n" + restart.stderr[-6000:]
    assert records(root) == reference


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_batch_emulator_reports_failure_and_cancels(tmp_path):
    env = dict(os.environ, KB_BATCH_DIR=str(tmp_path / "state"))
    batch = copy_workflow(tmp_path / "wf") / "workflow" / "batch"
    ok = tmp_path / "ok.sh"
    ok.write_text("exit 0\n")
    bad = tmp_path / "bad.sh"
    bad.write_text("exit 3\n")
    slow = tmp_path / "slow.sh"
    slow.write_text("sleep 30\n")

    def call(*args):
        return subprocess.run([str(batch / args[0]), *args[1:]], env=env, capture_output=True,
                              text=True, check=True).stdout.strip()

    ids = [call("submit", "--name", "t", str(s)) for s in (ok, bad, slow)]
    assert ids == ["1", "2", "3"]
    deadline = time.time() + 30
    while time.time() < deadline and {call("status", ids[0]), call("status", ids[1])} & {"running"}:
        time.sleep(0.05)
    assert call("status", ids[0]) == "success"
    assert call("status", ids[1]) == "failed"
    assert call("status", ids[2]) == "running"
    call("cancel", ids[2])
    deadline = time.time() + 30
    while time.time() < deadline and call("status", ids[2]) == "running":
        time.sleep(0.05)
    assert call("status", ids[2]) == "failed"
