"""The ``transfer`` experiment: probe-catalog flows x sizes x concurrency.

Workload = one probe flow swept over every configured size (a point costs
milliseconds, so the flows of a topology also share one job: ``batch``); variant = how many
identical flows run at once over the same route (1 = lone flow, 2 = two-flow
contention). Each size runs on a fresh engine, so a point does not depend on the
sizes beside it. The analytic model is Ovhd + Wire + k x Drain
(``probes.formula``). Its tables, figures and values live in ``post.py``, its paper
text next to this file.
"""

from __future__ import annotations

import sys

from kernbench.errors import ConfigError
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
    """Workloads (one per flow, sweeping the sizes) and variants, as (id, params) pairs."""
    flows = select_flows(spec, block["flows"], source, f"experiments.{NAME}.flows")
    sizes = sorted(parse_size(s) for s in block["sizes"])
    for a, b in zip(sizes, sizes[1:], strict=False):
        if a == b:
            same = [s for s in block["sizes"] if parse_size(s) == a]
            raise ConfigError(source, f"experiments.{NAME}.sizes",
                              f"{' and '.join(map(str, same))} name the same size; "
                              f"remove the duplicate")
    workloads = [(flow, {"flow": flow, "sizes": sizes}) for flow in flows]
    variants = [(vid, dict(v)) for vid, v in block["variants"].items()]
    return workloads, variants


def batch(flow_id: str, workload: dict) -> str:
    """Every flow of a topology runs in one job per variant: a flow's whole size
    sweep simulates in milliseconds, a process start costs most of a second."""
    return "flows"


def _point(graph: TopologyGraph, case, nbytes: int, k: int) -> dict:
    """One size on a fresh engine: k identical flows started together."""
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
        "size_bytes": nbytes,
        "size": format_size(nbytes),
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
        "predicted_ns": model.latency_ns,
        "rel_error": abs(makespan - model.latency_ns) / model.latency_ns,
        "memory_ops": len(engine.op_log),
        "occupancy": [{"edge": f"{a}->{b}", "busy_ns": ns, "busy_pct": 100.0 * ns / makespan}
                      for (a, b), ns in top],
    }


def run(graph: TopologyGraph, workload: dict, variant: dict) -> dict:
    case = find_case(graph.spec, workload["flow"])
    k = int(variant["concurrent_flows"])
    points = [_point(graph, case, int(n), k) for n in workload["sizes"]]
    last = points[-1]
    return {
        "metrics": {"points": points, "latency_ns": last["latency_ns"]},
        "prediction": {
            "model": "Ovhd + Wire + k x Drain",
            "latency_ns": last["predicted_ns"],
            "rel_error": max(p["rel_error"] for p in points),
        },
        "op_counts": {"memory": sum(p["memory_ops"] for p in points), "flows": k,
                      "sizes": len(points)},
        "labels": {"flow": case.name, "category": case.category},
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
    batch=batch,
    files=package_files(sys.modules[__name__]),
))
