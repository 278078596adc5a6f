"""The validation experiment: SCALE-Sim cycle for cycle, its table's contract, its errors.

SCALE-Sim runs for real here (a few small shapes, ~1 s); the cycle counts it must
report are worked by hand from its weight-stationary schedule: every weight
block ("fold") costs 2R + C + m - 2 cycles, and it counts from cycle 0.
"""

from __future__ import annotations

import math
import sys

import pytest

from kernbench.errors import ConfigError, UsageError
from kernbench.experiments.registry import get
from kernbench.experiments.validation import array_check, post
from kernbench.references import environment
from kernbench.references.gemm_reference import Shape, run_scalesim
from kernbench.topology import load_topology

from .conftest import TOPOLOGIES


def scalesim_by_hand(m: int, k: int, n: int, rows: int, cols: int) -> int:
    return math.ceil(k / rows) * math.ceil(n / cols) * (2 * rows + cols + m - 2) - 1


@pytest.fixture(scope="module")
def scalesim_graph():
    return load_topology(TOPOLOGIES / "scalesim_ws.yaml")


def test_scalesim_reports_the_hand_worked_cycles_on_a_non_square_array():
    """16 rows x 8 columns: swapping k and n (or rows and columns) changes every count."""
    shapes = [Shape("a", 5, 40, 20, rows=16, cols=8), Shape("b", 5, 20, 40, rows=16, cols=8),
              Shape("c", 3, 33, 17, "a", rows=16, cols=8)]
    answer = run_scalesim(shapes)
    assert answer["cycles"] == {"a": scalesim_by_hand(5, 40, 20, 16, 8),
                                "b": scalesim_by_hand(5, 20, 40, 16, 8),
                                "c": scalesim_by_hand(17, 33, 3, 16, 8)}  # A held: transposed
    assert answer["cycles"]["a"] != answer["cycles"]["b"]
    assert set(answer["stalls"].values()) == {0}


def test_the_array_check_is_one_cycle_off_under_the_scalesim_setting(scalesim_graph):
    workload = {"kind": "scalesim", "group": "g", "array": None,
                "shapes": [{"name": "odd", "m": 33, "k": 70, "n": 40},
                           {"name": "held", "m": 8, "k": 100, "n": 50, "stationary": "a"}]}
    body = array_check.run(scalesim_graph, workload)
    rows = {r["scenario"]: r for r in body["metrics"]["rows"]}
    assert rows["odd"]["reference_value"] == scalesim_by_hand(33, 70, 40, 32, 32)
    assert rows["held"]["reference_value"] == scalesim_by_hand(50, 100, 8, 32, 32)
    assert {r["diff_cycles"] for r in rows.values()} == {1}  # SCALE-Sim counts from 0
    assert body["metrics"]["max_abs_diff_cycles"] == 1


def test_the_array_check_bites_on_another_array(default_graph):
    """The default (double-buffered, pipelined) array is far from SCALE-Sim's: the check
    reads the simulated unit, not the reference, so it shows."""
    body = array_check.run(default_graph, {"kind": "scalesim", "group": "g", "array": None,
                                           "shapes": [{"name": "s", "m": 8, "k": 64, "n": 64}]})
    (row,) = body["metrics"]["rows"]
    assert row["simulated"] == 4 * 32  # 4 blocks, each its 32-cycle load (m = 8 < 32)
    assert row["reference_value"] == scalesim_by_hand(8, 64, 64, 32, 32)


def test_a_group_array_overrides_the_topology(scalesim_graph):
    body = array_check.run(scalesim_graph, {
        "kind": "scalesim", "group": "wide", "array": {"rows": 16, "cols": 64},
        "shapes": [{"name": "w", "m": 8, "k": 100, "n": 100}]})
    (row,) = body["metrics"]["rows"]
    assert (row["mac_rows"], row["mac_cols"]) == (16, 64)
    assert row["reference_value"] == scalesim_by_hand(8, 100, 100, 16, 64)
    assert row["simulated"] == row["reference_value"] + 1


def test_a_missing_reference_environment_fails_with_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv(environment.ENV_VAR, str(tmp_path / "none" / "python"))
    with pytest.raises(UsageError) as err:
        run_scalesim([Shape("a", 1, 32, 32)])
    assert "\n" not in str(err.value) and "scripts/setup" in str(err.value)


def test_a_python_without_scalesim_fails_with_one_line(monkeypatch):
    monkeypatch.setenv(environment.ENV_VAR, sys.executable)  # the project's: no scalesim
    with pytest.raises(UsageError) as err:
        run_scalesim([Shape("a", 1, 32, 32)])
    message = str(err.value)
    assert "\n" not in message and "SCALE-Sim" in message and "scripts/setup" in message


BLOCK = {"topologies": ["default"],
         "scalesim": {"g": {"shapes": [{"name": "x", "m": 1, "k": 32, "n": 32}]}},
         "packet": {"flows": ["pe-local-hbm"], "sizes": ["4KiB"], "scenarios": ["hbm-hot-spot"],
                    "contended_bytes": "16KiB", "packet_bytes": 256},
         "ns3": {"scenarios": ["one-hop"], "bytes": "4KiB", "packet_bytes": 256}}


def _expand(default_graph, **changes):
    block = {**BLOCK, **changes}
    return get("validation").expand(block, default_graph.spec, "cfg.yaml")


def test_expand_gives_one_workload_per_group_flow_scenario_and_ns3(default_graph):
    workloads, variants = _expand(default_graph)
    assert [w for w, _ in workloads] == ["scalesim-g", "alone-pe-local-hbm", "hbm-hot-spot", "ns3"]
    assert variants == [("ref", {})]


