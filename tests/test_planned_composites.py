"""Planned composites: a GEMM composite on TCM operands, timed in one pass without
events, gives exactly the times of the tile-by-tile path.

Run on every shape of the GEMM study (read from config/config.yaml; timing mode does
not need the bytes to fit a real TCM) and on the attention shapes, with and without
an epilogue and with k-tile epilogues, on one idle PE.
"""

from __future__ import annotations

import pytest
import yaml

from kernbench.isa.commands import CompositeCmd
from kernbench.isa.handles import Completion, TensorHandle
from kernbench.isa.ops import OpSpec, Scope
from kernbench.sim_engine import GraphEngine

from .conftest import ROOT


def _study_shapes():
    doc = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    shapes = [(s["name"], s["m"], s["k"], s["n"]) for s in doc["experiments"]["gemm"]["shapes"]]
    # attention: decode Q.K^T / P.V (G = 8 rows), prefill blocks, an uneven edge
    return shapes + [("attn-qk", 8, 128, 1024), ("attn-pv", 8, 1024, 128),
                     ("prefill-qk", 256, 128, 256), ("edge", 70, 100, 33)]


def _run(graph, M, K, N, epilogue: str, planned: bool, tile=None):
    eng = GraphEngine(graph, keep_records=False, planned_composites=planned)
    pe = eng.pe(0, 0, 0)
    a = TensorHandle("a", 0x1000, (M, K), "f16", "tcm", True)
    b = TensorHandle("b", 0x40_0000, (K, N), "f16", "tcm", True)
    out = TensorHandle("o", 0x80_0000, (M, N), "f32", "tcm", True)
    ops = [OpSpec("gemm", Scope.KERNEL, {"a": a, "b": b}, {"m": M, "k": K, "n": N}, out)]
    if epilogue == "output":
        ops.append(OpSpec("scale", Scope.OUTPUT_TILE, {}, {"factor": 0.5}, None))
    elif epilogue == "k":
        ops.append(OpSpec("relu", Scope.K_TILE, {}, {}, None))
    cmd = CompositeCmd(tuple(ops), (), tile)
    events = [0]
    schedule = eng.env.schedule

    def counting(event, priority=1, delay=0):
        events[0] += 1
        return schedule(event, priority, delay)

    eng.env.schedule = counting
    comp = Completion(event=eng.env.event(), label="composite")
    eng.env.process(pe.scheduler.feeder.run(cmd, 5.0, comp, []))
    eng.env.run()
    busy = {k: v for k, v in pe.engine_busy_ns().items()}
    stages = eng.op_log.stage_busy()
    return comp.done_at, busy, dict(eng.op_log.counts), stages, events[0]


@pytest.mark.parametrize("name,M,K,N", _study_shapes(), ids=lambda v: str(v))
@pytest.mark.parametrize("epilogue", ["none", "output", "k"])
def test_planned_matches_tile_by_tile(small_graph, name, M, K, N, epilogue):
    end_p, busy_p, counts_p, stages_p, ev_p = _run(small_graph, M, K, N, epilogue, True)
    end_e, busy_e, counts_e, stages_e, ev_e = _run(small_graph, M, K, N, epilogue, False)
    assert end_p == pytest.approx(end_e, rel=1e-12, abs=1e-9)
    assert busy_p == pytest.approx(busy_e, rel=1e-9)
    assert counts_p == counts_e
    for owner, st in stages_e.items():
        assert stages_p[owner] == pytest.approx(st, rel=1e-9)
    assert ev_p <= 6 and ev_p <= ev_e  # O(1): the process, its start, the wait to the end


@pytest.mark.parametrize("tile", [(64, 128, 64), (128, 128, 128)])
def test_planned_matches_with_larger_supertiles(small_graph, tile):
    a = _run(small_graph, 512, 512, 512, "output", True, tile)
    b = _run(small_graph, 512, 512, 512, "output", False, tile)
    assert a[0] == pytest.approx(b[0], rel=1e-12) and a[2] == b[2]


def test_busy_engines_take_the_tile_by_tile_path(small_graph):
    """With a booking in the future on an engine the plan needs, interleaving matters:
    the feeder falls back to the event path (many events)."""
    eng = GraphEngine(small_graph, keep_records=False)
    pe = eng.pe(0, 0, 0)
    pe.math.book(1000.0, 50.0, 0.0)  # something else holds the math engine later
    a = TensorHandle("a", 0x1000, (64, 64), "f16", "tcm", True)
    b = TensorHandle("b", 0x40_0000, (64, 256), "f16", "tcm", True)
    out = TensorHandle("o", 0x80_0000, (64, 256), "f32", "tcm", True)
    feeder = pe.scheduler.feeder
    assert not feeder._private(a, b, out, 0.0)
    assert feeder._private(a, b, out, 2000.0)  # after it, the plan is private again


def _attention(graph, mode: str, planned: bool):
    from kernbench.experiments.gqa.common import Shape
    from kernbench.experiments.gqa.decode_run import run_decode
    from kernbench.experiments.gqa.prefill_run import run_prefill

    if mode == "prefill":  # QK with a mask epilogue, P.V with the softmax_merge prologue
        r = run_prefill(graph, 300, C=2, P=2, q_rows=32, tile=64, shape=Shape(2, 2, 32),
                        planned=planned)
    else:
        r = run_decode(graph, 777, C=1, P=2, tile=128, variant="opt2",
                       shape=Shape(2, 8, 128), planned=planned)
    return r.latency_ns, dict(r.engine.op_log.counts), r.engine.op_log.stage_busy()


@pytest.mark.parametrize("mode", ["prefill", "decode-opt2"])
def test_whole_composites_with_recipe_prologues_plan_exactly(default_graph, mode):
    """Recipe prologue + GEMM + epilogues, planned once per shape and reused shifted,
    against every op timed stage by stage: the same latency, op counts and busy time."""
    lat_p, counts_p, stages_p = _attention(default_graph, mode.split("-")[0], True)
    lat_e, counts_e, stages_e = _attention(default_graph, mode.split("-")[0], False)
    assert lat_p == pytest.approx(lat_e, rel=1e-12)
    assert counts_p == counts_e
    assert stages_p.keys() == stages_e.keys()
    for owner, st in stages_e.items():
        assert stages_p[owner] == pytest.approx(st, rel=1e-9)
