"""The ``fabric_accuracy`` experiment: the analytic fabric against a packet-level reference.

Workloads are probe flows run alone at several sizes (``alone-<flow>``) and
contended scenarios (flows started together that share links or an HBM
slice); the variant sets the reference's packet size. Each point runs the
same FlowSpecs on the analytic engine and on ``PacketReference`` and records
both completion times, with the reference taken as the truth. Wall times are
not recorded (records must not depend on the machine); the cost is recorded
as what each model simulated (packets against flows). Its paper text is a
subsection of the platform section.
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
from kernbench.probes import fabric_accuracy as fa
from kernbench.probes.catalog import find_case, select_flows
from kernbench.sim_engine.packet_reference import PacketReference
from kernbench.topology.graph import TopologyGraph
from kernbench.topology.spec import TopologySpec
from kernbench.units import format_size, parse_size

NAME = "fabric_accuracy"


def expand(block: dict, spec: TopologySpec, source: str):
    flows = select_flows(spec, block["flows"], source, f"experiments.{NAME}.flows")
    for i, name in enumerate(block["scenarios"]):
        if name not in fa.SCENARIOS:
            raise ConfigError(source, f"experiments.{NAME}.scenarios[{i}]",
                              f"unknown scenario {name!r} (allowed: {', '.join(fa.SCENARIOS)})")
    sizes = [parse_size(s) for s in block["sizes"]]
    contended = parse_size(block["contended_bytes"])
    workloads = [(f"alone-{flow}", {"kind": "alone", "flow": flow, "sizes": sizes})
                 for flow in flows]
    workloads += [(name, {"kind": "contended", "scenario": name, "nbytes": contended})
                  for name in block["scenarios"]]
    variants = [(vid, dict(v)) for vid, v in block["variants"].items()]
    return workloads, variants


def _reference(graph: TopologyGraph, flows, packet_bytes: int) -> tuple[tuple[float, ...], int]:
    ref = PacketReference(graph, packet_bytes=packet_bytes)
    events = [ref.submit(f) for f in flows]
    ref.run()
    return tuple(ev.value for ev in events), ref.packets


def run(graph: TopologyGraph, workload: dict, variant: dict) -> dict:
    packet_bytes = int(variant["packet_bytes"])
    builder = fa.builder(graph)
    if workload["kind"] == "alone":
        case = find_case(graph.spec, workload["flow"])
        cases, packets = [], 0
        for nbytes in workload["sizes"]:
            flow = case.flow(builder, nbytes)
            (analytic,) = fa.run_analytic(graph, [flow]).completions
            (reference,), n = _reference(graph, [flow], packet_bytes)
            packets += n
            cases.append({"nbytes": nbytes, "size": format_size(nbytes), "analytic_ns": analytic,
                          "reference_ns": reference, "rel_error": fa.rel_err(analytic, reference)})
        worst = max(cases, key=lambda c: c["rel_error"])
        metrics = {"cases": cases, "max_rel_error": worst["rel_error"], "flows": 1,
                   "latency_ns": worst["analytic_ns"], "reference_ns": worst["reference_ns"]}
        labels = {"kind": "alone", "name": case.name, "category": case.category}
        flows_simulated = len(cases)
    else:
        sc = fa.scenario(graph, workload["scenario"], int(workload["nbytes"]))
        analytic = fa.run_analytic(graph, sc.flows).completions
        reference, packets = _reference(graph, sc.flows, packet_bytes)
        n = len(sc.flows)
        mean_a, mean_r = sum(analytic) / n, sum(reference) / n
        metrics = {"flows": n, "shared_links": sc.shared_links(), "nbytes": int(workload["nbytes"]),
                   "latency_ns": max(analytic), "reference_ns": max(reference),
                   "makespan_rel_error": fa.rel_err(max(analytic), max(reference)),
                   "mean_ns": mean_a, "reference_mean_ns": mean_r,
                   "mean_rel_error": fa.rel_err(mean_a, mean_r),
                   "completions_ns": list(analytic), "reference_completions_ns": list(reference)}
        labels = {"kind": "contended", "name": sc.name, "description": sc.description}
        flows_simulated = n
    return {
        "metrics": metrics,
        "prediction": {"model": f"packet-level reference, {packet_bytes} B packets (the truth)",
                       "latency_ns": metrics["reference_ns"],
                       "rel_error": metrics.get("max_rel_error",
                                                metrics.get("makespan_rel_error"))},
        "op_counts": {"analytic_flows": flows_simulated, "reference_packets": packets},
        "labels": labels,
    }


def batch(workload_id: str, workload: dict) -> str | None:
    """The lone flows share one job (each takes a fraction of a process start)."""
    return "alone-flows" if workload["kind"] == "alone" else None


register(Experiment(
    name=NAME,
    title="Accuracy of the analytic fabric",
    topic="the accuracy of the analytic fabric model",
    schema=package_schema(__name__),
    expand=expand,
    run=run,
    post=f"{__name__}.post",
    figures=("fabric_accuracy",),
    tables=("fabric_accuracy_table",),
    section=package_text(__name__, "section.tex"),
    part="platform",
    order=10,
    batch=batch,
    files=package_files(sys.modules[__name__]),
))
