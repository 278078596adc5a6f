"""The packet reference against ns-3: every flow's completion, ns-3 as the truth.

All scenarios share one ns-3 run (loading ns-3 takes seconds), so they are one
workload; ``references/ns3.py`` builds the flows and both sides of the check.
"""

from __future__ import annotations

from kernbench.errors import ConfigError
from kernbench.references import ns3
from kernbench.topology.graph import TopologyGraph
from kernbench.units import parse_size

REFERENCE = "ns-3"


def workloads(block: dict, source: str, key: str) -> list[tuple[str, dict]]:
    for i, name in enumerate(block["scenarios"]):
        if name not in ns3.SCENARIOS:
            raise ConfigError(source, f"{key}.scenarios[{i}]",
                              f"unknown scenario {name!r} (allowed: {', '.join(ns3.SCENARIOS)})")
    return [("ns3", {"kind": REFERENCE, "scenarios": list(block["scenarios"]),
                     "nbytes": parse_size(block["bytes"]),
                     "packet_bytes": int(block["packet_bytes"])})]


def run(graph: TopologyGraph, workload: dict) -> dict:
    nbytes, packet_bytes = workload["nbytes"], workload["packet_bytes"]
    answers = ns3.run_scenarios(graph, workload["scenarios"], nbytes, packet_bytes)
    rows = []
    for name in workload["scenarios"]:
        for row in ns3.compare(graph, name, answers[name], nbytes, packet_bytes):
            rows.append({"reference": REFERENCE, **row, "kind": "ns3", "nbytes": nbytes,
                         "flows": len(answers[name]["completions_ns"])})
    packets = sum(a["packets"] for a in answers.values())
    return {
        "metrics": {"rows": rows, "max_rel_error": max(r["rel_err"] for r in rows)},
        "prediction": {"model": f"ns-3 3.44, point-to-point links, {packet_bytes} B payload + "
                                f"{ns3.HEADER_BYTES} B headers, store-and-forward",
                       "rel_error": max(r["rel_err"] for r in rows)},
        "op_counts": {"flows": len(rows), "packets": packets},
        "labels": {"kind": REFERENCE, "scenarios": list(workload["scenarios"])},
    }
