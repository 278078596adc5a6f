"""Malformed topology files must each fail with ONE clear line.

Every ``ConfigError`` reads ``"<file>: <key.path>: <message>"``; the message says
what is allowed. Cases are built by mutating the shipped default topology.
"""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kernbench.errors import ConfigError
from kernbench.topology import load_spec

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TOPOLOGY = REPO / "config" / "topologies" / "default.yaml"


@pytest.fixture(scope="module")
def default_doc() -> dict:
    with DEFAULT_TOPOLOGY.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _set(doc: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        doc = doc[key]
    doc[last] = value


def _del(doc: dict, dotted: str) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        doc = doc[key]
    del doc[last]


def setter(dotted: str, value) -> Callable[[dict], None]:
    return lambda d: _set(d, dotted, value)


def deleter(dotted: str) -> Callable[[dict], None]:
    return lambda d: _del(d, dotted)


def both(*fns: Callable[[dict], None]) -> Callable[[dict], None]:
    def apply(d: dict) -> None:
        for fn in fns:
            fn(d)

    return apply


# (id, mutation, expected key path, expected "what is allowed" fragment)
CASES = [
    ("unknown_top_level_key", setter("bogus", 1), "bogus", "unknown key (allowed: cube, "),
    ("unknown_nested_key", setter("cube.noc.bogus", 1), "cube.noc.bogus",
     "unknown key (allowed: link_bw_gbs, max_spacing_mm, ns_per_mm, router_overhead_ns)"),
    ("string_for_number", setter("pe.clock_ghz", "fast"), "pe.clock_ghz",
     "expected number, got string 'fast'"),
    ("string_for_integer", setter("sip.cube_mesh.w", "4"), "sip.cube_mesh.w",
     "expected integer, got string"),
    ("bool_for_integer", setter("sip.cube_mesh.h", True), "sip.cube_mesh.h",
     "expected integer, got boolean"),
    ("negative_bandwidth", setter("system.pcie.bw_gbs", -64.0), "system.pcie.bw_gbs",
     "must be > 0, got -64.0"),
    ("zero_overhead", setter("system.host.overhead_ns", 0), "system.host.overhead_ns",
     "must be > 0, got 0"),
    ("zero_pe_overhead", setter("pe.overhead_ns.pe_dma", 0.0), "pe.overhead_ns.pe_dma",
     "must be > 0"),
    ("missing_required_nested", deleter("cube.sram.size_mb"), "cube.sram.size_mb",
     "missing required key"),
    ("missing_required_top", deleter("pe"), "pe", "missing required key"),
    ("bad_enum_sip_topology", setter("system.sips.topology", "star"), "system.sips.topology",
     "must be one of: ring_1d, torus_2d, mesh_2d_no_wrap"),
    ("bad_enum_corner", setter("cube.pe_layout.corners", ["nw", "up"]),
     "cube.pe_layout.corners[1]", "must be one of: nw, ne, sw, se"),
    ("schema_version_const", setter("schema_version", 2), "schema_version", "must be 1"),
    ("sip_count_too_large", setter("system.sips.count", 33), "system.sips.count", "must be <= 32"),
    ("sips_count_not_w_times_h", setter("system.sips.count", 3), "system.sips.count",
     "does not equal w x h = 2 x 1"),
    ("ring_1d_with_h_gt_1",
     both(setter("system.sips.w", 1), setter("system.sips.h", 2)),
     "system.sips.h", "ring_1d needs h = 1, got 2"),
    ("cube_too_narrow", setter("cube.geometry.cube_mm.w", 8.0), "cube.geometry.cube_mm.w",
     "needs >= 12 mm"),
    ("cube_too_short", setter("cube.geometry.cube_mm.h", 9.5), "cube.geometry.cube_mm.h",
     "needs >= 10 mm"),
    ("pseudo_channels_not_divisible", setter("cube.memory_map.pseudo_channels", 60),
     "cube.memory_map.pseudo_channels", "cannot be split evenly over 8 PEs"),
    ("interleave_not_power_of_two", setter("cube.memory_map.interleave_bytes", 384),
     "cube.memory_map.interleave_bytes", "must be a power of two, got 384"),
    ("interleave_below_minimum", setter("cube.memory_map.interleave_bytes", 16),
     "cube.memory_map.interleave_bytes", "must be >= 32"),
    ("m_cpu_outside_cube_x", setter("cube.placement.m_cpu.pos_mm", [17.5, 3.5]),
     "cube.placement.m_cpu.pos_mm", "lies outside the 17.0 x 14.0 mm cube"),
    ("sram_outside_cube_y", setter("cube.placement.sram.pos_mm", [1.5, 14.25]),
     "cube.placement.sram.pos_mm", "lies outside the 17.0 x 14.0 mm cube"),
    ("negative_position", setter("cube.placement.sram.pos_mm", [-1.0, 2.0]),
     "cube.placement.sram.pos_mm[0]", "must be >= 0"),
    ("tcm_reserved_equals_size", setter("pe.tcm.scheduler_reserved_kb", 4096),
     "pe.tcm.scheduler_reserved_kb", "must be smaller than size_kb = 4096"),
    ("tcm_reserved_exceeds_size", setter("pe.tcm.scheduler_reserved_kb", 5000),
     "pe.tcm.scheduler_reserved_kb", "must be smaller than size_kb"),
    ("page_size_not_power_of_two", setter("pe.mmu.page_size", 3000), "pe.mmu.page_size",
     "must be a power of two, got 3000"),
    ("pos_mm_three_items", setter("cube.placement.m_cpu.pos_mm", [1.0, 2.0, 3.0]),
     "cube.placement.m_cpu.pos_mm", "allows at most 2 item(s), got 3"),
    ("pos_mm_one_item", setter("cube.placement.m_cpu.pos_mm", [1.0]),
     "cube.placement.m_cpu.pos_mm", "needs at least 2 item(s), got 1"),
    ("name_with_space", setter("name", "my topo"), "name", "must match"),
    ("bad_emit_view", setter("visualization.emit_views", ["system", "chip"]),
     "visualization.emit_views[1]", "must be one of: system, sip, cube, pe"),
    ("extends_missing_file", setter("extends", "no_such_base.yaml"), "extends",
     "base topology 'no_such_base.yaml' not found"),
    ("zero_weight_rows_per_cycle", setter("pe.gemm.weight_rows_per_cycle", 0),
     "pe.gemm.weight_rows_per_cycle", "must be >= 1, got 0"),
    ("weight_rows_beyond_array", setter("pe.gemm.weight_rows_per_cycle", 33),
     "pe.gemm.weight_rows_per_cycle", "33 exceeds mac_rows = 32"),
    ("double_buffering_not_boolean", setter("pe.gemm.double_buffered_weights", "yes"),
     "pe.gemm.double_buffered_weights", "expected boolean, got string"),
    ("missing_fold_pipelining", deleter("pe.gemm.pipelined_folds"), "pe.gemm.pipelined_folds",
     "missing required key"),
    ("unknown_array_setting", setter("pe.gemm.weight_bus_bits", 512), "pe.gemm.weight_bus_bits",
     "unknown key (allowed: double_buffered_weights, mac_cols, mac_rows, pipelined_folds, "
     "weight_rows_per_cycle)"),
    ("unknown_sharing_policy", setter("fabric.sharing", "round_robin"), "fabric.sharing",
     "must be one of: interleaved, max_min, fifo"),
]


def _check_one_line(err: ConfigError, path: Path, key: str, allowed: str) -> None:
    text = str(err)
    assert "\n" not in text and "\r" not in text, text
    assert str(path) in text, text
    assert text.startswith(f"{path}: ") if not key else text.startswith(f"{path}: {key}: "), text
    assert err.key_path == key, text
    assert allowed in text, text


@pytest.mark.parametrize(("mutate", "key", "allowed"),
                         [pytest.param(m, k, a, id=i) for i, m, k, a in CASES])
def test_malformed_topology_is_one_clear_line(tmp_path, default_doc, mutate, key, allowed):
    doc = copy.deepcopy(default_doc)
    mutate(doc)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    _check_one_line(info.value, path, key, allowed)


def test_unmodified_default_loads(tmp_path, default_doc):
    """The mutation baseline itself must be valid, else every case above is vacuous."""
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(default_doc), encoding="utf-8")
    spec = load_spec(path)
    assert spec.cube_w == 4 and spec.cube_h == 4
    assert spec.pes_per_cube == 8
    assert spec.hbm_slice_bytes == 48 * 2**30 // 8


