"""Run manifest: every job, its config hash, wall time and peak memory.

It is rewritten by the workflow's ``onsuccess`` hook after every run that
did work; the workflow passes the folders it writes logs and benchmarks to
(this module hard-codes none). Wall time and sampled memory (``max_rss_mb``)
come from each job's Snakemake ``benchmark:`` file; because Snakemake samples
memory only every few hundred ms, simulation jobs also report their own peak
RSS (``peak_rss_mb``, from getrusage) in their log. Config hashes come from
the records' provenance. The one-page summary that quotes results is
``report.summary``; this module reads no table.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from kernbench import __version__
from kernbench.experiments.job import git_revision
from kernbench.fileio import dumps_pretty, write_atomic

_PEAK = re.compile(r"peak_rss_mb=([0-9.]+)")


def _bench(path: Path) -> dict:
    """Wall seconds and peak RSS (MB) from a Snakemake benchmark TSV, if present."""
    try:
        with path.open() as fh:
            row = next(csv.DictReader(fh, delimiter="\t"))
    except (OSError, StopIteration):
        return {"wall_s": None, "max_rss_mb": None}

    def number(key):
        try:
            return float(row[key])
        except (KeyError, TypeError, ValueError):
            return None  # Snakemake writes "-" when a job was too short to sample

    return {"wall_s": number("s"), "max_rss_mb": number("max_rss")}


def _peak_from_log(path: Path) -> float | None:
    """Peak RSS the job measured itself (getrusage); exact even for sub-second jobs."""
    try:
        m = _PEAK.search(path.read_text())
    except OSError:
        return None
    return float(m.group(1)) if m else None


def manifest(sweep, raw_dir: str, bench_dir: str | Path, log_dir: str | Path,
             stage_jobs: list[tuple[str, str, str]]) -> dict:
    """``stage_jobs``: (rule, output, benchmark file) of the non-simulation jobs."""
    bench, logs = Path(bench_dir), Path(log_dir)
    jobs = []
    for job in sorted(sweep.jobs, key=lambda j: j.output):
        rel = Path(job.output).relative_to(raw_dir).with_suffix(".tsv")
        record = Path(job.output)
        cfg_hash = None
        if record.exists():
            cfg_hash = json.loads(record.read_text())["provenance"]["config_hash"]
        jobs.append({"rule": "simulate", "output": job.output, "experiment": job.experiment,
                     "topology": job.topology, "workload": job.workload, "variant": job.variant,
                     "config_hash": cfg_hash, **_bench(bench / "simulate" / rel),
                     "peak_rss_mb": _peak_from_log(logs / "simulate" / rel.with_suffix(".log"))})
    for rule, output, bench_file in stage_jobs:
        jobs.append({"rule": rule, "output": output, "config_hash": None,
                     **_bench(Path(bench_file))})
    sim = [j["wall_s"] for j in jobs if j["rule"] == "simulate" and j["wall_s"] is not None]
    per_exp = {}
    for name in sweep.experiments:
        mine = [j for j in jobs if j.get("experiment") == name and j["wall_s"] is not None]
        slow = max(mine, key=lambda j: j["wall_s"], default=None)
        per_exp[name] = {
            "jobs": sum(1 for j in sweep.jobs if j.experiment == name),
            "wall_s_sum": sum(j["wall_s"] for j in mine),
            "slowest": ({"workload": slow["workload"], "topology": slow["topology"],
                         "variant": slow["variant"], "wall_s": slow["wall_s"]} if slow else None),
        }
    return {
        "kernbench_version": __version__,
        "git_revision": git_revision(),
        "experiments": sweep.experiments,
        "jobs": jobs,
        "totals": {
            "jobs": len(jobs),
            "simulate_jobs": len(sweep.jobs),
            "simulate_wall_s_sum": sum(sim),
            "simulate_wall_s_mean": sum(sim) / len(sim) if sim else None,
            "all_wall_s_sum": sum(j["wall_s"] or 0.0 for j in jobs),
        },
        "per_experiment": per_exp,  # each experiment's job count, total and slowest job
    }


def write_manifest(doc: dict, path: str | Path) -> Path:
    return write_atomic(path, dumps_pretty(doc))
