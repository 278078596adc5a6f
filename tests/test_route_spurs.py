"""Route searches that skip other nodes' spurs (PE units, HBM controllers) give exactly
the routes and latencies of a search over the whole graph (docs/adr/0064)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernbench.policy.routing import router as R
from kernbench.policy.routing.router import PathRouter
from kernbench.policy.routing.spurs import find_spurs
from kernbench.topology import load_topology
from kernbench.topology import naming as nm
from kernbench.topology.graph import Node

from .route_reference import full_search

REPO = Path(__file__).resolve().parents[1]
SETTINGS = settings(max_examples=80, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
UNITS = ("pe_dma", "pe_ipcq", "pe_tcm", "pe_cpu", "pe_scheduler")


@pytest.fixture(scope="module")
def graph():
    return load_topology(REPO / "config" / "topologies" / "default.yaml")


@pytest.fixture(scope="module")
def router(graph):
    return PathRouter(graph)


def test_every_pe_and_hbm_controller_is_a_spur_on_its_router(graph):
    spurs = find_spurs(graph.nodes, [(e.src, e.dst, e.kind, 1.0) for e in graph.edges])
    spec = graph.spec
    pes = spec.sips.count * spec.cubes_per_sip * spec.pes_per_cube
    assert len(spurs.members) == 2 * pes
    for group, members in enumerate(spurs.members):
        attachment = spurs.attachment[group]
        assert graph.nodes[attachment].kind == "router"
        for n in members:  # every edge leaving the group ends at its attachment
            assert all(e.dst in members or e.dst == attachment for e in graph.out_edges[n])
    assert sum(map(len, spurs.members)) == sum(
        1 for n in graph.nodes.values() if n.kind.startswith("pe_") or n.kind == "hbm_ctrl")


def test_a_group_with_a_second_way_out_is_no_spur():
    nodes = {n: Node(n, kind, 1.0, attrs) for n, kind, attrs in (
        ("r0", "router", {}), ("r1", "router", {}),
        ("p.dma", "pe_dma", {"sip": 0, "cube": 0, "pe": 0}),
        ("p.tcm", "pe_tcm", {"sip": 0, "cube": 0, "pe": 0}),
        ("h", "hbm_ctrl", {"sip": 0, "cube": 0, "pe": 0}))}
    edges = [("r0", "p.dma", "k", 1.0), ("p.dma", "p.tcm", "k", 1.0), ("r0", "r1", "k", 1.0),
             ("h", "r1", "k", 1.0)]
    spurs = find_spurs(nodes, edges)
    assert spurs.members == [["p.dma", "p.tcm"], ["h"]] and spurs.attachment == ["r0", "r1"]
    spurs = find_spurs(nodes, [*edges, ("p.tcm", "r1", "k", 1.0)])  # a second way out
    assert spurs.members == [["h"]] and spurs.attachment == ["r1"]


pe = st.tuples(st.integers(0, 1), st.integers(0, 15), st.integers(0, 7), st.sampled_from(UNITS))


@SETTINGS
@given(src=pe, dst=pe, policy=st.sampled_from(["all", "data", "sip_all", "sip_data"]),
       backward=st.booleans())
def test_routes_between_pe_units_equal_the_full_search(graph, router, src, dst, policy,
                                                       backward):
    """From one PE's units to another's (or the same PE's): both ends in spurs, the
    hardest case; forward (``route``) and backward (``route_to``) searches."""
    a, b = nm.pe_unit(*src), nm.pe_unit(*dst)
    if a == b or (policy.startswith("sip") and src[0] != dst[0]):
        return
    excluded = R.POLICIES[policy]
    if backward:
        path, dist = full_search(graph, b, a, excluded, backward=True)
        assert router.route_to(policy, a, b) == (tuple(path), dist)
    else:
        path, dist = full_search(graph, a, b, excluded)
        assert router.route(policy, a, b) == (tuple(path), dist)


@pytest.mark.parametrize(("src", "dst"), [
    ("sip0.cube0.pe0.pe_dma", "sip0.cube0.pe0.pe_cpu"),  # within one spur, via its router
    ("sip0.cube0.noc.r0c0", "sip0.cube0.pe0.pe_tcm"),  # from the attachment itself
    ("sip1.cube9.hbm_ctrl.pe2", "sip0.cube3.pe5.pe_ipcq"),  # spur to spur across SIPs
    ("system.host", "sip1.cube15.hbm_ctrl.pe7"),
])
def test_examples_equal_the_full_search(graph, router, src, dst):
    path, dist = full_search(graph, src, dst, R.POLICIES["all"])
    assert router.route("all", src, dst) == (tuple(path), dist)


def test_a_route_may_leave_its_own_spur_and_come_back():
    """Inside its source's spur a search keeps every edge of the attachment: here the
    way out and back in through the router beats the PE's own long internal path."""
    from types import SimpleNamespace

    from kernbench.topology.graph import Edge
    ids = {"r": "router", "r2": "router", "a": "pe_dma", "b": "pe_cpu", "c": "pe_scheduler"}
    nodes = {n: Node(n, kind, 1.0, {} if kind == "router" else {"sip": 0, "cube": 0, "pe": 0})
             for n, kind in ids.items()}
    edges = []
    for x, y, mm in (("a", "r", 1.0), ("b", "r", 1.0), ("a", "c", 9.0), ("c", "b", 9.0),
                     ("r", "r2", 1.0)):
        edges += [Edge(x, y, "k", 1.0, mm, 1.0), Edge(y, x, "k", 1.0, mm, 1.0)]
    graph = SimpleNamespace(nodes=nodes, edges=edges)
    path, dist = full_search(graph, "a", "b", frozenset())
    assert path == ["a", "r", "b"]
    assert PathRouter(graph).route("all", "a", "b") == (tuple(path), dist)
