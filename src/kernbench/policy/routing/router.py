"""``AddressResolver`` and ``PathRouter``: addresses to nodes, nodes to routes.

Routes minimise head latency: an edge weighs its wire delay plus the overhead
of the node it enters (docs/adr/0002-latency-weighted-routing.md). Four
adjacency lists select which edge kinds a routing intent may use; Dijkstra
breaks ties by insertion order, so a route is a pure function of the graph.
"""

from __future__ import annotations

import heapq

from kernbench.errors import RoutingError
from kernbench.policy.address.phys_addr import PhysAddr, UnitType
from kernbench.topology import naming as nm
from kernbench.topology.graph import TopologyGraph

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
        pa = PhysAddr.decode(addr) if isinstance(addr, int) else addr
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


_UNREACHED = float("inf")


class _Search:
    """A Dijkstra search from node ``origin`` (an index), grown on demand: the
    distances found (infinite until reached), each node's predecessor (-1 for none),
    the frontier heap, which nodes are settled and the push counter."""

    __slots__ = ("best", "prev", "heap", "done", "pushed")

    def __init__(self, origin: int, n: int) -> None:
        self.best: list[float] = [_UNREACHED] * n
        self.best[origin] = 0.0
        self.prev: list[int] = [-1] * n
        self.heap: list[tuple[float, int, int]] = [(0.0, 0, origin)]
        self.done: list[bool] = [False] * n
        self.pushed = 1


def _grow(state: _Search, adj: list[list[tuple[int, float]]], target: int) -> None:
    """Grow a search until node ``target`` is settled (or everything is; -1: grow it all).

    Settled nodes are final and ties break by insertion order (the push counter
    decides before the node index is ever compared), so a search grown in steps gives
    the routes one full run gives. ``prev`` points toward the origin (a backward
    search over reversed edges points toward its goal). Nodes are list indices, not
    names: on a 12 k-node system the searches were a twentieth of a decode step.
    """
    best, prev, heap, done = state.best, state.prev, state.heap, state.done
    if target >= 0 and done[target]:
        return
    pushed = state.pushed
    while heap:
        dist, _, node = heapq.heappop(heap)
        if done[node]:
            continue
        done[node] = True
        for nxt, weight in adj[node]:
            cand = dist + weight
            if cand < best[nxt]:
                best[nxt] = cand
                prev[nxt] = node
                heapq.heappush(heap, (cand, pushed, nxt))
                pushed += 1
        if node == target:
            break
    state.pushed = pushed  # target's distance is final once settled (or the heap ran dry)


class _Adjacency:
    """policy -> [[(next node, weight)] per node], by node index, each built the first
    time it is used; ``reversed(policy)`` turns the edges around (searches toward a
    goal), listing a node's incoming edges by source in order of each source's first
    edge, then by edge order."""

    def __init__(self, edges: list[tuple[int, int, str, float]], n: int) -> None:
        self._edges, self._n = edges, n
        self._built: dict[str, list[list[tuple[int, float]]]] = {}
        self._sources: dict[str, list[int]] = {}  # policy -> sources by first edge
        self._reversed: dict[str, list[list[tuple[int, float]]]] = {}

    def __getitem__(self, policy: str) -> list[list[tuple[int, float]]]:
        adj = self._built.get(policy)
        if adj is None:
            excluded = POLICIES[policy]
            adj = [[] for _ in range(self._n)]
            sources: list[int] = []
            for src, dst, kind, weight in self._edges:
                if kind not in excluded:
                    if not adj[src]:
                        sources.append(src)
                    adj[src].append((dst, weight))
            self._built[policy], self._sources[policy] = adj, sources
        return adj

    def reversed(self, policy: str) -> list[list[tuple[int, float]]]:
        radj = self._reversed.get(policy)
        if radj is None:
            adj = self[policy]
            radj = [[] for _ in range(self._n)]
            for a in self._sources[policy]:
                for b, weight in adj[a]:
                    radj[b].append((a, weight))
            self._reversed[policy] = radj
        return radj


class PathRouter:
    """Shortest head-latency paths under one of the edge-kind policies."""

    def __init__(self, graph: TopologyGraph) -> None:
        self._names: list[str] = list(graph.nodes)
        self._index: dict[str, int] = {name: i for i, name in enumerate(self._names)}
        index = self._index
        edges = [(index[e.src], index[e.dst], e.kind, e.wire_ns + graph.nodes[e.dst].overhead_ns)
                 for e in graph.edges]
        self._adj = _Adjacency(edges, len(self._names))  # per policy, built on first use
        self._cache: dict[tuple[str, ...], tuple[tuple[str, ...], float]] = {}
        self._trees: dict[tuple[str, int], _Search] = {}  # (policy, source) -> search state
        self._rtrees: dict[tuple[str, int], _Search] = {}  # (policy, goal) -> reverse search

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
            s, g = self._known(src), self._known(dst)
            if src == dst:
                hit = ((src,), 0.0)
            else:
                state = self._search(self._rtrees, self._adj.reversed(policy), g, s, policy)
                if state.best[s] == _UNREACHED:
                    raise RoutingError(f"no path from {src} to {dst} (policy {policy!r})")
                names, nxt, path = self._names, state.prev, [s]
                while path[-1] != g:
                    path.append(nxt[path[-1]])
                hit = (tuple(names[i] for i in path), state.best[s])
            self._cache[key] = hit
        return hit

    # -- internals -------------------------------------------------------------
    def _known(self, node: str) -> int:
        i = self._index.get(node)
        if i is None:
            raise RoutingError(f"node {node} not found in topology")
        return i

    def _path(self, policy: str, start: str, goal: str) -> tuple[tuple[str, ...], float]:
        if policy not in POLICIES:
            raise RoutingError(f"unknown routing policy {policy!r} (allowed: {', '.join(POLICIES)})")
        s, g = self._known(start), self._known(goal)
        if start == goal:
            return (start,), 0.0
        state = self._search(self._trees, self._adj[policy], s, g, policy)
        if state.best[g] == _UNREACHED:
            raise RoutingError(f"no path from {start} to {goal} (policy {policy!r})")
        prev, path = state.prev, [g]
        while path[-1] != s:
            path.append(prev[path[-1]])
        names = self._names
        return tuple(names[i] for i in reversed(path)), state.best[g]

    def _search(self, trees: dict[tuple[str, int], _Search],
                adj: list[list[tuple[int, float]]], origin: int, target: int,
                policy: str) -> _Search:
        """The search from ``origin`` under ``policy``, grown until ``target`` is settled.

        The search state is kept per origin and resumed for the next target, so a
        route costs what reaching its target costs (neighbours are found at once on
        a 12 k-node system), and every route is the one a full Dijkstra gives:
        settled nodes are final, and ties break by insertion order either way.
        """
        key = (policy, origin)
        state = trees.get(key)
        if state is None:
            state = trees[key] = _Search(origin, len(self._names))
        _grow(state, adj, target)
        return state
