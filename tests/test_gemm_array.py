"""The MAC array's cycles under each stated hardware setting, pinned by hand.

Every number here was worked out on paper from the array's definition
(docs/adr/0032-gemm-array-as-hardware.md), on a non-square array with partial
weight blocks, so swapping rows and columns or dropping a ceiling changes it.
SCALE-Sim v3's own output for a few shapes is pinned as well.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml

from kernbench.components.builtin.gemm_array import busy_cycles, drain_cycles, resolve
from kernbench.topology.spec import GemmArraySpec


def array(rows=4, cols=2, w=1, db=True, pipe=True) -> GemmArraySpec:
    return GemmArraySpec(rows, cols, w, db, pipe)


# (m, k, n) = (3, 10, 5) on a 4 x 2 array: 3 x 3 = 9 weight blocks of B; 3 x 2 = 6 of A.
# Block load L = ceil(4 / w); fill and skew S = 4 + 2 - 2 = 4.
SETTINGS = {
    # name: (array, busy with B held, busy with A held)
    "ideal": (array(w=4), 9 * 3, 6 * 5),                     # F x m, L = 1 hidden
    "scalesim": (array(w=1, db=False, pipe=False),            # F x (L + m + S)
                 9 * (4 + 3 + 4), 6 * (4 + 5 + 4)),
    "tpu": (array(w=1), 9 * max(3, 4), 6 * max(5, 4)),       # F x max(m, L)
    "w2-db-no-pipe": (array(w=2, pipe=False), 9 * 7, 6 * 9),  # F x max(m + S, L)
    "w2-no-db-pipe": (array(w=2, db=False), 9 * (2 + 3), 6 * (2 + 5)),  # F x (L + m)
}


@pytest.mark.parametrize("name", SETTINGS)
def test_busy_cycles_are_the_hand_worked_counts(name):
    arr, busy_b, busy_a = SETTINGS[name]
    assert busy_cycles(3, 10, 5, arr, "b") == busy_b
    assert busy_cycles(3, 10, 5, arr, "a") == busy_a
    assert busy_cycles(3, 10, 5, arr, "auto") == min(busy_a, busy_b)
    assert resolve(3, 10, 5, arr, "auto") == ("a" if busy_a < busy_b else "b")


def test_the_literal_numbers():
    """The same counts as literals: 27/30, 99/78, 36/30, 63/54, 45/42."""
    assert [busy_cycles(3, 10, 5, a, "b") for a, _, _ in SETTINGS.values()] == [27, 99, 36, 63, 45]
    assert [busy_cycles(3, 10, 5, a, "a") for a, _, _ in SETTINGS.values()] == [30, 78, 30, 54, 42]


def test_rows_hold_k_and_columns_hold_n():
    """Swapping the array's shape changes the count: 4 x 2 and 2 x 4 differ."""
    ideal_42 = busy_cycles(3, 10, 5, array(4, 2, w=4), "b")
    ideal_24 = busy_cycles(3, 10, 5, array(2, 4, w=2), "b")
    assert (ideal_42, ideal_24) == (3 * 3 * 3, 5 * 2 * 3)


def test_drain_is_a_latency_only_when_folds_pipeline():
    assert drain_cycles(array(pipe=True)) == 6
    assert drain_cycles(array(pipe=False)) == 0


def test_ties_keep_the_weights_stationary():
    arr = array(4, 4, w=4)
    assert busy_cycles(8, 8, 8, arr, "a") == busy_cycles(8, 8, 8, arr, "b")
    assert resolve(8, 8, 8, arr, "auto") == "b"


def test_a_bad_mapping_is_refused():
    with pytest.raises(ValueError, match="stationary must be one of b, a, auto"):
        busy_cycles(1, 1, 1, array(), "c")


# SCALE-Sim v3.0.0 (32 x 32, ws, ample SRAM and bandwidth) printed these "Total Cycles"
# (COMPUTE_REPORT.csv); it counts from cycle 0, so the busy count is one more.
SCALESIM_V3 = {(8, 64, 64): 407, (33, 70, 40): 761, (256, 256, 256): 22399,
               (1, 4096, 256): 97279, (1024, 256, 256): 71551}


@pytest.mark.parametrize("shape", SCALESIM_V3)
def test_the_scalesim_setting_matches_scalesim_output(shape):
    arr = GemmArraySpec(32, 32, 1, False, False)
    assert busy_cycles(*shape, arr) == SCALESIM_V3[shape] + 1


