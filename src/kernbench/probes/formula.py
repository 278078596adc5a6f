"""Analytic latency of data-movement flows, from topology numbers alone.

A lone flow takes ``Ovhd + Wire + Drain``: the head pays every node's overhead
(once: a leg continuing the previous one does not pay its first node again)
and every wire, and the tail follows after ``nbytes / BN.BW``. ``k`` identical
flows issued together over the same route share its bottleneck, so the last
one finishes after ``Ovhd + Wire + k * Drain``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.components.flows import FlowSpec
from kernbench.topology.graph import TopologyGraph


@dataclass(frozen=True)
class TransferPrediction:
    overhead_ns: float
    wire_ns: float
    drain_ns: float  # one flow's drain
    bottleneck_gbs: float
    concurrent_flows: int

    @property
    def latency_ns(self) -> float:
        return self.overhead_ns + self.wire_ns + self.concurrent_flows * self.drain_ns


def predict(graph: TopologyGraph, flow: FlowSpec, concurrent_flows: int = 1) -> TransferPrediction:
    ovhd = wire = drain = 0.0
    bn_all = float("inf")
    slice_bw = graph.spec.slice_bw_gbs
    for leg in flow.legs:
        paid = leg.nodes[1:] if leg.continues else leg.nodes  # a continuation starts paid
        ovhd += sum(graph.nodes[n].overhead_ns for n in paid)
        edges = [graph.edge(a, b) for a, b in zip(leg.nodes, leg.nodes[1:], strict=False)]
        wire += sum(e.distance_mm * e.ns_per_mm for e in edges)
        if leg.nbytes:
            bn = min(e.bw_gbs for e in edges)
            if leg.hbm_node:
                bn = min(bn, slice_bw)
            drain += leg.nbytes / bn
            bn_all = min(bn_all, bn)
    return TransferPrediction(ovhd, wire, drain, bn_all, concurrent_flows)
