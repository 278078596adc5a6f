"""The mixture-of-experts decoder layer (tensor-parallel experts): a 2-layer model in
data mode against numpy, the dump's keys, the routing record (dropped assignments,
skew), the analytic bound and the CLI's refusals."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.cli.main import main
from kernbench.experiments.llm.mapping import Dims
from kernbench.experiments.llm.moe_run import MoeSettings
from kernbench.experiments.llm.step import run_decode_step
from kernbench.models import load_model
from kernbench.models.routing import apply_capacity, sample_routes
from kernbench.topology import load_topology

from .conftest import ROOT

TINY = str(ROOT / "config/models/tiny-moe.yaml")
SMALL = str(ROOT / "config/topologies/small_2x2.yaml")


def _norm(v, g, eps):
    return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * g


def _silu(v):
    return v / (1 + np.exp(-v))


def _moe(m, a, l, E, k):
    """out[t] = sum over t's k largest router logits (ties: lower expert) of
    softmax(those logits) * SwiGLU_e(m[t])."""
    logits = m @ a[f"l{l}.router"]
    out = np.zeros_like(m)
    for t in range(m.shape[0]):
        top = np.argsort(-logits[t], kind="stable")[:k]
        p = np.exp(logits[t, top] - logits[t, top].max())
        for e, w in zip(top, p / p.sum(), strict=True):
            g, u, d = (a[f"l{l}.e{e}.{n}"].astype(np.float64) for n in ("w_gate", "w_up",
                                                                        "w_down"))
            out[t] += w * ((_silu(m[t] @ g) * (m[t] @ u)) @ d)
    return out


def _layer(x, a, l, cfg, positions, cache):
    """The Llama block with the MoE FFN (attention from the reference module, the FFN
    written out here)."""
    from kernbench.experiments.llm import reference

    dims = Dims.of(cfg)
    w = {k.split(".", 1)[1]: v for k, v in a.items() if k.startswith(f"l{l}.")}
    dense_ffn = {"w_gate": np.zeros((dims.D, 1)), "w_up": np.zeros((dims.D, 1)),
                 "w_down": np.zeros((1, dims.D))}
    attn = {k: w[k] for k in ("attn_norm", "wq", "wk", "wv", "wo", "ffn_norm")}
    h = reference.layer(x, {**attn, **dense_ffn}, dims, positions, cache)  # FFN adds 0
    eps = cfg.rms_norm_eps
    return h + _moe(_norm(h, a[f"l{l}.ffn_norm"], eps), a, l, dims.experts, dims.top_k)


def _dump(folder, phase: str, batch: int, context: int, parallel: str) -> dict:
    out = folder / "m.npz"
    assert main(["model", "--model", TINY, "--topology", SMALL, "--phase", phase, "--batch",
                 str(batch), "--context", str(context), "--data", "--seed", "6", "--dump",
                 str(out), "--moe-parallel", parallel]) == 0
    return dict(np.load(out))


@pytest.fixture(scope="module", params=["tp", "ep"])
def decode_dump(request, tmp_path_factory):
    return _dump(tmp_path_factory.mktemp("moe"), "decode", 3, 29, request.param)


@pytest.fixture(scope="module", params=["tp", "ep"])
def prefill_dump(request, tmp_path_factory):
    return _dump(tmp_path_factory.mktemp("moe"), "prefill", 1, 40, request.param)


def _check(dump, cfg, positions, decode: bool):
    x = dump["x"].astype(np.float64)
    for l in range(cfg.num_hidden_layers):
        cache = (dump[f"l{l}.k_cache"], dump[f"l{l}.v_cache"]) if decode else None
        x = _layer(x, dump, l, cfg, positions, cache)
    err = np.abs(dump["out"] - x).max()
    assert err < 2e-2 * np.abs(x).max(), err  # f16 operands, f32 accumulation
    assert np.abs(dump["out"] - dump["x"]).max() > 10 * err


def test_two_layer_moe_decode_equals_numpy(decode_dump):
    _check(decode_dump, load_model(TINY), np.full(3, 29), True)


def test_two_layer_moe_prefill_equals_numpy(prefill_dump):
    _check(prefill_dump, load_model(TINY), np.arange(40), False)


def test_moe_dump_has_router_and_expert_weights_in_place_of_the_dense_ffn(decode_dump):
    cfg = load_model(TINY)
    D, F, E = cfg.hidden_size, cfg.intermediate_size, cfg.num_local_experts
    for l in range(2):
        assert decode_dump[f"l{l}.router"].shape == (D, E)
        for e in range(E):
            assert decode_dump[f"l{l}.e{e}.w_gate"].shape == (D, F)
            assert decode_dump[f"l{l}.e{e}.w_up"].shape == (D, F)
            assert decode_dump[f"l{l}.e{e}.w_down"].shape == (F, D)
        assert f"l{l}.w_gate" not in decode_dump


@pytest.fixture(scope="module")
def skewed():
    cfg = load_model(TINY)
    settings = MoeSettings(capacity_factor=1.0, skew=1.5, seed=11)
    run = run_decode_step(load_topology(SMALL), Dims.of(cfg), 24, 48, model=cfg.name,
                          moe=settings)
    return run.record


def test_dropped_assignments_follow_the_capacity_rule(skewed):
    moe = skewed["mixture"]
    expect = 0
    for l in range(2):  # each layer draws its routes with the next seed
        routes, _ = sample_routes(24, 4, 2, 1.5, 11 + l)
        expect += int((~apply_capacity(routes, 4, 1.0)).sum())
    assert moe["dropped"] == expect > 0
    assert moe["assignments"] == 2 * 24 * 2
    assert max(moe["expert_tokens"]) <= 24 * 2 // 4  # capacity 1.0: ceil(24 * 2 / 4)


def test_skew_piles_tokens_onto_the_first_experts():
    cfg = load_model(TINY)
    run = run_decode_step(load_topology(SMALL), Dims.of(cfg), 32, 16, layers=1,
                          model=cfg.name, moe=MoeSettings(skew=2.0, seed=1))
    counts = run.record["mixture"]["expert_tokens"]
    assert counts[0] > counts[3] and sum(counts) == 64


def test_moe_components_add_up_and_stay_above_the_bound(skewed):
    rec = skewed
    assert rec["simulated_layer_totals_ns"][-1] == pytest.approx(
        sum(rec["layer_ns"].values()), rel=1e-12)
    assert rec["step_ns"] >= rec["analytic"]["step_ns"]
    for op in ("norms", "qkv", "attention", "o_proj", "ffn"):
        assert rec["layer_ns"][op] >= rec["analytic"]["layer_ns"][op], op


def test_layers_left_out_count_as_the_mean_of_the_later_ones():
    cfg = load_model(TINY)
    dims = Dims.of(cfg, layers=6)
    rec = run_decode_step(load_topology(SMALL), dims, 8, 16, layers=3, model=cfg.name).record
    t = rec["simulated_layer_totals_ns"]
    assert rec["unsimulated_layer_ns"] == pytest.approx((t[1] + t[2]) / 2)
    assert rec["step_ns"] == pytest.approx(rec["embedding_ns"] + sum(t) + 3 * (t[1] + t[2]) / 2
                                           + rec["lm_head_ns"])


def test_expert_parallel_parts_dispersion_and_bound():
    """Tokens owned in equal blocks over the ranks of two SIPs, experts 0-1 on SIP 0 and
    2-3 on SIP 1: the share of assignments that leave their SIP, recomputed here."""
    cfg = load_model(TINY)
    topo = load_topology(str(ROOT / "config/topologies/default.yaml"))
    T, seed = 16, 3
    rec = run_decode_step(topo, Dims.of(cfg), T, 16, layers=1, tp=32, model=cfg.name,
                          moe=MoeSettings(seed=seed, parallel="ep")).record
    moe = rec["mixture"]
    routes, _ = sample_routes(T, 4, 2, 0.0, seed)
    R, per_sip = 32, 16
    away = sum((t * R // T) // per_sip != e // 2 for t in range(T) for e in routes[t])
    assert moe["dispersion"] == pytest.approx(away / (2 * T))
    assert moe["expert_ranks"] == 8 and moe["parallel"] == "ep"
    parts = moe["parts_ns"]
    assert list(parts) == ["router", "pack", "dispatch", "experts", "combine", "unpack"]
    assert rec["layer_ns"]["ffn"] <= sum(parts.values()) <= (rec["layer_ns"]["ffn"]
                                                              + rec["layer_ns"]["norms"])
    assert parts["dispatch"] > 0 and parts["combine"] > 0
    assert rec["layer_ns"]["ffn"] >= rec["analytic"]["layer_ns"]["ffn"]


@pytest.mark.parametrize(("extra", "message"), [
    (["--moe-parallel", "dp"], "--moe-parallel must be one of tp, ep, got 'dp'"),
    (["--capacity-factor", "0"], "capacity factor 0.0: must be a positive number"),
    (["--skew", "-0.5"], "routing skew -0.5: the Zipf exponent must be >= 0"),
    (["--skew", "1", "--data"], "--skew sets timing mode's routing"),
    (["--moe-parallel", "ep", "--moe-all-to-all", "ring"],
     "--moe-all-to-all 'ring': not an all-to-all algorithm (allowed: a2a_direct, "
     "a2a_hierarchical)"),
    (["--moe-all-to-all", "a2a_direct"], "--moe-all-to-all a2a_direct: applies to "
                                         "--moe-parallel ep only"),
    (["--moe-parallel", "ep", "--moe-placement", "rows"],
     "--moe-placement must be one of blocks, strided, got 'rows'"),
    (["--moe-placement", "strided"], "--moe-placement strided: applies to --moe-parallel ep"),
])
def test_bad_moe_options_are_one_line(extra, message, capsys):
    assert main(["model", "--model", TINY, "--topology", SMALL, "--phase", "decode",
                 "--batch", "2", "--context", "8", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_experts_that_do_not_place_evenly_are_refused(tmp_path, capsys):
    model = tmp_path / "three.yaml"
    model.write_text((ROOT / "config/models/tiny-moe.yaml").read_text().replace(
        "num_local_experts: 4", "num_local_experts: 3"))
    assert main(["model", "--model", str(model), "--topology", SMALL, "--phase", "decode",
                 "--batch", "2", "--context", "8", "--moe-parallel", "ep"]) == 2
    err = capsys.readouterr().err.strip()
    assert "3 experts do not place evenly on 32 ranks" in err and "\n" not in err


def test_moe_options_on_a_dense_model_are_refused(capsys):
    assert main(["model", "--model", str(ROOT / "config/models/tiny-gqa.yaml"), "--topology",
                 SMALL, "--phase", "decode", "--batch", "2", "--context", "8", "--skew",
                 "1"]) == 2
    assert "apply to a mixture-of-experts model only" in capsys.readouterr().err
