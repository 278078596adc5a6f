"""Experiments are plugins: a new one is one module, and nothing else is edited.

The toy experiment below is written to a temporary folder, named in the
config's ``plugins:`` list, and run through the whole workflow. Its table,
figure, values, summary lines and paper section must appear; its numbers are
checked against what the toy computes from the topology.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap

import pytest
import yaml

from .workflow_helpers import ROOT, SNAKEMAKE, copy_workflow

TOY = textwrap.dedent('''
    """A toy experiment: n x (PEs per CUBE) units per point, against the same formula."""
    import sys

    from kernbench.experiments.registry import Experiment, package_files, register

    SCHEMA = {"type": "object", "additionalProperties": False,
              "required": ["topologies", "points"],
              "properties": {
                  "topologies": {"type": "array", "items": {"type": "string"},
                                 "description": "topology ids"},
                  "points": {"type": "array", "items": {"type": "integer", "minimum": 1},
                             "description": "the n of each point"}}}

    def expand(block, spec, source):
        return [(f"n{n}", {"n": n}) for n in block["points"]], [("v", {"scale": 1})]

    def run(graph, workload, variant):
        units = workload["n"] * graph.spec.pes_per_cube
        return {"metrics": {"units": units}, "prediction": {"units": units, "rel_error": 0.0},
                "labels": {"n": workload["n"]}}

    def frame(records):
        import pandas as pd
        rows = [{"n": r["labels"]["n"], "units": r["metrics"]["units"]} for r in records]
        return pd.DataFrame(rows).sort_values("n").reset_index(drop=True)

    def figures(df, out_dir):
        from kernbench.analysis.plots import plt, save
        fig, ax = plt.subplots()
        ax.plot(df["n"], df["units"], marker="o")
        return save(fig, out_dir / "toy_plot")

    def values(df, ctx=None):
        from kernbench.analysis.values import count
        return {"total": count(int(df["units"].sum())), "points": count(len(df))}

    SUMMARY = ("{points} toy points, {total} units in all",)

    register(Experiment(
        name="toy", title="A toy study", topic="a toy study", schema=SCHEMA,
        expand=expand, run=run, post=__name__, figures=("toy_plot",),
        section="The toy study counted \\\\kbv{toy/total} units over \\\\kbv{toy/points} points.\\n",
        files=package_files(sys.modules[__name__])))
''')


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    work = copy_workflow(tmp_path_factory.mktemp("toy"))
    plugins = work / "plugins"
    plugins.mkdir()
    (plugins / "toy_exp.py").write_text(TOY)
    config = {
        "topologies": {"small_2x2": "config/topologies/small_2x2.yaml"},
        "plugins": ["toy_exp"],
        "experiments": {
            "toy": {"topologies": ["small_2x2"], "points": [1, 2, 5]},
            # and one built-in study, the smallest: a sweep without the transfer study
            "gemm": {"topologies": ["small_2x2"],
                     "shapes": [{"name": "tiny", "m": 32, "k": 64, "n": 32, "group": "prefill"}],
                     "variants": {"composite": {"kernel": "composite", "pes": 1}}},
        },
        "report": {"title": "Toy edition"},
    }
    (work / "config" / "toy.yaml").write_text(yaml.safe_dump(config))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(plugins)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    proc = subprocess.run(SNAKEMAKE + ["--cores", "2", "--configfile", "config/toy.yaml"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return work


def test_the_toy_table_has_the_topology_derived_numbers(toy_run):
    pes = yaml.safe_load((ROOT / "config/topologies/default.yaml").read_text())["cube"][
        "pe_layout"]
    per_cube = len(pes["corners"]) * pes["pe_per_corner"]  # small_2x2 extends default
    rows = (toy_run / "results/tables/toy.csv").read_text().splitlines()
    assert rows[0] == "n,units"
    assert rows[1:] == [f"{n},{n * per_cube}" for n in (1, 2, 5)]


def test_the_toy_figure_value_summary_and_section_appear(toy_run):
    png = toy_run / "results/figures/toy_plot.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    values = (toy_run / "report/generated/values.tex").read_text()
    total = 8 * (1 + 2 + 5)
    assert f"\\csname kb@toy/total\\endcsname{{{total}}}" in values
    studies = (toy_run / "report/generated/studies.tex").read_text()
    assert "\\section{A toy study}\\label{sec:toy}" in studies
    summary = (toy_run / "results/SUMMARY.md").read_text()
    assert "## toy" in summary and f"- 3 toy points, {total} units in all" in summary
    aux = (toy_run / "report/build/paper.aux").read_text()
    assert "sec:toy" in aux  # LaTeX typeset the section
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", str(toy_run / "report/build/paper.pdf"), "-"],
                              capture_output=True, text=True, check=True).stdout
        assert re.search(rf"toy study counted\s+{total}\s+units over\s+3\s+points", text)


def test_a_sweep_without_transfer_builds_its_own_paper(toy_run):
    """The paper holds the studies the config names (gemm and the toy) and no other."""
    values = (toy_run / "report" / "generated" / "values.tex").read_text()
    assert "kb@gemm/records" in values and "kb@transfer/" not in values
    studies = (toy_run / "report" / "generated" / "studies.tex").read_text()
    assert "sections/gemm.tex" in studies and "transfer" not in studies
    assert (toy_run / "report" / "build" / "paper.pdf").read_bytes()[:5] == b"%PDF-"


def test_no_file_outside_an_experiment_names_it():
    """The generic layers (workflow, report, analysis, the registry, the CLI, the paper's
    fixed text) name no experiment; only its module, its config block, its tests and
    its documentation do."""
    from kernbench.experiments.registry import all_experiments

    names = [e.name for e in all_experiments()]
    generic = [ROOT / "Snakefile", *sorted((ROOT / "workflow").rglob("*")),
               *sorted((ROOT / "src/kernbench/report").rglob("*.py")),
               *sorted((ROOT / "src/kernbench/analysis").rglob("*.py")),
               *sorted((ROOT / "src/kernbench/cli").rglob("*.py")),
               *[ROOT / "src/kernbench/experiments" / f
                 for f in ("__init__.py", "registry.py", "sweep.py", "job.py", "checkout.py")],
               *sorted((ROOT / "report").glob("*.tex")),
               *sorted((ROOT / "report/sections").glob("*.tex"))]
    hits = []
    for path in generic:
        if not path.is_file() or path.suffix not in (".py", ".smk", ".tex", ".yaml", ".rst", ""):
            continue
        # a CLI subcommand may share a name with an experiment (``kernbench allreduce``
        # runs one collective; the ``allreduce`` experiment is a sweep): not a reference
        text = re.sub(r"add_parser\(\s*\"[a-z_]+\"", "add_parser(", path.read_text(errors="replace"))
        for name in names:
            # as an identifier or key: quoted, a path part, a value-key prefix, a tex label
            pattern = rf"[\"'/]{name}[\"'/]|\b{name}/|sec:{name}\b|\b{name}_(table|frame|values)"
            if re.search(pattern, text):
                hits.append(f"{path.relative_to(ROOT)}: {name}")
    assert not hits, hits
