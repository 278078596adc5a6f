"""The ``llm`` study: points from the config, the HBM fit, records, its table, values and
figures, and the hardware what-if axis (config ``whatif``)."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys

import pytest
import yaml

from kernbench.errors import ConfigError, UsageError
from kernbench.experiments import sweep as sweep_module
from kernbench.experiments.job import git_revision, run_job
from kernbench.experiments.llm import post, study
from kernbench.experiments.llm.fit import footprint
from kernbench.experiments.llm.post_table import COMPONENTS
from kernbench.fileio import dumps_pretty
from kernbench.models import load_model
from kernbench.topology.spec import load_spec

from .conftest import ROOT

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
SMALL = "config/topologies/small_2x2.yaml"
TINY = "config/models/tiny-gqa.yaml"
BLOCK = {"topologies": ["small_2x2"], "layers": 3, "tpot_target_ms": 0.05,
         "points": [{"model": TINY, "phase": "decode", "batch": [1, 2], "context": [64]},
                    {"model": TINY, "phase": "decode", "batch": [4096], "context": [65536]}]}
WHATIF = {"factors": [0.5, 2],
          "parameters": {"pe-clock": {"description": "the PE clock", "keys": ["pe.clock_ghz"]},
                         "mac-array": {"description": "the array width",
                                       "keys": ["pe.gemm.mac_cols", "pe.scheduler.tile_n"]}},
          "runs": [{"experiment": "llm", "workloads": ["tiny-gqa-decode-b1-s64"]}]}


def _config(tmp_path, block=None, whatif=None, name="c.yaml"):
    doc = {"topologies": {"small_2x2": SMALL}, "experiments": {"llm": block or BLOCK}}
    if whatif is not None:
        doc["whatif"] = whatif
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def _sweep(path):
    return sweep_module.load_sweep_file(path, ROOT, SCHEMA, "results/raw")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    return _sweep(_config(tmp_path_factory.mktemp("llm"), whatif=WHATIF))


@pytest.fixture(scope="module")
def records(sweep):
    """Every job of the tiny sweep run once: {output: record}."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        git_revision.cache_clear()  # an earlier test may have cached another folder's answer
        return {j.output: run_job(j.experiment, j.topology, j.topology_file, j.workload,
                                  j.variant, j.slice)
                for j in sweep.jobs if "mac-array-x0.5" not in j.variant}


def _by_point(sweep, point, variant="base"):
    return next(j for j in sweep.jobs if j.workload == point and j.variant == variant)


# -- points ---------------------------------------------------------------------------------
def test_expand_gives_a_point_per_batch_and_context():
    spec = load_spec(ROOT / SMALL)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        points, variants = study.expand(BLOCK, spec, "c.yaml")
    ids = [wid for wid, _ in points]
    assert ids == ["tiny-gqa-decode-b1-s64", "tiny-gqa-decode-b2-s64",
                   "tiny-gqa-decode-b4096-s65536"]
    assert variants == [("base", {})]
    p = dict(points)["tiny-gqa-decode-b2-s64"]
    assert (p["batch"], p["context"], p["phase"], p["tp"]) == (2, 64, "decode", None)
    assert p["layers"] == 2  # the block asks for 3; the model has 2
    assert p["config"]["num_key_value_heads"] == 2 and "name" not in p["config"]


@pytest.mark.parametrize("entry,key,expect", [
    ({"model": "no-such-model"}, "points[0].model", "not a preset"),
    ({"tp": 3}, "points[0]", "--tp"),
    ({"topologies": ["default"]}, "points[0].topologies[0]", "not a topology of this block"),
    ({"phase": "prefill"}, "points[0].phase", "no prefill step"),
])
def test_expand_refuses_a_bad_entry_with_one_line(entry, key, expect, monkeypatch):
    from kernbench.experiments.llm import step

    monkeypatch.chdir(ROOT)
    monkeypatch.delattr(step, "run_prefill_step", raising=False)  # as this checkout has it
    block = dict(BLOCK, points=[dict(BLOCK["points"][0], **entry)])
    with pytest.raises(ConfigError) as info:
        study.expand(block, load_spec(ROOT / SMALL), "c.yaml")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"c.yaml: experiments.llm.{key}: "), msg
    assert expect in msg, msg


