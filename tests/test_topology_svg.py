"""SVG diagrams of the topology views: well-formed, complete and byte-for-byte deterministic.

Counts come from the shipped default topology (2 SIPs, 6x6 router grid with
32 routers, 8 PEs, 64 pseudo-channels, 4 UCIe PHYs per side), so a renderer
that drops or duplicates an element fails here.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kernbench.topology import TopologyGraph, load_topology
from kernbench.topology.graph import View, ViewEdge, ViewNode
from kernbench.topology.svg import VIEW_NAMES, emit_diagrams, render_view_svg

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TOPOLOGY = REPO / "config" / "topologies" / "default.yaml"
NS = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def graph() -> TopologyGraph:
    return load_topology(DEFAULT_TOPOLOGY)


@pytest.fixture(scope="module")
def roots(graph: TopologyGraph) -> dict[str, ET.Element]:
    return {name: ET.fromstring(render_view_svg(graph.views[name])) for name in VIEW_NAMES}


def _texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{NS}text")]


def _with_class(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(f"{NS}{tag}") if e.get("class") == cls]


@pytest.mark.parametrize("name", VIEW_NAMES)
def test_each_view_is_an_svg_document_labelling_every_node(graph, roots, name):
    root = roots[name]
    assert root.tag == f"{NS}svg"
    x, y, w, h = (float(v) for v in root.get("viewBox").split())
    assert (x, y) == (0.0, 0.0) and 1000 <= w <= 1400 and h > 0
    texts = _texts(root)
    assert graph.views[name].title in texts
    missing = [n.label for n in graph.views[name].nodes if n.label not in texts]
    assert missing == []


def test_cube_svg_draws_every_router_as_a_labelled_circle(graph, roots):
    expected = {f"r{r}c{c}" for r, c in graph.mesh.routers()}
    assert len(expected) == 32
    assert expected <= set(_texts(roots["cube"]))
    assert len(_with_class(roots["cube"], "circle", "router")) == 32
    assert len(_with_class(roots["cube"], "line", "router_mesh")) == 48


def test_cube_svg_has_one_box_per_pseudo_channel_grouped_per_pe(graph, roots):
    assert graph.spec.hbm.pseudo_channels == 64
    assert len(_with_class(roots["cube"], "rect", "pch")) == 64
    texts = _texts(roots["cube"])
    assert [t for t in texts if t.endswith("x8ch")] == [f"PE{p} x8ch" for p in range(8)]


def test_cube_svg_labels_pes_mcpu_sram_and_ucie_phys(roots):
    texts = _texts(roots["cube"])
    assert sorted(t for t in texts if t.startswith("PE") and t[2:].isdigit()) == [
        f"PE{p}" for p in range(8)]
    assert "M_CPU" in texts and "SRAM" in texts
    assert len(_with_class(roots["cube"], "rect", "m_cpu")) == 1
    assert len(_with_class(roots["cube"], "rect", "sram")) == 1
    assert len(_with_class(roots["cube"], "rect", "pe")) == 8
    phys = {f"{d}c{c}" for d in "NSEW" for c in range(4)}
    assert phys <= set(texts)
    assert len(_with_class(roots["cube"], "rect", "ucie_phy")) == 16


def test_cube_svg_draws_one_dashed_labelled_hbm_link_per_slice(roots):
    links = _with_class(roots["cube"], "line", "hbm-link")
    assert len(links) == 8
    assert all(link.get("stroke-dasharray") for link in links)
    labels = [t.text for t in _with_class(roots["cube"], "text", "edge-label")]
    assert labels == ["256 GB/s"] * 8


def test_system_svg_names_every_sip(graph, roots):
    texts = _texts(roots["system"])
    sips = [t for t in texts if t.startswith("SIP ")]
    assert sips == [f"SIP {i} (4x4 CUBEs)" for i in range(graph.spec.sips.count)]
    assert len(sips) == 2


def test_rendering_depends_only_on_the_topology(graph, tmp_path):
    """Two independent compilations of one file draw the same bytes; a different
    topology draws different ones."""
    again = load_topology(DEFAULT_TOPOLOGY)
    assert again is not graph
    for name in VIEW_NAMES:
        assert render_view_svg(graph.views[name]) == render_view_svg(again.views[name])
    small = load_topology(DEFAULT_TOPOLOGY.parent / "small_2x2.yaml")
    assert render_view_svg(small.views["sip"]) != render_view_svg(graph.views["sip"])


def test_rendering_is_identical_across_hash_seeds():
    """Set/dict-of-str iteration differs between processes; the output must not."""
    code = ("import hashlib, sys; from kernbench.topology import load_topology; "
            "from kernbench.topology.svg import render_view_svg as r; "
            f"g = load_topology({str(DEFAULT_TOPOLOGY)!r}); "
            "print(hashlib.sha256(''.join(r(v) for v in g.views.values()).encode()).hexdigest())")
    digests = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip()
        for seed in ("1", "2")
    }
    assert len(digests) == 1 and len(digests.pop()) == len(hashlib.sha256().hexdigest())


def test_text_and_attributes_are_xml_escaped():
    node = ViewNode("a&b", 'x < y & "z"', "weird<kind>", 0.0, 0.0, 100.0, 40.0)
    other = ViewNode("c", "C", "host", 200.0, 0.0, 100.0, 40.0)
    view = View("custom", "A & B <test>", 300.0, 40.0, (node, other),
                (ViewEdge("a&b", "c", "k&k", "1 < 2"), ViewEdge("a&b", "missing", "pcie", "x")))
    root = ET.fromstring(render_view_svg(view))
    texts = _texts(root)
    assert {"A & B <test>", 'x < y & "z"', "1 < 2"} <= set(texts)
    assert "x" not in texts  # the edge to a node the view does not draw is skipped
    assert [e.get("class") for e in root.iter(f"{NS}rect") if e.get("class")] == ["weird<kind>",
                                                                                 "host"]


def test_emit_diagrams_writes_all_four_views_in_order(graph, tmp_path):
    out = tmp_path / "nested" / "diagrams"
    paths = emit_diagrams(graph, out)
    assert [p.name for p in paths] == ["system.svg", "sip.svg", "cube.svg", "pe.svg"]
    for path, name in zip(paths, VIEW_NAMES, strict=True):
        assert path.parent == out
        assert path.read_bytes() == render_view_svg(graph.views[name]).encode("utf-8")
        ET.parse(path)


def test_emit_diagrams_writes_only_requested_views(graph, tmp_path):
    paths = emit_diagrams(graph, tmp_path, views=["pe", "cube"])
    assert paths == [tmp_path / "pe.svg", tmp_path / "cube.svg"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cube.svg", "pe.svg"]


def test_emit_diagrams_rejects_unknown_view_before_writing(graph, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"'floorplan'.*allowed: system, sip, cube, pe"):
        emit_diagrams(graph, out, views=["cube", "floorplan"])
    assert not out.exists()
