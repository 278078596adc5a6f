"""The ``gqa`` experiment: fused grouped-query attention on a whole system.

Workloads per topology: the four headline points (``headline-decode-1u``,
``headline-decode-<U>u``, ``headline-prefill-1u``, ``headline-prefill-<U>u``),
the split-KV decode sweep (``decode-C<c>-<variant>-<context>``), the causal
ring prefill sweep (``prefill-<context>``), the ring block-size sweep
(``ring-q<rows>``) and the short-context grid
(``short-<phase>-<mapping>-t<tier>-<context>``). Every point reports latency,
its analytic bound (decode: KV bytes over the aggregate HBM-slice bandwidth of
the participating PEs; prefill: causal FLOPs over their peak) and the gap, op
counts and engine occupancy.

The study is this package: the host drivers (``decode_run``, ``prefill_run`` and
its ``prefill_layout``, ``short_run`` and its ``short_layout``, sharing
``common``), the analytic bounds (``bounds``), tables, figures and values
(``post``), the schema and the paper text (``section.tex`` and friends).
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
from kernbench.topology.graph import TopologyGraph
from kernbench.topology.spec import TopologySpec

NAME = "gqa"


def _shape(block: dict):
    from kernbench.experiments.gqa.common import Shape

    h = block.get("heads", {})
    return Shape(int(h.get("kv", 8)), int(h.get("group", 8)), int(h.get("dim", 128)))


def _check(source: str, key: str, fn) -> None:
    from kernbench.errors import UsageError

    try:
        fn()
    except UsageError as exc:
        raise ConfigError(source, f"experiments.{NAME}.{key}", str(exc)) from None


def _rows(q_rows: int, context: int, P: int) -> int:
    """Query rows per block: the configured size, halved (down to 16) until every PE
    gets two blocks, one early and one late in the causal triangle."""
    rows = q_rows
    while rows > 16 and -(-context // rows) < 2 * P:
        rows //= 2
    return rows


def expand(block: dict, spec: TopologySpec, source: str):
    from kernbench.experiments.gqa import decode_run, prefill_run
    from kernbench.experiments.gqa.common import Shape

    shape = _shape(block)
    dec, pre = block["decode"], block.get("prefill", {})
    ring, short = block.get("ring", {}), block.get("short", {})
    P, dtile = int(dec.get("P", 8)), int(dec.get("tile", 1024))
    pC, pP = int(pre.get("C", 8)), int(pre.get("P", 8))
    prow, ptile = int(pre.get("q_rows", 128)), int(pre.get("tile", 256))
    for C in dec["C"]:
        _check(source, "decode.C", lambda C=C: decode_run.validate(
            spec, 1, 1, C, P, dec["variants"][0], dtile, shape))
    _check(source, "prefill", lambda: prefill_run.validate(spec, 1, 1, pC, pP, prow, ptile, shape))
    hl = block["headline"]
    users = int(hl["users"])
    mpc = hl.get("multi_prefill_context", max(1, hl["prefill_context"] // users))
    C0, v0 = dec["C"][0], dec["variants"][-1]
    dcommon = {"kind": "decode", "C": C0, "P": P, "variant": v0, "tile": dtile}
    pcommon = {"kind": "prefill", "C": pC, "P": pP, "q_rows": prow, "tile": ptile}
    workloads = [
        ("headline-decode-1u", dict(dcommon, context=hl["decode_context"], users=1,
                                    panel="decode, 1 user")),
        (f"headline-decode-{users}u", dict(dcommon, users=users, panel=f"decode, {users} users",
                                           context=hl.get("multi_decode_context",
                                                          max(1, hl["decode_context"] // users)))),
        ("headline-prefill-1u", dict(pcommon, context=hl["prefill_context"], users=1,
                                     q_rows=_rows(prow, hl["prefill_context"], pP),
                                     panel="prefill, 1 user")),
        (f"headline-prefill-{users}u", dict(pcommon, users=users,
                                            panel=f"prefill, {users} users",
                                            context=mpc, q_rows=_rows(prow, mpc, pP))),
    ]
    for C in dec["C"]:
        for v in dec["variants"]:
            for ctx in dec["contexts"]:
                workloads.append((f"decode-C{C}-{v}-{ctx}",
                                  dict(dcommon, C=C, variant=v, context=ctx, users=1)))
    for ctx in pre.get("contexts", []):
        workloads.append((f"prefill-{ctx}", dict(pcommon, context=ctx, users=1,
                                                 q_rows=_rows(prow, ctx, pP))))
    rtile = int(ring.get("tile", 256))
    rheads = int(ring.get("kv_heads", shape.heads))
    rshape = Shape(rheads, shape.G, shape.d)
    if ring.get("q_rows"):
        _check(source, "ring", lambda: prefill_run.validate(
            spec, 1, 1, pC, int(ring.get("P", 1)), 1, rtile, rshape))
    for rows in ring.get("q_rows", []):
        # one full KV tile per CUBE: every ring step moves and computes a whole tile
        workloads.append((f"ring-q{rows}", dict(pcommon, q_rows=rows, P=int(ring.get("P", 1)),
                                               tile=rtile, context=pC * rtile, users=1,
                                               kv_heads=rheads, causal=False, sweep="ring")))
    workloads += _short_points(short, spec, shape, source)
    return _shared_headlines(workloads), [("base", {"heads": [shape.heads, shape.G, shape.d]})]


def _short_points(short: dict, spec: TopologySpec, shape, source: str) -> list:
    """The short-context grid: phase x mapping x tier x context, each checked first."""
    from kernbench.experiments.gqa import short_run

    points = []
    for phase in short.get("phases", ["decode"]):
        contexts = short.get("contexts", [])
        if phase == "prefill":
            contexts = short.get("prefill_contexts", contexts)
        for mapping in short.get("mappings", ["A1", "A2", "A4", "B"]):
            for tier in short.get("tiers", [1, 2, 3]):
                for ctx in contexts:
                    _check(source, "short", lambda p=phase, m=mapping, t=tier, c=ctx:
                           short_run.validate_config(spec, p, m, t, c, shape,
                                                     tile=int(short.get("tile", 128))))
                    points.append((f"short-{phase}-{mapping}-t{tier}-{ctx}", {
                        "kind": "short", "phase": phase, "mapping": mapping, "tier": tier,
                        "context": ctx, "users": 1, "tile": int(short.get("tile", 128))}))
    return points


def _shared_headlines(workloads: list) -> list:
    """A sweep point identical to a headline point is simulated once, as the headline
    (labelled ``sweep_point``: the tables count it in its sweep too)."""
    heads = {i: w for i, w in workloads if i.startswith("headline-")}
    out, shared = [], {}
    for wid, w in workloads:
        twin = next((h for h, hw in heads.items()
                     if not wid.startswith("headline-")
                     and {k: v for k, v in hw.items() if k != "panel"} == w), None)
        if twin is not None and twin not in shared:
            shared[twin] = wid
            continue
        out.append((wid, w))
    return [(wid, dict(w, sweep_point=shared[wid]) if wid in shared else w) for wid, w in out]


def run(graph: TopologyGraph, workload: dict, variant: dict) -> dict:
    from kernbench.experiments.gqa.common import Shape

    shape = Shape(*variant["heads"])
    if "kv_heads" in workload:  # the ring sweep may run fewer groups than the study
        shape = Shape(workload["kv_heads"], shape.G, shape.d)
    kind = workload["kind"]
    common = dict(users=workload["users"], shape=shape)
    extra: dict = {}
    if kind == "decode":
        from kernbench.experiments.gqa.decode_run import run_decode

        r = run_decode(graph, workload["context"], C=workload["C"], P=workload["P"],
                       variant=workload["variant"], tile=workload["tile"], **common)
    elif kind == "prefill":
        from kernbench.experiments.gqa.bounds import overlap_rows, overlap_rows_peak
        from kernbench.experiments.gqa.prefill_run import run_prefill

        r = run_prefill(graph, workload["context"], C=workload["C"], P=workload["P"],
                        q_rows=workload["q_rows"], tile=workload["tile"],
                        causal=workload.get("causal", True), **common)
        extra["overlap_rows"] = overlap_rows(graph.spec, shape.d, workload["tile"],
                                             max(1, shape.G // workload["C"]))
        extra["overlap_rows_peak"] = overlap_rows_peak(graph.spec)
    else:
        from kernbench.experiments.gqa.short_run import metrics, run_short

        r = run_short(graph, workload["phase"], workload["context"],
                      mapping=workload["mapping"], tier=workload["tier"],
                      tile=workload["tile"], **common)
        extra["short"] = metrics(r)
    labels = {k: v for k, v in workload.items() if k not in ("context", "users")}
    labels.update(r.params, sips=graph.spec.sips.count)
    return {
        "metrics": {"latency_ns": r.latency_ns, "context": r.context, "users": r.users,
                    "pes": r.pes, "bound_ns": r.bound_ns, "bound": r.bound_kind, "gap": r.gap,
                    "occupancy_pct": r.occupancy, "phases_ns": r.phases, **extra},
        "prediction": {"model": ("KV bytes / aggregate HBM-slice bandwidth"
                                 if r.bound_kind == "kv_bandwidth" else
                                 "causal FLOPs / peak MAC rate"),
                       "latency_ns": r.bound_ns, "rel_error": r.gap},
        "op_counts": r.families,
        "labels": labels,
    }


def batch(workload_id: str, workload: dict) -> str | None:
    """The decode grid and the short-context grid run each context sweep (one C and
    variant, or one mapping and tier) in one job: their points take seconds, and a
    process start with the 512-PE system costs one or two of them. Headline, prefill
    and ring points keep their own jobs."""
    if workload_id.startswith("decode-"):
        return f"decode-C{workload['C']}-{workload['variant']}"
    if workload_id.startswith("short-decode-"):
        return f"short-decode-{workload['mapping']}-t{workload['tier']}"
    return None


def resources(workload: dict) -> dict:
    """Memory and time of the long prefill points, from measured runs (the op log and
    hazard tables grow with the (query block, tile) pairs: 2.7 GB, 6-7 minutes at 32K)."""
    if workload.get("kind") != "prefill":
        return {}
    scale = workload.get("users", 1) * (workload["context"] / 32768) ** 2
    return {"mem_mb": 600 + 3000 * scale, "runtime": 10 + 15 * scale}


register(Experiment(
    name=NAME,
    resources=resources,
    title="Fused grouped-query attention",
    topic="fused grouped-query attention at long context",
    schema=package_schema(__name__),
    expand=expand,
    run=run,
    post=f"{__name__}.post",
    figures=("gqa_decode_latency", "gqa_occupancy", "gqa_dispatch", "gqa_ring_overlap",
             "gqa_short"),
    tables=("gqa_headline_table", "gqa_short_table"),
    section=package_text(__name__, "section.tex"),
    abstract=package_text(__name__, "abstract.tex"),
    conclusion=package_text(__name__, "conclusion.tex"),
    order=40,
    seed_benches=("milestone-gqa-headline",),
    batch=batch,
    files=package_files(sys.modules[__name__]),
))
