"""GEMM study outputs: aggregation, headline values, LaTeX table and figures,
from synthetic records (no simulation)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from kernbench.analysis.tables import write_csv
from kernbench.analysis.values import latex
from kernbench.experiments.gemm import STAGES as GEMM_STAGES
from kernbench.experiments.gemm import post
from kernbench.experiments.registry import get
from kernbench.report.generate import values_file
from kernbench.topology import load_topology

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "config/topologies/small_2x2.yaml"
busy_column = post.busy_column


class Ctx:
    """A report context whose every topology is small_2x2 (default dispatch cost model)."""

    def topology(self, _tid):
        return load_topology(SMALL)


def write_table(name, paths, out):
    assert name == "gemm"
    return write_csv(post.frame([json.loads(Path(p).read_text()) for p in paths]), out)


def gemm_values(df, ctx=None):
    """Values as their LaTeX text, keyed as in the paper (gemm/...)."""
    return {f"gemm/{k}": latex(v) for k, v in post.values(df, ctx).items()}


MISSING = "--"

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
                       "memory_ns": roof, "bound": bound, "intensity": bound, "util_pct": 50.0,
                       "rel_error": abs(latency - roof) / roof},
        "labels": {"shape": name, "m": m, "k": k, "n": n, "kernel": kernel, "pes": pes,
                   "group": group, "stationary": "b"},
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
    return post.load(table_csv)


def test_table_has_one_row_per_record_and_tidy_columns(table):
    df = read(table)
    assert len(df) == len(SHAPES) * 4
    for col in ("topology", "group", "shape", "m", "k", "n", "variant", "kernel", "pes",
                "latency_ns", "predicted_ns", "rel_error", "bound", "intensity", "mac_util_pct",
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
    assert post.frame([]).empty


def test_values_come_from_the_table(table):
    df = read(table)
    v = gemm_values(df, Ctx())
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
    values_file(post.values(df, Ctx()))


def test_values_exist_when_a_group_and_a_bound_are_missing(tmp_path):
    only_decode = [s for s in SHAPES if s[4] == "decode"]
    paths = write_records(tmp_path, only_decode, (("primitive", 1), ("composite", 1)))
    df = post.frame([json.loads(p.read_text()) for p in paths])
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
    tex = post.tables(read(table))["gemm_table"]
    assert r"\toprule" in tex and r"\bottomrule" in tex
    body = tex.split(r"\midrule", 1)[1]
    for name, *_ in SHAPES:
        assert re.search(rf"^(\\midrule\n)?{re.escape(name)} &", body, re.M)
    assert body.count(r"\midrule") == 2  # decode | prefill | synthetic
    assert "8 PEs" in tex


def _png_pixels(path):
    import matplotlib.image as mpimg

    return mpimg.imread(path)


def test_figures_are_written_and_drawn_from_the_table(table, tmp_path):
    exp = get("gemm")
    assert exp.post == post.__name__
    paths = post.figures(read(table), tmp_path / "fig")
    names = {p.name for p in paths}
    assert names == {f"{stem}.{ext}" for stem in exp.figures for ext in ("pdf", "png")}
    for stem in exp.figures:
        assert (tmp_path / "fig" / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
        pixels = _png_pixels(tmp_path / "fig" / f"{stem}.png")
        assert pixels.shape[0] > 200 and pixels.shape[1] > 200
        assert pixels.std() > 0.01  # something is drawn, not a blank canvas
    # the pictures follow the data: change one latency and the figures change
    df = read(table)
    df.loc[df["variant"] == "primitive", "latency_ns"] *= 3.0
    df.loc[df["variant"] == "primitive", "mac_util_pct"] /= 3.0
    changed = post.figures(df, tmp_path / "fig2")
    for a, b in zip(sorted(paths), sorted(changed), strict=True):
        if a.suffix == ".png":
            assert a.read_bytes() != b.read_bytes(), a.name


def test_figures_are_deterministic(table, tmp_path):
    a = [p.read_bytes() for p in post.figures(read(table), tmp_path / "a")]
    b = [p.read_bytes() for p in post.figures(read(table), tmp_path / "b")]
    assert a == b


def test_figures_and_values_handle_ungrouped_shapes(tmp_path):
    shape = ("plain", 32, 64, 32, "", 2048.0, "compute")
    paths = write_records(tmp_path, [shape], (("composite", 1),))
    csv = write_table("gemm", paths, tmp_path / "gemm.csv")
    df = read(csv)
    assert df["group"].tolist() == [""]
    assert len(post.figures(read(csv), tmp_path / "fig")) == 6
    v = gemm_values(df)
    assert v["gemm/groups"] == MISSING
    assert v["gemm/ref/compute/shape"] == "plain"


def test_generate_writes_the_gemm_table_and_dispatch_values(table, tmp_path):
    from kernbench.report.generate import generate

    cfg = {"topologies": {"t0": str(SMALL)}, "report": {"title": "t"}}
    out = tmp_path / "gen"
    written = generate(cfg, {"gemm": table}, out)
    assert out / "gemm_table.tex" in written
    values = (out / "values.tex").read_text()
    for key, body in (("hw/dispatch/fixedcomposite", "40"),
                      ("hw/dispatch/fixedsingle", "8"), ("hw/dispatch/r", "0.0625"),
                      ("hw/dispatch/cap", "1,024"), ("hw/clock", "1.0"),
                      ("gemm/comp/descbytes", "46")):
        assert f"\\csname kb@{key}\\endcsname{{{body}}}" in values
    hw = (out / "hardware_table.tex").read_text()
    assert "F = 40 cycles" in hw and "32 x 64 x 32" in hw
    studies = (out / "studies.tex").read_text()
    assert "\\label{sec:gemm}" in studies and "generated/sections/gemm.tex" in studies
    assert (out / "sections" / "gemm.tex").read_text() == get("gemm").section

    # a sweep without the GEMM study: no table, no section, no gemm values
    written = generate(cfg, {}, tmp_path / "none")
    assert all(p.name != "gemm_table.tex" for p in written)
    assert "gemm" not in (tmp_path / "none" / "studies.tex").read_text()
    assert "kb@gemm/" not in (tmp_path / "none" / "values.tex").read_text()
