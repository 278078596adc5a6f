"""``kernbench model``: a decoder step over the system, checked against numpy and its own
accounting (docs/host-api.md, "Decoder layers")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kernbench.cli.main import main
from kernbench.experiments.llm.mapping import Dims, build
from kernbench.experiments.llm.step import run_decode_step, run_prefill_step
from kernbench.models import load_model
from kernbench.topology import load_topology

from .conftest import ROOT

SMALL = str(ROOT / "config/topologies/small_2x2.yaml")
TINY = str(ROOT / "config/models/tiny-gqa.yaml")
WEIGHTS = ("attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w_gate", "w_up", "w_down")


def _rope(x, pos, theta):
    """Rotate-half RoPE of x [T, H, d] at positions pos (written out per element pair)."""
    d = x.shape[-1]
    out = np.empty_like(x)
    for i in range(d // 2):
        t = pos[:, None] * theta ** (-2 * i / d)
        a, b = x[..., i], x[..., i + d // 2]
        out[..., i] = a * np.cos(t) - b * np.sin(t)
        out[..., i + d // 2] = b * np.cos(t) + a * np.sin(t)
    return out


def _norm(v, g, eps):
    return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * g


def _rest_of_block(x, att, w, eps):
    """After attention: the residual through W_o, then the FFN block."""
    h = x + att @ w["wo"]
    m = _norm(h, w["ffn_norm"], eps)
    g = m @ w["w_gate"]
    return h + (g / (1 + np.exp(-g)) * (m @ w["w_up"])) @ w["w_down"]


def _numpy_decode_layer(x, a, l, S, cfg):
    """The Llama block of the issue, in float64, straight from the dump's arrays."""
    w = {k: a[f"l{l}.{k}"].astype(np.float64) for k in WEIGHTS}
    B, D = x.shape
    Hq, Hkv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    eps = cfg.rms_norm_eps
    n = _norm(x, w["attn_norm"], eps)
    pos = np.full(B, float(S))
    q = _rope((n @ w["wq"]).reshape(B, Hq, d), pos, cfg.rope_theta)
    k = _rope((n @ w["wk"]).reshape(B, Hkv, d), pos, cfg.rope_theta)
    v = (n @ w["wv"]).reshape(B, Hkv, d)
    att = np.zeros((B, Hq, d))
    for u in range(B):
        keys = np.concatenate([a[f"l{l}.k_cache"][u], k[u:u + 1]]).astype(np.float64)
        vals = np.concatenate([a[f"l{l}.v_cache"][u], v[u:u + 1]]).astype(np.float64)
        for i in range(Hq):
            s = keys[:, i // (Hq // Hkv)] @ q[u, i] / np.sqrt(d)
            p = np.exp(s - s.max())
            att[u, i] = (p / p.sum()) @ vals[:, i // (Hq // Hkv)]
    return _rest_of_block(x, att.reshape(B, Hq * d), w, eps)


def _dump(folder, phase: str, batch: int, context: int, seed: int, model: str = TINY) -> dict:
    """The arrays ``kernbench model --data --dump`` writes for the tiny model."""
    out = folder / "m.npz"
    assert main(["model", "--model", model, "--topology", SMALL, "--phase", phase,
                 "--batch", str(batch), "--context", str(context), "--data", "--seed",
                 str(seed), "--dump", str(out)]) == 0
    return dict(np.load(out))


@pytest.fixture(scope="module")
def dumped(tmp_path_factory):
    return _dump(tmp_path_factory.mktemp("model"), "decode", 2, 37, 3)


def test_two_layer_decode_equals_numpy(dumped):
    cfg = load_model(TINY)
    x = dumped["x"].astype(np.float64)
    for layer in range(cfg.num_hidden_layers):
        x = _numpy_decode_layer(x, dumped, layer, 37, cfg)
    err = np.abs(dumped["out"] - x).max()
    assert err < 2e-2 * np.abs(x).max(), err  # f16 operands, f32 accumulation
    # and the block does something: out is far from x
    assert np.abs(dumped["out"] - dumped["x"]).max() > 10 * err


def test_dump_follows_the_keys_of_the_contract(dumped):
    cfg = load_model(TINY)
    B, S, D, d = 2, 37, cfg.hidden_size, cfg.head_dim
    Hq, Hkv, F = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size
    shapes = {"x": (B, D), "out": (B, D)}
    for layer in range(2):
        shapes.update({f"l{layer}.attn_norm": (D,), f"l{layer}.wq": (D, Hq * d),
                       f"l{layer}.wk": (D, Hkv * d), f"l{layer}.wv": (D, Hkv * d),
                       f"l{layer}.wo": (Hq * d, D), f"l{layer}.ffn_norm": (D,),
                       f"l{layer}.w_gate": (D, F), f"l{layer}.w_up": (D, F),
                       f"l{layer}.w_down": (F, D), f"l{layer}.k_cache": (B, S, Hkv, d),
                       f"l{layer}.v_cache": (B, S, Hkv, d)})
    assert {k: v.shape for k, v in dumped.items()} == shapes
    assert all(v.dtype == np.float32 for v in dumped.values())


@pytest.fixture(scope="module")
def record():
    cfg = load_model(TINY)
    return run_decode_step(load_topology(SMALL), Dims.of(cfg), 3, 100, model=cfg.name).record


def test_components_add_up_to_the_step(record):
    layer = sum(record["layer_ns"].values())
    assert record["simulated_layer_totals_ns"][-1] == pytest.approx(layer, rel=1e-12)
    assert record["step_ns"] == pytest.approx(
        record["embedding_ns"] + sum(record["simulated_layer_totals_ns"])
        + record["lm_head_ns"], rel=1e-12)
    assert record["tokens_per_s_system"] == pytest.approx(3 * record["tokens_per_s_user"])


def test_the_step_is_never_below_its_analytic_bound(record):
    pred = record["analytic"]
    assert record["step_ns"] >= pred["step_ns"]
    for op in ("norms", "qkv", "attention", "o_proj", "ffn"):
        assert record["layer_ns"][op] >= pred["layer_ns"][op], op


def test_the_norms_line_is_the_fused_prologues_and_grows_with_the_rows(record):
    """The RMSNorms run as composite prologues: their line is positive, at least the
    vector engine's four passes over the rows (2 x 4 x T x D / (lanes x GHz)), and,
    their overheads aside, proportional to the rows (3 users here, 6 below)."""
    cfg = load_model(TINY)
    spec = load_topology(SMALL).spec
    bound = 2 * 4 * 3 * cfg.hidden_size / (spec.pe.vector_width * spec.pe.clock_ghz)
    norms = record["layer_ns"]["norms"]
    assert list(record["layer_ns"])[0] == "norms" and norms >= bound > 0
    six = run_decode_step(load_topology(SMALL), Dims.of(cfg), 6, 100, layers=1).record
    assert 1.3 < six["layer_ns"]["norms"] / norms <= 2.0


def test_fewer_layers_scale_by_the_last(record):
    cfg = load_model(TINY)
    one = run_decode_step(load_topology(SMALL), Dims.of(cfg), 3, 100, layers=1).record
    assert one["simulated_layers"] == 1
    assert one["step_ns"] == pytest.approx(
        one["embedding_ns"] + 2 * one["simulated_layer_totals_ns"][0] + one["lm_head_ns"])
    # layer 2 of the full run is layer 1 again (same shapes, idle system)
    assert record["simulated_layer_totals_ns"][1] == pytest.approx(
        one["simulated_layer_totals_ns"][0], rel=5e-3)


def test_every_rank_takes_an_equal_share_of_each_projection():
    spec = load_topology(ROOT / "config/topologies/llama70b_4sip.yaml").spec
    dims = Dims.of(load_model("llama3-70b"))
    m = build(spec, dims)
    assert m.tp == 512 and len(m.ranks) == 512 and m.C * m.P * dims.Hkv == 512
    sizes = {(s.qk, s.v, s.o) for s in m.slices.values()}
    assert sizes == {(1152 // 64, 128 // 64, 1024 // 64)}
    # together the ranks of a head cover its columns exactly once
    for g in m.groups:
        mine = sorted(s.qk0 for s in m.slices.values() if s.group is g)
        assert mine == list(range(0, 1152, 18))
    assert m.ffn_cols * 512 == dims.F


def test_json_output_names_the_model_and_phase(capsys):
    assert main(["model", "--model", TINY, "--topology", SMALL, "--phase", "decode",
                 "--batch", "1", "--context", "16", "--layers", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["model"] == "tiny-gqa" and doc["phase"] == "decode"
    assert doc["simulated_layers"] == 1 and doc["layers"] == 2


def test_set_overrides_a_topology_key_and_the_record_names_the_links(capsys):
    """``--set fabric.sharing=fifo`` runs the study's link model from the CLI: the record
    says which, and the step differs from the topology's own fair-shared links."""
    argv = ["model", "--model", TINY, "--topology", SMALL, "--phase", "decode", "--batch",
            "2", "--context", "64", "--layers", "1", "--json"]
    steps = {}
    for extra in ([], ["--set", "fabric.sharing=fifo"]):
        assert main(argv + extra) == 0
        doc = json.loads(capsys.readouterr().out)
        steps[doc["links"]] = doc["step_ns"]
    assert set(steps) == {"interleaved", "fifo"} and steps["fifo"] != steps["interleaved"]


@pytest.mark.parametrize("value,expect", [
    ("fabric.sharing", "expected KEY=VALUE"),
    ("fabric.sharing=round-robin", "fabric.sharing"),
    ("pe.no_such_key=3", "pe.no_such_key"),
])
def test_a_bad_set_is_one_line_and_exit_2(value, expect, capsys):
    assert main(["model", "--model", TINY, "--topology", SMALL, "--phase", "decode",
                 "--batch", "1", "--context", "16", "--set", value]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expect in err, err


# -- prefill: one prompt, causal, every token through the layers -----------------------

PROMPT = 300  # > one 256-token KV tile per CUBE and several 128-row query blocks


def _numpy_prefill_layer(x, a, l, cfg):
    """The same block over a prompt: token t at position t sees tokens 0..t."""
    w = {k: a[f"l{l}.{k}"].astype(np.float64) for k in WEIGHTS}
    S, D = x.shape
    Hq, Hkv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    eps = cfg.rms_norm_eps
    n = _norm(x, w["attn_norm"], eps)
    pos = np.arange(S, dtype=np.float64)
    q = _rope((n @ w["wq"]).reshape(S, Hq, d), pos, cfg.rope_theta)
    k = _rope((n @ w["wk"]).reshape(S, Hkv, d), pos, cfg.rope_theta)
    v = (n @ w["wv"]).reshape(S, Hkv, d)
    att = np.zeros((S, Hq, d))
    for i in range(Hq):
        kv = i // (Hq // Hkv)
        s = q[:, i] @ k[:, kv].T / np.sqrt(d)
        s[np.triu_indices(S, 1)] = -np.inf  # a token does not see later ones
        p = np.exp(s - s.max(-1, keepdims=True))
        att[:, i] = (p / p.sum(-1, keepdims=True)) @ v[:, kv]
    return _rest_of_block(x, att.reshape(S, Hq * d), w, eps)


@pytest.fixture(scope="module")
def prefill_dumped(tmp_path_factory):
    return _dump(tmp_path_factory.mktemp("prefill"), "prefill", 1, PROMPT, 5)


def test_two_layer_prefill_equals_numpy(prefill_dumped):
    cfg = load_model(TINY)
    x = prefill_dumped["x"].astype(np.float64)
    for layer in range(cfg.num_hidden_layers):
        x = _numpy_prefill_layer(x, prefill_dumped, layer, cfg)
    err = np.abs(prefill_dumped["out"] - x)
    assert err.max() < 2e-2 * np.abs(x).max(), err.max()
    assert np.median(err) < 2e-3 * np.abs(x).max()  # typical rows far tighter than the worst
    assert np.abs(prefill_dumped["out"] - prefill_dumped["x"]).max() > 10 * err.max()


def _two_query_heads(folder) -> str:
    """tiny-gqa with one KV head of two query heads: the widest group (all 4 CUBEs of
    small_2x2) does not divide G = 2, so the prefill ring takes C = 2."""
    text = (ROOT / "config/models/tiny-gqa.yaml").read_text()
    text = text.replace("num_attention_heads: 8", "num_attention_heads: 2").replace(
        "num_key_value_heads: 2", "num_key_value_heads: 1")
    path = folder / "g2.yaml"
    path.write_text(text)
    return str(path)


def test_prefill_ring_takes_a_group_width_that_divides_the_query_heads(tmp_path):
    cfg = load_model(_two_query_heads(tmp_path))
    spec = load_topology(SMALL).spec
    assert build(spec, Dims.of(cfg)).C == 4  # decode splits the cache, any C will do
    assert build(spec, Dims.of(cfg), ring=True).C == 2
    dump = _dump(tmp_path, "prefill", 1, 140, 8, _two_query_heads(tmp_path))
    x = dump["x"].astype(np.float64)
    for layer in range(cfg.num_hidden_layers):
        x = _numpy_prefill_layer(x, dump, layer, cfg)
    err = np.abs(dump["out"] - x)
    assert err.max() < 2e-2 * np.abs(x).max(), err.max()
    assert np.abs(dump["out"] - dump["x"]).max() > 10 * err.max()


def test_prefill_dump_has_the_prompt_rows_and_no_cache(prefill_dumped):
    cfg = load_model(TINY)
    D = cfg.hidden_size
    assert prefill_dumped["x"].shape == prefill_dumped["out"].shape == (PROMPT, D)
    assert not [k for k in prefill_dumped if "cache" in k]
    weights = {k for k in prefill_dumped if k.startswith("l")}
    assert weights == {f"l{layer}.{w}" for layer in range(2) for w in WEIGHTS}


@pytest.fixture(scope="module")
def prefill_record():
    cfg = load_model(TINY)
    return run_prefill_step(load_topology(SMALL), Dims.of(cfg), 1, 700, model=cfg.name).record


def test_prefill_components_add_up_and_stay_above_the_bound(prefill_record):
    rec = prefill_record
    assert rec["phase"] == "prefill" and rec["context"] == 700
    assert rec["step_ns"] == pytest.approx(
        rec["embedding_ns"] + sum(rec["simulated_layer_totals_ns"]) + rec["lm_head_ns"],
        rel=1e-12)
    assert rec["ttft_ms"] == pytest.approx(rec["step_ns"] / 1e6)
    assert rec["prefill_tokens_per_s"] == pytest.approx(700 * 1e9 / rec["step_ns"])
    pred = rec["analytic"]
    assert rec["step_ns"] >= pred["step_ns"]
    for op in ("norms", "qkv", "attention", "o_proj", "ffn"):
        assert rec["layer_ns"][op] >= pred["layer_ns"][op], op


def test_a_residual_reduced_in_pieces_equals_numpy(monkeypatch):
    """A prompt's [S, D] rows exceed one collective's scratch on real models; force
    the pieces small here (4 KiB of a 20 KiB buffer) and check the values."""
    from kernbench.experiments.llm import step

    monkeypatch.setattr(step, "collective_chunk_bytes", lambda spec: 4096)
    cfg = load_model(TINY)
    dims = Dims.of(cfg)
    r = run_prefill_step(load_topology(SMALL), dims, 1, 40, layers=1, data=True, seed=2)
    assert r.record["collective"]["chunk_bytes"] == 4096
    x = r.arrays["x"].astype(np.float64)
    want = _numpy_prefill_layer(x, r.arrays, 0, cfg)
    # one simulated layer: the dump's out is after layer 0
    assert np.abs(r.arrays["out"] - want).max() < 2e-2 * np.abs(want).max()


def test_prefill_of_a_longer_prompt_takes_longer(prefill_record):
    cfg = load_model(TINY)
    short = run_prefill_step(load_topology(SMALL), Dims.of(cfg), 1, 350, layers=1).record
    assert short["ttft_ms"] < prefill_record["ttft_ms"]
    for op in short["layer_ns"]:  # every step has more rows to move or compute
        assert short["layer_ns"][op] < prefill_record["layer_ns"][op], op


def _pieces_both_ways(monkeypatch, run, sharing, **kw):
    """The record with equal all-reduce pieces replayed (the default) and simulated."""
    from kernbench.experiments.llm import step

    monkeypatch.setattr(step, "collective_chunk_bytes", lambda spec: 4096)
    dims = Dims.of(load_model(TINY))
    graph = lambda: load_topology(SMALL, {"fabric.sharing": sharing})  # noqa: E731
    return [run(graph(), dims, **kw, replay=r).record for r in (True, False)]


@pytest.mark.parametrize("phase,sharing", [("prefill", "interleaved"), ("prefill", "fifo"),
                                           ("decode", "interleaved")])
def test_replayed_all_reduce_pieces_take_the_span_simulating_them_gives(monkeypatch, phase,
                                                                         sharing):
    """docs/adr/0050: a piece the size of one simulated before, on an idle system, is
    counted as that one's span; simulating every piece gives the same step to rounding.
    Prefill [40, 256] f16 rows cut into 4 KiB pieces end in a shorter piece, which
    has a span of its own (taking the full piece's for it fails this test)."""
    if phase == "prefill":
        fast, full = _pieces_both_ways(monkeypatch, run_prefill_step, sharing, batch=1,
                                       context=40, layers=2)
    else:
        fast, full = _pieces_both_ways(monkeypatch, run_decode_step, sharing, users=3,
                                       context=100, layers=2)
    assert fast["links"] == full["links"] == sharing
    shard = (40 if phase == "prefill" else 3) * 256 * 2
    per_reduce = -(-shard // 4096)
    reduces = 1 + 2 * full["simulated_layers"]  # the embedding's, then two per layer
    assert full["collective"]["simulated_pieces"] == reduces * per_reduce
    assert full["collective"]["replayed_pieces"] == 0
    distinct = len({min(4096, shard - off) for off in range(0, shard, 4096)})
    assert fast["collective"]["simulated_pieces"] == distinct
    assert fast["collective"]["replayed_pieces"] == reduces * per_reduce - distinct
    assert fast["step_ns"] == pytest.approx(full["step_ns"], rel=1e-12)
    for name, ns in full["layer_ns"].items():
        assert fast["layer_ns"][name] == pytest.approx(ns, rel=1e-12, abs=1e-9), name
    assert fast["embedding_ns"] == pytest.approx(full["embedding_ns"], rel=1e-12)


def test_data_mode_and_traces_simulate_every_piece():
    cfg = load_model(TINY)
    r = run_decode_step(load_topology(SMALL), Dims.of(cfg), 2, 64, layers=2, data=True)
    assert r.record["collective"]["replayed_pieces"] == 0
    r = run_decode_step(load_topology(SMALL), Dims.of(cfg), 2, 64, layers=2,
                        keep_records=True)
    assert r.record["collective"]["replayed_pieces"] == 0
    assert r.record["collective"]["simulated_pieces"] == 5


def test_settle_drops_a_finished_tail_and_sees_what_is_pending():
    from kernbench.sim_engine.engine import GraphEngine

    engine = GraphEngine(load_topology(SMALL), keep_records=False)
    env = engine.env
    assert engine.settle()
    env.timeout(0)  # due now, nothing waits on it: a finished launch's tail
    assert engine.settle() and env.now == 0
    env.timeout(5).callbacks.append(lambda ev: None)
    assert not engine.settle()
    woken = []
    env.timeout(0).callbacks.append(woken.append)  # due now and waited on: kept
    engine.run(until=1)
    assert not engine.settle()  # the one at 5 is still pending
    assert woken and env.now == 1


def _attention_commands(S: int) -> tuple[int, float]:
    """(PE commands, attention ns) of a one-user, one-layer tiny decode at context S."""
    cfg = load_model(TINY)
    run = run_decode_step(load_topology(SMALL), Dims.of(cfg), 1, S, layers=1)
    commands = sum(u.cpu.commands for u in run.engine.pes.values())
    return commands, run.record["layer_ns"]["attention"]


def test_a_token_past_whole_kv_tiles_joins_the_tile_before(tmp_path, monkeypatch):
    """At S = 256 x 16 each of the 16 group ranks holds 257 slots: the new token would be
    a one-token tile of its own; the host widens the tile to 257 instead, the layer still
    equals numpy, and attention takes fewer commands and no longer than with 256."""
    from kernbench.experiments.llm import layer_run

    tile = layer_run.attention_tile
    assert [tile(n) for n in (100, 256, 257, 512, 513, 528, 529, 1025)] == [
        256, 256, 257, 256, 257, 264, 256, 257]
    S = 256 * 16
    dumped = _dump(tmp_path, "decode", 2, S, 5)
    cfg = load_model(TINY)
    x = dumped["x"].astype(np.float64)
    for layer in range(cfg.num_hidden_layers):
        x = _numpy_decode_layer(x, dumped, layer, S, cfg)
    err = np.abs(dumped["out"] - x).max()
    assert err < 2e-2 * np.abs(x).max(), err
    widened = _attention_commands(S)
    monkeypatch.setattr(layer_run, "attention_tile", lambda slots: layer_run.ATTN_TILE)
    whole = _attention_commands(S)
    assert widened[0] < whole[0] and widened[1] <= whole[1], (widened, whole)
