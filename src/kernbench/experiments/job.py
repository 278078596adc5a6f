"""Run one sweep point in its own process and write its JSON record.

The record carries the metrics, the analytic prediction and its relative
error, op counts, occupancy and provenance (kernbench version, git revision,
the resolved config slice and its hash). Its bytes depend only on the inputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

from kernbench import __version__
from kernbench.experiments.checkout import simulator_code_hash
from kernbench.experiments.registry import get
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
    blob = json.dumps(slice_, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def dumps_record(record: dict) -> str:
    return json.dumps(record, indent=2, sort_keys=True) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write via a temp file + rename so a killed job never leaves half a record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_job(experiment: str, topology_id: str, topology_file: str | Path, workload_id: str,
            variant_id: str, slice_: dict) -> dict:
    """Simulate one point; ``slice_`` holds {"workload": {...}, "variant": {...}}."""
    module = get(experiment)
    graph = load_topology(topology_file)
    body = module.run(graph, slice_["workload"], slice_["variant"])
    resolved = {"experiment": experiment, "topology": topology_id,
                "topology_hash": graph.spec.content_hash(), "workload_id": workload_id,
                "variant_id": variant_id, **slice_}
    return {
        "schema": RECORD_SCHEMA,
        "experiment": experiment,
        "topology": topology_id,
        "workload": workload_id,
        "variant": variant_id,
        **body,
        "config": resolved,
        "provenance": {
            "kernbench_version": __version__,
            "git_revision": git_revision(),
            "config_hash": config_hash(resolved),
            "simulator_code_hash": simulator_code_hash(),
            "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        },
    }