def test_a_prefill_entry_runs_one_prompt(monkeypatch):
    monkeypatch.chdir(ROOT)
    block = dict(BLOCK, points=[dict(BLOCK["points"][0], phase="prefill", batch=[1, 2])])
    with pytest.raises(ConfigError, match=r"^c\.yaml: experiments\.llm\.points\[0\]\.batch: "
                       r"\[1, 2\]: a prefill point runs one prompt"):
        study.expand(block, load_spec(ROOT / SMALL), "c.yaml")
    block = dict(BLOCK, points=[dict(BLOCK["points"][0], phase="prefill", batch=[1])])
    points, _ = study.expand(block, load_spec(ROOT / SMALL), "c.yaml")
    assert [wid for wid, _ in points] == ["tiny-gqa-prefill-b1-s64"]


def test_a_prefill_job_without_the_prefill_step_fails_loudly(monkeypatch, small_graph):
    from kernbench.experiments.llm import step

    monkeypatch.delattr(step, "run_prefill_step", raising=False)
    cfg = {k: v for k, v in vars(load_model(str(ROOT / TINY))).items() if k != "name"}
    workload = {"model": "tiny-gqa", "config": cfg, "phase": "prefill", "batch": 1,
                "context": 64, "layers": 2, "tp": None}
    with pytest.raises(UsageError, match="no prefill step"):
        study.run(small_graph, workload, {})


# -- records --------------------------------------------------------------------------------
def test_a_point_that_fits_runs_and_one_that_does_not_is_recorded(sweep, records):
    ok = records[_by_point(sweep, "tiny-gqa-decode-b2-s64").output]
    m = ok["metrics"]
    assert m["fits"] and m["latency_ns"] == m["step_ns"] > 0 and m["batch"] == 2
    layers = sum(m["layer_ns"].values())
    assert m["step_ns"] == pytest.approx(m["embedding_ns"] + 2 * layers + m["lm_head_ns"])
    assert ok["prediction"]["latency_ns"] == m["analytic"]["step_ns"]
    assert ok["op_counts"] and ok["labels"]["model"] == "tiny-gqa"
    big = records[_by_point(sweep, "tiny-gqa-decode-b4096-s65536").output]
    need, have = footprint(load_model(str(ROOT / TINY)), load_spec(ROOT / SMALL), 4096, 65536)
    assert not big["metrics"]["fits"] and need > have
    assert (big["metrics"]["bytes_needed"], big["metrics"]["bytes_available"]) == (need, have)
    assert big["metrics"]["latency_ns"] is None and big["op_counts"] == {}
    from kernbench.cli.model_cmd import check_fit  # the same rule refuses it on the CLI

    with pytest.raises(UsageError, match=f"need {need} bytes"):
        check_fit(load_model(str(ROOT / TINY)), load_spec(ROOT / SMALL), 4096, 65536)


def test_a_job_writes_the_same_bytes_twice(sweep, records, monkeypatch):
    monkeypatch.chdir(ROOT)
    for job in (_by_point(sweep, "tiny-gqa-decode-b1-s64"),
                _by_point(sweep, "tiny-gqa-decode-b1-s64", "base@pe-clock-x2")):
        again = run_job(job.experiment, job.topology, job.topology_file, job.workload,
                        job.variant, job.slice)
        assert dumps_pretty(again) == dumps_pretty(records[job.output]), job.output


# -- table, values, figures ------------------------------------------------------------------
COLUMNS = ("model", "topology", "phase", "batch", "context", "fits", "bytes_needed",
           "bytes_available", "step_ns", "tpot_ms", "ttft_ms", "tokens_per_s_user",
           "tokens_per_s_system", "exposed_comm_ns", "analytic_step_ns", "analytic_error",
           "links", "simulated_layers", "layer_spread", "setting", "parameter", "factor", "change",
           "comm_share", "tpot_target_ms", *(f"layer_{c}_ns" for c in COMPONENTS))


@pytest.fixture(scope="module")
def table(records):
    return post.frame(list(records.values()), {"tpot_target_ms": 0.05})


