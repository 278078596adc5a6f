"""Exact reruns: each kind of edit reruns exactly the jobs that depend on it."""

from __future__ import annotations

import pytest
import yaml

from .workflow_helpers import copy_workflow, planned_jobs, snakemake

CONFIG = {
    "batch_points": False,  # a job per flow, so the tests can see which flows rerun
    "topologies": {"small_2x2": "config/topologies/small_2x2.yaml",
                   "small_2x3": "config/topologies/small_2x3.yaml"},
    "experiments": {"transfer": {
        "topologies": ["small_2x2", "small_2x3"],
        "flows": ["h2d-1hop", "pe-local-hbm"],
        "sizes": ["4KiB"],
        "variants": {"single": {"concurrent_flows": 1}, "contention": {"concurrent_flows": 2}},
    }},
    "report": {"title": "rerun test"},
}
DOWNSTREAM = {("aggregate", "results/tables/transfer.csv"),
              ("figures_transfer", "results/figures/transfer_latency.pdf"),
              ("paper", "report/build/paper.pdf"), ("site", "results/site/index.html"),
              ("all", "")}
REPORT = {("report_generated", "report/generated/values.tex")}


def sim(topology, flow, variant):
    return ("simulate", f"results/raw/transfer/{topology}/{flow}/{variant}.json")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    root = copy_workflow(tmp_path_factory.mktemp("reruns"))
    (root / "config" / "test.yaml").write_text(yaml.safe_dump(CONFIG))
    settle(root, full=False)
    return root


def settle(root, full: bool):
    """Run what is planned. Not ``full``: only up to the tables, since every edit
    test expects the figures, the report and the paper to rerun anyway (a paper
    build per edit would add nothing to what the tests check); the last edit
    settles fully so the forced rerun starts from a finished workflow."""
    until = () if full else ("--until", "aggregate")
    proc = snakemake(root, "--cores", "2", "--configfile", "config/test.yaml", *until)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    left = planned_jobs(root, "--configfile", "config/test.yaml")
    tables = ("aggregate", "results/tables/transfer.csv")
    assert left == (set() if full else (DOWNSTREAM - {tables}) | REPORT)


def edit_config(root, fn):
    path = root / "config" / "test.yaml"
    doc = yaml.safe_load(path.read_text())
    fn(doc)
    path.write_text(yaml.safe_dump(doc))


def test_topology_edit_reruns_that_topology_only(work):
    path = work / "config" / "topologies" / "small_2x3.yaml"
    path.write_text(path.read_text().replace("description: One SIP, 2 x 3",
                                             "description: One SIP (edited), 2 x 3"))
    expected = {sim("small_2x3", f, v) for f in ("h2d-1hop", "pe-local-hbm")
                for v in ("single", "contention")} | DOWNSTREAM | REPORT
    assert planned_jobs(work, "--configfile", "config/test.yaml") == expected
    settle(work, full=False)


def test_variant_edit_reruns_that_variant_only(work):
    edit_config(work, lambda d: d["experiments"]["transfer"]["variants"]["contention"].update(
        concurrent_flows=3))
    expected = {sim(t, f, "contention") for t in ("small_2x2", "small_2x3")
                for f in ("h2d-1hop", "pe-local-hbm")} | DOWNSTREAM | REPORT
    assert planned_jobs(work, "--configfile", "config/test.yaml") == expected
    settle(work, full=False)


def test_workload_edit_runs_only_the_new_workload(work):
    edit_config(work, lambda d: d["experiments"]["transfer"].update(
        flows=["h2d-1hop", "pe-same-half-hbm"]))
    expected = {sim(t, "pe-same-half-hbm", v) for t in ("small_2x2", "small_2x3")
                for v in ("single", "contention")} | DOWNSTREAM | REPORT
    assert planned_jobs(work, "--configfile", "config/test.yaml") == expected
    settle(work, full=True)


def test_forcerun_figures_rerenders_figures_and_paper_only(work):
    expected = {("figures_transfer", "results/figures/transfer_latency.pdf"),
                ("paper", "report/build/paper.pdf"), ("site", "results/site/index.html"),
                ("all", "")}
    assert planned_jobs(work, "--configfile", "config/test.yaml",
                        "--forcerun", "figures_transfer") == expected


def test_simulator_code_is_a_job_parameter(work, monkeypatch):
    """Editing the simulator (not post-processing) changes every simulation job's params."""
    from kernbench.experiments import checkout

    before = checkout.simulator_code_hash()
    pkg = checkout.Path(checkout.__file__).resolve().parents[1]
    assert len(before) == 16
    assert checkout.simulator_code_hash(pkg) == before
    fake = work / "fakepkg"
    for sub in ("sim_engine", "analysis"):
        (fake / sub).mkdir(parents=True)
    (fake / "sim_engine" / "x.py").write_text("A = 1\n")
    (fake / "analysis" / "y.py").write_text("B = 1\n")
    h1 = checkout.simulator_code_hash(fake)
    (fake / "analysis" / "y.py").write_text("B = 2\n")  # post-processing: no change
    assert checkout.simulator_code_hash(fake) == h1
    (fake / "sim_engine" / "x.py").write_text("A = 2\n")  # simulator: new hash
    assert checkout.simulator_code_hash(fake) != h1
    simulate = (work / "workflow" / "rules" / "simulate.smk").read_text()
    assert "code=SIM_CODE" in simulate
