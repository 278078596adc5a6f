"""``AddressResolver`` and ``PathRouter``: addresses to nodes, nodes to routes.

Routes minimise head latency: an edge weighs its wire delay plus the overhead
of the node it enters (docs/adr/0002-latency-weighted-routing.md). Four
adjacency lists select which edge kinds a routing intent may use; Dijkstra
breaks ties by insertion order, so a route is a pure function of the graph.
"""

from __future__ import annotations

import heapq
from typing import Final

from kernbench.errors import RoutingError
from kernbench.policy.address.phys_addr import PhysAddr, UnitType, decode_pa
from kernbench.policy.routing import spurs
from kernbench.policy.routing.edges import Edges, wires_of
from kernbench.topology import naming as nm
from kernbench.topology.graph import TopologyGraph

# (Final: the compiled twin keeps these in C statics, not looked up by name per call; ADR 0065)
heappop: Final = heapq.heappop
heappush: Final = heapq.heappush

# Edge kinds that leave a cube; same-cube routes may not use them.
LEAVE_CUBE_KINDS = frozenset({
    "ucie_internal", "ucie_conn_to_router", "router_to_ucie_conn", "ucie_conn_to_noc",
    "noc_to_ucie_conn", "ucie_mesh", "io_to_cube", "cube_to_io", "inter_sip", "pcie",
    "io_internal",
})

# Edge kinds that leave a SIP's cube mesh; cube-to-cube routes inside one SIP stay
# on the UCIe mesh instead of short-cutting through the IO chiplet.
LEAVE_MESH_KINDS = frozenset({"io_to_cube", "cube_to_io", "inter_sip", "pcie"})
_NO_PE = frozenset({"command", "pe_internal", "pe_to_router"})

# Which edge kinds each adjacency excludes.
POLICIES: dict[str, frozenset[str]] = {
    "all": frozenset(),  # component-to-component, command links included
    "data": frozenset({"command"}),  # PE DMA and generic data
    "memory": _NO_PE,  # host / M_CPU DMA: never through a PE pipeline
    "mesh_data": frozenset({"command"}) | LEAVE_MESH_KINDS,  # PE DMA to another cube, same SIP
    "mesh_memory": _NO_PE | LEAVE_MESH_KINDS,  # M_CPU DMA to another cube, same SIP
    "local": frozenset({"command"}) | LEAVE_CUBE_KINDS,  # same-cube traffic
    "local_all": LEAVE_CUBE_KINDS,  # same-cube control messages (command links included)
    "sip_all": frozenset({"inter_sip", "pcie"}),  # control messages inside one SIP
    "sip_data": frozenset({"command", "inter_sip", "pcie"}),  # data inside one SIP (IO included)
}


def command_policy(src: str, dst: str) -> str:
    """Narrowest policy for a control message: same cube, same SIP, or anywhere.

    A narrower policy searches a smaller graph (one Dijkstra tree per source is
    what launching a kernel on every CUBE of many SIPs costs); the route itself
    is the same, because leaving a CUBE or SIP and coming back is never shorter.
    """
    if nm.same_cube(src, dst):
        return "local_all"
    a, b = nm.sip_of(src), nm.sip_of(dst)
    if a is not None and a == b:
        return "sip_all"
    return "all"


def scope_policy(src: str, dst: str, wide: str) -> str:
    """Narrowest policy that can join src and dst: same cube, same SIP, or anywhere."""
    if nm.same_cube(src, dst):
        return "local"
    src_cube, dst_cube = nm.cube_of(src), nm.cube_of(dst)
    if src_cube and dst_cube and src_cube[0] == dst_cube[0]:
        return "mesh_" + wide
    return wide


