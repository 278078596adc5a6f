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

from dataclasses import dataclass

from kernbench.components.builtin.hbm_ctrl import HbmController
from kernbench.components.busy_timeline import BusyTimeline
from kernbench.topology.graph import TopologyGraph

PRUNE_AT = 16  # forget finished bookings once a link holds this many


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

    @property
    def hops(self) -> int:
        return len(self.wires)


@dataclass(frozen=True, slots=True)
class HbmEnd:
    """The HBM slice a leg reads from (``at_start``) or writes to."""

    ctrl: HbmController
    offset: int  # byte offset inside the slice
    at_start: bool


@dataclass(frozen=True, slots=True)
class LegTiming:
    """Timing of one leg: per-node head times, waits and the drain."""

    plan: RoutePlan
    nbytes: int
    overhead_ns: float  # node overheads this leg paid
    start_ns: float
    hop_ns: tuple[float, ...]  # time each node finished handling the head
    wait_ns: float  # queueing behind other traffic (edges + channels)
    drain_ns: float
    end_ns: float
    bottleneck_gbs: float  # slowest of edges and HBM channels for this leg


class Fabric:
    """Owns every edge's busy timeline and every HBM controller."""

    def __init__(self, graph: TopologyGraph) -> None:
        self.graph = graph
        self._timelines: dict[tuple[str, str], BusyTimeline] = {}
        self._plans: dict[tuple[str, ...], RoutePlan] = {}
        spec = graph.spec
        self.hbm: dict[str, HbmController] = {
            n.id: HbmController(n.id, spec.channels_per_slice, spec.hbm.pseudo_channel_bw_gbs,
                                spec.hbm.interleave_bytes)
            for n in graph.nodes.values() if n.kind == "hbm_ctrl"
        }

    def timeline(self, src: str, dst: str) -> BusyTimeline:
        key = (src, dst)
        tl = self._timelines.get(key)
        if tl is None:
            tl = self._timelines[key] = BusyTimeline()
        return tl

    def plan(self, nodes: tuple[str, ...]) -> RoutePlan:
        """Precompute a route's overheads, wires, bandwidths and timelines (cached)."""
        plan = self._plans.get(nodes)
        if plan is not None:
            return plan
        g = self.graph
        overheads = tuple(g.nodes[n].overhead_ns for n in nodes)
        edges = [g.edge(a, b) for a, b in zip(nodes, nodes[1:], strict=False)]
        bws = tuple(e.bw_gbs for e in edges)
        bn_edge = min(edges, key=lambda e: e.bw_gbs) if edges else None
        plan = RoutePlan(
            nodes=nodes,
            overheads=overheads,
            timelines=tuple(self.timeline(e.src, e.dst) for e in edges),
            bws=bws,
            wires=tuple(e.wire_ns for e in edges),
            overhead_ns=sum(overheads),
            wire_ns=sum(e.wire_ns for e in edges),
            bottleneck_gbs=bn_edge.bw_gbs if bn_edge else float("inf"),
            bottleneck_edge=(bn_edge.src, bn_edge.dst) if bn_edge else None,
        )
        self._plans[nodes] = plan
        return plan

    def run_leg(self, plan: RoutePlan, nbytes: int, start: float, now: float,
                hbm: HbmEnd | None = None, continues: bool = False) -> LegTiming:
        """Book the leg's resources from ``start`` and return its timing.

        This is the simulator's hot path, so the common case of booking a free
        link (the head arrives after its last booking ends) is inlined.
        """
        t = start
        wait = 0.0
        channel_ns = 0.0
        hop: list[float] = []
        timelines, bws, wires, overheads = plan.timelines, plan.bws, plan.wires, plan.overheads
        last = len(wires)
        read_hbm = hbm is not None and hbm.at_start and nbytes
        for i in range(last):
            if i or not continues:  # a continuation leg's first node was paid by the last leg
                t += overheads[i]
            hop.append(t)
            if read_hbm and i == 0:
                delay, channel_ns = hbm.ctrl.reserve(t, hbm.offset, nbytes, now)
                t += delay
                wait += delay
            if nbytes:
                tl = timelines[i]
                d = nbytes / bws[i]
                ends = tl.ends
                if not ends or t >= ends[-1]:
                    if ends and t == ends[-1]:
                        ends[-1] = t + d
                    else:
                        tl.starts.append(t)
                        ends.append(t + d)
                        if len(ends) > PRUNE_AT:
                            tl.prune(now)
                    tl.busy_ns += d
                    tl.bookings += 1
                else:
                    tl.prune(now)
                    s = tl.reserve(t, d)
                    if s > t:
                        wait += s - t
                        t = s
            t += wires[i]
        t += overheads[last]
        hop.append(t)
        if hbm is not None and nbytes and not hbm.at_start:
            delay, channel_ns = hbm.ctrl.reserve(t, hbm.offset, nbytes, now)
            t += delay
            wait += delay
        drain = nbytes / plan.bottleneck_gbs if nbytes else 0.0
        if channel_ns > drain:
            drain = channel_ns
        bn = nbytes / drain if drain > 0 else plan.bottleneck_gbs
        paid = plan.overhead_ns - (overheads[0] if continues else 0.0)
        return LegTiming(plan, nbytes, paid, start, tuple(hop), wait, drain, t + drain, bn)

    def link_busy_ns(self) -> dict[tuple[str, str], float]:
        """Total booked time per edge that carried traffic (sorted for determinism)."""
        return {k: v.busy_ns for k, v in sorted(self._timelines.items()) if v.bookings}
