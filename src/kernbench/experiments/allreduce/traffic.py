"""The fabric reference on an all-reduce traffic pattern: one torus2d row step.

Every rank sends one chunk to its ``row_next`` neighbour of the torus2d
algorithm at the same instant, over the IPCQ message routes. Rows wrap across
SIPs, so the CUBEs of a SIP column boundary share the IO chiplets and the
inter-SIP link: the step is contended. The analytic fabric and the
packet-level reference time the same flows; the makespan error is reported
(the reference is the truth).
"""

from __future__ import annotations

from kernbench.probes import fabric_accuracy as fa


def row_step_flows(graph, chunk_bytes: int):
    return list(fa.row_step_flows(graph, chunk_bytes))


def row_step_accuracy(graph, chunk_bytes: int, packet_bytes: int) -> dict:
    flows = row_step_flows(graph, chunk_bytes)
    analytic = fa.run_analytic(graph, flows).completions
    ref = fa.run_reference(graph, flows, packet_bytes).completions
    n = len(flows)
    return {"flows": n, "chunk_bytes": chunk_bytes, "packet_bytes": packet_bytes,
            "latency_ns": max(analytic), "reference_ns": max(ref),
            "makespan_rel_error": fa.rel_err(max(analytic), max(ref)),
            "mean_rel_error": fa.rel_err(sum(analytic) / n, sum(ref) / n),
            "packets": len(flows) * -(-chunk_bytes // packet_bytes)}