def test_the_table_has_a_row_per_point_and_setting(table, records):
    assert set(COLUMNS) <= set(table.columns)
    assert len(table) == len(records) == 3 + 3  # three points, pe-clock x0.5 and x2, mac x2
    default = table[table["setting"] == "default"]
    assert list(default["batch"]) == [1, 2, 4096] and list(default["fits"]) == [1, 1, 0]
    fast = table[table["setting"] == "pe-clock-x2"].iloc[0]
    base = default.iloc[0]
    assert (fast["parameter"], fast["factor"]) == ("pe-clock", 2.0)
    assert fast["change"] == pytest.approx(fast["step_ns"] / base["step_ns"] - 1)
    assert fast["change"] < 0  # a faster clock shortens the step
    assert math.isnan(default.iloc[2]["step_ns"]) and default.iloc[2]["bytes_needed"] > 0
    assert (table["tpot_target_ms"] == 0.05).all()


def _fake(point, phase, batch, context, step, setting="", factor=1.0, param=""):
    """A record as the study writes it, with made-up times."""
    parts = dict.fromkeys(COMPONENTS, step / 10)
    return {"topology": "t", "workload": point, "variant": f"base@{setting}" if setting
            else "base", "provenance": {"config_hash": "h"},
            "config": {"variant": {"whatif": {"parameter": param, "factor": factor}}
                       if setting else {}},
            "labels": {"model": "m", "phase": phase, "batch": batch, "context": context,
                       "model_layers": 4, "weight_bytes": 10, "sips": 1},
            "metrics": {"fits": True, "bytes_needed": 1, "bytes_available": 2, "step_ns": step,
                        "tpot_ms": step / 1e6, "tokens_per_s_user": 1e9 / step,
                        "tokens_per_s_system": batch * 1e9 / step, "layer_ns": parts,
                        "exposed_comm_ns": step / 20, "analytic": {"step_ns": step / 2},
                        "analytic_error": 1.0, "layer_spread": 0.001, "simulated_layers": 3,
                        "tp": 4, "pes": 4}}


def test_values_rank_the_what_if_parameters_from_the_numbers():
    recs = [_fake("p", "decode", 1, 1024, 1e6), _fake("q", "decode", 8, 1024, 2e6)]
    for param, half, double in (("link", 1.5e6, 0.7e6), ("clock", 1.9e6, 0.9e6),
                                ("noc", 1.01e6, 0.99e6)):
        recs += [_fake("p", "decode", 1, 1024, half, f"{param}-x0.5", 0.5, param),
                 _fake("p", "decode", 1, 1024, double, f"{param}-x2", 2.0, param)]
    ctx = type("Ctx", (), {"config": {"whatif": {"parameters": {
        "link": {"description": "the links"}}}}})()
    v = post.values(post.frame(recs, {"tpot_target_ms": 1.5}), ctx)
    assert v["wi/decode/top/param"].number == "clock"  # +90 % at x0.5
    assert v["wi/decode/top/pct"].number == pytest.approx(90)
    assert v["wi/decode/up/desc"].number == "the links"  # 30 % less time at x2
    assert v["wi/decode/up/pct"].number == pytest.approx(30)
    assert v["wi/decode/down/param"].number == "clock"
    assert v["wi/decode/least/param"].number == "noc"
    assert v["wi/prefill/top/param"].missing  # no prefill what-if here
    assert v["best/batch"].number == 1  # batch 8 takes 2 ms, over the 1.5 ms target
    assert v["points"].number == 2 and v["whatifs"].number == 6


def test_figures_render_from_a_tiny_table(table, tmp_path):
    paths = post.figures(table, tmp_path)
    stems = {p.stem for p in paths}
    from kernbench.experiments.registry import get

    assert stems == set(get("llm").figures)
    assert all(p.stat().st_size > 1000 for p in paths)
    tex = post.tables(table)
    assert "needs 256 of 192 GiB" in tex["llm_table"]
    assert "pe-clock" in tex["llm_whatif_table"]


def test_the_site_panel_lists_every_point(table, tmp_path):
    from kernbench.report.site import build, study_panels

    csv = tmp_path / "llm.csv"
    table.to_csv(csv, index=False)
    panels = study_panels({"llm": csv, "gqa": tmp_path / "missing.csv"})
    assert [p[0] for p in panels] == ["Model steps"] and len(panels[0][2]) == 3
    page = build(tmp_path / "site", "t", {}, [], {"eff": []}, panels).read_text()
    assert "<th>tokens/s per system</th>" in page and "no: 256 of 192 GiB" in page


