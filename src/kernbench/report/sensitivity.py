"""What changes when a modelling choice changes: the sweep's sensitivity reruns.

``sensitivity.runs`` in the config reruns some jobs under other settings (array
micro-architecture, link sharing; ``experiments/sweep.py``). This module pairs
every rerun point with the same point of the default run and turns the pairs
into a table (``results/tables/sensitivity.csv``), value macros for the study
sections (``sens/<experiment>/<topology>/<variant>/<point>/<setting>/...`` and
per experiment and setting ``sens/<experiment>/<setting>/...``, per rerun job
``sensjob/<experiment>/<topology>/<job>/<variant>/<setting>/...``, two variants
of a job against each other ``sensvs/...``) and a LaTeX table for the paper.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path

from kernbench.analysis.latex import escape, tabular
from kernbench.analysis.values import Value, count, num, text

# value prefixes this module owns; a section may quote a rerun that a configuration does
# not make, which is then typeset as missing ("--") rather than stopping the build
PREFIXES = ("sens", "sensjob", "sensvs")
COLUMNS = ("experiment", "topology", "job", "variant", "point", "setting", "default_ns",
           "setting_ns", "ratio", "model_ns")


def _point(record: dict) -> tuple[str, float, float]:
    """(point id, latency ns, the analytic model's ns or NaN) of one point's record; the
    model (a bound, a roofline) does not depend on the setting only where the study says so."""
    model = record.get("prediction", {}).get("latency_ns")
    return (record["workload"], float(record["metrics"]["latency_ns"]),
            float(model) if model is not None else math.nan)


def _points(record: dict) -> list[tuple[str, float, float]]:
    """:func:`_point` of a record or of each point of a batch record; a point without a
    latency (one a study recorded but did not simulate) has nothing to compare."""
    points = record["points"] if "points" in record and "metrics" not in record else [record]
    return [_point(p) for p in points if p["metrics"].get("latency_ns") is not None]


def rows(record_paths: Iterable[str | Path]) -> list[dict]:
    """One row per rerun point: its latency next to the default run's."""
    default: dict[tuple, float] = {}
    reruns: list[tuple] = []
    for path in sorted(map(str, record_paths)):
        rec = json.loads(Path(path).read_text())
        base, _, setting = rec["variant"].partition("@")
        for point, ns, model in _points(rec):
            key = (rec["experiment"], rec["topology"], rec["workload"], base, point)
            if setting:
                reruns.append((key, setting, ns, model))
            else:
                default[key] = ns
    out = []
    for key, setting, ns, model in sorted(reruns):
        ref = default.get(key)
        if ref is None:  # the default point was recorded without a latency
            continue
        out.append(dict(zip(COLUMNS, (*key, setting, ref, ns, ns / ref, model), strict=True)))
    return out


def write_csv(record_paths: Iterable[str | Path], out: str | Path) -> Path:
    import pandas as pd

    from kernbench.analysis.tables import write_csv as write

    return write(pd.DataFrame(rows(record_paths), columns=list(COLUMNS)), out)


def load(csv: str | Path | None) -> list[dict]:
    """The rows of a sensitivity table (none without one)."""
    if csv is None or not Path(csv).exists():
        return []
    import pandas as pd

    return pd.read_csv(csv).to_dict("records")


def values(table: list[dict], settings: dict) -> dict[str, Value]:
    """Per rerun point: default and setting latency (us) and their ratio; per experiment
    and setting: the geometric mean, least and largest ratio; per setting: its text."""
    out: dict[str, Value] = {f"sens/setting/{name}": text(s["description"])
                             for name, s in settings.items()}
    groups: dict[tuple[str, str], list[float]] = {}
    for r in table:
        key = f"sens/{r['experiment']}/{r['topology']}/{r['variant']}/{r['point']}/{r['setting']}"
        out[f"{key}/ratio"] = num(r["ratio"], 2)
        out[f"{key}/us"] = num(r["setting_ns"] / 1000.0, 2)
        out[f"{key}/defaultus"] = num(r["default_ns"] / 1000.0, 2)
        model = r.get("model_ns", math.nan)
        if model == model:  # the point's analytic model (a bound): how close each run is to it
            out[f"{key}/ofmodelpct"] = num(100.0 * model / r["setting_ns"], 1)
            out[f"{key}/defaultofmodelpct"] = num(100.0 * model / r["default_ns"], 1)
        groups.setdefault(f"sens/{r['experiment']}/{r['setting']}", []).append(r["ratio"])
        job = f"sensjob/{r['experiment']}/{r['topology']}/{r['job']}/{r['variant']}/{r['setting']}"
        groups.setdefault(job, []).append(r["ratio"])
    groups.update(contrasts(table))
    for key, ratios in sorted(groups.items()):
        out[f"{key}/geomean"] = num(math.exp(sum(map(math.log, ratios)) / len(ratios)), 2)
        out[f"{key}/min"] = num(min(ratios), 2)
        out[f"{key}/max"] = num(max(ratios), 2)
        out[f"{key}/points"] = count(len(ratios))
    return out


def contrasts(table: list[dict]) -> dict[str, list[float]]:
    """Two variants of one job compared under each setting (and under the default, as
    ``default``): ``sensvs/<experiment>/<topology>/<job>/<setting>/<a>/<b>`` -> the
    ratios time(a) / time(b) over the points both ran, for every pair a < b."""
    times: dict[tuple, dict[str, dict[str, float]]] = {}
    for r in table:
        job = (r["experiment"], r["topology"], r["job"])
        for setting, ns in ((r["setting"], r["setting_ns"]), ("default", r["default_ns"])):
            times.setdefault((*job, setting), {}).setdefault(r["variant"], {})[r["point"]] = ns
    out: dict[str, list[float]] = {}
    for (exp, topo, job, setting), by_variant in sorted(times.items()):
        names = sorted(by_variant)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                common = sorted(set(by_variant[a]) & set(by_variant[b]))
                if common:
                    out[f"sensvs/{exp}/{topo}/{job}/{setting}/{a}/{b}"] = [
                        by_variant[a][p] / by_variant[b][p] for p in common]
    return out


def _cell(ratios: list[float]) -> str:
    if len(ratios) == 1:
        return f"{ratios[0]:.2f}"
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    return f"{geo:.2f} ({min(ratios):.2f}--{max(ratios):.2f})"


def latex_table(table: list[dict], settings: dict) -> str:
    """One row per rerun job: study, topology, job (variant), points, the default time of
    a one-point job, and per setting the time ratio to the default (for a job of several
    points their geometric mean, least and largest)."""
    names = [n for n in settings if any(r["setting"] == n for r in table)]
    if not names:
        return ("% Generated by kernbench; no sensitivity reruns in this configuration.\n"
                + tabular("@{}l@{}", [r"\textbf{Sensitivity}"],
                          [["no reruns in this configuration"]]))
    jobs: dict[tuple, dict] = {}
    for r in table:
        key = (r["experiment"], r["topology"], r["job"], r["variant"])
        job = jobs.setdefault(key, {"points": {}, "ratios": {}})
        job["points"][r["point"]] = r["default_ns"]
        job["ratios"].setdefault(r["setting"], []).append(r["ratio"])
    body = []
    for (exp, topo, wid, variant), job in sorted(jobs.items()):
        label = wid if variant in ("base", "sum") else f"{wid} ({variant})"
        points = job["points"]
        default = f"{next(iter(points.values())) / 1000.0:.2f}" if len(points) == 1 else "--"
        body.append([escape(exp), escape(topo), escape(label), str(len(points)), default]
                    + [_cell(job["ratios"][n]) if n in job["ratios"] else "--" for n in names])
    head = ([r"\textbf{Study}", r"\textbf{Topology}", r"\textbf{Job}", r"\textbf{Points}",
             r"\textbf{Default ($\mu$s)}"] + [r"\textbf{" + escape(n) + "}" for n in names])
    return ("% Generated by kernbench from the sensitivity reruns; do not edit.\n"
            + tabular("@{}lllr" + "r" * (1 + len(names)) + "@{}", head, body))
