"""Run one sweep job (a point, or a batch of points) and build its JSON record.

A point's record carries the experiment's metrics, its analytic prediction and the
relative error, op counts, occupancy and provenance (kernbench version, git
revision, the resolved config slice and its hash, the simulator code hash).
Its bytes depend only on the inputs. A batch's record lists its points' records
under ``points``; each is what the point alone would have written.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from kernbench import __version__
from kernbench.experiments.checkout import simulator_code_hash
from kernbench.experiments.registry import get
from kernbench.fileio import json_hash
from kernbench.topology import load_topology

RECORD_SCHEMA = "kernbench.record/1"


@lru_cache(maxsize=1)
def git_revision() -> str | None:
    """HEAD of the repository the job runs in, or None outside git."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    rev = out.stdout.strip()
    return rev if out.returncode == 0 and rev else None


def config_hash(slice_: dict) -> str:
    return json_hash(slice_)


def run_job(experiment: str, topology_id: str, topology_file: str | Path, workload_id: str,
            variant_id: str, slice_: dict) -> dict:
    """Simulate one job; ``slice_`` holds {"workload": {...}, "variant": {...}}, or for a
    batch {"workloads": [[id, {...}], ...], "variant": {...}}."""
    exp = get(experiment)
    # the variant's topology overrides (a study's stated modelling choice, a sensitivity
    # setting's or a what-if's on top of it), which the experiment's own run never sees
    graph = load_topology(topology_file, slice_["variant"].get("overrides"))
    if "workloads" not in slice_:
        return _point(exp, graph, topology_id, workload_id, variant_id, slice_)
    points = []
    for wid, params in slice_["workloads"]:
        points.append(_point(exp, graph, topology_id, wid, variant_id,
                             {"workload": params, "variant": slice_["variant"]}))
        if not gc.isenabled():  # ``kernbench job`` runs without the automatic collector:
            gc.collect()  # the point's engine is garbage now, and freezing what survives
            gc.freeze()  # keeps the next collection to the next point's objects
    return {"schema": RECORD_SCHEMA, "experiment": experiment, "topology": topology_id,
            "workload": workload_id, "variant": variant_id, "points": points,
            "provenance": _provenance({"experiment": experiment, "topology": topology_id,
                                       "workload_id": workload_id, "variant_id": variant_id,
                                       **slice_})}


def _point(exp, graph, topology_id: str, workload_id: str, variant_id: str,
           slice_: dict) -> dict:
    # the topology's overrides and the what-if label are the job's, not the experiment's
    variant = {k: v for k, v in slice_["variant"].items() if k not in ("overrides", "whatif")}
    body = exp.run(graph, slice_["workload"], variant)
    resolved = {"experiment": exp.name, "topology": topology_id,
                "topology_hash": graph.spec.content_hash(), "workload_id": workload_id,
                "variant_id": variant_id, **slice_}
    return {
        "schema": RECORD_SCHEMA,
        "experiment": exp.name,
        "topology": topology_id,
        "workload": workload_id,
        "variant": variant_id,
        **body,
        "config": resolved,
        "provenance": _provenance(resolved),
    }


def _provenance(resolved: dict) -> dict:
    return {
        "kernbench_version": __version__,
        "git_revision": git_revision(),
        "config_hash": config_hash(resolved),
        "simulator_code_hash": simulator_code_hash(),
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
    }
