"""End-to-end: the smoke config through Snakemake, and byte-identical records.

The smoke workflow runs once per test run (``conftest.smoke_build``, shared by the
pytest-xdist workers); this module works in its own copy of the finished run. (A sweep
of other studies builds its own paper: test_experiment_plugins.py.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from .workflow_helpers import ROOT, SNAKEMAKE, clone_run, planned_jobs


def run(cmd, cwd):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def smoke_run(smoke_build, tmp_path_factory):
    """This module's copy of the finished smoke run (its tests run Snakemake in it)."""
    return clone_run(smoke_build, tmp_path_factory.mktemp("smoke") / "run")


def test_smoke_produces_records_tables_figures_and_paper(smoke_run):
    raw = sorted((smoke_run / "results" / "raw" / "transfer" / "small_2x2").rglob("*.json"))
    reruns = [p for p in raw if "@" in p.name]  # the sensitivity block's FIFO-links rerun
    assert [p.name for p in reruns] == ["contention@links-fifo.json"]
    raw = [p for p in raw if p not in reruns]
    assert len(raw) == 2  # a batch of the 4 flows per variant (each flow a size sweep)
    table = (smoke_run / "results" / "tables" / "transfer.csv").read_text().splitlines()
    assert len(table) == 1 + 4 * 2 * 2  # a row per flow x size x variant
    for fig in ("transfer_latency", "transfer_bandwidth"):
        for ext in ("pdf", "png"):
            assert (smoke_run / "results" / "figures" / f"{fig}.{ext}").stat().st_size > 1000
    pdf = smoke_run / "report" / "build" / "paper.pdf"
    assert pdf.read_bytes()[:5] == b"%PDF-"
    values = (smoke_run / "report" / "generated" / "values.tex").read_text()
    assert r"kb@transfer/records\endcsname{16}" in values
    summary = (smoke_run / "results" / "SUMMARY.md").read_text()
    assert "## transfer" in summary and "## gemm" in summary
    assert "8 points: 2 shapes x 4 variants" in summary


def test_same_tables_give_the_same_generated_tex(smoke_run, tmp_path):
    """Report generation is a pure function of the tables and the config: regenerating
    from the smoke run's tables gives byte-identical LaTeX."""
    from kernbench.experiments.sweep import load_sweep_file
    from kernbench.report.generate import generate

    sweep = load_sweep_file(smoke_run / "config/smoke.yaml", smoke_run,
                            smoke_run / "workflow/schemas/config.schema.yaml", "results/raw")
    tables = {e: str(smoke_run / "results" / "tables" / f"{e}.csv") for e in sweep.experiments}
    config = {**sweep.config, "topologies": {k: str(smoke_run / v) for k, v in
                                             sweep.config["topologies"].items()}}
    made = generate(config, tables, tmp_path / "generated",
                    sensitivity=smoke_run / "results" / "tables" / "sensitivity.csv")
    ours = smoke_run / "report" / "generated"
    assert sorted(p.relative_to(tmp_path / "generated") for p in made) == sorted(
        p.relative_to(ours) for p in ours.rglob("*.tex"))
    for p in made:
        assert p.read_bytes() == (ours / p.relative_to(tmp_path / "generated")).read_bytes(), p


def test_every_value_the_paper_text_uses_is_generated(smoke_run):
    """Every \\kbv{key} in the text the paper inputs names a generated value (the
    report_generated rule checks this before LaTeX runs; here against its output)."""
    from kernbench.report.generate import undefined_values

    values = (smoke_run / "report" / "generated" / "values.tex").read_text()
    keys = set(re.findall(r"\\csname kb@(.*?)\\endcsname", values))
    texts = {str(p.relative_to(smoke_run)): p.read_text()
             for p in [*(smoke_run / "report" / "sections").glob("*.tex"),
                       *(smoke_run / "report" / "generated").rglob("*.tex")]}
    assert len(keys) > 200 and len(texts) > 20
    assert undefined_values(texts, keys) == []


def test_records_carry_prediction_and_provenance(smoke_run):
    batch = json.loads((smoke_run / "results/raw/transfer/small_2x2/flows/contention.json")
                       .read_text())
    assert [p["workload"] for p in batch["points"]] == [
        "h2d-1hop", "d2h-2hop", "pe-local-hbm", "pe-cross-cube-hbm-best"]
    rec = next(p for p in batch["points"] if p["workload"] == "pe-local-hbm")
    assert rec["prediction"]["rel_error"] < 1e-9
    points = rec["metrics"]["points"]
    assert [p["size_bytes"] for p in points] == [4096, 65536]  # the smoke config's sizes
    for p in points:  # two flows sharing one route: the model's k x Drain holds exactly
        assert p["latency_ns"] == pytest.approx(p["predicted_ns"])
        assert len(p["per_flow_latency_ns"]) == 2
    assert rec["metrics"]["latency_ns"] == points[-1]["latency_ns"]
    prov = rec["provenance"]
    assert prov["kernbench_version"] and len(prov["config_hash"]) == 16
    assert rec["config"]["variant"] == {"concurrent_flows": 2}