def test_the_engine_charges_the_array_model(tmp_path):
    """A tl.dot on a 4 x 2 array under the SCALE-Sim setting occupies the GEMM unit for
    99 cycles plus its overhead, and its result is numerically a @ b."""
    from kernbench.runtime_api import RuntimeContext
    from kernbench.sim_engine import GraphEngine
    from kernbench.topology import load_topology
    from tests.conftest import TOPOLOGIES

    doc = yaml.safe_load((TOPOLOGIES / "small_2x2.yaml").read_text())
    doc = copy.deepcopy(doc)
    doc["extends"] = str(TOPOLOGIES / "default.yaml")
    doc["pe"] = {"gemm": {"mac_rows": 4, "mac_cols": 2, "weight_rows_per_cycle": 1,
                          "double_buffered_weights": False, "pipelined_folds": False}}
    path = tmp_path / "arr.yaml"
    path.write_text(yaml.safe_dump(doc))
    graph = load_topology(path)
    eng = GraphEngine(graph, enable_data=True)
    ctx = RuntimeContext(eng)
    rng = np.random.default_rng(1)
    av, bv = rng.standard_normal((3, 10)).astype(np.float32), rng.standard_normal((10, 5))
    a, b = ctx.from_numpy(av, "f32"), ctx.from_numpy(bv.astype(np.float32), "f32")
    c = ctx.empty((3, 5), "f32")

    def kernel(pa, pb, pc, *, tl):
        x = tl.load(pa, (3, 10), "f32")
        y = tl.load(pb, (10, 5), "f32")
        tl.store(pc, tl.dot(x, y))

    ctx.wait(ctx.launch("dot", kernel, a, b, c))
    gemm = [r for r in eng.op_log.records if r.component_id.endswith("pe_gemm")]
    assert len(gemm) == 1
    ovh = graph.spec.pe.overhead_ns["pe_gemm"]
    assert gemm[0].duration == pytest.approx(99 + ovh)
    np.testing.assert_allclose(ctx.to_numpy(c), av @ bv.astype(np.float32), rtol=1e-5)


@pytest.mark.parametrize("topology, expected", [
    # SCALE-Sim's array: a B block costs L + m + R + C - 2 = 95 cycles for one row of A,
    # an A block (n = 256 columns streamed through it) 32 + 256 + 62 = 350
    ("scalesim_ws.yaml", {"b": 4 * 8 * 95, "a": 4 * 1 * 350, "auto": 4 * 1 * 350}),
    # the ideal array: a B block costs max(m, 1) = 1 cycle, an A block 256
    ("array_ideal.yaml", {"b": 4 * 8 * 1, "a": 4 * 1 * 256, "auto": 4 * 8 * 1}),
])
@pytest.mark.parametrize("stationary", ["b", "a", "auto"])
def test_a_composite_holds_the_operand_it_is_told_or_the_cheaper_one(topology, expected,
                                                                      stationary):
    """(1, 128, 256) with both operands in TCM: holding A walks one supertile as wide as
    the product, so each A block loads once and all 256 columns of B stream through it."""
    from kernbench.runtime_api import RuntimeContext
    from kernbench.sim_engine import GraphEngine
    from kernbench.topology import load_topology
    from tests.conftest import TOPOLOGIES

    graph = load_topology(TOPOLOGIES / topology)
    eng = GraphEngine(graph, enable_data=True)
    ctx = RuntimeContext(eng)
    rng = np.random.default_rng(2)
    av, bv = (rng.standard_normal(s).astype(np.float32) for s in ((1, 128), (128, 256)))
    a, b = ctx.from_numpy(av, "f32"), ctx.from_numpy(bv, "f32")
    c = ctx.empty((1, 256), "f32")

    def kernel(pa, pb, pc, *, tl):
        x = tl.load(pa, (1, 128), "f32")
        y = tl.load(pb, (128, 256), "f32")
        tl.wait(tl.composite("gemm", a=x, b=y, out_ptr=pc, out_dtype="f32",
                             stationary=stationary))

    ctx.wait(ctx.launch("composite", kernel, a, b, c, scratch_bytes=256 * 1024))
    gemm = [r for r in eng.op_log.records if r.component_id.endswith("pe_gemm")]
    ovh = graph.spec.pe.overhead_ns["pe_gemm"]
    clock = graph.spec.pe.clock_ghz
    busy = sum(r.duration - ovh for r in gemm) * clock
    assert busy == pytest.approx(expected[stationary])
    np.testing.assert_allclose(ctx.to_numpy(c), av @ bv, rtol=1e-4)
