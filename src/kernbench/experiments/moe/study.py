"""The ``moe`` study's simulation side: config entries -> points -> one run each.

Three kinds of point, one topology at a time:

* ``layer``: the FFN half of one MoE layer (``experiments.llm.block``) for a number
  of tokens in flight, a layout (tp, ep), a routing skew and a capacity factor;
* ``step``: a whole decode step of a MoE model in one layout (``llm.step``);
* ``alltoall``: one all-to-all algorithm at one size (``workloads.alltoall_run``).

A point carries its model's keys (not only its name), so editing a model file
reruns exactly its points. Every entry is checked when the config is: the model
must have experts, the layout must place them on the ranks, the algorithm must
be an all-to-all one and a size must split into one f16 block per rank.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict

from kernbench.errors import ConfigError, UsageError
from kernbench.experiments.entries import check_overrides, entry_applies

NAME = "moe"
A2A_DTYPE = "f16"


def _model(name: str, where: str, source: str):
    from kernbench.models import load_model

    try:
        model = load_model(name)
    except UsageError as exc:
        raise ConfigError(source, f"{where}.model", str(exc)) from None
    if not model.num_local_experts:
        raise ConfigError(source, f"{where}.model", f"{model.name} has no experts "
                          f"(num_local_experts); the moe study runs MoE models")
    return model


def _keys(model) -> dict:
    return {k: v for k, v in asdict(model).items() if k != "name" and v is not None}


def _check_layout(spec, model, tp, parallel: str, where: str, source: str,
                  ring: bool = False) -> None:
    """The mapping and the expert layout must fit the topology (one line); ``ring``: a
    prefill step's attention."""
    from kernbench.experiments.llm.mapping import Dims, build
    from kernbench.experiments.llm.moe_layout import ExpertLayout

    dims = Dims.of(model)
    try:
        m = build(spec, dims, tp, ring=ring)
        ExpertLayout(parallel, dims.experts, len(m.ranks), dims.F)
    except UsageError as exc:
        raise ConfigError(source, where, f"{model.name} {parallel} on {spec.name}: "
                          f"{exc}") from None


def _slug(model) -> str:
    return model.name.replace("/", "-")


def _layer_points(block: dict, spec, source: str) -> list:
    points = []
    for i, entry in enumerate(block.get("layers", ())):
        where = f"experiments.{NAME}.layers[{i}]"
        if not entry_applies(block, entry, where, spec, source):
            continue
        model = _model(entry["model"], where, source)
        for par in entry["parallel"]:
            _check_layout(spec, model, block.get("tp"), par, f"{where}.parallel", source)
        cases = [(par, place) for par in entry["parallel"]
                 for place in (entry.get("placement", ["blocks"]) if par == "ep" else
                               ["blocks"])]
        for tokens in entry["tokens"]:
            for (par, place), skew, cf in itertools.product(
                    dict.fromkeys(cases), entry.get("skew", [0]),
                    entry.get("capacity_factor", [None])):
                wid = (f"L-{_slug(model)}-t{tokens}-{par}-s{skew:g}"
                       + ("" if cf is None else f"-cf{cf:g}")
                       + ("" if place == "blocks" else f"-{place}"))
                points.append((wid, {
                    "kind": "layer", "model": model.name, "config": _keys(model),
                    "tokens": tokens, "parallel": par, "placement": place,
                    "skew": float(skew), "capacity_factor": None if cf is None else float(cf),
                    "tp": block.get("tp")}))
    return points


def _step_points(block: dict, spec, source: str) -> list:
    points = []
    for i, entry in enumerate(block.get("steps", ())):
        where = f"experiments.{NAME}.steps[{i}]"
        if not entry_applies(block, entry, where, spec, source):
            continue
        model = _model(entry["model"], where, source)
        phase = entry.get("phase", "decode")
        for par in entry["parallel"]:
            _check_layout(spec, model, block.get("tp"), par, f"{where}.parallel", source,
                          ring=phase == "prefill")
        if phase == "prefill" and entry["batch"] != [1]:
            raise ConfigError(source, f"{where}.batch", f"{entry['batch']}: a prefill step "
                              f"runs one prompt (batch [1])")
        for batch, context, par in itertools.product(entry["batch"], entry["context"],
                                                     entry["parallel"]):
            points.append((f"S-{_slug(model)}-{phase}-b{batch}-s{context}-{par}", {
                "kind": "step", "model": model.name, "config": _keys(model),
                "phase": phase, "batch": batch, "context": context, "parallel": par,
                "layers": min(entry.get("layers", 1), model.num_hidden_layers),
                "tp": block.get("tp")}))
    return points


def _alltoall_points(block: dict, spec, source: str) -> list:
    from kernbench.ccl import config as ccl_config
    from kernbench.units import format_size, parse_size
    from kernbench.workloads.alltoall_run import check_arguments

    a2a = block.get("alltoall")
    where = f"experiments.{NAME}.alltoall"
    if not a2a or not entry_applies(block, a2a, where, spec, source):
        return []
    known = ccl_config.configured_algorithms(collective="all_to_all")
    points = []
    for j, alg in enumerate(a2a["algorithms"]):
        if alg not in known:
            raise ConfigError(source, f"{where}.algorithms[{j}]", f"{alg!r} is not an "
                              f"all-to-all algorithm (allowed: {', '.join(known)})")
        for k, size in enumerate(a2a["sizes"]):
            nbytes = parse_size(size)
            try:
                check_arguments(spec, alg, nbytes, A2A_DTYPE, "hbm")
            except UsageError as exc:
                raise ConfigError(source, f"{where}.sizes[{k}]", f"{size}: {exc}") from None
            points.append((f"A-{alg}-{nbytes}", {"kind": "alltoall", "algorithm": alg,
                                                 "bytes": nbytes,
                                                 "size": format_size(nbytes)}))
    return points