class AddressResolver:
    """Maps physical addresses and (sip, cube) coordinates to node ids."""

    def __init__(self, graph: TopologyGraph) -> None:
        self._node_ids = frozenset(graph.nodes)
        self._hbm_slice_bytes = graph.spec.hbm_slice_bytes
        self._hbm: dict[tuple[int, int, int], str] = {}  # (sip, cube, slice) -> node

    def _known(self, node_id: str) -> str:
        if node_id not in self._node_ids:
            raise RoutingError(f"node {node_id} not found in topology")
        return node_id

    def resolve(self, addr: PhysAddr | int) -> str:
        pa = decode_pa(addr) if isinstance(addr, int) else addr
        if pa.kind == "hbm":
            key = (pa.sip, pa.cube, pa.hbm_offset // self._hbm_slice_bytes)
            node = self._hbm.get(key)
            if node is None:
                node = self._hbm[key] = self._known(nm.hbm_ctrl(*key))
            return node
        if pa.unit_type == UnitType.PE:
            return self._known(nm.pe_unit(pa.sip, pa.cube, pa.pe_id, "pe_tcm"))
        if pa.unit_type == UnitType.SRAM:
            return self._known(nm.sram(pa.sip, pa.cube))
        if pa.unit_type == UnitType.MCPU:
            return self._known(nm.m_cpu(pa.sip, pa.cube))
        raise RoutingError(f"unsupported unit type {pa.unit_type!r}")  # pragma: no cover

    def find_m_cpu(self, sip: int, cube: int) -> str:
        return self._known(nm.m_cpu(sip, cube))

    def find_pcie_ep(self, sip: int, io_id: str = nm.IO) -> str:
        return self._known(nm.io_node(sip, "pcie_ep", io_id))

    def find_io_cpu(self, sip: int, io_id: str = nm.IO) -> str:
        return self._known(nm.io_node(sip, "io_cpu", io_id))

    def find_hbm_ctrl(self, sip: int, cube: int, pe: int) -> str:
        return self._known(nm.hbm_ctrl(sip, cube, pe))

    def find_pe(self, sip: int, cube: int, pe: int) -> str:
        """PE prefix (e.g. ``sip0.cube0.pe0``) after checking the PE exists."""
        self._known(nm.pe_unit(sip, cube, pe, "pe_dma"))
        return nm.pe_prefix(sip, cube, pe)

    def find_pe_unit(self, sip: int, cube: int, pe: int, unit: str) -> str:
        return self._known(nm.pe_unit(sip, cube, pe, unit))

    def find_all_pcie_eps(self) -> list[str]:
        return sorted(n for n in self._node_ids if n.endswith(".pcie_ep"))


class _Reached:
    """A frontier entry of a search: a node reached at ``dist``, the ``seq``-th push.
    Entries order by distance, then push order (ties break by insertion). Compiled, a
    heap compare of two is two float compares; of two tuples it was an equality test
    per item first (callgrind: ~1.6k instructions a compare, most of a route's search)."""

    __slots__ = ("dist", "seq", "node")

    def __init__(self, dist: float, seq: int, node: str) -> None:
        self.dist, self.seq, self.node = dist, seq, node

    def __lt__(self, other: _Reached) -> bool:
        return self.dist < other.dist or (self.dist == other.dist and self.seq < other.seq)


class _Search:
    """A Dijkstra search from ``origin`` (at distance ``d0``), grown on demand: the
    distances found, each node's predecessor, the frontier heap, the settled nodes, the
    push counter, and the edges it follows instead of the shared adjacency's (``local``:
    its own spur's, ``spurs``)."""

    __slots__ = ("best", "prev", "heap", "done", "pushed", "local")

    def __init__(self, origin: str, d0: float = 0.0,
                 local: dict[str, list[tuple[str, float]]] | None = None) -> None:
        self.best: dict[str, float] = {origin: d0}
        self.prev: dict[str, str] = {}
        self.heap: list[_Reached] = [_Reached(d0, 0, origin)]
        self.done: set[str] = set()
        self.pushed = 1
        self.local: dict[str, list[tuple[str, float]]] = local if local is not None else {}


def _grow(state: _Search, edges: Edges | None,
          target: str | None) -> tuple[dict[str, float], dict[str, str]]:
    """Grow a search until ``target`` is settled (or everything is); return (best, prev).

    Settled nodes are final and ties break by insertion order, so a search grown in
    steps gives the routes one full run gives. ``prev`` points toward the origin (a
    backward search over reversed edges points toward its goal). A node's edges are
    the search's own (``local``) or else ``edges.core`` (None: no others).
    """
    best, prev, heap, done, local = state.best, state.prev, state.heap, state.done, state.local
    if target is not None and target in done:
        return best, prev
    pushed = state.pushed
    no_edges: list[tuple[str, float]] = []
    while heap:
        entry = heappop(heap)
        dist, node = entry.dist, entry.node
        if node in done:
            continue
        done.add(node)
        outs = local.get(node) if local else None
        if outs is None:
            outs = edges.core(node) if edges is not None else no_edges
        for nxt, weight in outs:
            cand = dist + weight
            if nxt not in best or cand < best[nxt]:
                best[nxt] = cand
                prev[nxt] = node
                heappush(heap, _Reached(cand, pushed, nxt))
                pushed += 1
        if node == target:
            break
    state.pushed = pushed
    return best, prev  # target is in best only once settled (or the heap ran dry)


class PathRouter:
    """Shortest head-latency paths under one of the edge-kind policies."""

    def __init__(self, graph: TopologyGraph) -> None:
        self._nodes = graph.nodes
        self._edges = [(e.src, e.dst, e.kind, e.wire_ns + graph.nodes[e.dst].overhead_ns)
                       for e in graph.edges]
        # PE units and HBM controllers: skipped by searches that do not start or end there
        self._spurs = spurs.find_spurs(graph.nodes, self._edges)
        self._group = self._spurs.group_of
        self._wires = wires_of(self._edges)  # (outgoing, incoming) per node
        self._forward: dict[str, Edges] = {}  # per policy, listed as searches reach them
        self._backward: dict[str, Edges] = {}  # the same over the reversed edges
        self._cache: dict[tuple[str, ...], tuple[tuple[str, ...], float]] = {}
        self._trees: dict[tuple[str, str], _Search] = {}  # (policy, source) -> search state
        self._rtrees: dict[tuple[str, str], _Search] = {}  # (policy, goal) -> reverse search

    # -- public API ------------------------------------------------------------
    def find_path(self, src_pe: str, dst_node: str) -> list[str]:
        """PE DMA route from ``src_pe``'s DMA engine (``src_pe`` is a PE prefix)."""
        return self.find_path_with_distance(src_pe, dst_node)[0]

    def find_path_with_distance(self, src_pe: str, dst_node: str) -> tuple[list[str], float]:
        start = nm.unit_of(src_pe, "pe_dma")
        policy = scope_policy(start, dst_node, "data")
        path, cost = self.route(policy, start, dst_node)
        return list(path), cost

    def find_path_to_pe(self, src_node: str, dst_pe: str) -> list[str]:
        """Return route of DMA data from ``src_node`` into ``dst_pe``'s DMA engine."""
        goal = nm.unit_of(dst_pe, "pe_dma")
        return list(self.route(scope_policy(src_node, goal, "data"), src_node, goal)[0])

    def find_mcpu_dma_path(self, m_cpu_id: str, dst_node: str) -> list[str]:
        return list(self.route(scope_policy(m_cpu_id, dst_node, "memory"), m_cpu_id, dst_node)[0])

    def find_memory_path(self, src: str, dst: str) -> list[str]:
        """Host/IO memory path that never enters a PE pipeline."""
        return list(self.route("memory", src, dst)[0])

    def find_node_path(self, src: str, dst: str) -> list[str]:
        """Any-kind route, command links included."""
        return list(self.route("all", src, dst)[0])

    def route(self, policy: str, src: str, dst: str) -> tuple[tuple[str, ...], float]:
        """Cached (path, head latency in ns) under ``policy``."""
        key = (policy, src, dst)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._path(policy, src, dst)
        return hit

    def route_to(self, policy: str, src: str, dst: str) -> tuple[tuple[str, ...], float]:
        """:meth:`route` searched backwards from ``dst``: the same latency, found at the
        cost of one search per destination when many sources share it (every
        CUBE's M_CPU reporting to its IO CPU). Equal-latency ties may pick another
        of the equally short routes."""
        key = ("to", policy, src, dst)
        hit = self._cache.get(key)
        if hit is None:
            for node in (src, dst):
                if node not in self._nodes:
                    raise RoutingError(f"node {node} not found in topology")
            if src == dst:
                hit = ((src,), 0.0)
            else:
                found = self._chain(self._rtrees, self._backward_edges(policy), policy, dst, src)
                if found is None:
                    raise RoutingError(f"no path from {src} to {dst} (policy {policy!r})")
                hit = (tuple(found[0]), found[1])
            self._cache[key] = hit
        return hit

    def _forward_edges(self, policy: str) -> Edges:
        edges = self._forward.get(policy)
        if edges is None:
            edges = self._forward[policy] = Edges(self._wires[0], POLICIES[policy], self._group)
        return edges

    def _backward_edges(self, policy: str) -> Edges:
        edges = self._backward.get(policy)
        if edges is None:
            edges = self._backward[policy] = Edges(self._wires[1], POLICIES[policy],
                                                   self._group, self._forward_edges(policy))
        return edges

    # -- internals -------------------------------------------------------------
    def _path(self, policy: str, start: str, goal: str) -> tuple[tuple[str, ...], float]:
        if policy not in POLICIES:
            raise RoutingError(f"unknown routing policy {policy!r} (allowed: {', '.join(POLICIES)})")
        for node in (start, goal):
            if node not in self._nodes:
                raise RoutingError(f"node {node} not found in topology")
        if start == goal:
            return (start,), 0.0
        found = self._chain(self._trees, self._forward_edges(policy), policy, start, goal)
        if found is None:
            raise RoutingError(f"no path from {start} to {goal} (policy {policy!r})")
        return tuple(reversed(found[0])), found[1]

    def _chain(self, trees: dict[tuple[str, str], _Search], edges: Edges, policy: str,
               origin: str, target: str) -> tuple[list[str], float] | None:
        """The nodes from ``target`` back to ``origin`` of a shortest route found by a
        search grown from ``origin`` over ``edges``, and its length (None: unreachable).
        The search skips other nodes' spurs; a target inside one is reached through its
        attachment, then by a search inside it started at the attachment's distance."""
        group = self._group.get(target)
        if group is None or group == self._group.get(origin):
            best, links = self._grown(trees, edges, policy, origin, target)
            if target not in best:
                return None
            chain, dist = [target], best[target]
        else:
            attachment = self._spurs.attachment[group]
            best, links = self._grown(trees, edges, policy, origin, attachment)
            if attachment not in best:
                return None
            inside = spurs.edges_of(edges, self._spurs, group, leaving=False)
            inner, back = _grow(_Search(attachment, best[attachment], inside), None, target)
            if target not in inner:
                return None
            chain, dist = [target], inner[target]
            while chain[-1] != attachment:
                chain.append(back[chain[-1]])
        while chain[-1] != origin:
            chain.append(links[chain[-1]])
        return chain, dist

    def _grown(self, trees: dict[tuple[str, str], _Search], edges: Edges, policy: str,
               origin: str, target: str) -> tuple[dict[str, float], dict[str, str]]:
        """The search from ``origin`` over ``edges`` without other nodes' spurs, grown
        only until ``target`` is settled.

        The search state is kept per origin and resumed for the next target, so a
        route costs what reaching its target costs (neighbours are found at once on
        a 12 k-node system), and every route is the one a full Dijkstra gives:
        settled nodes are final, and ties break by insertion order either way.
        """
        key = (policy, origin)
        state = trees.get(key)
        if state is None:
            group = self._group.get(origin)
            local = None if group is None else spurs.edges_of(edges, self._spurs, group,
                                                               leaving=True)
            state = trees[key] = _Search(origin, 0.0, local)
        return _grow(state, edges, target)
