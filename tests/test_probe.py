"""``kernbench probe``: catalog, formula columns, invariants, CLI flags."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kernbench.cli import main as cli_main
from kernbench.probes import probe as probe_mod
from kernbench.probes.catalog import build_catalog
from kernbench.probes.probe import Invariant, format_report, run_probe
from kernbench.topology.spec import load_spec

from .conftest import ROOT, TOPOLOGIES


def kernbench(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "kernbench.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def default_report():
    return run_probe(TOPOLOGIES / "default.yaml")


def test_default_report_passes_every_invariant(default_report):
    assert default_report.ok
    text = format_report(default_report)
    assert "[x]" not in text
    assert text.count("[v]") == len(default_report.invariants) >= 7


def test_summary_columns_add_up(default_report):
    for c in default_report.cases:
        assert c.nbytes == 32 * 1024
        assert c.actual_ns == pytest.approx(c.overhead_ns + c.wire_ns + c.drain_ns, rel=0.01)
        assert c.eff_bw_gbs == pytest.approx(c.nbytes / c.actual_ns)
        assert c.util_pct == pytest.approx(100 * c.eff_bw_gbs / c.bn_bw_gbs)
        assert c.drain_ns == pytest.approx(c.nbytes / c.bn_bw_gbs)


def test_sweep_utilisation_rises_with_size(default_report):
    assert default_report.sweep_sizes == [4096, 16384, 65536, 262144, 1048576]
    for name, points in default_report.sweep.items():
        utils = [p["util_pct"] for p in points]
        assert all(a < b for a, b in zip(utils, utils[1:], strict=False)), name
        assert utils[-1] > 90.0, name


def test_catalog_follows_the_mesh_shape():
    spec = load_spec(TOPOLOGIES / "small_2x3.yaml")
    cases = {c.name: c for c in build_catalog(spec)}
    assert [n for n in cases if n.startswith("h2d")] == ["h2d-1hop", "h2d-2hop", "h2d-3hop"]
    assert [cases[f"d2h-{k}hop"].dst_cube for k in (1, 2, 3)] == [0, 2, 4]
    assert cases["pe-cross-cube-hbm-worst"].dst_cube == 5
    assert "pe-cross-sip-hbm" not in cases  # one SIP only
    default = {c.name for c in build_catalog(load_spec(TOPOLOGIES / "default.yaml"))}
    assert {"h2d-4hop", "d2h-4hop", "pe-cross-sip-hbm", "pe-cross-half-hbm"} <= default


def test_route_details_mark_the_bottleneck(default_report):
    text = format_report(default_report)
    assert "<BN:128GB/s>" in text and "drain:" in text
    local = next(c for c in default_report.cases if c.name == "pe-local-hbm")
    assert local.legs[0].nodes[0].endswith("pe_tcm")
    assert local.legs[0].nodes[-1] == "sip0.cube0.hbm_ctrl.pe0"


def test_failed_invariant_prints_x_and_strict_exits_1(monkeypatch, capsys):
    real = probe_mod.run_probe

    def broken(*args, **kwargs):
        rep = real(*args, **kwargs)
        rep.invariants.append(Invariant("injected failure", False, "for the test"))
        return rep

    monkeypatch.setattr(probe_mod, "run_probe", broken)
    args = ["probe", "--topology", str(TOPOLOGIES / "small_2x2.yaml"), "--case", "h2d-1hop"]
    assert cli_main.main(args) == 0
    assert "[x] FAIL injected failure" in capsys.readouterr().out
    assert cli_main.main(args + ["--strict"]) == 1


def test_cli_json_is_byte_identical_across_runs():
    a = kernbench("probe", "--topology", "small_2x2", "--json")
    b = kernbench("probe", "--topology", "small_2x2", "--json")
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    doc = json.loads(a.stdout)
    assert {c["name"] for c in doc["cases"]} >= {"h2d-1hop", "pe-local-hbm"}
    assert all(inv["passed"] for inv in doc["invariants"])


def test_cli_single_case_and_strict_pass(tmp_path):
    proc = kernbench("probe", "--topology", "default", "--case", "d2h-2hop", "--strict",
                     "--trace", str(tmp_path / "trace.json"))
    assert proc.returncode == 0, proc.stderr
    assert "d2h-2hop" in proc.stdout and "h2d-1hop" not in proc.stdout
    assert "[x]" not in proc.stdout
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert any(e.get("name") == "d2h_read" for e in trace["traceEvents"])


def test_cli_unknown_case_is_one_line():
    proc = kernbench("probe", "--case", "nope")
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "unknown probe case 'nope'" in lines[0]
    assert "Traceback" not in proc.stderr
