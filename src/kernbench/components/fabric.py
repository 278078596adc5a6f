"""The fabric: per-edge occupancy and the analytic timing of one transfer.

A transfer is computed in one pass along its route, never with per-hop events
(docs/adr/0001-analytic-transfer-timing.md):

* the head pays each node's overhead and each edge's wire delay (a leg that
  continues another, e.g. data returning from the memory the request reached,
  does not pay its first node again);
* each edge is booked for ``nbytes / edge_bw`` starting when the head reaches
  it; if the edge is busy the head waits, and the wait carries downstream;
* an HBM end point books its pseudo-channels the same way;
* the tail arrives ``nbytes / bottleneck_bw`` after the head (drain), where the
  bottleneck is the slowest edge or the busiest pseudo-channel.

With no competing traffic a transfer therefore takes exactly
``sum(overheads) + sum(wires) + drain``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from kernbench.components.builtin.hbm_ctrl import HbmController
from kernbench.components.busy_timeline import BusyTimeline
from kernbench.topology.graph import TopologyGraph


@dataclass(frozen=True, slots=True)
class RoutePlan:
    """A route with everything timing needs precomputed (cached per node sequence)."""

    nodes: tuple[str, ...]
    overheads: tuple[float, ...]
    timelines: tuple[BusyTimeline, ...]
    bws: tuple[float, ...]
    wires: tuple[float, ...]
    overhead_ns: float
    wire_ns: float
    bottleneck_gbs: float
    bottleneck_edge: tuple[str, str] | None
    steps: tuple[tuple[float, BusyTimeline, float, float], ...]  # per hop: (ovh, tl, bw, wire);
    # the first hop's overhead is 0.0 there, because it is paid (or not) before the loop
    head_ns: float  # what a zero-byte head adds after its first node (wires and later nodes)

    @property
    def hops(self) -> int:
        return len(self.wires)


class RouteShape(NamedTuple):
    """What a route's plan takes from the graph, one lookup per node and edge: the same
    for every engine on the graph, so built once per graph and shared (the points of a
    batch, an all-to-all's message sizes); each engine adds its own timelines."""

    edges: tuple[tuple[str, str], ...]  # (src, dst) of each hop
    overheads: tuple[float, ...]  # per node
    bws: tuple[float, ...]  # per edge, as wires
    wires: tuple[float, ...]
    bottleneck: tuple[float, tuple[str, str] | None]  # (bandwidth, edge); (inf, None) alone


def route_shape(graph: TopologyGraph, nodes: tuple[str, ...]) -> RouteShape:
    """The graph's part of the plan of the route through ``nodes``."""
    node_of, edge_of = graph.nodes, graph.edge_map
    edges = [edge_of[hop] for hop in zip(nodes, nodes[1:], strict=False)]
    bn_edge = min(edges, key=_bandwidth) if edges else None
    return RouteShape(
        tuple([(e.src, e.dst) for e in edges]),
        tuple([node_of[n].overhead_ns for n in nodes]),
        tuple([e.bw_gbs for e in edges]),
        tuple([e.wire_ns for e in edges]),
        (bn_edge.bw_gbs, (bn_edge.src, bn_edge.dst)) if bn_edge else (float("inf"), None),
    )


class IpcqRoute(NamedTuple):
    """A route as the IPCQ virtual channel books it: per hop (overhead, IPCQ timeline,
    bulk timeline, bandwidth, wire)."""

    plan: RoutePlan
    steps: tuple
    first_ns: float  # the first node's overhead
    last_ns: float  # the last node's overhead (0 for a one-node route)
    bottleneck_gbs: float
    head_ns: float  # a zero-byte message: every overhead and wire


class LegTiming(NamedTuple):
    """Timing of one leg: waits, drain and end; per-node head times on request."""

    plan: RoutePlan
    nbytes: int
    overhead_ns: float  # node overheads this leg paid
    start_ns: float
    continues: bool
    waited: tuple[tuple[int, float], ...]  # (hop index, head time after waiting there)
    wait_ns: float  # queueing behind other traffic (edges + channels)
    drain_ns: float
    end_ns: float
    bottleneck_gbs: float  # slowest of edges and HBM channels for this leg

    @property
    def hop_ns(self) -> tuple[float, ...]:
        """Time each node finished handling the head (replays the booking's sums)."""
        plan = self.plan
        after = dict(self.waited)
        t = self.start_ns
        out = []
        for i, wire in enumerate(plan.wires):
            if i or not self.continues:
                t += plan.overheads[i]
            out.append(t)
            t = after.get(i, t)
            t += wire
        t += plan.overheads[-1]
        out.append(t)
        return tuple(out)


def _bandwidth(edge) -> float:
    return edge.bw_gbs


def _once_per_route(by_id: dict, by_value: dict, nodes: tuple[str, ...],
                    build: Callable[[tuple[str, ...]], Any]) -> Any:
    """``build(nodes)`` once per route: looked up by the tuple's identity first (flow
    builders hand out the same tuple for the same route), then by its value. The
    identity entry keeps the tuple alive, so its id cannot be reused meanwhile."""
    hit = by_id.get(id(nodes))
    if hit is not None and hit[0] is nodes:
        return hit[1]
    value = by_value.get(nodes)
    if value is None:
        value = by_value[nodes] = build(nodes)
    by_id[id(nodes)] = (nodes, value)
    return value


class Fabric:
    """Owns every edge's busy timeline and every HBM controller."""

    def __init__(self, graph: TopologyGraph, shapes: dict | None = None) -> None:
        self.graph = graph
        # route shapes by node sequence: the graph's part of each plan, shared by the
        # engines of one graph when the caller hands the same dict to each
        self._shapes: dict[tuple[str, ...], RouteShape] = {} if shapes is None else shapes
        self._timelines: dict[tuple[str, str], BusyTimeline] = {}
        self._ipcq_timelines: dict[tuple[str, str], BusyTimeline] = {}
        self._plans: dict[tuple[str, ...], RoutePlan] = {}
        self._by_id: dict[int, tuple[tuple[str, ...], RoutePlan]] = {}
        self._ipcq_routes: dict[tuple[str, ...], IpcqRoute] = {}
        self._ipcq_by_id: dict[int, tuple[tuple[str, ...], IpcqRoute]] = {}
        spec = graph.spec
        self.hbm: dict[str, HbmController] = {
            n.id: HbmController(n.id, spec.channels_per_slice, spec.hbm.pseudo_channel_bw_gbs,
                                spec.hbm.interleave_bytes)
            for n in graph.nodes.values() if n.kind == "hbm_ctrl"
        }

    def timeline(self, src: str, dst: str) -> BusyTimeline:
        return self._timeline_of((src, dst))

    def _timeline_of(self, key: tuple[str, str]) -> BusyTimeline:
        """The busy timeline of edge ``key`` = (src, dst), made on first use."""
        tl = self._timelines.get(key)
        if tl is None:
            tl = self._timelines[key] = BusyTimeline()
        return tl

    def plan(self, nodes: tuple[str, ...]) -> RoutePlan:
        """Precompute a route's overheads, wires, bandwidths and timelines (cached).

        Flow builders hand out the same node tuple for the same route, so the
        cache is consulted by identity first and by value second.
        """
        return _once_per_route(self._by_id, self._plans, nodes, self._build_plan)

    def _build_plan(self, nodes: tuple[str, ...]) -> RoutePlan:
        """The route's shape (built once per graph) with this engine's timelines.
        (A direct all-to-all builds one per pair of ranks, so this is kept lean.)"""
        shape = self._shapes.get(nodes)
        if shape is None:
            shape = self._shapes[nodes] = route_shape(self.graph, nodes)
        timeline_of = self._timeline_of
        tls = tuple([timeline_of(key) for key in shape.edges])
        overheads, bws, wires = shape.overheads, shape.bws, shape.wires
        wire_ns = sum(wires, 0.0)
        return RoutePlan(
            nodes=nodes,
            overheads=overheads,
            timelines=tls,
            bws=bws,
            wires=wires,
            overhead_ns=sum(overheads, 0.0),
            wire_ns=wire_ns,
            bottleneck_gbs=shape.bottleneck[0],
            bottleneck_edge=shape.bottleneck[1],
            steps=tuple(zip((0.0, *overheads[1:-1]), tls, bws, wires, strict=True)),
            head_ns=wire_ns + sum(overheads[1:], 0.0),
        )

    def book(self, plan: RoutePlan, nbytes: int, start: float, now: float,
             hbm: HbmController | None = None, hbm_offset: int = 0, hbm_at_start: bool = False,
             continues: bool = False) -> tuple[float, float, float, float, tuple]:
        """Book the leg's resources from ``start``; return (end, wait, drain, bottleneck,
        waited hops). This is the simulator's hot path: one pass, no objects per hop."""
        wires = plan.wires
        if not wires:  # a one-node route: its node is paid, nothing is crossed
            return self._one_node(plan, nbytes, start, now, hbm, hbm_offset, hbm_at_start)
        t = start
        if not continues:
            t += plan.overheads[0]
        if not nbytes:  # a command: head only, no occupancy
            return t + plan.head_ns, 0.0, 0.0, plan.bottleneck_gbs, ()
        wait = 0.0
        channel_ns = 0.0
        waited: tuple = ()
        if hbm is not None and hbm_at_start:  # a read: the slice serves first
            delay, channel_ns = hbm.reserve(t, hbm_offset, nbytes, now)
            if delay:
                t += delay
                wait += delay
                waited = ((0, t),)
        i = -1
        for ovh, tl, bw, wire in plan.steps:
            i += 1
            t += ovh
            s = tl.book(t, nbytes / bw, now)
            if s > t:
                wait += s - t
                t = s
                waited += ((i, t),)
            t += wire
        t += plan.overheads[-1]
        if hbm is not None and not hbm_at_start:  # a write: the slice serves last
            delay, channel_ns = hbm.reserve(t, hbm_offset, nbytes, now)
            t += delay
            wait += delay
        drain = nbytes / plan.bottleneck_gbs
        if channel_ns > drain:
            drain = channel_ns
        return t + drain, wait, drain, nbytes / drain if drain > 0 else plan.bottleneck_gbs, waited

    @staticmethod
    def _one_node(plan: RoutePlan, nbytes: int, start: float, now: float,
                  hbm: HbmController | None, hbm_offset: int, hbm_at_start: bool):
        t = start + plan.overheads[0]
        wait = channel_ns = 0.0
        if hbm is not None and nbytes and not hbm_at_start:
            wait, channel_ns = hbm.reserve(t, hbm_offset, nbytes, now)
            t += wait
        drain = max(nbytes / plan.bottleneck_gbs if nbytes else 0.0, channel_ns)
        bn = nbytes / drain if drain > 0 else plan.bottleneck_gbs
        return t + drain, wait, drain, bn, ()

    def run_leg(self, plan: RoutePlan, nbytes: int, start: float, now: float,
                hbm: HbmController | None = None, hbm_offset: int = 0,
                hbm_at_start: bool = False, continues: bool = False) -> LegTiming:
        """:meth:`book`, returned as a :class:`LegTiming` (for results and reports)."""
        end, wait, drain, bn, waited = self.book(plan, nbytes, start, now, hbm, hbm_offset,
                                                 hbm_at_start, continues)
        paid = plan.overhead_ns - (plan.overheads[0] if continues else 0.0)
        return LegTiming(plan, nbytes, paid, start, continues, waited, wait, drain, end, bn)

    def ipcq_route(self, nodes: tuple[str, ...]) -> IpcqRoute:
        """The IPCQ booking plan of a route, cached as :meth:`plan` caches its plan (every
        message of a queue books the same one)."""
        return _once_per_route(self._ipcq_by_id, self._ipcq_routes, nodes,
                               self._build_ipcq_route)

    def _build_ipcq_route(self, nodes: tuple[str, ...]) -> IpcqRoute:
        plan = self.plan(nodes)
        vcs = tuple(self._ipcq_timeline(a, b) for a, b in zip(nodes, nodes[1:], strict=False))
        steps = tuple((ovh, vc, bulk, bw, wire)
                      for (ovh, bulk, bw, wire), vc in zip(plan.steps, vcs, strict=True))
        return IpcqRoute(plan, steps, plan.overheads[0], plan.overheads[-1] if steps else 0.0,
                         plan.bottleneck_gbs, plan.overheads[0] + plan.head_ns)

    @staticmethod
    def book_ipcq(route: IpcqRoute, nbytes: int, start: float, now: float) -> float:
        """Book an IPCQ message on its own virtual channel; return its arrival time.

        Each edge has a second timeline for IPCQ traffic, so a message queues only
        behind other messages, never behind bulk DMA (strict priority for IPCQ at
        packet granularity). The physical link is still shared: the message's link
        time is also booked on the bulk timeline at its first free gap, so bulk
        transfers booked later are delayed by exactly the bytes IPCQ took
        (docs/adr/0023-ipcq-virtual-channel.md). Unloaded, the time equals
        :meth:`book`'s: overheads + wires + drain; a zero-byte message (a credit)
        occupies nothing and takes ``route.head_ns``.
        """
        if not nbytes:
            return start + route.head_ns
        t = start + route.first_ns
        for ovh, vc, bulk, bw, wire in route.steps:
            t += ovh
            d = nbytes / bw
            t = vc.book(t, d, now)
            bulk.book(t, d, now)  # bulk traffic yields the link for d at its next gap
            t += wire
        return t + route.last_ns + nbytes / route.bottleneck_gbs

    def carry(self, plan: RoutePlan, nbytes: int, vc: str = "bulk") -> None:
        """Count ``nbytes`` on every link of ``plan`` for utilisation reports, without
        booking it (fair sharing times transfers itself)."""
        for tl, bw in zip(plan.timelines, plan.bws, strict=True):
            tl.busy_ns += nbytes / bw
        if vc == "ipcq":
            for a, b, bw in zip(plan.nodes, plan.nodes[1:], plan.bws, strict=False):
                self._ipcq_timeline(a, b).busy_ns += nbytes / bw

    def _ipcq_timeline(self, src: str, dst: str) -> BusyTimeline:
        key = (src, dst)
        tl = self._ipcq_timelines.get(key)
        if tl is None:
            tl = self._ipcq_timelines[key] = BusyTimeline()
        return tl

    def ipcq_busy_ns(self) -> dict[tuple[str, str], float]:
        """Booked IPCQ time per edge (the virtual channel's share of each link)."""
        return {k: v.busy_ns for k, v in sorted(self._ipcq_timelines.items()) if v.busy_ns}

    def link_busy_ns(self) -> dict[tuple[str, str], float]:
        """Total booked time per edge that carried traffic (sorted for determinism)."""
        return {k: v.busy_ns for k, v in sorted(self._timelines.items()) if v.busy_ns}
