"""The ``allreduce`` experiment: all-reduce across CUBE meshes and SIP topologies.

Workloads per topology: one per algorithm x buffer kind (``ring-hbm``, ...),
each a size sweep run on one engine (the system is idle between sizes, so
every point times as it would alone; ``AllReduceSession``); ``pe2pe``, the
PE-to-PE latency table (IPCQ against raw DMA); ``reference``, the packet-level
reference on the ring's traffic pattern. The variant fixes the reduction op.
Each collective point reports latency, algbw and busbw (nccl-tests), the
alpha-beta prediction for the same algorithm and topology (``ccl.model``, all
terms from the topology file) with its relative error, op counts and the time
of every phase. The study is this package: its host driver (``run``), the
PE-to-PE table (``pe2pe``), the reference traffic (``traffic``), tables, figures
and values (``post``), the schema and the paper text.
"""

from __future__ import annotations

import sys

from kernbench.errors import ConfigError
from kernbench.experiments.allreduce import pe2pe, traffic
from kernbench.experiments.registry import (
    Experiment,
    package_files,
    package_schema,
    package_text,
    register,
)
from kernbench.topology.graph import TopologyGraph
from kernbench.topology.spec import TopologySpec
from kernbench.units import parse_size

NAME = "allreduce"
KEYS = ("ipcq_copy", "ipcq_send", "dma_read", "dma_write")


