"""Per-job overhead of the workflow: where the time of one sweep point goes.

    python benchmarks/workflow_overhead.py

Measures (wall clock, median of repeats): bare Python start-up, importing the
kernbench CLI, one complete `kernbench job` process, and Snakemake running the
smoke sweep's simulation jobs on one core, from which Snakemake's own cost per
job follows. Also the whole smoke pipeline (with the paper) on 2 cores.
Reports figures; asserts nothing. Results go to benchmarks/out/workflow_overhead.json.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from workflow_helpers import copy_workflow  # noqa: E402

JOB = [sys.executable, "-m", "kernbench.cli.main", "job", "--experiment", "transfer",
       "--topology-id", "small_2x2", "--topology-file",
       str(ROOT / "config/topologies/small_2x2.yaml"), "--workload-id", "pe-local-hbm",
       "--variant-id", "single", "--slice",
       '{"workload": {"flow": "pe-local-hbm", "sizes": [4096]}, "variant": {"concurrent_flows": 1}}']


def timed(cmd, cwd=ROOT, repeats=7) -> float:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    out = Path(tempfile.mkdtemp())
    python = timed([sys.executable, "-c", "pass"])
    imports = timed([sys.executable, "-c", "import kernbench.cli.main, kernbench.experiments.job"])
    job = timed(JOB + ["--out", str(out / "r.json")])
    work = copy_workflow(out / "wf")
    snake = [sys.executable, "-m", "snakemake", "--configfile", "config/smoke.yaml"]
    subprocess.run(snake + ["--cores", "1", "--until", "simulate"], cwd=work, check=True,
                   capture_output=True)  # warm the mesh cache
    n_jobs = len(list((work / "results/raw").rglob("*.json")))
    samples = []
    for _ in range(3):
        shutil.rmtree(work / "results", ignore_errors=True)
        t0 = time.perf_counter()
        subprocess.run(snake + ["--cores", "1", "--until", "simulate"], cwd=work, check=True,
                       capture_output=True)
        samples.append(time.perf_counter() - t0)
    startup = timed(snake + ["-n", "--quiet", "all"], cwd=work, repeats=3)
    sim_wall = statistics.median(samples)
    per_job = (sim_wall - startup) / n_jobs
    shutil.rmtree(work / "results", ignore_errors=True)
    t0 = time.perf_counter()
    subprocess.run(snake + ["--cores", "2"], cwd=work, check=True, capture_output=True)
    smoke_wall = time.perf_counter() - t0
    report = {
        "python_startup_s": python, "kernbench_import_s": imports, "kernbench_job_s": job,
        "smoke_simulate_jobs": n_jobs, "snakemake_startup_s": startup,
        "snakemake_wall_per_job_s": per_job, "snakemake_overhead_per_job_s": per_job - job,
        "smoke_pipeline_wall_s": smoke_wall,
    }
    print(f"python start-up            {python:7.3f} s")
    print(f"import kernbench           {imports:7.3f} s (incl. start-up)")
    print(f"one `kernbench job`        {job:7.3f} s (incl. start-up)")
    print(f"snakemake start-up (-n)    {startup:7.3f} s")
    print(f"snakemake wall per job     {per_job:7.3f} s ({n_jobs} jobs, 1 core)")
    print(f"  of which snakemake       {per_job - job:7.3f} s per job")
    print(f"smoke pipeline, 2 cores    {smoke_wall:7.3f} s (incl. LaTeX)")
    dest = ROOT / "benchmarks" / "out" / "workflow_overhead.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(report, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
