"""The packet reference checked against ns-3 on four small scenarios.

The packet reference (``sim_engine/packet_reference.py``) is the yardstick of
the analytic fabric, so it is itself checked against an independent simulator.
Each scenario is a few hand-made FlowSpecs over real nodes and edges of a
topology graph (one data leg each, no HBM, so only links matter). It runs on
the reference in store-and-forward mode with the per-packet header ns-3 puts
on a UDP datagram over PPP, and on ns-3 through ``ns3_run.py`` in the
reference environment; every flow's completion is compared, ns-3 as truth.

How a hop is charged the same way in both: the reference pays a link's wire
delay and then the overhead of the node it enters; ns-3 has no per-node
latency, so a link's delay is ``wire_ns`` plus that overhead. The first node's
overhead, paid once before a flow's first packet leaves, becomes the flow's
start time on ns-3, so both report absolute completion times from t = 0.

Scenarios (``sip0``, CUBE 0 of the graph for the router ones):

* ``one-hop``: host -> PCIe switch;
* ``line-3``: host -> switch -> PCIe end point -> IO CPU (64, 64, 256 GB/s);
* ``bottleneck``: PE 1's DMA (256 GB/s) and router r1c1 (128 GB/s) both send
  through r0c1 -> r0c2, the one shared link;
* ``parking-lot``: r0c0 -> r0c3 along row 0, with one cross flow on each of
  the line's last two hops (three flows cannot share all three hops pairwise;
  the first hop is the long flow's own).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kernbench.components.flows import FlowSpec, LegSpec
from kernbench.errors import UsageError
from kernbench.references.environment import run_tool
from kernbench.sim_engine.packet_reference import PacketReference, packet_sizes
from kernbench.topology import load_topology
from kernbench.topology import naming as nm
from kernbench.topology.graph import TopologyGraph
from kernbench.units import KiB

SCENARIOS = ("one-hop", "line-3", "bottleneck", "parking-lot")
NBYTES = 16 * KiB  # per flow
PACKET_BYTES = 256
HEADER_BYTES = 2 + 20 + 8  # PPP + IPv4 + UDP, what ns-3 adds to every datagram
SPACING_NS = 1e6  # scenarios batched into one ns-3 run start this far apart
DEFAULT_TOPOLOGY = Path("config") / "topologies" / "default.yaml"


def default_graph(root: Path) -> TopologyGraph:
    """The default topology of the repository at ``root``."""
    return load_topology(Path(root) / DEFAULT_TOPOLOGY)


def run_ns3(request: dict) -> dict:
    """One ns-3 run (``ns3_run.py`` under the reference interpreter)."""
    return run_tool("ns3_run.py", "ns", request)


# -- scenarios -----------------------------------------------------------------------
def _flow(graph: TopologyGraph, nodes: tuple[str, ...], nbytes: int) -> FlowSpec:
    """A one-leg data flow along ``nodes``; every hop must be an edge of ``graph``."""
    for a, b in zip(nodes, nodes[1:], strict=False):
        if (a, b) not in graph.edge_map:
            raise UsageError(f"topology {graph.spec.name!r} has no link {a} -> {b}")
    leg = LegSpec("data", nodes, nbytes)
    return FlowSpec("p2p", nodes[0], nbytes, (leg,), nodes[0], nodes[-1])


def scenario_flows(graph: TopologyGraph, name: str,
                   nbytes: int = NBYTES) -> dict[str, FlowSpec]:
    """The flows of scenario ``name`` (all start at t = 0), by flow name."""
    r = {(row, col): nm.router(0, 0, row, col) for row in range(2) for col in range(4)}
    if name == "one-hop":
        paths = {"host-switch": (nm.HOST, nm.SWITCH)}
    elif name == "line-3":
        paths = {"host-io_cpu": (nm.HOST, nm.SWITCH, nm.io_node(0, "pcie_ep"),
                                 nm.io_node(0, "io_cpu"))}
    elif name == "bottleneck":
        paths = {"pe1-r0c2": (nm.pe_unit(0, 0, 1, "pe_dma"), r[0, 1], r[0, 2]),
                 "r1c1-r0c2": (r[1, 1], r[0, 1], r[0, 2])}
    elif name == "parking-lot":
        paths = {"r0c0-r0c3": (r[0, 0], r[0, 1], r[0, 2], r[0, 3]),
                 "r0c1-r0c2": (r[0, 1], r[0, 2]),
                 "r0c2-r0c3": (r[0, 2], r[0, 3])}
    else:
        raise UsageError(f"unknown ns-3 scenario {name!r} (known: {', '.join(SCENARIOS)})")
    return {flow: _flow(graph, nodes, nbytes) for flow, nodes in paths.items()}


# -- the two models ------------------------------------------------------------------
def _links(graph: TopologyGraph, flows: dict[str, FlowSpec]) -> dict[tuple[str, str], dict]:
    """Every directed link the flows use, with the delay the reference charges a hop."""
    links = {}
    for flow in flows.values():
        nodes = flow.legs[0].nodes
        for a, b in zip(nodes, nodes[1:], strict=False):
            edge = graph.edge(a, b)
            links[(a, b)] = {"src": a, "dst": b, "bw_gbs": edge.bw_gbs,
                             "delay_ns": edge.wire_ns + graph.nodes[b].overhead_ns}
    return links


def request(graph: TopologyGraph, name: str, nbytes: int = NBYTES,
            packet_bytes: int = PACKET_BYTES, header_bytes: int = HEADER_BYTES) -> dict:
    """Scenario ``name`` as an ``ns3_run.py`` request (start = first node's overhead)."""
    flows = scenario_flows(graph, name, nbytes)
    links = _links(graph, flows)
    nodes = list(dict.fromkeys(n for key in links for n in key))
    return {"nodes": nodes, "links": list(links.values()), "header_bytes": header_bytes,
            "flows": [{"name": fname, "path": list(f.legs[0].nodes),
                       "packets": packet_sizes(f.nbytes, packet_bytes),
                       "start_ns": graph.nodes[f.legs[0].nodes[0]].overhead_ns}
                      for fname, f in flows.items()]}


def packet_reference_completions(graph: TopologyGraph, name: str, nbytes: int = NBYTES,
                                 packet_bytes: int = PACKET_BYTES,
                                 header_bytes: int = HEADER_BYTES) -> dict[str, float]:
    """Completion (ns) of every flow of ``name`` on the store-and-forward reference."""
    ref = PacketReference(graph, packet_bytes=packet_bytes, switching="store_and_forward",
                          header_bytes=header_bytes)
    events = {fname: ref.submit(f) for fname, f in scenario_flows(graph, name, nbytes).items()}
    ref.run()
    return {fname: ev.value for fname, ev in events.items()}


def run_scenarios(graph: TopologyGraph, names: Sequence[str] = SCENARIOS, nbytes: int = NBYTES,
                  packet_bytes: int = PACKET_BYTES,
                  header_bytes: int = HEADER_BYTES) -> dict[str, dict]:
    """Every scenario in one ns-3 run (loading ns-3 costs seconds), one answer per scenario.

    Scenario ``k`` starts ``k x SPACING_NS`` later and its flows are renamed
    ``scenario/flow``; the scenarios share nodes but never overlap in time.
    """
    nodes: dict[str, None] = {}
    links: dict[tuple[str, str], dict] = {}
    flows = []
    for k, name in enumerate(names):
        one = request(graph, name, nbytes, packet_bytes, header_bytes)
        nodes.update(dict.fromkeys(one["nodes"]))
        links.update({(link["src"], link["dst"]): link for link in one["links"]})
        flows += [{**f, "name": f"{name}/{f['name']}", "start_ns": f["start_ns"] + k * SPACING_NS}
                  for f in one["flows"]]
    answer = run_ns3({"nodes": list(nodes), "links": list(links.values()), "flows": flows,
                      "header_bytes": header_bytes})
    out: dict[str, dict] = {}
    for k, name in enumerate(names):
        mine = {key.split("/", 1)[1]: ns - k * SPACING_NS
                for key, ns in answer["completions_ns"].items() if key.split("/", 1)[0] == name}
        if max(mine.values()) >= SPACING_NS:
            raise RuntimeError(f"scenario {name!r} ran into the next one's start")
        out[name] = {"completions_ns": mine,
                     "packets": sum(len(f["packets"]) for f in flows
                                    if f["name"].startswith(name + "/"))}
    return out


def compare(graph: TopologyGraph, name: str, ns3_answer: dict, nbytes: int = NBYTES,
            packet_bytes: int = PACKET_BYTES, header_bytes: int = HEADER_BYTES) -> list[dict]:
    """One row per flow: the reference's completion against ns-3's, ns-3 as truth."""
    ours = packet_reference_completions(graph, name, nbytes, packet_bytes, header_bytes)
    theirs = ns3_answer["completions_ns"]
    if set(ours) != set(theirs):
        raise ValueError(f"scenario {name!r}: ns-3 answered for {sorted(theirs)}, "
                         f"expected {sorted(ours)}")
    return [{"scenario": name, "metric": f"completion_ns/{flow}", "simulated": ours[flow],
             "reference_value": theirs[flow],
             "rel_err": abs(ours[flow] - theirs[flow]) / theirs[flow]}
            for flow in ours]