def sweep_sizes(block: dict, source: str) -> list[int]:
    lo, hi = parse_size(block["min"]), parse_size(block["max"])
    if lo & (lo - 1):
        raise ConfigError(source, f"experiments.{NAME}.sizes.min", f"{lo} is not a power of two")
    if hi < lo:
        raise ConfigError(source, f"experiments.{NAME}.sizes.max", f"{hi} is below min {lo}")
    out, s = [], lo
    while s <= hi:
        out.append(s)
        if block.get("between", True) and s * 3 // 2 <= hi and s >= 2:
            out.append(s * 3 // 2)
        s *= 2
    if out[-1] != hi:  # the largest size is always measured, on the grid or not
        out.append(hi)
    return out


def expand(block: dict, spec: TopologySpec, source: str):
    from kernbench.ccl import config as ccl_config

    known = ccl_config.configured_algorithms()
    for i, name in enumerate(block["algorithms"]):
        if name not in known:
            raise ConfigError(source, f"experiments.{NAME}.algorithms[{i}]",
                              f"unknown algorithm {name!r} (kernbench/ccl/ccl.yaml's "
                              f"all-reduce algorithms: {', '.join(sorted(known))})")
    sizes = sweep_sizes(block["sizes"], source)
    dtype = block.get("dtype", "f16")
    from kernbench.isa.dtypes import dtype_bytes

    for s in sizes:
        if s % dtype_bytes(dtype):
            raise ConfigError(source, f"experiments.{NAME}.sizes",
                              f"{s} B is not a whole number of {dtype} elements")
    buffers = block.get("buffers", {})
    kinds = buffers.get("kinds", ["hbm"]) if spec.name in _ids(block, buffers, spec) else ["hbm"]
    other_sizes = sizes
    if buffers.get("sizes"):
        other_sizes = [parse_size(x) for x in buffers["sizes"]]
        for i, x in enumerate(other_sizes):
            if x not in sizes:
                raise ConfigError(source, f"experiments.{NAME}.buffers.sizes[{i}]",
                                  f"{x} B is not one of the sweep's sizes")
    workloads = [(f"{a}-{k}", {"kind": "collective", "algorithm": a, "buffer": k,
                               "dtype": dtype, "sizes": sizes if k == "hbm" else other_sizes})
                 for a in block["algorithms"] for k in kinds]
    p2p = block.get("pe2pe", {})
    if spec.name in _ids(block, p2p, spec) and p2p.get("sizes"):
        if spec.sips.count < 2:
            raise ConfigError(source, f"experiments.{NAME}.pe2pe.on",
                              f"{spec.name} has one SIP; the table needs an inter-SIP pair")
        workloads.append(("pe2pe", {"kind": "pe2pe",
                                    "sizes": [parse_size(s) for s in p2p["sizes"]]}))
    ref = block.get("reference", {})
    workloads.append(("reference", {"kind": "reference",
                                    "chunk_bytes": int(ref.get("chunk_bytes", 1024)),
                                    "packet_bytes": int(ref.get("packet_bytes", 256))}))
    return workloads, [("sum", {"op": "sum"})]


def _ids(block: dict, sub: dict, spec: TopologySpec) -> set[str]:
    """Topology names a sub-block applies to (config ids are matched by the topology's
    own name as well, so `on` may list either)."""
    return set(sub.get("on", []))


def run(graph: TopologyGraph, workload: dict, variant: dict) -> dict:
    spec = graph.spec
    labels = {"kind": workload["kind"], "sip_kind": spec.sips.topology, "sip_w": spec.sips.w,
              "sip_h": spec.sips.h, "cube_w": spec.cube_w, "cube_h": spec.cube_h,
              "sips": spec.sips.count}
    if workload["kind"] == "pe2pe":
        rows = pe2pe.measure(graph, workload["sizes"])
        worst = max(rows, key=lambda r: r["ipcq_ns"])
        return {"metrics": {"pairs": rows, "latency_ns": worst["ipcq_ns"]},
                "prediction": {"model": "unloaded route: overheads + wires + bytes / bottleneck",
                               "latency_ns": worst["predicted_ns"],
                               "rel_error": max(abs(r["message_ns"] - r["predicted_ns"])
                                                / r["predicted_ns"] for r in rows)},
                "op_counts": {"measurements": len(rows)}, "labels": labels}
    if workload["kind"] == "reference":
        m = traffic.row_step_accuracy(graph, workload["chunk_bytes"], workload["packet_bytes"])
        return {"metrics": m,
                "prediction": {"model": f"packet-level reference, {workload['packet_bytes']} B "
                                        f"packets (the truth)",
                               "latency_ns": m["reference_ns"],
                               "rel_error": m["makespan_rel_error"]},
                "op_counts": {"flows": m["flows"], "reference_packets": m["packets"]},
                "labels": labels}
    return _collective(graph, workload, variant, labels)


def _collective(graph, workload: dict, variant: dict, labels: dict) -> dict:
    from kernbench.ccl.model import Costs
    from kernbench.experiments.allreduce.run import AllReduceSession

    session = AllReduceSession(graph, workload["algorithm"], dtype=workload["dtype"],
                               buffer=workload["buffer"], op=variant["op"])
    backend = session.backend
    costs = Costs(session.engine, backend.cfg.ipcq.tier)
    links = [costs.alpha_beta(a, b) for a, table in sorted(backend.tables.items())
             for b in table.values()]
    points, counts = [], {}
    for size in workload["sizes"]:
        r = session.run(size)
        n = r.ranks
        factor = 2 * (n - 1) / n if n > 1 else 0.0
        points.append({
            "size": size, "count": r.count, "time_ns": r.time_ns,
            "predicted_ns": r.predicted_ns, "rel_error": r.rel_error,
            "algbw_gbs": r.algbw_gbs, "busbw_gbs": r.busbw_gbs,
            "predicted_busbw_gbs": size / r.predicted_ns * factor,
            "phases": {k: {"simulated_ns": a, "predicted_ns": b} for k, (a, b) in r.phases.items()},
            **{k: r.op_counts.get(k, 0) for k in KEYS},
        })
        for k, v in r.op_counts.items():
            counts[k] = counts.get(k, 0) + v
    last = points[-1]
    labels.update(algorithm=workload["algorithm"], buffer=workload["buffer"],
                  dtype=workload["dtype"], op=variant["op"], ranks=session.backend.group.size)
    return {
        "metrics": {"points": points, "latency_ns": last["time_ns"],
                    "link_bound_gbs": min(1.0 / beta for _, beta in links) if links else 0.0,
                    "max_alpha_ns": max(alpha for alpha, _ in links) if links else 0.0,
                    "phases": list(backend.algorithm.phases),
                    "queues": backend.queues, "slot_bytes": backend.cfg.ipcq.slot_bytes,
                    "slots": backend.cfg.ipcq.slots, "tier": backend.cfg.ipcq.tier},
        "prediction": {"model": "alpha-beta over the algorithm's program (ccl.model)",
                       "latency_ns": last["predicted_ns"],
                       "rel_error": max(abs(p["rel_error"]) for p in points)},
        "op_counts": dict(sorted(counts.items())),
        "labels": labels,
    }


register(Experiment(
    name=NAME,
    title="All-reduce acceleration via PE_IPCQ",
    topic="all-reduce over PE-to-PE queues on three SIP topologies",
    schema=package_schema(__name__),
    expand=expand,
    run=run,
    post=f"{__name__}.post",
    figures=("allreduce_latency", "allreduce_busbw", "allreduce_buffers", "allreduce_pe2pe",
             "allreduce_topologies", "allreduce_phases"),
    tables=("allreduce_table", "allreduce_pe2pe_table"),
    section=package_text(__name__, "section.tex"),
    abstract=package_text(__name__, "abstract.tex"),
    conclusion=package_text(__name__, "conclusion.tex"),
    order=30,
    seed_benches=("milestone-1h-ccl",),
    files=package_files(sys.modules[__name__]),
))
