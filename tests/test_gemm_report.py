"""GEMM study outputs: aggregation, headline values, LaTeX table and figures,
from synthetic records (no simulation)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from kernbench.analysis.aggregate import GEMM_STAGES, busy_column, gemm_frame, write_table
from kernbench.analysis.figures import FIGURE_RENDERERS, gemm_figures
from kernbench.components.builtin.pe_cost_model import PeCostModel
from kernbench.report.gemm_report import MISSING, gemm_table, gemm_values
from kernbench.report.latex import values_file

KERNELS = {"primitive": (12.0, 400.0, 400), "prefetch": (6.0, 400.0, 400),
           "composite": (1.0, 42.875, 1)}
# name, m, k, n, group, roofline latency (ns), bound
SHAPES = [
    ("dec-small", 1, 256, 64, "decode", 100.0, "memory"),
    ("dec-large", 1, 4096, 512, "decode", 16000.0, "memory"),
    ("pre-large", 256, 4096, 256, "prefill", 262144.0, "compute"),
    ("sq", 64, 64, 64, "synthetic", 512.0, "compute"),
]


def record(shape, kernel: str, pes: int, topology: str = "t0") -> dict:
    name, m, k, n, group, roof, bound = shape
    slow, cycles, commands = KERNELS[kernel]
    roof = roof / pes
    latency = roof * slow + 300.0
    busy = {s: 0.0 for s in GEMM_STAGES}
    busy.update(DMA_READ=0.5 * latency, GEMM=0.3 * latency, PE_CPU=cycles,
                FETCH=0.1 * latency, DMA_WRITE=10.0)
    variant = kernel if pes == 1 else f"{kernel}-cube"
    return {
        "topology": topology, "variant": variant, "workload": name,
        "metrics": {"latency_ns": latency, "host_ns": latency + 500.0,
                    "mac_util_pct": 100.0 * 0.5 / slow, "stage_busy_ns": busy,
                    "dispatch_cycles_per_pe": cycles, "commands_per_pe": commands,
                    "supertiles_per_pe": max(1, m * k * n // (32 * 64 * 32 * pes)),
                    "tflops": 1.0},
        "prediction": {"model": "roofline", "latency_ns": roof, "compute_ns": roof / 2,
                       "memory_ns": roof, "bound": bound, "util_pct": 50.0,
                       "rel_error": abs(latency - roof) / roof},
        "labels": {"shape": name, "m": m, "k": k, "n": n, "kernel": kernel, "pes": pes,
                   "group": group},
        "config": {}, "provenance": {"config_hash": f"{name}-{variant}"},
    }


def write_records(tmp_path, shapes=SHAPES, variants=(("primitive", 1), ("prefetch", 1),
                                                     ("composite", 1), ("composite", 8))):
    paths = []
    for shape in shapes:
        for kernel, pes in variants:
            r = record(shape, kernel, pes)
            p = tmp_path / "raw" / shape[0] / f"{r['variant']}.json"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(r))
            paths.append(p)
    return paths


@pytest.fixture
def table(tmp_path):
    paths = write_records(tmp_path)
    return write_table("gemm", reversed(paths), tmp_path / "gemm.csv")


def read(table_csv) -> pd.DataFrame:
    return pd.read_csv(table_csv, keep_default_na=False, na_values={"vs_composite": [""]})


def test_table_has_one_row_per_record_and_tidy_columns(table):
    df = read(table)
    assert len(df) == len(SHAPES) * 4
    for col in ("topology", "group", "shape", "m", "k", "n", "variant", "kernel", "pes",
                "latency_ns", "predicted_ns", "rel_error", "bound", "mac_util_pct",
                "roofline_util_pct", "dispatch_cycles_per_pe", "commands_per_pe",
                "supertiles_per_pe", "vs_composite", "config_hash"):
        assert col in df.columns
    for stage in GEMM_STAGES:
        assert busy_column(stage) in df.columns
    # deterministic order: group, then size, then PE count, then kernel
    assert list(df["group"].drop_duplicates()) == ["decode", "prefill", "synthetic"]
    first = df[df["shape"] == "dec-small"]
    assert list(zip(first["kernel"], first["pes"], strict=True)) == [
        ("primitive", 1), ("prefetch", 1), ("composite", 1), ("composite", 8)]
    assert df.loc[df["kernel"] == "composite", "vs_composite"].eq(1.0).all()
    prim = df[(df["shape"] == "dec-large") & (df["kernel"] == "primitive")].iloc[0]
    comp = df[(df["shape"] == "dec-large") & (df["variant"] == "composite")].iloc[0]
    assert prim["vs_composite"] == pytest.approx(prim["latency_ns"] / comp["latency_ns"],
                                                 rel=1e-5)


def test_table_is_byte_identical_whatever_the_record_order(tmp_path):
    paths = write_records(tmp_path)
    a = write_table("gemm", paths, tmp_path / "a.csv").read_bytes()
    b = write_table("gemm", list(reversed(paths)), tmp_path / "b.csv").read_bytes()
    assert a == b


def test_empty_record_list_gives_an_empty_frame():
    assert gemm_frame([]).empty


def test_values_come_from_the_table(table):
    df = read(table)
    v = gemm_values(df, PeCostModel())
    assert v["gemm/records"] == "16"
    assert v["gemm/shapes"] == "4"
    assert v["gemm/groups"] == "decode, prefill, synthetic"
    assert v["gemm/cubepes"] == "8"
    # references: the largest shape of each bound among the one-PE composites
    assert v["gemm/ref/memory/shape"] == "dec-large"
    assert v["gemm/ref/compute/shape"] == "pre-large"
    # primitive latency = 12 x roofline + 300 ns vs composite = roofline + 300 ns
    assert v["gemm/ref/memory/primx"] == f"{(12 * 16000 + 300) / 16300:.1f}"
    assert v["gemm/ref/memory/lat"] == "16.3"  # microseconds
    assert v["gemm/comp/memory/excessmin"] == "0.30"
    assert v["gemm/comp/cyclesmin"] == "42.9"
    assert v["gemm/comp/descbytes"] == "46"  # (42.875 - 40) / 0.0625
    assert v["gemm/cube/decode/worst/shape"] == "dec-small"
    # every value is a LaTeX-safe macro body
    values_file(v)


def test_values_exist_when_a_group_and_a_bound_are_missing(tmp_path):
    only_decode = [s for s in SHAPES if s[4] == "decode"]
    paths = write_records(tmp_path, only_decode, (("primitive", 1), ("composite", 1)))
    df = gemm_frame([json.loads(p.read_text()) for p in paths])
    full = gemm_values(read(write_table("gemm", write_records(tmp_path / "full"),
                                        tmp_path / "full.csv")))
    v = gemm_values(df)
    assert set(v) == set(full)  # the same keys, always
    assert v["gemm/ref/compute/shape"] == MISSING
    assert v["gemm/comp/compute/errpctmin"] == MISSING
    assert v["gemm/pref/slowdownmax"] == MISSING  # no prefetch variant
    assert v["gemm/cube/speedupmin"] == MISSING  # no CUBE variant
    assert v["gemm/cubepes"] == MISSING
    assert v["gemm/comp/descbytes"] == MISSING  # no cost model given
    assert v["gemm/ref/memory/shape"] == "dec-large"
    assert v["gemm/groups"] == "decode"


def test_latex_table_has_a_row_per_shape_and_rules_between_groups(table):
    tex = gemm_table(read(table))
    assert r"\toprule" in tex and r"\bottomrule" in tex
    body = tex.split(r"\midrule", 1)[1]
    for name, *_ in SHAPES:
        assert re.search(rf"^(\\midrule\n)?{re.escape(name)} &", body, re.M)
    assert body.count(r"\midrule") == 2  # decode | prefill | synthetic
    assert "8 PEs" in tex


def test_figures_are_written(table, tmp_path):
    assert FIGURE_RENDERERS["gemm"] is gemm_figures
    paths = gemm_figures(table, tmp_path / "fig")
    names = {p.name for p in paths}
    for stem in ("gemm_breakdown", "gemm_util", "gemm_util_vs_roofline"):
        for ext in ("pdf", "png"):
            assert f"{stem}.{ext}" in names
            assert (tmp_path / "fig" / f"{stem}.{ext}").stat().st_size > 1000


def test_figures_are_deterministic(table, tmp_path):
    a = [p.read_bytes() for p in gemm_figures(table, tmp_path / "a")]
    b = [p.read_bytes() for p in gemm_figures(table, tmp_path / "b")]
    assert a == b


def test_figures_and_values_handle_ungrouped_shapes(tmp_path):
    shape = ("plain", 32, 64, 32, "", 2048.0, "compute")
    paths = write_records(tmp_path, [shape], (("composite", 1),))
    csv = write_table("gemm", paths, tmp_path / "gemm.csv")
    df = read(csv)
    assert df["group"].tolist() == [""]
    assert len(gemm_figures(csv, tmp_path / "fig")) == 6
    v = gemm_values(df)
    assert v["gemm/groups"] == MISSING
    assert v["gemm/ref/compute/shape"] == "plain"


def test_generate_writes_the_gemm_table_and_dispatch_values(table, tmp_path):
    from kernbench.report.generate import generate

    topo = {"t0": str(Path(__file__).resolve().parents[1] / "config/topologies/small_2x2.yaml")}
    cfg = {"topologies": topo, "report": {"title": "t"}}
    out = tmp_path / "gen"
    written = generate(cfg, {"gemm": table}, out)
    assert out / "gemm_table.tex" in written
    values = (out / "values.tex").read_text()
    for key, body in (("gemm/present", "1"), ("hw/dispatch/fixedcomposite", "40"),
                      ("hw/dispatch/fixedsingle", "8"), ("hw/dispatch/r", "0.0625"),
                      ("hw/dispatch/cap", "1,024"), ("hw/clock", "1.0"),
                      ("gemm/comp/descbytes", "46")):
        assert f"\\csname kb@{key}\\endcsname{{{body}}}" in values
    hw = (out / "hardware_table.tex").read_text()
    assert "F = 40 cycles" in hw and "32 x 64 x 32" in hw

    # a sweep without the GEMM study: no table, and the paper skips the section
    written = generate(cfg, {}, tmp_path / "none")
    assert all(p.name != "gemm_table.tex" for p in written)
    assert "\\csname kb@gemm/present\\endcsname{0}" in (tmp_path / "none" / "values.tex").read_text()
