"""Fused GQA attention: numerics against numpy, and the levers read from the op log.

Decode (split-KV + two-level reduce) and prefill (causal ring) run on whole
systems in data mode with random non-symmetric f16 inputs at contexts that are
not multiples of the tile; every output is compared with plain softmax
attention in float64 (tolerance: a few f16 ulps of O, whose entries are O(1)).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kernbench.cli.main import main
from kernbench.errors import UsageError
from kernbench.experiments.gqa.common import Shape
from kernbench.experiments.gqa.decode_run import run_decode
from kernbench.experiments.gqa.prefill_layout import chunk_width, q_blocks_of, working_set
from kernbench.experiments.gqa.prefill_run import run_prefill
from kernbench.geometry.groups import (
    centre_depth,
    centre_role,
    place_groups,
    reduce_tables,
    root_of,
    tree_role,
    tree_rounds,
)
from kernbench.kernels.attention.helpers import block_len, reference_attention, valid_len
from kernbench.topology import load_topology

from .conftest import TOPOLOGIES

TOL = 2e-3  # f16 inputs, f32 accumulation: the error is far below one f16 ulp of O(1)
SMALL = Shape(heads=2, G=8, d=32)


@pytest.fixture(scope="module")
def llama_graph():
    return load_topology(TOPOLOGIES / "llama70b_4sip.yaml")


# -- placement arithmetic ---------------------------------------------------------------------
@pytest.mark.parametrize("S,ranks", [(1, 16), (777, 16), (4096, 64), (131071, 16)])
def test_contiguous_blocks_cover_every_token_once(S, ranks):
    B = block_len(S, ranks)
    owner = np.full(S, -1)
    for r in range(ranks):
        n = valid_len(S, r, B)
        assert owner[r * B:r * B + n].tolist() == [-1] * n
        owner[r * B:r * B + n] = r
    assert (owner >= 0).all() and (np.diff(owner) >= 0).all()  # contiguous, in rank order


def test_groups_cover_all_sips_two_per_sip(llama_graph):
    groups = place_groups(llama_graph.spec, 8, 8, 8)
    assert [g.sip for g in groups] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [g.cube_start for g in groups] == [0, 8] * 4
    assert all((g.w, g.h) == (4, 2) for g in groups)
    cubes = {(g.sip, c) for g in groups for c in g.cubes}
    assert len(cubes) == 64  # every CUBE of the system, none twice


@pytest.mark.parametrize("P", [1, 2, 3, 5, 8])
def test_binomial_tree_reaches_pe0_in_ceil_log2_rounds(P):
    depth = {0: 0}
    for pe in range(1, P):
        hops, at = 0, pe
        while at:
            _, (_, at) = tree_role(at, P)
            hops += 1
        depth[pe] = hops
    rounds = math.ceil(math.log2(P)) if P > 1 else 0
    assert tree_rounds(P) == rounds == len(tree_role(0, P)[0])  # the root merges once a round
    assert max(depth.values()) <= rounds and (P & (P - 1) or max(depth.values()) == rounds)


@pytest.mark.parametrize("w,h", [(1, 1), (2, 1), (4, 1), (4, 2), (3, 3)])
def test_centre_root_reduce_depth(w, h):
    def hops(x, y):
        n = 0
        while True:
            _, parent = centre_role(x, y, w, h)
            if parent is None:
                return n
            x, y = parent[1]
            n += 1

    assert max(hops(x, y) for x in range(w) for y in range(h)) == centre_depth(w, h)


# -- decode -------------------------------------------------------------------------------------
@pytest.mark.parametrize("C,P,variant,S", [(1, 1, "opt3", 300), (1, 8, "opt1", 777),
                                           (2, 8, "opt2", 1000), (4, 2, "opt3", 513)])
def test_decode_matches_numpy(default_graph, C, P, variant, S):
    r = run_decode(default_graph, S, C=C, P=P, variant=variant, tile=64, data=True, seed=C * P,
                   shape=Shape(heads=2, G=8, d=128))
    assert r.max_error < TOL
    for h in range(2):  # the dump holds the logical arrays
        ref = reference_attention(r.arrays[f"q_{h}"], r.arrays[f"k_{h}"], r.arrays[f"v_{h}"],
                                  causal=False)
        np.testing.assert_allclose(r.arrays[f"o_{h}"], ref, atol=TOL)
        assert r.arrays[f"k_{h}"].shape == (S, 128) and r.arrays[f"o_{h}"].shape == (8, 128)


def test_batched_decode_keeps_users_apart(default_graph):
    r = run_decode(default_graph, 200, users=3, C=1, P=2, tile=64, data=True, shape=SMALL)
    assert r.max_error < TOL
    assert {"q_2_1", "o_0_0", "k_1_1"} <= set(r.arrays)
    assert not np.allclose(r.arrays["o_0_0"], r.arrays["o_1_0"])


def _each_user_matches_numpy(r, users: int) -> None:
    assert r.max_error < TOL
    for key in (f"{u}_{h}" for u in range(users) for h in range(2)):
        ref = reference_attention(r.arrays[f"q_{key}"], r.arrays[f"k_{key}"],
                                  r.arrays[f"v_{key}"], causal=False)
        np.testing.assert_allclose(r.arrays[f"o_{key}"], ref, atol=TOL)


@pytest.mark.parametrize("variant", ["opt2", "opt3"])
def test_fused_reduce_gives_each_user_its_attention_in_fewer_messages(default_graph, variant):
    """Every user's state merged once per tree edge (ADR 0052): each user's output is
    still its own numpy attention, and every rank but a root sends U + 2 messages (m
    and l stacked, O one user per message) instead of 3 U."""
    U, C, P = 3, 2, 4
    runs = {fused: run_decode(default_graph, 300, users=U, C=C, P=P, variant=variant, tile=64,
                              data=True, seed=5, shape=SMALL, keep_records=True,
                              fused_reduce=fused) for fused in (False, True)}
    for r in runs.values():
        _each_user_matches_numpy(r, U)
    copies = {fused: sum(rec.op_name == "ipcq_copy" for rec in r.engine.op_log.records)
              for fused, r in runs.items()}
    assert copies == {False: 3 * U * (C * P - 1) * 2, True: (U + 2) * (C * P - 1) * 2}


@pytest.mark.parametrize("fused", [False, True])
def test_block_sweep_gives_each_user_its_attention_in_fewer_commands(default_graph, fused):
    """opt3 over blocks of two users (ADR 0053: users 0-1, then 2): each user's output is
    still its own numpy attention, with the per-user sweep's Q.K^T and P.V composites
    and KV reads but one set of softmax steps per block and tile."""
    U, C, P, S, tile = 3, 2, 4, 300, 64
    runs = {n: run_decode(default_graph, S, users=U, C=C, P=P, tile=tile, data=True, seed=7,
                          shape=SMALL, fused_reduce=fused, sweep_users=n) for n in (1, 2)}
    for r in runs.values():
        _each_user_matches_numpy(r, U)
    one, two = (runs[n].op_counts for n in (1, 2))
    for kind in ("dma_read", "composite_gemm"):
        assert one[kind] == two[kind]
    # 300 tokens over 8 ranks: one 64-token tile per user on each of 2 x 8 ranks, so one
    # row max per rank and user, or per rank and block of users
    assert (one["max"], two["max"]) == (2 * C * P * U, 2 * C * P * 2)
    assert two["dispatch"] < one["dispatch"]


def test_decode_kv_reads_do_not_grow_with_G(default_graph):
    runs = {G: run_decode(default_graph, 1024, C=1, P=2, tile=128, shape=Shape(2, G, 128))
            for G in (1, 8)}
    assert runs[1].families["dma_read"] == runs[8].families["dma_read"]
    assert runs[1].params["kv_bytes"] == runs[8].params["kv_bytes"]


@pytest.mark.parametrize("C,P", [(1, 8), (2, 8), (4, 2)])
def test_decode_reduce_is_a_static_tree_landing_on_one_rank(default_graph, C, P):
    shape = Shape(heads=2, G=8, d=128)
    r = run_decode(default_graph, 4 * C * P, C=C, P=P, tile=64, shape=shape, keep_records=True)
    groups = place_groups(default_graph.spec, 2, C, P)
    tables = reduce_tables(groups)
    recv = {}
    for rec in r.engine.op_log.records:
        if rec.op_name == "ipcq_copy":
            pe = rec.component_id.rsplit(".", 1)[0]
            recv[pe] = recv.get(pe, 0) + 1
    # every rank but the root sends (m, l, O) exactly once up the tree
    assert sum(recv.values()) == 3 * (C * P - 1) * 2
    writers = {rec.component_id.rsplit(".", 1)[0] for rec in r.engine.op_log.records
               if rec.op_name == "dma_write"}
    assert writers == {f"sip{s}.cube{c}.pe{p}" for s, c, p in map(root_of, groups)}
    # tree depth: ceil(log2 P) rounds in the CUBE plus the centre-mesh depth over C
    for g in groups:
        root = root_of(g)
        depth, frontier, seen = 0, [root], {root}
        while True:
            nxt = [peer for node in frontier for peer in tables.get(node, {}).values()
                   if peer not in seen]
            if not nxt:
                break
            seen.update(nxt)
            frontier, depth = nxt, depth + 1
        assert len(seen) == C * P
        assert r.params["reduce_rounds"] == tree_rounds(P) + (centre_depth(g.w, g.h) if C > 1
                                                              else 0)
        assert depth <= r.params["reduce_rounds"]


def test_tiled_sweep_overlaps_loads_and_compute(ideal_graph):
    """On an array that reloads a weight block per cycle, the KV loads and the GEMMs of a
    decode sweep take comparable time and overlap (on the default array the GEMMs
    dominate: tests/test_gemm_array.py)."""
    r = run_decode(ideal_graph, 8192, C=1, P=1, tile=512, shape=Shape(2, 8, 128))
    occ = r.occupancy
    serial = occ["dma_read"] + occ["gemm"] + occ["math"]  # % of the span each
    assert serial > 100.0  # the serial sum of loads and compute exceeds the latency
    assert occ["dma_read"] > 50.0 and occ["gemm"] > 50.0  # both run most of the time


def _per_tile_cycles(graph, variant: str) -> float:
    def cycles(S):
        r = run_decode(graph, S, C=1, P=1, tile=128, variant=variant, shape=Shape(1, 8, 128))
        return r.engine.pe(0, 0, 0).cpu.dispatch_cycles
    return cycles(6 * 128) - cycles(5 * 128)


@pytest.mark.parametrize("R", [0.25, 0.0625, 0.03125])
def test_dispatch_cycles_per_tile_opt2_below_opt3(tmp_path, R):
    path = tmp_path / f"r{R}.yaml"
    path.write_text(f"schema_version: 1\nextends: {TOPOLOGIES / 'single_cube.yaml'}\n"
                    f"name: r\ndescription: R sweep\npe:\n  pe_cost_model:\n"
                    f"    byte_cycles_recip: {R}\n")
    graph = load_topology(path)
    opt2, opt3 = _per_tile_cycles(graph, "opt2"), _per_tile_cycles(graph, "opt3")
    assert opt2 < opt3
    if R == 0.0625:  # the default calibration
        assert opt3 > 2 * opt2


# -- prefill ------------------------------------------------------------------------------------
@pytest.mark.parametrize("C,P,S,q_rows,tile,fused", [
    (1, 2, 70, 16, 32, True), (2, 2, 150, 16, 32, False), (4, 2, 203, 16, 32, True),
    (8, 1, 130, 32, 32, True), (8, 2, 300, 16, 32, False)])
def test_causal_prefill_matches_numpy(default_graph, C, P, S, q_rows, tile, fused):
    r = run_prefill(default_graph, S, C=C, P=P, q_rows=q_rows, tile=tile, fused=fused,
                    data=True, seed=S, shape=SMALL, tile_shape=(32, 32, 32) if fused else None)
    assert r.max_error < TOL
    assert r.arrays["q_0"].shape == (8, S, 32) and r.arrays["o_1"].shape == (8, S, 32)


def _lane_tiles(S, C, P, tile):
    Sb = block_len(S, C)
    return [(c * Sb + t * tile, chunk_width(S, Sb, tile, c, t)) for c in range(C)
            for t in range(-(-Sb // tile))]


@pytest.mark.parametrize("C,P,S,fused", [(2, 2, 150, True), (4, 1, 203, False)])
def test_prefill_levers(default_graph, C, P, S, fused):
    q_rows, tile = 16, 32
    r = run_prefill(default_graph, S, C=C, P=P, q_rows=q_rows, tile=tile, fused=fused,
                    shape=SMALL)
    kv = _lane_tiles(S, C, P, tile)
    lower = full = 0
    for pe in range(P):
        for q0, rows in q_blocks_of(S, q_rows, pe, P):
            lower += sum(1 for k0, w in kv if w and k0 <= q0 + rows - 1)
            full += sum(1 for _, w in kv if w)
    heads = SMALL.heads
    # one Q.K^T and one P.V per (query block, KV tile) on or below the diagonal, per CUBE
    assert r.families["gemm"] == 2 * lower * C * heads < 2 * full * C * heads
    # every needed tile visits all C CUBEs of its lane: C - 1 hops, one message each
    # (K^T and V packed); nothing else crosses IPCQ (no reduce)
    assert r.families["ipcq_copy"] == lower * (C - 1) * heads
    # each CUBE writes only its own heads' rows: one store per query block
    n_blocks = sum(len(q_blocks_of(S, q_rows, pe, P)) for pe in range(P))
    assert r.families["dma_write"] == n_blocks * C * heads


# -- CLI ------------------------------------------------------------------------------------------
def test_cli_dump_checks_with_numpy(tmp_path, capsys):
    out = tmp_path / "o.npz"
    assert main(["attention", "--mode", "prefill", "--topology", "default", "--context", "90",
                 "--C", "2", "--P", "2", "--q-rows", "16", "--tile", "32", "--data",
                 "--dump", str(out)]) == 0
    text = capsys.readouterr().out
    assert "latency" in text and "bound (compute)" in text and "engine occupancy" in text
    z = np.load(out)
    for h in range(8):
        ref = reference_attention(z[f"q_{h}"], z[f"k_{h}"], z[f"v_{h}"], causal=True)
        np.testing.assert_allclose(z[f"o_{h}"], ref, atol=TOL)


TINY_MODEL = {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 8,
              "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512,
              "vocab_size": 1024, "architectures": ["LlamaForCausalLM"]}


def test_cli_takes_the_heads_from_a_user_model_on_small_2x2(tmp_path, capsys):
    """8 query heads over 2 KV heads of 64 (not hidden_size / heads = 32) fit the one SIP
    of small_2x2, where the 70B's 8 KV heads do not: every head's output equals numpy's
    attention, with G = 8 / 2 query rows."""
    folder = tmp_path / "tiny-gqa"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_MODEL))
    out = tmp_path / "o.npz"
    assert main(["attention", "--model", str(folder / "config.json"), "--mode", "decode",
                 "--topology", str(TOPOLOGIES / "small_2x2.yaml"), "--context", "300",
                 "--C", "1", "--P", "2", "--tile", "128", "--data", "--dump", str(out),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["model"], doc["heads"], doc["G"], doc["d"]) == ("tiny-gqa", 2, 4, 64)
    assert doc["pes"] == 2 * 1 * 2 and doc["max_abs_error"] < TOL
    z = np.load(out)
    assert sorted(k for k in z.files if k.startswith("o_")) == ["o_0", "o_1"]
    for h in range(2):
        ref = reference_attention(z[f"q_{h}"], z[f"k_{h}"], z[f"v_{h}"], causal=False)
        assert z[f"q_{h}"].shape == (4, 64) and z[f"k_{h}"].shape == (300, 64)
        np.testing.assert_allclose(z[f"o_{h}"], ref, atol=TOL)


def test_cli_says_why_the_70b_heads_do_not_fit_small_2x2(capsys):
    rc = main(["attention", "--mode", "decode", "--topology",
               str(TOPOLOGIES / "small_2x2.yaml"), "--context", "256", "--C", "1", "--P", "2"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err
    assert "topology 'small_2x2'" in err and "--model llama3-70b: 8 KV heads" in err


@pytest.mark.parametrize("argv,needle", [
    (["--mode", "decode", "--model", "gpt-17"], "--model 'gpt-17': not a preset"),
    (["--mode", "sideways"], "--mode must be decode, prefill or short, got 'sideways'"),
    (["--mode", "decode", "--variant", "opt9"], "--variant must be one of opt1, opt2, opt3"),
    (["--mode", "decode", "--C", "5"], "--C 5 --P 8 on topology 'default'"),
    (["--mode", "prefill", "--C", "3"], "C must divide G = 8"),
    (["--mode", "decode", "--dump", "x.npz"], "--dump needs --data"),
])
def test_cli_rejects_bad_input_in_one_line(argv, needle, capsys):
    rc = main(["attention", "--topology", "default", "--context", "64", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_context_must_be_positive(default_graph):
    with pytest.raises(UsageError, match="--context must be a positive integer, got 0"):
        run_decode(default_graph, 0)


def test_peak_scratch_does_not_grow_with_context(default_graph):
    """Scratch holds one tile's working set, whatever the context."""
    shape = Shape(2, 8, 128)
    dec = [run_decode(default_graph, S, C=1, P=1, tile=256, shape=shape).phases[
        "peak_scratch_bytes"] for S in (2048, 8192)]
    assert dec[0] == dec[1] > 0
    pre = [run_prefill(default_graph, S, C=2, P=1, q_rows=32, tile=32, shape=SMALL).phases
           for S in (128, 256)]
    assert pre[0]["peak_scratch_bytes"] == pre[1]["peak_scratch_bytes"]
    assert pre[0]["peak_scratch_bytes"] <= working_set(SMALL.G // 2 * 32, 32, SMALL.d, True)


def test_fewer_heads_than_sips_take_one_group_on_each_first_sip(llama_graph):
    groups = place_groups(llama_graph.spec, 2, 8, 8)
    assert [(g.sip, g.cube_start) for g in groups] == [(0, 0), (1, 0)]
    with pytest.raises(ValueError, match="spread evenly"):
        place_groups(llama_graph.spec, 6, 8, 8)


def test_exposed_wait_counts_only_uncovered_wait_time():
    from kernbench.experiments.gqa.prefill_run import exposed_wait

    rng = np.random.default_rng(3)
    edges = np.sort(rng.uniform(0, 1000, 40))
    busy = [(float(a), float(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]
    cuts = np.sort(rng.uniform(0, 1000, 20))
    marks = [(float(t), "ring_wait" if k % 2 == 0 else "ring_go") for k, t in enumerate(cuts)]
    brute = 0.0
    for (t0, _), (t1, _) in zip(marks[::2], marks[1::2], strict=True):
        grid = np.linspace(t0, t1, 20001)[:-1] + (t1 - t0) / 40000
        idle = ~np.any([(grid >= s) & (grid < e) for s, e in busy], axis=0)
        brute += idle.mean() * (t1 - t0)
    assert exposed_wait(marks, busy) == pytest.approx(brute, rel=1e-3, abs=1e-3)


def test_the_decode_array_bound_counts_both_products_of_every_tile(default_graph, ideal_graph):
    """1024 tokens on one rank in 256-token tiles, G = 8 rows, d = 128. Default array
    (a block loads in 32 cycles, double-buffered): Q.K^T has 4 x 8 blocks of
    max(8, 32) cycles, P.V 8 x 4; holding the 8 rows instead costs the same (4 x 1
    blocks of 256 columns), so 2 x 1024 cycles per tile. Ideal array: 8 cycles a block."""
    from kernbench.experiments.gqa.bounds import array_bound_ns

    assert array_bound_ns(default_graph.spec, 1024, 1, 1, 256, 8, 128, "auto") == 4 * 2 * 1024
    assert array_bound_ns(ideal_graph.spec, 1024, 1, 1, 256, 8, 128, "auto") == 4 * 2 * 256
    assert array_bound_ns(default_graph.spec, 1000, 1, 2, 256, 8, 128, "b") == 2 * (
        3 * 2 * 1024 + 2 * (4 * 8 * 32))  # last tile of 232 tokens: 8 column blocks, 8 row blocks


def test_the_ring_overlap_point_follows_the_array(default_graph, ideal_graph):
    """A 256-token tile of d = 128 hops in 4 x 128 x 256 B / 128 GB/s = 1024 ns. On the
    ideal array a step of r rows takes 2 x 32 r cycles, so r = 16 = F / B; on the
    default array every block takes at least its 32-cycle load, 2048 cycles at any r."""
    from kernbench.experiments.gqa.bounds import (
        hop_ns,
        overlap_rows,
        overlap_rows_peak,
    )

    assert hop_ns(ideal_graph.spec, 128, 256) == 1024
    assert overlap_rows(ideal_graph.spec, 128, 256) == 16 == overlap_rows_peak(ideal_graph.spec)
    assert overlap_rows(default_graph.spec, 128, 256) == 1
