"""The ``llm`` study's simulation side: config entries -> points -> one step each.

A point is (model, phase, batch, context[, tp]) on one topology. Its workload
carries the model's keys (not only its name), so editing a model file reruns
exactly its points. A point whose weights plus KV cache do not fit the
system's HBM (:func:`~kernbench.experiments.llm.fit.footprint`, the rule
``kernbench model`` refuses it by) is recorded with the bytes and not
simulated; the fit is decided on the job's own topology, so a what-if that
changes the HBM changes it too. A prefill point is one prompt (batch 1),
and a phase without a step driver (``run_<phase>_step``) is refused when the
config is checked and again by the job, never skipped.
"""

from __future__ import annotations

import re
from dataclasses import asdict

from kernbench.errors import ConfigError, UsageError
from kernbench.experiments.entries import check_overrides, entry_applies

NAME = "llm"
PREDICTION = "roofline per op + alpha-beta per collective, same layers and mapping"


def step_function(phase: str):
    """The step driver of ``phase`` (``run_decode_step`` / ``run_prefill_step``)."""
    from kernbench.experiments.llm import step

    fn = getattr(step, f"run_{phase}_step", None)
    if fn is None:
        raise UsageError(f"phase {phase!r}: this kernbench has no {phase} step yet "
                         f"(kernbench.experiments.llm.step.run_{phase}_step is missing)")
    return fn


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "model"


def _model(entry: dict, where: str, source: str):
    from kernbench.models import load_model

    try:
        return load_model(entry["model"])
    except UsageError as exc:
        raise ConfigError(source, f"{where}.model", str(exc)) from None


def _check_mapping(spec, model, tp, phase: str, where: str, source: str) -> None:
    from kernbench.experiments.llm.mapping import Dims, build

    dims = Dims.of(model)
    try:
        build(spec, dims, tp, ring=phase == "prefill")
    except UsageError as exc:
        raise ConfigError(source, where, f"{model.name} on {spec.name}: {exc}") from None


def expand(block: dict, spec, source: str):
    """Every entry's batch x context grid on this topology, each checked first: the
    model file, the tensor-parallel mapping and, for prefill, the step driver."""
    check_overrides(block, spec, source, NAME)
    points = []
    for i, entry in enumerate(block["points"]):
        where = f"experiments.{NAME}.points[{i}]"
        if not entry_applies(block, entry, where, spec, source):
            continue
        model = _model(entry, where, source)
        tp = entry.get("tp")
        _check_mapping(spec, model, tp, entry["phase"], where, source)
        try:
            step_function(entry["phase"])
        except UsageError as exc:
            raise ConfigError(source, f"{where}.phase", f"{exc}; remove the entry") from None
        if entry["phase"] == "prefill" and entry.get("batch", [1]) != [1]:
            raise ConfigError(source, f"{where}.batch", f"{entry['batch']}: a prefill point "
                              f"runs one prompt (batch [1] or no batch)")
        keys = {k: v for k, v in asdict(model).items() if k != "name" and v is not None}
        layers = min(entry.get("layers", block["layers"]), model.num_hidden_layers)
        for batch in entry.get("batch", [1]):
            for context in entry["context"]:
                wid = f"{_slug(model.name)}-{entry['phase']}-b{batch}-s{context}"
                points.append((wid + (f"-tp{tp}" if tp else ""), {
                    "model": model.name, "config": keys, "phase": entry["phase"],
                    "batch": batch, "context": context, "layers": layers, "tp": tp}))
    base = {"overrides": dict(block["overrides"])} if block.get("overrides") else {}
    return points, [("base", base)]


def run(graph, workload: dict, variant: dict) -> dict:
    """One point: the fit, then (if it fits) the step, its breakdown and its analytic
    prediction; op counts of the simulated layers."""
    from kernbench.experiments.llm.fit import footprint
    from kernbench.models import from_dict

    model = from_dict(workload["config"], workload["model"], f"model {workload['model']}")
    batch, context = workload["batch"], workload["context"]
    need, have = footprint(model, graph.spec, batch, context)
    labels = {"model": model.name, "phase": workload["phase"], "batch": batch,
              "context": context, "tp": workload.get("tp"),
              "model_layers": model.num_hidden_layers, "weight_bytes": model.weight_bytes,
              "sips": graph.spec.sips.count}
    fit = {"fits": need <= have, "bytes_needed": need, "bytes_available": have}
    if need > have:
        return {"metrics": {**fit, "latency_ns": None},
                "prediction": {"model": PREDICTION, "latency_ns": None, "rel_error": None},
                "op_counts": {}, "labels": labels}
    from kernbench.experiments.llm.mapping import Dims

    r = step_function(workload["phase"])(graph, Dims.of(model), batch, context,
                                         layers=workload["layers"], tp=workload.get("tp"),
                                         model=model.name)
    rec = r.record
    metrics = {**fit, **{k: v for k, v in rec.items() if k not in ("model", "topology")},
               "latency_ns": rec["step_ns"]}
    return {"metrics": metrics,
            "prediction": {"model": PREDICTION, "latency_ns": rec["analytic"]["step_ns"],
                           "rel_error": rec["analytic_error"]},
            "op_counts": dict(sorted(r.engine.op_log.counts.items())),
            "labels": labels}
