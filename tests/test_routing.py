"""Address resolution and latency-weighted, policy-aware routing on the default topology."""

from __future__ import annotations

import heapq
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kernbench.errors import RoutingError
from kernbench.policy.address import PhysAddr
from kernbench.policy.routing import router as R
from kernbench.policy.routing.router import AddressResolver, PathRouter
from kernbench.topology import load_topology
from kernbench.topology import naming as nm

from .route_reference import full_search

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TOPOLOGY = REPO / "config" / "topologies" / "default.yaml"

SETTINGS = settings(max_examples=120, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

N_SIPS, N_CUBES, N_PES = 2, 16, 8
IO_KINDS = frozenset({"io_to_cube", "cube_to_io"})
UCIE_OR_IO_KINDS = frozenset({
    "ucie_internal", "ucie_conn_to_router", "router_to_ucie_conn", "ucie_conn_to_noc",
    "noc_to_ucie_conn", "ucie_mesh", "io_to_cube", "cube_to_io", "inter_sip", "pcie",
    "io_internal",
})
PE_KINDS = frozenset({"pe_internal", "pe_to_router", "command"})


@pytest.fixture(scope="module")
def graph():
    return load_topology(DEFAULT_TOPOLOGY)


@pytest.fixture(scope="module")
def router(graph):
    return PathRouter(graph)


@pytest.fixture(scope="module")
def fresh_router():
    """A second, independently built graph + router (determinism across builds)."""
    return PathRouter(load_topology(DEFAULT_TOPOLOGY))


@pytest.fixture(scope="module")
def resolver(graph):
    return AddressResolver(graph)


def test_default_topology_shape(graph):
    spec = graph.spec
    assert (spec.sips.count, spec.cubes_per_sip, spec.pes_per_cube) == (N_SIPS, N_CUBES, N_PES)
    assert spec.hbm_slice_bytes == 6 * 2**30


# --- reference implementation ------------------------------------------------------------

def reference_distance(graph, src: str, dst: str, excluded: frozenset[str]) -> float:
    """Plain Dijkstra over graph.out_edges, skipping edge kinds in ``excluded``."""
    dist = {src: 0.0}
    heap = [(0.0, src)]
    while heap:
        d, node = heapq.heappop(heap)
        if node == dst:
            return d
        if d > dist[node]:
            continue
        for e in graph.out_edges[node]:
            if e.kind in excluded:
                continue
            nd = d + e.wire_ns + graph.nodes[e.dst].overhead_ns
            if nd < dist.get(e.dst, float("inf")):
                dist[e.dst] = nd
                heapq.heappush(heap, (nd, e.dst))
    return float("inf")


def reference_route(graph, src: str, dst: str, excluded: frozenset[str]) -> list[str]:
    """The route a Dijkstra over the whole graph picks, with the router's tie rule."""
    return full_search(graph, src, dst, excluded)[0]


def path_cost(graph, path: list[str]) -> float:
    total = 0.0
    for a, b in zip(path, path[1:], strict=False):
        total += graph.edge_map[(a, b)].wire_ns + graph.nodes[b].overhead_ns
    return total


def edge_kinds(graph, path: list[str]) -> list[str]:
    return [graph.edge_map[(a, b)].kind for a, b in zip(path, path[1:], strict=False)]


def expected_policy(src: tuple[int, int], dst: tuple[int, int]) -> str:
    if src == dst:
        return "local"
    if src[0] == dst[0]:
        return "mesh_data"
    return "data"


# --- AddressResolver ---------------------------------------------------------------------

@SETTINGS
@given(st.integers(0, N_SIPS - 1), st.integers(0, N_CUBES - 1),
       st.integers(0, N_PES * 6 * 2**30 - 1), st.booleans())
def test_resolve_hbm(resolver, sip, cube, offset, as_int):
    pa = PhysAddr.hbm(sip, cube, offset)
    node = resolver.resolve(pa.encode() if as_int else pa)
    assert node == f"sip{sip}.cube{cube}.hbm_ctrl.pe{offset // (6 * 2**30)}"


def test_resolve_hbm_slice_boundaries(resolver):
    s = 6 * 2**30
    assert resolver.resolve(PhysAddr.hbm(0, 0, s - 1)) == "sip0.cube0.hbm_ctrl.pe0"
    assert resolver.resolve(PhysAddr.hbm(0, 0, s)) == "sip0.cube0.hbm_ctrl.pe1"
    assert resolver.resolve(PhysAddr.hbm(1, 15, 8 * s - 1)) == "sip1.cube15.hbm_ctrl.pe7"
    with pytest.raises(RoutingError, match=r"^node sip1\.cube15\.hbm_ctrl\.pe8 not found"):
        resolver.resolve(PhysAddr.hbm(1, 15, 8 * s))


@SETTINGS
@given(st.integers(0, N_SIPS - 1), st.integers(0, N_CUBES - 1), st.integers(0, N_PES - 1),
       st.integers(0, 2**32 - 1))
def test_resolve_on_die_resources(resolver, sip, cube, pe, off):
    tcm = PhysAddr.pe_tcm_addr(sip, cube, pe, off)
    assert resolver.resolve(tcm) == f"sip{sip}.cube{cube}.pe{pe}.pe_tcm"
    assert resolver.resolve(PhysAddr.sram_addr(sip, cube, off)) == f"sip{sip}.cube{cube}.sram"
    mcpu = PhysAddr.mcpu_addr(sip, cube, off)
    assert resolver.resolve(mcpu) == f"sip{sip}.cube{cube}.m_cpu"
    assert resolver.resolve(mcpu.encode()) == f"sip{sip}.cube{cube}.m_cpu"


@pytest.mark.parametrize(("pa", "node"), [
    (PhysAddr.hbm(5, 0, 0), "sip5.cube0.hbm_ctrl.pe0"),
    (PhysAddr.hbm(0, 16, 0), "sip0.cube16.hbm_ctrl.pe0"),
    (PhysAddr.pe_tcm_addr(5, 1, 2, 0), "sip5.cube1.pe2.pe_tcm"),
    (PhysAddr.pe_tcm_addr(0, 0, 8, 0), "sip0.cube0.pe8.pe_tcm"),
    (PhysAddr.sram_addr(5, 3, 0), "sip5.cube3.sram"),
    (PhysAddr.mcpu_addr(2, 0, 0), "sip2.cube0.m_cpu"),
])
def test_resolve_absent_node_names_it(resolver, pa, node):
    with pytest.raises(RoutingError) as info:
        resolver.resolve(pa)
    assert str(info.value) == f"node {node} not found in topology"


def test_resolver_finders(resolver, graph):
    eps = resolver.find_all_pcie_eps()
    assert eps == ["sip0.io0.pcie_ep", "sip1.io0.pcie_ep"]
    assert eps == sorted(n.id for n in graph.nodes.values() if n.kind == "pcie_ep")
    assert resolver.find_pcie_ep(1) == "sip1.io0.pcie_ep"
    assert resolver.find_io_cpu(0) == "sip0.io0.io_cpu"
    assert resolver.find_m_cpu(1, 7) == "sip1.cube7.m_cpu"
    assert resolver.find_hbm_ctrl(0, 3, 5) == "sip0.cube3.hbm_ctrl.pe5"
    assert resolver.find_pe(1, 2, 3) == "sip1.cube2.pe3"
    assert resolver.find_pe_unit(0, 0, 0, "pe_gemm") == "sip0.cube0.pe0.pe_gemm"
    for call, missing in (
        (lambda: resolver.find_pcie_ep(5), "sip5.io0.pcie_ep"),
        (lambda: resolver.find_pe(0, 0, 8), "sip0.cube0.pe8.pe_dma"),
        (lambda: resolver.find_pe_unit(0, 0, 0, "pe_fpu"), "sip0.cube0.pe0.pe_fpu"),
        (lambda: resolver.find_m_cpu(0, 16), "sip0.cube16.m_cpu"),
    ):
        with pytest.raises(RoutingError, match=f"^node {missing} not found in topology$"):
            call()


# --- PathRouter: PE DMA to HBM ---------------------------------------------------------------

pe_coords = st.tuples(st.integers(0, N_SIPS - 1), st.integers(0, N_CUBES - 1),
                      st.integers(0, N_PES - 1))


@SETTINGS
@given(src=pe_coords, dst=pe_coords)
@example(src=(0, 5, 3), dst=(0, 5, 6))  # same cube
@example(src=(1, 0, 0), dst=(1, 15, 7))  # same SIP, opposite mesh corners
@example(src=(0, 12, 2), dst=(1, 3, 4))  # across SIPs
def test_pe_to_hbm_path_properties(graph, router, fresh_router, src, dst):
    s_sip, s_cube, s_pe = src
    d_sip, d_cube, d_pe = dst
    src_pe = f"sip{s_sip}.cube{s_cube}.pe{s_pe}"
    goal = f"sip{d_sip}.cube{d_cube}.hbm_ctrl.pe{d_pe}"

    path, dist = router.find_path_with_distance(src_pe, goal)
    assert path[0] == f"{src_pe}.pe_dma"
    assert path[-1] == goal
    assert len(path) == len(set(path))  # a shortest path never revisits a node
    for a, b in zip(path, path[1:], strict=False):
        assert (a, b) in graph.edge_map, f"{a} -> {b} is not an edge"
    kinds = edge_kinds(graph, path)
    assert "command" not in kinds
    assert kinds[0] == "pe_to_router" and kinds[-1] == "router_to_hbm"
    assert kinds.count("pe_to_router") == 1  # never passes through another PE

    if (s_sip, s_cube) == (d_sip, d_cube):
        assert not set(kinds) & UCIE_OR_IO_KINDS
        assert all(n.startswith(f"sip{s_sip}.cube{s_cube}.") for n in path)
    elif s_sip == d_sip:
        assert not set(kinds) & IO_KINDS
        assert "inter_sip" not in kinds and "pcie" not in kinds
        assert "ucie_mesh" in kinds
        assert all(n.startswith(f"sip{s_sip}.cube") for n in path)
    else:
        assert "inter_sip" in kinds or "pcie" in kinds

    # reported distance: wire delay of each edge plus overhead of the node it enters
    assert dist == pytest.approx(path_cost(graph, path), rel=1e-12, abs=1e-9)
    assert dist > 0

    # minimal: matches an independent Dijkstra under the same edge-kind policy
    policy = expected_policy((s_sip, s_cube), (d_sip, d_cube))
    ref = reference_distance(graph, path[0], goal, R.POLICIES[policy])
    assert dist == pytest.approx(ref, rel=1e-9)
    assert router.route(policy, path[0], goal) == (tuple(path), dist)
    # and the very route the tie rule picks among equally short ones
    assert path == reference_route(graph, path[0], goal, R.POLICIES[policy])

    # deterministic: repeated calls and an independently built router agree exactly
    assert router.find_path(src_pe, goal) == path
    again, again_dist = fresh_router.find_path_with_distance(src_pe, goal)
    assert again == path and again_dist == dist


@SETTINGS
@given(src=pe_coords, dst=pe_coords, policy=st.sampled_from(["all", "sip_all", "data"]))
@example(src=(0, 0, 0), dst=(1, 15, 7), policy="all")
def test_route_to_is_a_shortest_route(graph, router, src, dst, policy):
    """The backward search (reversed edges, grown from the goal) returns a real route
    of the graph, as short as an independent Dijkstra finds and as ``route``."""
    a = nm.m_cpu(src[0], src[1])
    b = nm.pe_unit(dst[0], dst[1], dst[2], "pe_dma")
    if policy == "sip_all" and src[0] != dst[0]:
        with pytest.raises(RoutingError, match="no path"):
            router.route_to(policy, a, b)
        return
    path, dist = router.route_to(policy, a, b)
    assert path[0] == a and path[-1] == b and len(path) == len(set(path))
    assert all((x, y) in graph.edge_map for x, y in zip(path, path[1:], strict=False))
    assert dist == pytest.approx(path_cost(graph, list(path)), rel=1e-12, abs=1e-9)
    assert dist == pytest.approx(reference_distance(graph, a, b, R.POLICIES[policy]), rel=1e-9)
    assert dist == pytest.approx(router.route(policy, a, b)[1], rel=1e-12)


def test_route_result_is_not_shared_mutable_state(router):
    p = router.find_path("sip0.cube0.pe0", "sip0.cube0.hbm_ctrl.pe7")
    snapshot = list(p)
    p.append("garbage")
    p.reverse()
    assert router.find_path("sip0.cube0.pe0", "sip0.cube0.hbm_ctrl.pe7") == snapshot


def test_local_path_example(graph, router):
    """pe0 sits on r0c0 and its own HBM controller hangs off the same router."""
    path, dist = router.find_path_with_distance("sip0.cube0.pe0", "sip0.cube0.hbm_ctrl.pe0")
    assert path == ["sip0.cube0.pe0.pe_dma", "sip0.cube0.noc.r0c0", "sip0.cube0.hbm_ctrl.pe0"]
    spec = graph.spec
    hbm_edge = graph.edge_map[("sip0.cube0.noc.r0c0", "sip0.cube0.hbm_ctrl.pe0")]
    expected = (spec.pe.link.wire_ns + spec.router_overhead_ns
                + hbm_edge.wire_ns + spec.hbm.ctrl_overhead_ns)
    assert dist == pytest.approx(expected)
    assert expected == pytest.approx(0.05 + 2.0 + hbm_edge.distance_mm * 0.1 + 40.0)


def test_start_equals_goal(router):
    assert router.route("all", "system.host", "system.host") == (("system.host",), 0.0)


# --- PathRouter: memory paths ----------------------------------------------------------------

mem_sources = st.one_of(
    st.just("system.host"),
    st.integers(0, N_SIPS - 1).map(lambda s: f"sip{s}.io0.pcie_ep"),
    st.tuples(st.integers(0, N_SIPS - 1), st.integers(0, N_CUBES - 1)).map(
        lambda t: f"sip{t[0]}.cube{t[1]}.m_cpu"),
)
mem_targets = st.one_of(
    pe_coords.map(lambda t: f"sip{t[0]}.cube{t[1]}.hbm_ctrl.pe{t[2]}"),
    st.tuples(st.integers(0, N_SIPS - 1), st.integers(0, N_CUBES - 1),
              st.sampled_from(["sram", "m_cpu"])).map(lambda t: f"sip{t[0]}.cube{t[1]}.{t[2]}"),
)


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(src=mem_sources, dst=mem_targets)
def test_memory_paths_avoid_pe_pipelines(graph, router, src, dst):
    path = router.find_memory_path(src, dst)
    assert path[0] == src and path[-1] == dst
    kinds = edge_kinds(graph, path)
    assert not set(kinds) & PE_KINDS
    assert all(nm.pe_of(n) is None for n in path)  # no PE sub-component on the way
    dist = router.route("memory", src, dst)[1]
    assert dist == pytest.approx(path_cost(graph, path), rel=1e-12, abs=1e-9)
    assert dist == pytest.approx(reference_distance(graph, src, dst, R.POLICIES["memory"]),
                                 rel=1e-9)


def test_mcpu_dma_same_sip_stays_on_mesh(graph, router):
    path = router.find_mcpu_dma_path("sip0.cube3.m_cpu", "sip0.cube12.hbm_ctrl.pe1")
    kinds = set(edge_kinds(graph, path))
    assert not kinds & (IO_KINDS | PE_KINDS)
    assert "ucie_mesh" in kinds
    same_cube = router.find_mcpu_dma_path("sip0.cube3.m_cpu", "sip0.cube3.sram")
    assert not set(edge_kinds(graph, same_cube)) & (UCIE_OR_IO_KINDS | PE_KINDS)


def test_path_to_pe_enters_through_dma(graph, router):
    path = router.find_path_to_pe("sip1.io0.pcie_ep", "sip1.cube5.pe6")
    assert path[0] == "sip1.io0.pcie_ep" and path[-1] == "sip1.cube5.pe6.pe_dma"
    kinds = edge_kinds(graph, path)
    assert "command" not in kinds and kinds[-1] == "pe_to_router"


def test_node_path_may_use_command_links(graph, router):
    path = router.find_node_path("sip0.cube0.pe0.pe_cpu", "sip0.cube0.m_cpu")
    assert edge_kinds(graph, path)[0] == "command"
    # under the data policy the PE CPU must go through its own pipeline instead
    data_path, _ = router.route("data", "sip0.cube0.pe0.pe_cpu", "sip0.cube0.m_cpu")
    assert "command" not in edge_kinds(graph, list(data_path))
    assert "pe_internal" in edge_kinds(graph, list(data_path))


# --- errors --------------------------------------------------------------------------------

@pytest.mark.parametrize(("call", "fragment"), [
    (lambda r: r.find_path("sip9.cube0.pe0", "sip0.cube0.hbm_ctrl.pe0"),
     "node sip9.cube0.pe0.pe_dma not found in topology"),
    (lambda r: r.find_path("sip0.cube0.pe0", "sip0.cube0.hbm_ctrl.pe9"),
     "node sip0.cube0.hbm_ctrl.pe9 not found in topology"),
    (lambda r: r.find_memory_path("nowhere", "system.host"), "node nowhere not found in topology"),
    (lambda r: r.route("fastest", "system.host", "fabric.switch0"),
     "unknown routing policy 'fastest' "
     "(allowed: all, data, memory, mesh_data, mesh_memory, local, local_all, sip_all, sip_data)"),
])
def test_unknown_nodes_and_policies_raise(router, call, fragment):
    with pytest.raises(RoutingError) as info:
        call(router)
    assert str(info.value) == fragment


@pytest.mark.parametrize(("policy", "src", "dst"), [
    # memory paths may not enter a PE
    ("memory", "system.host", "sip0.cube3.pe1.pe_dma"),
    ("memory", "sip0.cube0.pe0.pe_dma", "sip0.cube0.sram"),
    # same-cube policy cannot leave the cube
    ("local", "sip0.cube0.pe0.pe_dma", "sip0.cube1.hbm_ctrl.pe0"),
    # mesh policies cannot reach another SIP or the IO chiplet
    ("mesh_data", "sip0.cube0.pe0.pe_dma", "sip1.cube0.hbm_ctrl.pe0"),
    ("mesh_memory", "sip0.cube0.m_cpu", "sip0.io0.pcie_ep"),
])
def test_unreachable_pairs_raise(router, policy, src, dst):
    with pytest.raises(RoutingError) as info:
        router.route(policy, src, dst)
    assert str(info.value) == f"no path from {src} to {dst} (policy '{policy}')"