def test_first_error_is_deterministic(tmp_path, default_doc):
    """Several violations: the same (first by key path) one is reported every time."""
    doc = copy.deepcopy(default_doc)
    doc["zzz"] = 1
    doc["pe"]["clock_ghz"] = -1
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    messages = set()
    for _ in range(3):
        with pytest.raises(ConfigError) as info:
            load_spec(path)
        messages.add(str(info.value))
    assert len(messages) == 1
    # unknown keys are caught in pass 1 (per file), before the merged-document checks
    assert info.value.key_path == "zzz"


@pytest.mark.parametrize(("text", "line", "column", "fragment"), [
    pytest.param("schema_version: 1\nname: [oops\nsystem: {}\n", 3, 7, "expected ',' or ']'",
                 id="unclosed_flow_sequence"),
    pytest.param("schema_version: 1\n  name: x\n", 2, 7, "mapping values are not allowed",
                 id="bad_indent"),
    pytest.param("schema_version: 1\nsystem:\n\t- x\n", 3, 1, "'\\t'", id="tab"),
])
def test_yaml_syntax_error_reports_line_and_column(tmp_path, text, line, column, fragment):
    path = tmp_path / "broken.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}: YAML syntax error at line {line}, column {column}: "), msg
    assert fragment in msg, msg