def test_nothing_to_do_after_a_run(smoke_run):
    proc = run(SNAKEMAKE + ["-n", "--configfile", "config/smoke.yaml"], smoke_run)
    assert proc.returncode == 0
    assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout


def test_forcerun_figures_rerenders_figures_and_paper_only(smoke_run):
    expected = {("figures_transfer", "results/figures/transfer_latency.pdf"),
                ("paper", "report/build/paper.pdf"), ("site", "results/site/index.html"),
                ("all", "")}
    assert planned_jobs(smoke_run, "--configfile", "config/smoke.yaml",
                        "--forcerun", "figures_transfer") == expected


def test_html_report_contains_figures_and_tables(smoke_run):
    from kernbench.experiments.sweep import load_sweep_file

    report = smoke_run / "results" / "report.html"  # the whole run wrote it
    html = report.read_text(errors="replace")
    assert "paper.pdf" in html
    report.unlink()
    proc = run(SNAKEMAKE + ["--configfile", "config/smoke.yaml", "--report",
                            "results/report.html"], smoke_run)
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = report.read_text(errors="replace")
    for name in ("transfer_latency.png", "transfer_bandwidth.png", "transfer.csv", "paper.pdf",
                 "gemm.csv", "sensitivity.csv"):
        assert name in html
    assert "identical flows issued together" in html  # a figure caption
    sweep = load_sweep_file(smoke_run / "config/smoke.yaml", smoke_run,
                            smoke_run / "workflow/schemas/config.schema.yaml", "results/raw")
    manifest = json.loads((smoke_run / "results" / "manifest.json").read_text())
    sims = [j for j in manifest["jobs"] if j["rule"] == "simulate"]
    assert len(sims) == len(sweep.jobs) == 86
    assert all(j["config_hash"] and j["wall_s"] is not None and j["peak_rss_mb"] > 10
               for j in sims)
    summary = (smoke_run / "results" / "SUMMARY.md").read_text()
    assert "86 simulation jobs" in summary and "## transfer" in summary


# A job runs with the cyclic collector off and collects between a batch's points (ADR
# 0047); in one process for all jobs, each such collection would rescan what every earlier
# job left behind (0.4 s a time, half this test), so what a job leaves is frozen, as a
# new job process starts with nothing to scan.
RERUN = """\
import gc, json, sys
from kernbench.cli.main import main
for args in json.load(sys.stdin):
    assert main(args) == 0, args
    gc.freeze()
"""


def test_rerun_gives_byte_identical_records(smoke_run, tmp_path):
    """Every point of the smoke run, run again with the command line of its simulate job,
    writes the bytes of its record. (The points run one after another in one new
    process, not one process each as the workflow does: the same records, without 84
    interpreter start-ups; a process other than the one that wrote each record, so
    results that hang on hash order or object ids differ as they would.)"""
    from kernbench.experiments.sweep import load_sweep_file

    sweep = load_sweep_file(smoke_run / "config/smoke.yaml", smoke_run,
                            smoke_run / "workflow/schemas/config.schema.yaml", "results/raw")
    jobs, before = [], {}
    for job in sweep.jobs:  # the simulate rule's command, its wildcards from the output
        experiment, topology, workload, variant = job.output.removesuffix(".json").split(
            "/")[-4:]
        out = tmp_path / job.output
        jobs.append(["job", "--experiment", experiment, "--topology-id", topology,
                     "--topology-file", job.topology_file, "--workload-id", workload,
                     "--variant-id", variant, "--slice", job.slice_json(), "--out", str(out)])
        before[job.output] = (smoke_run / job.output).read_bytes()
    assert len(jobs) == 86
    proc = subprocess.run([sys.executable, "-c", RERUN], input=json.dumps(jobs), cwd=smoke_run,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    differ = [name for name, data in before.items() if (tmp_path / name).read_bytes() != data]
    assert not differ, f"records differ on a rerun: {differ}"


def test_job_cli_writes_identical_bytes_twice(tmp_path):
    args = [sys.executable, "-m", "kernbench.cli.main", "job", "--experiment", "transfer",
            "--topology-id", "small_2x2", "--topology-file",
            str(ROOT / "config/topologies/small_2x2.yaml"), "--workload-id", "d2h-2hop",
            "--variant-id", "single", "--slice",
            '{"workload": {"flow": "d2h-2hop", "sizes": [4096, 16384]}, '
            '"variant": {"concurrent_flows": 1}}']
    outs = []
    for i in range(2):
        out = tmp_path / f"r{i}.json"
        proc = run(args + ["--out", str(out)], ROOT)
        assert proc.returncode == 0, proc.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
