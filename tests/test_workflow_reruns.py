"""Exact reruns: each kind of edit reruns exactly the jobs that depend on it.

The scratch workflow carries its own copy of ``src/`` and Snakemake imports it (as a
checkout does), so a test can edit the simulator's code and see which jobs rerun.
(Forcing a rule to rerun is checked on the finished smoke run, in test_workflow.py.)
"""

from __future__ import annotations

import os
import shutil

import pytest
import yaml

from .workflow_helpers import ROOT, copy_workflow, planned_jobs, snakemake

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
    shutil.copytree(ROOT / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "config" / "test.yaml").write_text(yaml.safe_dump(CONFIG))
    settle(root)
    assert planned(root) == SETTLED
    return root


def env(root):
    """Snakemake (and so every job) imports the scratch copy's kernbench."""
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / "src"), *rest]))


def planned(root):
    return planned_jobs(root, "--configfile", "config/test.yaml", env=env(root))


SETTLED = (DOWNSTREAM - {("aggregate", "results/tables/transfer.csv")}) | REPORT


def settle(root):
    """Run what is planned, up to the tables only: every edit test expects the figures,
    the report and the paper to rerun anyway (a paper build per edit would add nothing
    to what the tests check). What is left is checked by the next test's plan, which
    holds exactly the jobs of its own edit on top of ``SETTLED``."""
    proc = snakemake(root, "--cores", "2", "--configfile", "config/test.yaml",
                     "--until", "aggregate", env=env(root))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


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
    assert planned(work) == expected
    settle(work)


def test_variant_edit_reruns_that_variant_only(work):
    edit_config(work, lambda d: d["experiments"]["transfer"]["variants"]["contention"].update(
        concurrent_flows=3))
    expected = {sim(t, f, "contention") for t in ("small_2x2", "small_2x3")
                for f in ("h2d-1hop", "pe-local-hbm")} | DOWNSTREAM | REPORT
    assert planned(work) == expected
    settle(work)


def test_workload_edit_runs_only_the_new_workload(work):
    edit_config(work, lambda d: d["experiments"]["transfer"].update(
        flows=["h2d-1hop", "pe-same-half-hbm"]))
    expected = {sim(t, "pe-same-half-hbm", v) for t in ("small_2x2", "small_2x3")
                for v in ("single", "contention")} | DOWNSTREAM | REPORT
    assert planned(work) == expected
    settle(work)


def test_simulator_code_hash_leaves_out_post_processing(tmp_path):
    from kernbench.experiments import checkout

    before = checkout.simulator_code_hash()
    pkg = checkout.Path(checkout.__file__).resolve().parents[1]
    assert len(before) == 16
    assert checkout.simulator_code_hash(pkg) == before
    fake = tmp_path / "fakepkg"
    for sub in ("sim_engine", "analysis"):
        (fake / sub).mkdir(parents=True)
    (fake / "sim_engine" / "x.py").write_text("A = 1\n")
    (fake / "analysis" / "y.py").write_text("B = 1\n")
    h1 = checkout.simulator_code_hash(fake)
    (fake / "analysis" / "y.py").write_text("B = 2\n")  # post-processing: no change
    assert checkout.simulator_code_hash(fake) == h1
    study = fake / "experiments" / "toy"
    study.mkdir(parents=True)
    for name in ("post.py", "post_figures.py"):  # a study's post-processing modules
        (study / name).write_text("C = 1\n")
    assert checkout.simulator_code_hash(fake) == h1
    (study / "run.py").write_text("D = 1\n")  # its simulation side counts
    assert checkout.simulator_code_hash(fake) != h1
    (study / "run.py").unlink()
    (fake / "sim_engine" / "x.py").write_text("A = 2\n")  # simulator: new hash
    assert checkout.simulator_code_hash(fake) != h1


def test_simulator_edit_reruns_every_simulation_and_post_processing_edit_none(work):
    """Editing the simulator (in the checkout Snakemake imports) reruns every simulation
    job; editing post-processing (the analysis package, an experiment's post module)
    reruns none of them, and putting the code back leaves nothing new to do."""
    from kernbench.experiments import checkout

    pkg = work / "src" / "kernbench"
    post = [pkg / checkout.POST_PROCESSING[0] / "__init__.py",
            pkg / "experiments" / "transfer" / checkout.POST_MODULE]
    simulator = pkg / "sim_engine" / "engine.py"
    sims = {sim(t, f, v) for t in ("small_2x2", "small_2x3") for f in ("h2d-1hop",
            "pe-same-half-hbm") for v in ("single", "contention")}
    assert {job for job in sims if (work / job[1]).is_file()} == sims
    assert planned(work) == SETTLED  # the last edit settled
    originals = {p: p.read_bytes() for p in [*post, simulator]}
    try:
        for path in post:
            path.write_bytes(originals[path] + b"\nEDITED_FOR_A_TEST = 1\n")
        assert planned(work) == SETTLED  # no simulation (and no table) reruns
        simulator.write_bytes(originals[simulator] + b"\nEDITED_FOR_A_TEST = 1\n")
        assert planned(work) == sims | DOWNSTREAM | REPORT
    finally:
        for path, data in originals.items():
            path.write_bytes(data)
    assert planned(work) == SETTLED