def test_duplicate_key_reported(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("schema_version: 1\nname: a\nsystem: {}\nname: b\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg == f"{path}: YAML syntax error at line 4, column 1: duplicate key 'name'"


def test_duplicate_nested_key_reported(tmp_path, default_doc):
    text = yaml.safe_dump(default_doc, sort_keys=False)
    text = text.replace("  clock_ghz: 1.0\n", "  clock_ghz: 1.0\n  clock_ghz: 2.0\n", 1)
    assert text.count("clock_ghz") == 2
    path = tmp_path / "dup_nested.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="duplicate key 'clock_ghz'") as info:
        load_spec(path)
    assert "\n" not in str(info.value)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("text", [
    pytest.param("- 1\n- 2\n", id="list"),
    pytest.param("just a string\n", id="scalar"),
    pytest.param("", id="empty"),
])
def test_top_level_must_be_mapping(tmp_path, text):
    path = tmp_path / "top.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    assert str(info.value) == f"{path}: top level must be a mapping of keys"


def test_missing_file(tmp_path):
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg == f"{path}: topology file not found"


def test_directory_is_not_a_topology(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_spec(tmp_path)
    assert str(info.value) == f"{tmp_path}: topology path is not a file"


def test_circular_extends(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("extends: b.yaml\n", encoding="utf-8")
    b.write_text("extends: a.yaml\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_spec(a)
    err = info.value
    assert "\n" not in str(err)
    assert err.key_path == "extends"
    ra, rb = a.resolve(), b.resolve()
    assert str(err) == f"{ra}: extends: circular extends chain: {ra} -> {rb} -> {ra}"


def test_self_extends_is_circular(tmp_path):
    a = tmp_path / "self.yaml"
    a.write_text("extends: self.yaml\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="circular extends chain") as info:
        load_spec(a)
    assert info.value.key_path == "extends"
    assert "\n" not in str(info.value)


def test_extends_overrides_and_inherits(tmp_path):
    child = tmp_path / "child.yaml"
    child.write_text(yaml.safe_dump({
        "schema_version": 1, "name": "x", "extends": str(DEFAULT_TOPOLOGY),
        "sip": {"cube_mesh": {"w": 2, "h": 2}},
    }), encoding="utf-8")
    spec = load_spec(child)
    assert spec.name == "x"
    assert spec.cube_w == 2 and spec.cube_h == 2
    assert spec.cubes_per_sip == 4
    # everything else comes from the base
    assert spec.pe.clock_ghz == 1.0
    assert spec.pe.overhead_ns["pe_dma"] == 4.0
    assert spec.sips.count == 2 and spec.sips.topology == "ring_1d"
    assert spec.ucie.bw_gbs == 128.0
    assert spec.sources == (DEFAULT_TOPOLOGY.resolve(), child.resolve())
    assert spec.raw["sip"]["io"]["pcie_ep"]["overhead_ns"] == 30.0
    assert "extends" not in spec.raw


def test_extends_relative_path_and_deep_merge(tmp_path, default_doc):
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "root.yaml").write_text(yaml.safe_dump(default_doc), encoding="utf-8")
    child = tmp_path / "child.yaml"
    child.write_text("extends: base/root.yaml\npe:\n  tcm:\n    size_kb: 8192\n", encoding="utf-8")
    spec = load_spec(child)
    assert spec.pe.tcm_bytes == 8192 * 1024
    # sibling keys of the overridden one survive the merge
    assert spec.pe.tcm_reserved_bytes == 512 * 1024
    assert spec.pe.tcm_port_bw_gbs == 512.0


def test_unknown_key_reported_against_the_file_that_holds_it(tmp_path, default_doc):
    doc = copy.deepcopy(default_doc)
    doc["cube"]["noc"]["bogus"] = 1
    base = tmp_path / "badbase.yaml"
    base.write_text(yaml.safe_dump(doc), encoding="utf-8")
    child = tmp_path / "child.yaml"
    child.write_text("extends: badbase.yaml\nname: child\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_spec(child)
    err = info.value
    assert err.source == str(base.resolve())
    assert err.key_path == "cube.noc.bogus"
    assert "unknown key" in str(err)


def test_semantic_error_in_merged_child(tmp_path):
    """A child whose override breaks a cross-field rule is reported against the child."""
    child = tmp_path / "child.yaml"
    child.write_text(yaml.safe_dump({
        "extends": str(DEFAULT_TOPOLOGY), "system": {"sips": {"count": 4}},
    }), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_spec(child)
    assert str(info.value) == (f"{child}: system.sips.count: 4 does not equal w x h = 2 x 1")


# --- regressions: bugs found by these tests --------------------------------------------------

def test_mixed_type_unknown_keys_are_one_line(tmp_path, default_doc):
    doc = copy.deepcopy(default_doc)
    doc[1] = "x"
    doc["bogus"] = 2
    path = tmp_path / "intkey.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown key"):
        load_spec(path)


def test_nan_is_not_a_positive_number(tmp_path, default_doc):
    doc = copy.deepcopy(default_doc)
    doc["pe"]["clock_ghz"] = math.nan
    path = tmp_path / "nan.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    assert info.value.key_path == "pe.clock_ghz"


def test_non_utf8_file_is_one_line(tmp_path):
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00schema_version: 1\n")
    with pytest.raises(ConfigError) as info:
        load_spec(path)
    assert str(path) in str(info.value)


# --- CLI -----------------------------------------------------------------------------------

def test_cli_validate_prints_one_line_no_traceback(tmp_path, default_doc):
    doc = copy.deepcopy(default_doc)
    doc["system"]["pcie"]["bw_gbs"] = -1.0
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "kernbench.cli.main", "topology", "validate", str(bad)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert str(bad) in lines[0]
    assert "system.pcie.bw_gbs" in lines[0]
    assert "must be > 0" in lines[0]
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
