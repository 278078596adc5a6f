"""The ``moe`` study: points from the config and their refusals, one job of each kind,
its table (dropped assignments and dispersion recomputed), values, figures and panel."""

from __future__ import annotations

import pytest

from kernbench.errors import ConfigError
from kernbench.experiments.job import git_revision, run_job
from kernbench.experiments.moe import post, study
from kernbench.topology.spec import load_spec

from .conftest import ROOT

SMALL = ROOT / "config/topologies/small_2x2.yaml"
TINY = "config/models/tiny-moe.yaml"
BLOCK = {"topologies": ["small_2x2"], "overrides": {"fabric.sharing": "fifo"},
         "layers": [{"model": TINY, "tokens": [1, 8], "parallel": ["tp", "ep"]},
                    {"model": TINY, "tokens": [8], "parallel": ["tp", "ep"], "skew": [1.5],
                     "capacity_factor": [1.0]}],
         "steps": [{"model": TINY, "batch": [2], "context": [32], "parallel": ["ep"]},
                   {"model": TINY, "phase": "prefill", "batch": [1], "context": [24],
                    "parallel": ["tp"]}],
         "alltoall": {"topologies": ["small_2x2"], "algorithms": ["a2a_hierarchical"],
                      "sizes": ["256B"]}}


def _expand(block=BLOCK):
    return study.expand(block, load_spec(SMALL), "c.yaml")


def test_expand_names_every_point_and_carries_the_overrides(monkeypatch):
    monkeypatch.chdir(ROOT)
    points, variants = _expand()
    assert [wid for wid, _ in points] == [
        "L-tiny-moe-t1-tp-s0", "L-tiny-moe-t1-ep-s0", "L-tiny-moe-t8-tp-s0",
        "L-tiny-moe-t8-ep-s0", "L-tiny-moe-t8-tp-s1.5-cf1", "L-tiny-moe-t8-ep-s1.5-cf1",
        "S-tiny-moe-decode-b2-s32-ep", "S-tiny-moe-prefill-b1-s24-tp",
        "A-a2a_hierarchical-256"]
    assert variants == [("base", {"overrides": {"fabric.sharing": "fifo"}})]
    p = dict(points)["L-tiny-moe-t8-ep-s1.5-cf1"]
    assert (p["tokens"], p["parallel"], p["skew"], p["capacity_factor"]) == (8, "ep", 1.5, 1.0)
    assert p["config"]["num_local_experts"] == 4 and "name" not in p["config"]
    assert study.batch("A-a2a_hierarchical-256", dict(points)["A-a2a_hierarchical-256"]) \
        == "alltoall-a2a_hierarchical"
    assert study.batch("x", p) is None


@pytest.mark.parametrize("change,key,expect", [
    ({"layers": [{"model": "llama3-8b", "tokens": [1], "parallel": ["tp"]}]},
     "layers[0].model", "has no experts"),
    ({"layers": [{"model": "no-such", "tokens": [1], "parallel": ["tp"]}]},
     "layers[0].model", "not a preset"),
    ({"layers": [{"model": TINY, "tokens": [1], "parallel": ["ep"], "topologies": ["x"]}]},
     "layers[0].topologies[0]", "not a topology of this block"),
    ({"tp": 3}, "layers[0].parallel", "tiny-moe tp on small_2x2"),
    ({"alltoall": {"topologies": ["small_2x2"], "algorithms": ["ring"], "sizes": ["256B"]}},
     "alltoall.algorithms[0]", "not an all-to-all algorithm"),
    ({"alltoall": {"topologies": ["small_2x2"], "algorithms": ["a2a_direct"],
                   "sizes": ["100B"]}}, "alltoall.sizes[0]", "100B: --bytes-per-pe 100"),
    ({"steps": [{"model": TINY, "phase": "prefill", "batch": [2], "context": [8],
                 "parallel": ["tp"]}]}, "steps[0].batch", "one prompt"),
])
def test_a_bad_entry_is_one_line_naming_its_key(change, key, expect, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(ConfigError) as info:
        _expand(dict(BLOCK, **change))
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"c.yaml: experiments.moe.{key}: "), msg
    assert expect in msg, msg