@pytest.mark.parametrize("changes, key", [
    ({"scalesim": {"g": {"shapes": [{"name": "x", "m": 1, "k": 1, "n": 1}]},
                   "h": {"shapes": [{"name": "x", "m": 2, "k": 2, "n": 2}]}}},
     "experiments.validation.scalesim.h.shapes[0].name"),
    ({"packet": {**BLOCK["packet"], "scenarios": ["hbm-hot-spot", "no-such"]}},
     "experiments.validation.packet.scenarios[1]"),
    ({"ns3": {**BLOCK["ns3"], "scenarios": ["ring"]}}, "experiments.validation.ns3.scenarios[0]"),
])
def test_bad_blocks_name_the_key(default_graph, changes, key):
    with pytest.raises(ConfigError) as err:
        _expand(default_graph, **changes)
    assert key in str(err.value) and "\n" not in str(err.value)


def _record(workload: str, rows: list[dict]) -> dict:
    return {"topology": "t", "variant": "ref", "workload": workload, "metrics": {"rows": rows},
            "provenance": {"config_hash": "h"}}


def test_the_table_has_the_contract_columns_and_one_row_per_comparison():
    rows = [{"reference": "packet", "scenario": "two-flows-one-link", "metric": m,
             "simulated": 105.0, "reference_value": 100.0, "rel_err": 0.05, "flows": 2,
             "shared_links": 1, "nbytes": 4096, "kind": "contended"}
            for m in ("makespan_ns", "mean_completion_ns")]
    ss = [{"reference": "scalesim", "scenario": "x", "metric": "compute_cycles", "simulated": 408,
           "reference_value": 407, "rel_err": 1 / 407, "diff_cycles": 1, "stall_cycles": 0,
           "m": 8, "k": 64, "n": 64, "stationary": "b", "mac_rows": 32, "mac_cols": 32}]
    df = post.frame([_record("two-flows-one-link", rows), _record("scalesim-g", ss)])
    assert tuple(df.columns[:6]) == post.COLUMNS
    assert list(df["reference"]) == ["scalesim", "packet", "packet"]  # reference order
    assert not df.duplicated(["reference", "scenario", "metric"]).any()
    v = post.values(df)
    assert v["scalesim/maxdiff"].number == 1
    assert v["packet/contended/within"].number == 1  # 5 % makespan, 5 % mean: both targets met
    table = post.tables(df)["validation_table"]
    assert "SCALE-Sim v3" in table and "packet reference" in table


def test_contended_rows_compare_both_sharing_models(default_graph):
    """Two equal flows on one route: interleaved links finish both with the reference;
    FIFO links finish the first one a drain early (the mean is off by about a quarter),
    with the same makespan."""
    from kernbench.experiments.validation import fabric_check

    body = fabric_check.run_contended(default_graph, {
        "kind": "contended", "scenario": "two-flows-one-link", "nbytes": 16 * 1024,
        "packet_bytes": 256})
    rows = {r["metric"]: r for r in body["metrics"]["rows"]}
    assert set(rows) == {"makespan_ns", "mean_completion_ns", "worst_flow_completion_ns",
                         "makespan_ns/fifo", "mean_completion_ns/fifo"}
    assert rows["makespan_ns"]["rel_err"] < 0.01 and rows["mean_completion_ns"]["rel_err"] < 0.01
    assert rows["makespan_ns/fifo"]["rel_err"] < 0.01
    assert 0.1 < rows["mean_completion_ns/fifo"]["rel_err"] < 0.3
    assert rows["makespan_ns/fifo"]["sharing"] == "fifo"


def test_the_worst_flow_row_is_the_flow_farthest_from_the_reference(default_graph):
    """Recomputed flow by flow from both models: the row names the flow whose own
    completion differs most, and the values pick the worst row over all scenarios."""
    from kernbench.experiments.validation import fabric_check
    from kernbench.probes import fabric_accuracy as fa

    sc = fa.scenario(default_graph, "hbm-hot-spot", 16 * 1024)
    a = fa.run_analytic(default_graph, sc.flows).completions
    r = fa.run_reference(default_graph, sc.flows, 256).completions
    errs = [abs(x - y) / y for x, y in zip(a, r, strict=True)]
    i = errs.index(max(errs))
    body = fabric_check.run_contended(default_graph, {
        "kind": "contended", "scenario": "hbm-hot-spot", "nbytes": 16 * 1024,
        "packet_bytes": 256})
    (row,) = [x for x in body["metrics"]["rows"] if x["metric"] == "worst_flow_completion_ns"]
    assert row["simulated"] == a[i] and row["reference_value"] == r[i]
    assert row["flow"] == f"{sc.flows[i].kind} from {sc.flows[i].initiator}"
    other = {**row, "scenario": "two-flows-one-link", "rel_err": row["rel_err"] / 2,
             "flow": "x"}
    v = post.values(post.frame([_record("a", [row]), _record("b", [other])]))
    assert v["packet/worstflow/scenario"].number == "hbm-hot-spot"
    assert v["packet/worstflow/flow"].number == row["flow"]


def test_large_errors_print_without_an_exponent():
    """A flow 4x off is a 303 % error: two significant figures, in plain digits."""
    from kernbench.analysis.values import errpct, latex, markdown

    assert latex(errpct(3.032)) == "300" and markdown(errpct(0.996)) == "100"
    assert latex(errpct(0.000164)) == "0.016"