def expand(block: dict, spec, source: str):
    """Every entry's points on this topology, each checked first. Topologies with layer
    or step points run with the study's overrides; the all-to-all sweep on the others
    keeps the topology's own link model, as the all-reduce study does."""
    sims = _layer_points(block, spec, source) + _step_points(block, spec, source)
    if sims:
        check_overrides(block, spec, source, NAME)
    points = sims + _alltoall_points(block, spec, source)
    base = {"overrides": dict(block["overrides"])} if sims and block.get("overrides") else {}
    return points, [("base", base)]


def batch(wid: str, params: dict) -> str | None:
    """An algorithm's all-to-all sizes on a topology share one job (seconds each)."""
    return f"alltoall-{params['algorithm']}" if params["kind"] == "alltoall" else None


# -- running a point ----------------------------------------------------------------------
SEED = 0  # the routing draws; both layouts of a point route the same tokens alike
PREDICTIONS = {
    "layer": "roofline per op (router, busiest rank's expert slices) + alpha-beta per "
             "collective (all-to-alls, all-reduce)",
    "step": "roofline per op + alpha-beta per collective, same layers and mapping",
    "alltoall": "alpha-beta play of the algorithm's plan on idle links",
}


def run(graph, workload: dict, variant: dict) -> dict:
    """One point of any kind: its metrics, its analytic prediction and its op counts."""
    kind = workload["kind"]
    metrics, predicted, error, counts, labels = _RUNNERS[kind](graph, workload)
    return {"metrics": metrics,
            "prediction": {"model": PREDICTIONS[kind], "latency_ns": predicted,
                           "rel_error": error},
            "op_counts": counts, "labels": {"kind": kind, **labels}}


def _model_of(workload: dict):
    from kernbench.experiments.llm.mapping import Dims
    from kernbench.models import from_dict

    model = from_dict(workload["config"], workload["model"], f"model {workload['model']}")
    return model, Dims.of(model)


def _run_layer(graph, w: dict):
    from kernbench.experiments.llm.block import run_ffn_block
    from kernbench.experiments.llm.moe_run import MoeSettings

    model, dims = _model_of(w)
    settings = MoeSettings(w["capacity_factor"], w["skew"], SEED, w["parallel"],
                           placement=w.get("placement", "blocks"))
    r = run_ffn_block(graph, dims, w["tokens"], tp=w.get("tp"), rounds=1, model=model.name,
                      moe=settings)
    rec = r.record
    metrics = {**{k: v for k, v in rec.items() if k not in ("model", "topology")},
               "latency_ns": rec["block_total_ns"]}
    labels = {"model": model.name, "tokens": w["tokens"], "parallel": w["parallel"],
              "placement": settings.placement, "skew": w["skew"],
              "capacity_factor": w["capacity_factor"]}
    return (metrics, rec["analytic"]["total_ns"], rec["analytic_error"],
            dict(sorted(r.engine.op_log.counts.items())), labels)


def _run_step(graph, w: dict):
    from kernbench.experiments.llm.fit import footprint
    from kernbench.experiments.llm.moe_run import MoeSettings
    from kernbench.experiments.llm.study import step_function

    model, dims = _model_of(w)
    phase = w.get("phase", "decode")
    labels = {"model": model.name, "phase": phase, "batch": w["batch"],
              "context": w["context"], "parallel": w["parallel"],
              "tokens": w["batch"] if phase == "decode" else w["context"]}
    need, have = footprint(model, graph.spec, w["batch"], w["context"])
    fit = {"fits": need <= have, "bytes_needed": need, "bytes_available": have}
    if need > have:
        return {**fit, "latency_ns": None}, None, None, {}, labels
    r = step_function(phase)(graph, dims, w["batch"], w["context"], layers=w["layers"],
                             tp=w.get("tp"), model=model.name,
                             moe=MoeSettings(None, 0.0, SEED, w["parallel"]))
    rec = r.record
    metrics = {**fit, **{k: v for k, v in rec.items() if k not in ("model", "topology")},
               "latency_ns": rec["step_ns"]}
    return (metrics, rec["analytic"]["step_ns"], rec["analytic_error"],
            dict(sorted(r.engine.op_log.counts.items())), labels)


def _run_alltoall(graph, w: dict):
    from kernbench.workloads.alltoall_run import run_alltoall

    r = run_alltoall(graph, w["algorithm"], w["bytes"], dtype=A2A_DTYPE)
    metrics = {"algorithm": r.algorithm, "bytes": r.size, "size": w["size"],
               "ranks": len(r.ranks), "latency_ns": r.time_ns, "algbw_gbs": r.algbw_gbs,
               "busbw_gbs": r.busbw_gbs, "phases": r.phases, "links": graph.spec.sharing}
    labels = {"algorithm": r.algorithm, "bytes": r.size}
    return metrics, r.predicted_ns, r.rel_error, r.op_counts, labels


_RUNNERS = {"layer": _run_layer, "step": _run_step, "alltoall": _run_alltoall}