@pytest.fixture(scope="module")
def records():
    """Every point of the block run once, as the workflow's jobs run them."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        git_revision.cache_clear()
        points, variants = _expand()
        out = []
        for wid, params in points:
            rec = run_job("moe", "small_2x2", SMALL, wid, "base",
                          {"workload": params, "variant": variants[0][1]})
            out.append(rec)
        return out


@pytest.fixture(scope="module")
def table(records):
    return post.frame(records)


def test_the_table_recomputes_drops_and_dispersion_from_the_routing(table, records):
    assert len(table) == len(records) == 9
    assert list(table["kind"].value_counts().sort_index().items()) == [
        ("alltoall", 1), ("layer", 6), ("step", 2)]
    for rec in records:
        moe = rec["metrics"].get("mixture")
        if not moe:
            continue
        row = table[table["point"] == rec["workload"]].iloc[0]
        counts = moe["expert_tokens"]
        assert row["drop_share"] == pytest.approx(moe["dropped"] / moe["assignments"])
        assert row["imbalance"] == pytest.approx(max(counts) / (sum(counts) / len(counts)))
        assert moe["assignments"] - moe["dropped"] == sum(counts)
    capped = table[table["capacity_factor"] == 1.0]
    # one SIP: no assignment leaves it; 8 tokens x top 2 over 4 experts, capacity 4 each
    assert (capped["drop_share"] > 0).all() and (table["dispersion"].fillna(0) == 0).all()
    tp, ep = (capped[capped["parallel"] == p].iloc[0] for p in ("tp", "ep"))
    assert tp["dropped"] == ep["dropped"]  # same seed: the same routes in both layouts


def test_layer_points_match_the_block_and_the_records_repeat(records):
    """A layer job's time is the FFN half's total; a rerun writes the same metrics."""
    layer = next(r for r in records if r["labels"]["kind"] == "layer")
    m = layer["metrics"]
    assert m["latency_ns"] == pytest.approx(sum(m["block_ns"].values()))
    assert layer["prediction"]["latency_ns"] <= m["latency_ns"]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        points, variants = _expand()
        again = run_job("moe", "small_2x2", SMALL, layer["workload"], "base",
                        {"workload": dict(points)[layer["workload"]],
                         "variant": variants[0][1]})
    assert again["metrics"] == layer["metrics"]


def test_values_figures_tables_and_panel(table, tmp_path):
    v = post.values(table)
    assert v["model"].number == "tiny-moe" and v["lo/tokens"].number == 1
    assert v["hi/ep"].number == pytest.approx(float(table[
        (table["point"] == "L-tiny-moe-t8-ep-s0")]["latency_ns"].iloc[0]))
    assert v["cap/factor"].number == 1.0 and v["cap/droppct"].number > 0
    assert v["fine/model"].missing  # one model only
    paths = post.figures(table, tmp_path)
    from kernbench.experiments.registry import get

    assert {p.stem for p in paths} == set(get("moe").figures)
    tex = post.tables(table)
    assert "a2a\\_hierarchical" in tex["moe_alltoall_table"]
    title, header, rows = post.panel(table)
    assert title == "Mixture of experts" and len(rows) == 8 and "off-SIP (%)" in header
    assert [r[0] for r in rows][-2:] == ["decode step", "prefill step"]
    pre = table[table["phase"] == "prefill"].iloc[0]
    assert v["pre/tpttft"].number == pytest.approx(pre["ttft_ms"], rel=1e-3)
    assert v["pre/context"].number == 24 and v["pre/epttft"].missing  # tp only here
    assert v["pre/C"].number == pre["C"] == 2  # 4 CUBEs, 2 KV heads of 4 query heads


def test_the_step_points_run_the_moe_decode_and_prefill_steps(records):
    step, pre = (next(r for r in records if r["labels"].get("phase") == phase)
                 for phase in ("decode", "prefill"))
    m = step["metrics"]
    assert m["fits"] and m["mixture"]["parallel"] == "ep" and m["tpot_ms"] > 0
    assert m["latency_ns"] >= step["prediction"]["latency_ns"]
    p = pre["metrics"]
    assert p["fits"] and p["mixture"]["parallel"] == "tp" and p["context"] == 24
    assert p["latency_ns"] == pytest.approx(p["ttft_ms"] * 1e6)
    assert p["latency_ns"] >= pre["prediction"]["latency_ns"]
    assert p["mixture"]["assignments"] == 24 * 2  # every prompt token routed to its top 2


def test_the_default_config_runs_both_layouts_at_every_skew():
    """The issue's table: expert- and tensor-parallel points for every skew."""
    import yaml

    block = yaml.safe_load((ROOT / "config/config.yaml").read_text())["experiments"]["moe"]
    spec = load_spec(ROOT / "config/topologies/llama70b_4sip.yaml")
    points, _ = study.expand(block, spec, "config.yaml")
    layer = [p for _, p in points if p["kind"] == "layer"]
    for skew in (0.0, 0.5, 1.0, 1.5):
        assert {p["parallel"] for p in layer if p["skew"] == skew} == {"tp", "ep"}, skew
    assert {p["tokens"] for p in layer} >= {1, 256}
    assert any(p["capacity_factor"] for p in layer)
    prefill = [p for _, p in points if p["kind"] == "step" and p["phase"] == "prefill"]
    assert {p["parallel"] for p in prefill} == {"tp", "ep"}


def test_strided_placement_is_an_expert_parallel_axis(monkeypatch):
    monkeypatch.chdir(ROOT)
    block = dict(BLOCK, layers=[{"model": TINY, "tokens": [4], "parallel": ["tp", "ep"],
                                 "placement": ["blocks", "strided"]}], steps=[])
    block.pop("alltoall")
    points, _ = _expand(block)
    assert [wid for wid, _ in points] == ["L-tiny-moe-t4-tp-s0", "L-tiny-moe-t4-ep-s0",
                                          "L-tiny-moe-t4-ep-s0-strided"]
    row = {"parallel": "ep", "placement": "strided"}
    assert post._layout(row) == "ep (strided)" and post._layout(dict(row, placement="")) == "ep"
    assert dict(points)["L-tiny-moe-t4-ep-s0-strided"]["placement"] == "strided"
