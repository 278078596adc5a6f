"""The ``transfer`` experiment: probe-catalog flows x sizes x concurrency.

Workload = one probe flow at one size; variant = how many identical flows run
at once over the same route (1 = lone flow, 2 = two-flow contention). The
analytic model is Ovhd + Wire + k x Drain (``probes.formula``). Its tables,
figures and values live in ``post.py``, its paper text next to this file.
"""

from __future__ import annotations

import sys

from kernbench.experiments.registry import (
    Experiment,
    package_files,
    package_schema,
    package_text,
    register,
)
from kernbench.probes.catalog import find_case, select_flows
from kernbench.probes.formula import predict
from kernbench.sim_engine.engine import GraphEngine
from kernbench.topology.graph import TopologyGraph
from kernbench.topology.spec import TopologySpec
from kernbench.units import format_size, parse_size

NAME = "transfer"


def expand(block: dict, spec: TopologySpec, source: str) -> tuple[list[tuple[str, dict]],
                                                                  list[tuple[str, dict]]]:
    """Workloads (flow x size) and variants of one topology, as (id, params) pairs."""
    flows = select_flows(spec, block["flows"], source, f"experiments.{NAME}.flows")
    sizes = [parse_size(s) for s in block["sizes"]]
    workloads = [(f"{flow}_{format_size(n)}", {"flow": flow, "nbytes": n})
                 for flow in flows for n in sizes]
    variants = [(vid, dict(v)) for vid, v in block["variants"].items()]
    return workloads, variants


def run(graph: TopologyGraph, workload: dict, variant: dict) -> dict:
    case = find_case(graph.spec, workload["flow"])
    nbytes = int(workload["nbytes"])
    k = int(variant["concurrent_flows"])
    engine = GraphEngine(graph)
    flows = [case.flow(engine, nbytes, offset=i * nbytes) for i in range(k)]
    events = [engine.submit(f) for f in flows]
    engine.run()
    results = [ev.value for ev in events]
    makespan = max(r.done_ns for r in results) - min(r.issue_ns for r in results)
    model = predict(graph, flows[0], k)
    busy = engine.fabric.link_busy_ns()
    top = sorted(busy.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    return {
        "metrics": {
            "latency_ns": makespan,
            "per_flow_latency_ns": [r.total_ns for r in results],
            "eff_bw_gbs": k * nbytes / makespan,
            "overhead_ns": results[0].overhead_ns,
            "wire_ns": results[0].wire_ns,
            "drain_ns": results[0].drain_ns,
            "wait_ns": sum(r.wait_ns for r in results),
            "bottleneck_gbs": results[0].bottleneck_gbs,
            "hops": sum(len(leg.nodes) - 1 for leg in flows[0].legs),
            "util_pct": 100.0 * (k * nbytes / makespan) / results[0].bottleneck_gbs,
        },
        "prediction": {
            "model": "Ovhd + Wire + k x Drain",
            "latency_ns": model.latency_ns,
            "rel_error": abs(makespan - model.latency_ns) / model.latency_ns,
        },
        "op_counts": {"memory": len(engine.op_log), "flows": k},
        "occupancy": [{"edge": f"{a}->{b}", "busy_ns": ns, "busy_pct": 100.0 * ns / makespan}
                      for (a, b), ns in top],
        "labels": {"flow": case.name, "category": case.category, "size": format_size(nbytes)},
    }


register(Experiment(
    name=NAME,
    title="Characterising data movement",
    topic="the data-movement fabric",
    schema=package_schema(__name__),
    expand=expand,
    run=run,
    post=f"{__name__}.post",
    figures=("transfer_latency", "transfer_bandwidth"),
    tables=("transfer_table",),
    section=package_text(__name__, "section.tex"),
    abstract=package_text(__name__, "abstract.tex"),
    conclusion=package_text(__name__, "conclusion.tex"),
    order=10,
    files=package_files(sys.modules[__name__]),
))