# -- what-if axis -----------------------------------------------------------------------------
def test_whatif_reruns_scale_the_topology_and_join_the_study_table(sweep):
    reruns = [j for j in sweep.jobs if j.whatif]
    assert sorted(j.variant for j in reruns) == [
        "base@mac-array-x0.5", "base@mac-array-x2", "base@pe-clock-x0.5", "base@pe-clock-x2"]
    by = {j.variant: j.slice["variant"] for j in reruns}
    assert by["base@pe-clock-x0.5"] == {"overrides": {"pe.clock_ghz": 0.5},
                                        "whatif": {"parameter": "pe-clock", "factor": 0.5}}
    assert by["base@mac-array-x2"]["overrides"] == {"pe.gemm.mac_cols": 64,
                                                    "pe.scheduler.tile_n": 64}
    assert all(j.base == _by_point(sweep, "tiny-gqa-decode-b1-s64").output for j in reruns)
    assert set(sweep.table_inputs("llm")) == {j.output for j in sweep.jobs}
    assert sweep.sensitivity_outputs() == []  # not the modelling-choice comparison
    assert sweep.post_settings("llm") == {"tpot_target_ms": 0.05}


def test_editing_one_parameter_changes_only_its_jobs(tmp_path, sweep):
    other = copy.deepcopy(WHATIF)
    other["parameters"]["pe-clock"]["factors"] = [0.5, 4]
    changed = _sweep(_config(tmp_path, whatif=other))
    before = {j.output: j.slice_json() for j in sweep.jobs}
    after = {j.output: j.slice_json() for j in changed.jobs}
    differ = {o for o in before.keys() | after.keys() if before.get(o) != after.get(o)}
    assert differ == {f"results/raw/llm/small_2x2/tiny-gqa-decode-b1-s64/base@pe-clock-x{f}.json"
                      for f in (2, 4)}


@pytest.mark.parametrize("change,key,expect", [
    (lambda w: w["parameters"]["pe-clock"].update(keys=["pe.no_such_key"]),
     "whatif.parameters.pe-clock.keys[0]", "is not a key of"),
    (lambda w: w["parameters"]["mac-array"].update(factors=[0.3]),
     "whatif.parameters.mac-array.keys[0]", "takes an integer"),
    (lambda w: w["runs"][0].update(experiment="gqa"), "whatif.runs[0].experiment",
     "is not an experiment of this config"),
    (lambda w: w["runs"][0].update(parameters=["nope"]), "whatif.runs[0].parameters[0]",
     "unknown parameter"),
    (lambda w: w["parameters"]["pe-clock"].update(factors=[0]), "whatif.parameters.pe-clock",
     "must be"),
])
def test_a_bad_whatif_is_one_line_naming_its_key(tmp_path, change, key, expect):
    bad = copy.deepcopy(WHATIF)
    change(bad)
    with pytest.raises(ConfigError) as info:
        _sweep(_config(tmp_path, whatif=bad))
    msg = str(info.value)
    assert "\n" not in msg and f": {key}" in msg and expect in msg, msg


def test_whatif_is_refused_for_a_study_that_does_not_tabulate_it(tmp_path):
    doc = {"topologies": {"small_2x2": SMALL},
           "experiments": {"transfer": {"topologies": ["small_2x2"], "flows": ["h2d-1hop"],
                                        "sizes": ["4KiB"],
                                        "variants": {"one": {"concurrent_flows": 1}}}},
           "whatif": dict(WHATIF, runs=[{"experiment": "transfer"}])}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match="whatif.runs.0..experiment: 'transfer' does not"):
        _sweep(tmp_path / "t.yaml")


