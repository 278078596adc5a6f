"""Short-context GQA attention (ADR 0036 mappings A1/A2/A4/B, tiers 1-3).

Every mapping x tier x phase must reproduce plain softmax attention (causal for
prefill) on random f16 inputs at contexts that are multiples of nothing; the
byte counts the metrics report must be the ones the simulator moved; and every
inconsistent configuration must fail up front with one line naming the value.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kernbench.errors import UsageError
from kernbench.experiments.gqa import short_run
from kernbench.experiments.gqa.common import LLAMA3_70B, Shape
from kernbench.experiments.gqa.short_layout import MAPPINGS, cubes_of, q_tile_plan
from kernbench.experiments.gqa.short_run import (
    TIERS,
    metrics,
    run_short,
    scratch_need,
    validate_config,
)
from kernbench.geometry.groups import row_tree_depth, row_tree_tables
from kernbench.geometry.ipcq import OPPOSITE
from kernbench.kernels.attention.helpers import reference_attention

# the fewest KV heads each mapping accepts (A1 spreads over both SIPs of `default`)
SHAPES = {"A1": Shape(2, 8, 32), "A2": Shape(2, 8, 32), "A4": Shape(4, 8, 32),
          "B": Shape(8, 8, 32)}
TOL = 2e-2
DECODE = dict(tile=16)  # B = ceil(150 / 8) = 19 slots: a full and a partial tile per PE
PREFILL = dict(tile=32, q_rows=5)  # Q tiles (5 x group_size rows) straddle the KV tiles


def check_against_numpy(run, phase: str) -> None:
    arrays = run.arrays
    outs = sorted(k for k in arrays if k.startswith("o_"))
    assert outs, "data mode returns the outputs"
    G, d, S = run.params["G"], run.params["d"], run.context
    for key in outs:
        tag = key[2:]
        q, k, v, o = (arrays[f"{x}_{tag}"] for x in "qkvo")
        assert k.shape == v.shape == (S, d)
        assert q.shape == o.shape == ((G, d) if phase == "decode" else (G, S, d))
        ref = reference_attention(q, k, v, causal=phase == "prefill")
        assert np.abs(o - ref).max() < TOL, key
    assert run.max_error < TOL
    assert run.latency_ns > run.bound_ns > 0


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("mapping", MAPPINGS)
@pytest.mark.parametrize("context", [70, 150])
def test_decode_matches_numpy(default_graph, mapping, tier, context):
    run = run_short(default_graph, "decode", context, mapping=mapping, tier=tier, data=True,
                    seed=context + tier, shape=SHAPES[mapping], **DECODE)
    check_against_numpy(run, "decode")
    assert run.mode == "short" and run.params["kv_per_cube"] == MAPPINGS[mapping]
    assert run.families["dma_write"] == SHAPES[mapping].heads  # one O store per group root


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("mapping", MAPPINGS)
def test_prefill_matches_causal_numpy(default_graph, mapping, tier):
    run = run_short(default_graph, "prefill", 70, mapping=mapping, tier=tier, data=True,
                    seed=tier, shape=SHAPES[mapping], **PREFILL)
    check_against_numpy(run, "prefill")


@pytest.mark.parametrize("mapping", MAPPINGS)
def test_prefill_longer_context_fused_tier(default_graph, mapping):
    run = run_short(default_graph, "prefill", 150, mapping=mapping, tier=3, data=True, seed=7,
                    shape=SHAPES[mapping], **PREFILL)
    check_against_numpy(run, "prefill")


def test_decode_with_empty_slices(default_graph):
    """9 tokens over 8 PEs: slices of 2, 2, 2, 2, 1, 0, 0, 0 tokens still merge right."""
    run = run_short(default_graph, "decode", 9, mapping="A1", tier=3, data=True,
                    shape=SHAPES["A1"], tile=4)
    check_against_numpy(run, "decode")


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_batched_users_have_their_own_keys(default_graph, phase):
    run = run_short(default_graph, phase, 40, mapping="A2", tier=3, users=2, data=True,
                    shape=SHAPES["A2"], tile=16, q_rows=3)
    check_against_numpy(run, phase)
    assert {f"{x}_{u}_{h}" for x in "qkvo" for u in (0, 1) for h in (0, 1)} == set(run.arrays)


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_metric_bytes_are_what_the_simulator_moved(default_graph, phase):
    run = run_short(default_graph, phase, 70, mapping="A2", tier=2, data=True,
                    shape=SHAPES["A2"], keep_records=True, **(DECODE | PREFILL))
    moved = {"read": 0, "write": 0, "ipcq": 0}
    for rec in run.engine.op_log.records:
        kind = {"dma_read": "read", "TileToken/DMA_READ": "read", "dma_write": "write",
                "TileToken/DMA_WRITE": "write", "ipcq_send": "ipcq"}.get(rec.op_name)
        if kind:
            moved[kind] += rec.params["nbytes"]
    p = run.params
    assert moved == {"read": p["hbm_read_bytes"], "write": p["hbm_write_bytes"],
                     "ipcq": p["ipcq_bytes"]}
    m = metrics(run)
    assert m["hbm_read_mb"] == p["hbm_read_bytes"] / 2**20
    assert m["ipcq_kb"] == p["ipcq_bytes"] / 2**10 > 0
    assert m["kv_cache_per_cube_mb"] == 2 * 2 * 70 * 32 * 2 / 2**20  # 2 heads x K, V x f16
    assert m["math_count"] > 0 and 0 < m["gemm_util"] < 100 and m["wall_us"] > 0


@pytest.mark.parametrize("mapping", MAPPINGS)
def test_ipcq_trees_stay_inside_one_group(default_graph, mapping):
    kv = MAPPINGS[mapping]
    n = 8 // kv
    cubes = cubes_of(default_graph.spec, 8 // kv)
    tables = row_tree_tables(cubes, kv, n)
    for pe, table in tables.items():
        for direction, peer in table.items():
            assert tables[peer][OPPOSITE[direction]] == pe  # mirrored
            assert peer[:2] == pe[:2] and peer[2] // n == pe[2] // n  # same CUBE and group
    assert len(tables) == (len(cubes) * 8 if n > 1 else 0)
    assert row_tree_depth(n) == {"A1": 4, "A2": 3, "A4": 1, "B": 0}[mapping]


def test_q_tiles_are_floor_balanced_and_cover_every_position():
    plan = q_tile_plan(70, 5, 8, 32)
    rows = [r for _, parts in plan for _, r in parts]
    assert sum(rows) == 70 and [r for _, r in plan[1][1]] == [4, 4, 4, 4, 4, 4, 3, 3]
    assert [n_kv for n_kv, _ in plan] == [2, 3]  # KV tiles up to each Q tile's last row


@pytest.mark.parametrize(("phase", "mapping", "tier"), [("decode", "A1", 1),
                                                         ("prefill", "A2", 3)])
def test_scratch_check_measures_what_the_kernel_uses(default_graph, monkeypatch, phase, mapping,
                                                     tier):
    peaks = []

    def recording(kernel):
        def run(ranks, *, tl):
            kernel(ranks, tl=tl)
            peaks.append(tl.peak_scratch)
        return run

    for name in ("gqa_short_decode", "gqa_short_prefill"):
        monkeypatch.setattr(short_run, name, recording(getattr(short_run, name)))
    shape = SHAPES[mapping]
    run_short(default_graph, phase, 70, mapping=mapping, tier=tier, users=2, shape=shape,
              **PREFILL)
    n = 8 // MAPPINGS[mapping]
    assert max(peaks) == scratch_need(phase, tier, shape, 70, 2, PREFILL["tile"],
                                      PREFILL["q_rows"], n)


# -- configuration errors --------------------------------------------------------------------
def fewer_pes(spec):
    return dataclasses.replace(spec, geometry=dataclasses.replace(spec.geometry, pe_per_corner=3))


def one_cube(spec):
    return dataclasses.replace(spec, cube_w=1, cube_h=1,
                               sips=dataclasses.replace(spec.sips, count=1))


BAD = [
    ("phase", dict(phase="train"), "'train'"),
    ("mapping", dict(mapping="A3"), "'A3'"),
    ("tier 0", dict(tier=0), "got 0"),
    ("tier 4", dict(tier=4), "got 4"),
    ("context 0", dict(context=0), "--context"),
    ("negative context", dict(context=-8), "-8"),
    ("users", dict(users=0), "--users"),
    ("tile", dict(tile=0), "--tile"),
    ("q_rows", dict(q_rows=2.5), "2.5"),
    ("G not integer", dict(shape=Shape(8, 7.5, 32)), "7.5"),
    ("C not integer", dict(mapping="A4", shape=Shape(6, 8, 32)), "--heads 6"),
    ("kv_per_cube vs PEs", dict(mapping="B", spec=fewer_pes), "kv_per_cube=8"),
    ("too few CUBEs", dict(mapping="A1", spec=one_cube), "C = 8"),
    ("scratch", dict(shape=LLAMA3_70B, context=8192, tile=256, q_rows=128),
     "--tile 256 --q-rows 128"),
    ("ipcq slots", dict(mapping="A1", shape=Shape(2, 8, 128), context=1100, tile=1024,
                        q_rows=2), "--tile 1024: the IPCQ receive slots"),
    ("decode states", dict(phase="decode", shape=LLAMA3_70B, users=600), "--users 600"),
]


@pytest.mark.parametrize(("what", "change", "names"), BAD, ids=[b[0] for b in BAD])
def test_bad_configuration_fails_with_one_line(default_graph, what, change, names):
    args = dict(spec=default_graph.spec, phase="prefill", mapping="A2", tier=3, context=128,
                shape=Shape(8, 8, 32), users=1, tile=32, q_rows=4)
    change = dict(change)
    if "spec" in change:
        change["spec"] = change["spec"](default_graph.spec)
    args.update(change)
    with pytest.raises(UsageError) as err:
        validate_config(**args)
    msg = str(err.value)
    assert "\n" not in msg and names in msg


def test_run_short_validates_before_building(default_graph):
    with pytest.raises(UsageError, match="--mapping must be one of A1, A2, A4, B"):
        run_short(default_graph, "decode", 64, mapping="C")
