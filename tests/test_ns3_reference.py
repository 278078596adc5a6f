"""Store-and-forward packet reference against hand formulas, and against ns-3 (slow).

A lone flow of N equal packets through store-and-forward links is a tandem of
deterministic servers: its last packet arrives after the first node's
overhead, each hop's serialisation, wire and entered-node overhead, plus
N - 1 packet times of the slowest link. The expected values below are built
from the graph's edges with that formula, never from the reference itself.
"""

from __future__ import annotations

import pytest

from kernbench.components.flows import FlowSpec, LegSpec
from kernbench.references import ns3
from kernbench.sim_engine.packet_reference import PacketReference

EXACT = 1e-9


def run(graph, flows, **kw) -> list[float]:
    ref = PacketReference(graph, **kw)
    events = [ref.submit(f) for f in flows]
    ref.run()
    return [ev.value for ev in events]


def one_flow(graph, name: str) -> FlowSpec:
    (flow,) = ns3.scenario_flows(graph, name, nbytes=16 * 1024).values()
    return flow


def store_and_forward_ns(graph, nodes, packets: int, wire_bytes: int) -> float:
    hops = [graph.edge(a, b) for a, b in zip(nodes, nodes[1:], strict=False)]
    per_hop = sum(wire_bytes / e.bw_gbs + e.wire_ns + graph.nodes[e.dst].overhead_ns
                  for e in hops)
    slowest = min(e.bw_gbs for e in hops)
    return graph.nodes[nodes[0]].overhead_ns + per_hop + (packets - 1) * wire_bytes / slowest


@pytest.mark.parametrize("name", ["one-hop", "line-3"])
@pytest.mark.parametrize("header", [0, 30])
def test_store_and_forward_matches_the_tandem_formula(default_graph, name, header):
    flow = one_flow(default_graph, name)
    (done,) = run(default_graph, [flow], switching="store_and_forward", header_bytes=header)
    expected = store_and_forward_ns(default_graph, flow.legs[0].nodes, 64, 256 + header)
    assert done == pytest.approx(expected, rel=EXACT)


def test_equal_router_links_give_the_simple_formula(default_graph):
    """h hops of one bandwidth: overhead + h (P/bw + wire + overhead) + (N - 1) P/bw."""
    g = default_graph
    nodes = ns3.scenario_flows(g, "parking-lot")["r0c0-r0c3"].legs[0].nodes
    n, p = 10, 100 + 30
    flow = FlowSpec("p2p", nodes[0], 1000, (LegSpec("data", nodes, 1000),))
    (done,) = run(g, [flow], packet_bytes=100, switching="store_and_forward", header_bytes=30)
    bw = g.edge(nodes[0], nodes[1]).bw_gbs
    hops = sum(g.edge(a, b).wire_ns + g.nodes[b].overhead_ns
               for a, b in zip(nodes, nodes[1:], strict=False))
    first = g.nodes[nodes[0]].overhead_ns
    assert done == pytest.approx(first + 3 * p / bw + hops + (n - 1) * p / bw, rel=EXACT)


def test_cut_through_is_the_unchanged_default(default_graph):
    flow = one_flow(default_graph, "line-3")
    nodes = flow.legs[0].nodes
    hops = [default_graph.edge(a, b) for a, b in zip(nodes, nodes[1:], strict=False)]
    closed_form = (sum(default_graph.nodes[n].overhead_ns for n in nodes)
                   + sum(e.wire_ns for e in hops) + flow.nbytes / min(e.bw_gbs for e in hops))
    default = run(default_graph, [flow])
    assert default == run(default_graph, [flow], switching="cut_through", header_bytes=0)
    assert default[0] == pytest.approx(closed_form, rel=EXACT)
    assert run(default_graph, [flow], switching="store_and_forward")[0] > default[0]


@pytest.mark.parametrize("kw", [{"switching": "wormhole"}, {"header_bytes": -1},
                                {"header_bytes": 2.5}])
def test_bad_options_are_one_line_errors(default_graph, kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        PacketReference(default_graph, **kw)


def test_request_charges_a_hop_as_the_reference_does(default_graph):
    g = default_graph
    req = ns3.request(g, "line-3")
    (flow,) = req["flows"]
    path = flow["path"]
    assert flow["start_ns"] == g.nodes[path[0]].overhead_ns
    assert sum(flow["packets"]) == ns3.NBYTES and set(flow["packets"]) == {256}
    assert req["header_bytes"] == 30 and req["nodes"] == path
    for link, (a, b) in zip(req["links"], zip(path, path[1:], strict=False), strict=True):
        assert (link["src"], link["dst"]) == (a, b)
        assert link["delay_ns"] == g.edge(a, b).wire_ns + g.nodes[b].overhead_ns


def test_batched_run_splits_back_per_scenario(default_graph, monkeypatch):
    """Scenarios share one ns-3 run, offset in time; each answer is back at t = 0."""
    seen = {}

    def fake(request):
        seen.update(request)
        return {"completions_ns": {f["name"]: f["start_ns"] + 100.0 for f in request["flows"]},
                "packets": sum(len(f["packets"]) for f in request["flows"])}

    monkeypatch.setattr(ns3, "run_ns3", fake)
    answers = ns3.run_scenarios(default_graph)
    assert list(answers) == list(ns3.SCENARIOS)
    assert len({(link["src"], link["dst"]) for link in seen["links"]}) == len(seen["links"])
    for name, answer in answers.items():
        flows = ns3.scenario_flows(default_graph, name)
        assert answer["packets"] == 64 * len(flows)
        for fname, flow in flows.items():
            start = default_graph.nodes[flow.legs[0].nodes[0]].overhead_ns
            assert answer["completions_ns"][fname] == pytest.approx(start + 100.0, abs=1e-6)
        rows = ns3.compare(default_graph, name, answer)
        assert [r["metric"] for r in rows] == [f"completion_ns/{f}" for f in flows]
        assert all(r["scenario"] == name and r["rel_err"] > 0 for r in rows)


@pytest.mark.slow
def test_packet_reference_agrees_with_ns3(default_graph):
    answers = ns3.run_scenarios(default_graph)
    rows = [row for name in ns3.SCENARIOS
            for row in ns3.compare(default_graph, name, answers[name])]
    assert len(rows) == 7
    worst = max(rows, key=lambda r: r["rel_err"])
    assert worst["rel_err"] < 0.01, worst
