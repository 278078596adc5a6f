"""The FFN half of a decoder layer alone (``experiments.llm.block``): equal to numpy in
data mode (dense and MoE, both layouts), equal to the same half inside a whole step in
timing mode, and its record."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.experiments.llm.block import run_ffn_block
from kernbench.experiments.llm.mapping import Dims
from kernbench.experiments.llm.moe_run import MoeSettings
from kernbench.experiments.llm.step import run_decode_step
from kernbench.experiments.llm.tensors import row_block
from kernbench.kernels.decoder import lm_head
from kernbench.models import load_model
from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine import GraphEngine
from kernbench.topology import load_topology

from .conftest import ROOT
from .test_llm_moe import _moe, _norm, _silu

TINY_MOE = str(ROOT / "config/models/tiny-moe.yaml")
TINY = str(ROOT / "config/models/tiny-gqa.yaml")
SMALL = ROOT / "config/topologies/small_2x2.yaml"


def _expected(run, cfg) -> np.ndarray:
    """Two rounds of h + FFN(norm(h)) from the dumped input and weights, in float64."""
    a, dims, eps = run.arrays, Dims.of(cfg), cfg.rms_norm_eps
    h = a["x"].astype(np.float64)
    for l in range(2):
        m = _norm(h, a[f"l{l}.ffn_norm"], eps)
        if dims.experts:
            h = h + _moe(m, a, l, dims.experts, dims.top_k)
        else:
            g, u, d = (a[f"l{l}.{n}"].astype(np.float64) for n in ("w_gate", "w_up", "w_down"))
            h = h + (_silu(m @ g) * (m @ u)) @ d
    return h


@pytest.mark.parametrize("model,parallel,placement", [
    (TINY, "tp", "blocks"), (TINY_MOE, "tp", "blocks"), (TINY_MOE, "ep", "blocks"),
    (TINY_MOE, "ep", "strided")])
def test_ffn_block_equals_numpy(model, parallel, placement):
    cfg = load_model(model)
    moe = MoeSettings(parallel=parallel, placement=placement) if parallel == "ep" else None
    run = run_ffn_block(load_topology(SMALL), Dims.of(cfg), 6, data=True, seed=3, moe=moe)
    want = _expected(run, cfg)
    got = run.arrays["out"]
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < 1e-2, err


def test_ffn_block_times_what_the_step_times():
    """Timing mode, one layer: the block alone takes the step's norm, FFN and FFN
    all-reduce spans (the step's launches each wait for the last, so the FFN half starts
    on an idle machine)."""
    graph = load_topology(SMALL, {"fabric.sharing": "fifo"})
    dims = Dims.of(load_model(TINY_MOE))
    moe = MoeSettings(parallel="ep", skew=1.0, seed=5)
    step = run_decode_step(graph, dims, 4, 64, layers=1, moe=moe).record
    block = run_ffn_block(graph, dims, 4, rounds=1, moe=moe).record
    for phase in ("ffn", "allreduce_ffn"):
        assert block["block_ns"][phase] == pytest.approx(step["layer_ns"][phase], rel=1e-9)
    assert block["mixture"]["expert_tokens"] == step["mixture"]["expert_tokens"]
    assert block["block_total_ns"] >= block["analytic"]["total_ns"]


@pytest.mark.parametrize("parallel", ["tp", "ep"])
def test_expert_rows_in_small_blocks_still_equal_numpy(parallel, monkeypatch):
    """Experts take their rows a scratch-sized block at a time (256 Mixtral tokens
    overflowed the scratch in one); blocks of 2 rows give the same result."""
    from kernbench.experiments.llm import moe_ep, moe_run

    monkeypatch.setattr(moe_run, "expert_rows", lambda spec, D, cols: 2)
    monkeypatch.setattr(moe_ep, "expert_rows", lambda spec, D, cols: 2)
    cfg = load_model(TINY_MOE)
    run = run_ffn_block(load_topology(SMALL), Dims.of(cfg), 7, data=True, seed=4,
                        moe=MoeSettings(parallel=parallel))
    want = _expected(run, cfg)
    assert np.abs(run.arrays["out"] - want).max() / np.abs(want).max() < 1e-2
    assert max(run.record["mixture"]["expert_tokens"]) > 2  # some expert took several blocks


@pytest.mark.parametrize("experts,ranks", [(4, 32), (8, 8), (16, 4)])
@pytest.mark.parametrize("placement", ["blocks", "strided"])
def test_every_expert_column_lives_on_exactly_one_rank(experts, ranks, placement):
    """The layout's two views agree: ``slot`` (what a rank holds) and ``members`` (who
    holds an expert); every (expert, column block) is held once."""
    from kernbench.experiments.llm.moe_layout import ExpertLayout

    lay = ExpertLayout("ep", experts, ranks, 64, placement)
    held = [lay.slot(r, s) for r in range(ranks) for s in range(lay.slots)]
    assert sorted(held) == sorted((e, c * lay.cols) for e in range(experts)
                                  for c in range(lay.group))
    for e in range(experts):
        cols = {lay.slot(r, s)[1] for r in lay.members(e) for s in range(lay.slots)
                if lay.slot(r, s)[0] == e}
        assert len(list(lay.members(e))) == lay.group and len(cols) == lay.group
    if placement == "strided" and experts < ranks:
        assert list(lay.members(1)) == list(range(1, ranks, experts))


def test_a_row_block_fills_most_of_the_scratch_without_overflowing_it():
    """Every row block streams the weights again (ADR 0054): the LM head of Llama 3 8B's
    shard (D 4096, 501 vocabulary columns) over one block of ``row_block`` rows must fit
    the kernel scratch and use most of it (the old rule's 20-row block used 48 %)."""
    graph = load_topology(ROOT / "config/topologies/default.yaml")
    spec = graph.spec
    D, cols = 4096, 501
    rows = row_block(spec, D, cols)
    engine = GraphEngine(graph, keep_records=False)
    ctx = RuntimeContext(engine)
    x, norm = ctx.empty((rows, D)), ctx.empty((D,), "f32")
    w, logits = ctx.empty((D, cols)), ctx.empty((rows, cols), "f32")
    ctx.wait(ctx.launch("lm_head", lm_head, x, norm, w, logits, rows, D, cols, 1e-5, rows))
    peak = engine.pe(0, 0, 0).cpu.runner.context.peak_scratch
    assert 0.7 * spec.pe.kernel_scratch_bytes < peak <= spec.pe.kernel_scratch_bytes


def test_a_row_block_over_one_supertile_is_a_whole_number_of_them():
    """Each 32-row supertile band streams the weights again (ADR 0054, amendment): Llama
    3 8B's FFN shard (D 4096, 2 x 56 columns) fits 34 rows in the 2 MiB scratch,
    (2,097,152 - 4 x 4096 - 65,536) // (4096 x 14 + 112 x 6) = 34, and takes 32; 70B's
    17 rows (D 8192) stay 17."""
    spec = load_topology(ROOT / "config/topologies/default.yaml").spec
    assert row_block(spec, 4096, 112) == 32
    assert row_block(spec, 8192, 112) == 17
    for D in (1024, 2048, 4096, 8192):
        for cols in (2, 20, 112, 501):
            rows = row_block(spec, D, cols)
            assert rows < spec.pe.tile_m or rows % spec.pe.tile_m == 0, (D, cols, rows)
