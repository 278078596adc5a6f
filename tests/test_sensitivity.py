"""Sensitivity reruns: every rerun point paired with its default point, by hand-made records."""

from __future__ import annotations

import json
import math

from kernbench.report import sensitivity as sens

SETTINGS = {"array-w4": {"description": "four rows a cycle", "overrides": {}},
            "links-fifo": {"description": "fifo", "overrides": {}}}


def _write(folder, name: str, record: dict):
    path = folder / f"{name}.json"
    path.write_text(json.dumps(record))
    return path


def _point(workload: str, ns: float, model: float | None = None) -> dict:
    rec = {"workload": workload, "metrics": {"latency_ns": ns}}
    if model is not None:
        rec["prediction"] = {"latency_ns": model}
    return rec


def _records(tmp_path):
    one = {"experiment": "gqa", "topology": "t"}
    batch = {"experiment": "gemm", "topology": "d", "workload": "decode-shapes"}
    return [
        _write(tmp_path, "a", {**one, **_point("dec", 2000.0, 500.0), "variant": "base"}),
        _write(tmp_path, "b", {**one, **_point("dec", 3000.0, 500.0), "variant": "base@array-w4"}),
        _write(tmp_path, "c", {**batch, "variant": "composite",
                               "points": [_point("p", 100.0), _point("q", 400.0)]}),
        _write(tmp_path, "d", {**batch, "variant": "composite@array-w4",
                               "points": [_point("p", 200.0), _point("q", 200.0)]}),
    ]


def test_rows_pair_each_rerun_point_with_its_default(tmp_path):
    rows = sens.rows(_records(tmp_path))
    by = {(r["experiment"], r["point"]): r for r in rows}
    assert len(rows) == 3
    dec = by[("gqa", "dec")]
    assert (dec["default_ns"], dec["setting_ns"], dec["ratio"]) == (2000.0, 3000.0, 1.5)
    assert dec["job"] == "dec" and dec["variant"] == "base" and dec["model_ns"] == 500.0
    assert by[("gemm", "q")]["ratio"] == 0.5 and by[("gemm", "q")]["job"] == "decode-shapes"
    assert math.isnan(by[("gemm", "p")]["model_ns"])


def test_values_give_ratios_bounds_and_geometric_means(tmp_path):
    v = sens.values(sens.rows(_records(tmp_path)), SETTINGS)
    key = "sens/gqa/t/base/dec/array-w4"
    assert v[f"{key}/ratio"].number == 1.5
    assert v[f"{key}/ofmodelpct"].number == 100 * 500 / 3000
    assert v[f"{key}/defaultofmodelpct"].number == 100 * 500 / 2000
    job = "sensjob/gemm/d/decode-shapes/composite/array-w4"
    assert v[f"{job}/geomean"].number == 1.0  # sqrt(2 x 0.5)
    assert (v[f"{job}/min"].number, v[f"{job}/max"].number) == (0.5, 2.0)
    assert v["sens/gemm/array-w4/points"].number == 2
    assert v["sens/setting/links-fifo"].number == "fifo"
    assert "sens/gemm/d/composite/p/array-w4/ofmodelpct" not in v  # no model, no claim


def test_the_latex_table_has_one_row_per_rerun_job(tmp_path):
    table = sens.latex_table(sens.rows(_records(tmp_path)), SETTINGS)
    lines = [ln for ln in table.splitlines() if ln.endswith(r"\\")]
    assert len(lines) == 3  # header + two jobs
    assert "1.00 (0.50--2.00)" in table and "1.50" in table
    assert "links-fifo" not in table  # no rerun used it


def test_without_reruns_the_table_says_so():
    assert "no reruns in this configuration" in sens.latex_table([], SETTINGS)


def test_contrasts_compare_two_variants_under_each_setting(tmp_path):
    records = _records(tmp_path)
    batch = {"experiment": "gemm", "topology": "d", "workload": "decode-shapes"}
    records += [
        _write(tmp_path, "e", {**batch, "variant": "held-a",
                               "points": [_point("p", 50.0), _point("q", 100.0)]}),
        _write(tmp_path, "f", {**batch, "variant": "held-a@array-w4",
                               "points": [_point("p", 400.0), _point("q", 100.0)]}),
    ]
    got = sens.contrasts(sens.rows(records))
    assert got["sensvs/gemm/d/decode-shapes/default/composite/held-a"] == [2.0, 4.0]
    assert got["sensvs/gemm/d/decode-shapes/array-w4/composite/held-a"] == [0.5, 2.0]
    assert not any(k.startswith("sensvs/gqa") for k in got)  # one variant: nothing to compare


def test_a_point_recorded_without_a_latency_is_left_out(tmp_path):
    """A study may record a point it did not simulate (a model too large for the HBM):
    neither it nor its rerun has anything to compare."""
    one = {"experiment": "llm", "topology": "t"}
    paths = _records(tmp_path) + [
        _write(tmp_path, "g", {**one, **_point("big", None), "variant": "base"}),
        _write(tmp_path, "h", {**one, **_point("big", None), "variant": "base@links-fifo"}),
        _write(tmp_path, "i", {**one, **_point("fits", None), "variant": "base"}),
        _write(tmp_path, "j", {**one, **_point("fits", 10.0), "variant": "base@links-fifo"}),
    ]
    assert [r["experiment"] for r in sens.rows(paths)] == ["gemm", "gemm", "gqa"]