def test_a_job_with_an_unknown_override_key_exits_2_and_writes_nothing(tmp_path):
    out = tmp_path / "r.json"
    slice_ = {"workload": {"flow": "h2d-1hop", "sizes": [4096]},
              "variant": {"concurrent_flows": 1, "overrides": {"pe.gemm.no_such_key": 2}}}
    proc = subprocess.run([sys.executable, "-m", "kernbench.cli.main", "job", "--experiment",
                           "transfer", "--topology-id", "t", "--topology-file",
                           str(ROOT / SMALL), "--workload-id", "w", "--variant-id", "v@x",
                           "--slice", json.dumps(slice_), "--out", str(out)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "pe.gemm.no_such_key" in lines[0], proc.stderr
    assert not out.exists()


def test_a_job_process_is_lean_and_writes_the_same_bytes_as_in_process(sweep, records,
                                                                        tmp_path):
    """``kernbench job`` in its own process (another hash seed): no pandas or matplotlib,
    and the record byte for byte as the in-process run wrote it."""
    job = _by_point(sweep, "tiny-gqa-decode-b2-s64")
    out = tmp_path / "r.json"
    args = ["job", "--experiment", "llm", "--topology-id", job.topology, "--topology-file",
            job.topology_file, "--workload-id", job.workload, "--variant-id", job.variant,
            "--slice", job.slice_json(), "--out", str(out)]
    code = ("import sys\nfrom kernbench.cli.main import main\n"
            f"rc = main({args!r})\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', "
            "'matplotlib'))\nprint(rc, heavy)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": "7"})
    assert proc.stdout.strip() == "0 []", proc.stdout + proc.stderr
    assert out.read_text() == dumps_pretty(records[job.output])


# -- the study's own topology overrides (a stated modelling choice, ADR 0042) ------------------
def test_study_overrides_reach_every_job_and_reruns_add_theirs_on_top(tmp_path):
    block = dict(BLOCK, overrides={"fabric.sharing": "fifo"})
    sens = {"settings": {"links-fair": {"description": "fair links",
                                        "overrides": {"fabric.sharing": "interleaved"}}},
            "runs": [{"experiment": "llm", "workloads": ["tiny-gqa-decode-b2-s64"],
                      "settings": ["links-fair"]}]}
    path = _config(tmp_path, block, whatif=WHATIF)
    doc = yaml.safe_load(path.read_text())
    doc["sensitivity"] = sens
    path.write_text(yaml.safe_dump(doc))
    jobs = {(j.workload, j.variant): j.slice["variant"] for j in _sweep(path).jobs}
    assert jobs[("tiny-gqa-decode-b1-s64", "base")] == {"overrides": {"fabric.sharing": "fifo"}}
    assert jobs[("tiny-gqa-decode-b1-s64", "base@pe-clock-x2")]["overrides"] == {
        "fabric.sharing": "fifo", "pe.clock_ghz": 2.0}
    assert jobs[("tiny-gqa-decode-b2-s64", "base@links-fair")] == {
        "overrides": {"fabric.sharing": "interleaved"}}
    # without study overrides a job's slice is what it was, so no other job reruns
    assert _by_point(_sweep(_config(tmp_path, name="p.yaml")),
                     "tiny-gqa-decode-b1-s64").slice["variant"] == {}


def test_the_study_overrides_change_the_simulated_links(monkeypatch):
    """A job reads its link model from the study's overrides: FIFO bookings and fair
    sharing time the same point differently, and the record's topology hash says which."""
    monkeypatch.chdir(ROOT)
    block = dict(BLOCK, layers=1, overrides={"fabric.sharing": "fifo"})
    points, [(vid, variant)] = study.expand(block, load_spec(ROOT / SMALL), "c.yaml")
    params = dict(points)["tiny-gqa-decode-b2-s64"]
    fifo = run_job("llm", "small_2x2", ROOT / SMALL, "w", vid,
                   {"workload": params, "variant": variant})
    fair = run_job("llm", "small_2x2", ROOT / SMALL, "w", vid,
                   {"workload": params, "variant": {}})
    assert variant == {"overrides": {"fabric.sharing": "fifo"}}
    assert fifo["config"]["topology_hash"] != fair["config"]["topology_hash"]
    assert fifo["metrics"]["step_ns"] != fair["metrics"]["step_ns"]


def test_bad_study_overrides_are_one_line_naming_the_key(tmp_path):
    block = dict(BLOCK, overrides={"fabric.sharing": "round-robin"})
    with pytest.raises(ConfigError) as info:
        _sweep(_config(tmp_path, block))
    msg = str(info.value)
    assert "\n" not in msg and "experiments.llm.overrides" in msg and "fabric" in msg, msg
