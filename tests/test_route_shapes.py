"""Route shapes: built once per graph and shared by its engines, never their bookings."""

from __future__ import annotations

import pytest

from kernbench.sim_engine import GraphEngine


def test_engines_on_one_graph_share_a_route_shape_but_book_their_own_links(default_graph):
    """A second engine on the graph reuses the route's shape (its overheads, wires and
    bandwidths, as the graph gives them) and books links of its own: a transfer the
    first engine booked leaves the second's copy of the route idle."""
    first, second = GraphEngine(default_graph), GraphEngine(default_graph)
    nodes = first.flows.pe_message((0, 0, 0), (0, 5, 3), 1).legs[0].nodes
    mine, theirs = first.fabric.plan(nodes), second.fabric.plan(nodes)
    assert mine.wires is theirs.wires  # one shape for both engines

    edges = [default_graph.edge(a, b) for a, b in zip(nodes, nodes[1:], strict=False)]
    assert len(edges) > 3
    assert mine.overhead_ns == pytest.approx(
        sum(default_graph.nodes[n].overhead_ns for n in nodes), rel=1e-12)
    assert mine.wire_ns == pytest.approx(sum(e.distance_mm * e.ns_per_mm for e in edges),
                                         rel=1e-12)
    assert mine.bottleneck_gbs == min(e.bw_gbs for e in edges)
    assert not any(a is b for a, b in zip(mine.timelines, theirs.timelines, strict=True))

    nbytes = 64 * 1024
    alone = mine.overhead_ns + mine.wire_ns + nbytes / mine.bottleneck_gbs
    first_end = first.fabric.book(mine, nbytes, 0.0, 0.0)[0]
    queued_end = first.fabric.book(mine, nbytes, 0.0, 0.0)[0]
    other_end = second.fabric.book(theirs, nbytes, 0.0, 0.0)[0]
    assert first_end == pytest.approx(alone, rel=1e-12)
    assert queued_end > first_end  # the first engine's links are busy now
    assert other_end == first_end  # the second engine's are not
