"""The analytic fabric against the packet-level reference, on the same flows.

Probe flows run alone at several sizes (``alone-<flow>``, one batch), and
contended scenarios start their flows together (``probes.fabric_accuracy``
builds them; the torus2d row step runs on its own mesh topology), and once
more on the analytic fabric with links booked FIFO, the stated alternative to
interleaving. The reference is the truth. Wall times are not recorded (a record must not depend
on the machine); the cost shows as packets simulated against flows.
"""

from __future__ import annotations

from kernbench.errors import ConfigError
from kernbench.probes import fabric_accuracy as fa
from kernbench.probes.catalog import find_case, select_flows
from kernbench.topology import load_topology
from kernbench.topology.graph import TopologyGraph
from kernbench.topology.spec import TopologySpec
from kernbench.units import format_size, parse_size

REFERENCE = "packet"
ALTERNATIVE = "fifo"  # the sharing model the contended scenarios also run under


def workloads(block: dict, spec: TopologySpec, source: str, key: str) -> list[tuple[str, dict]]:
    flows = select_flows(spec, block["flows"], source, f"{key}.flows")
    for i, name in enumerate(block["scenarios"]):
        if name not in fa.SCENARIOS:
            raise ConfigError(source, f"{key}.scenarios[{i}]",
                              f"unknown scenario {name!r} (allowed: {', '.join(fa.SCENARIOS)})")
    common = {"packet_bytes": int(block["packet_bytes"])}
    sizes = sorted(parse_size(s) for s in block["sizes"])
    contended = parse_size(block["contended_bytes"])
    out = [(f"alone-{flow}", {"kind": "alone", "flow": flow, "sizes": sizes, **common})
           for flow in flows]
    out += [(name, {"kind": "contended", "scenario": name, "nbytes": contended, **common})
            for name in block["scenarios"]]
    return out


def _row(scenario: str, metric: str, analytic: float, reference: float, **extra) -> dict:
    return {"reference": REFERENCE, "scenario": scenario, "metric": metric,
            "simulated": analytic, "reference_value": reference,
            "rel_err": fa.rel_err(analytic, reference), **extra}


def run_alone(graph: TopologyGraph, workload: dict) -> dict:
    """One probe flow alone at every size, on both models."""
    case = find_case(graph.spec, workload["flow"])
    builder = fa.builder(graph)
    rows, packets = [], 0
    for nbytes in workload["sizes"]:
        flow = case.flow(builder, nbytes)
        (analytic,) = fa.run_analytic(graph, [flow]).completions
        ref = fa.run_reference(graph, [flow], workload["packet_bytes"])
        (reference,) = ref.completions
        packets += ref.packets
        rows.append(_row(f"alone/{case.name}/{format_size(nbytes)}", "completion_ns", analytic,
                         reference, kind="alone", flows=1, nbytes=nbytes, category=case.category))
    return {
        "metrics": {"rows": rows, "max_rel_error": max(r["rel_err"] for r in rows)},
        "prediction": {"model": f"packet-level reference, {workload['packet_bytes']} B packets",
                       "rel_error": max(r["rel_err"] for r in rows)},
        "op_counts": {"analytic_flows": len(rows), "reference_packets": packets},
        "labels": {"kind": "alone", "name": case.name, "category": case.category},
    }


def _under(graph: TopologyGraph, sharing: str, scenario) -> tuple[float, float]:
    """(makespan, mean completion) of the scenario's flows on the analytic fabric with
    links shared under ``sharing`` (the same topology otherwise)."""
    other = load_topology(graph.spec.source, {"fabric.sharing": sharing})
    done = fa.run_analytic(fa.scenario_graph(other, scenario.name), scenario.flows).completions
    return max(done), sum(done) / len(done)


def run_contended(graph: TopologyGraph, workload: dict) -> dict:
    """One contended scenario on both models: makespan, mean completion and the flow
    whose own completion differs most, and the first two under the stated
    alternative, whole transfers booked in turn (``fifo``)."""
    sc = fa.scenario(graph, workload["scenario"], int(workload["nbytes"]))
    acc = fa.compare(graph, sc, packet_bytes=workload["packet_bytes"])
    extra = {"kind": "contended", "flows": acc.flows, "nbytes": int(workload["nbytes"]),
             "shared_links": acc.shared_links, "sharing": graph.spec.sharing}
    fifo_makespan, fifo_mean = _under(graph, ALTERNATIVE, sc)
    alt = {**extra, "sharing": ALTERNATIVE}
    rows = [_row(sc.name, "makespan_ns", acc.analytic_makespan_ns, acc.reference_makespan_ns,
                 **extra),
            _row(sc.name, "mean_completion_ns", acc.analytic_mean_completion_ns,
                 acc.reference_mean_completion_ns, **extra),
            _row(sc.name, "worst_flow_completion_ns", acc.worst_flow_analytic_ns,
                 acc.worst_flow_reference_ns, flow=acc.worst_flow, **extra),
            _row(sc.name, f"makespan_ns/{ALTERNATIVE}", fifo_makespan,
                 acc.reference_makespan_ns, **alt),
            _row(sc.name, f"mean_completion_ns/{ALTERNATIVE}", fifo_mean,
                 acc.reference_mean_completion_ns, **alt)]
    return {
        "metrics": {"rows": rows, "max_rel_error": max(r["rel_err"] for r in rows)},
        "prediction": {"model": f"packet-level reference, {workload['packet_bytes']} B packets",
                       "rel_error": acc.makespan_rel_err},
        "op_counts": {"analytic_flows": acc.flows, "reference_packets": acc.reference_packets},
        "labels": {"kind": "contended", "name": sc.name, "description": sc.description},
    }
