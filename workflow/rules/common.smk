# Shared set-up: check the config (one-line errors, before any job) and expand
# the sweep into jobs. Heavy lifting lives in kernbench.experiments.sweep.
import os
import sys
from pathlib import Path

from kernbench.errors import KernbenchError
from kernbench.experiments.sweep import load_sweep


def _config_source():
    files = list(getattr(workflow, "overwrite_configfiles", None) or []) or list(
        getattr(workflow, "configfiles", None) or []
    )
    return str(files[-1]) if files else "config"


try:
    SWEEP = load_sweep(config, _config_source(), Path(workflow.basedir))
except KernbenchError as _exc:
    sys.stderr.write(f"kernbench: config error: {_exc}\n")
    sys.exit(1)

config.update(SWEEP.config)  # schema defaults filled in
JOBS = SWEEP.by_output()
EXPERIMENTS = SWEEP.experiments
TABLES = expand("results/tables/{experiment}.csv", experiment=EXPERIMENTS)
FIGURE_NAMES = {"transfer": ["transfer_latency", "transfer_bandwidth"]}
FIGURES = [
    f"results/figures/{name}.{ext}"
    for experiment in EXPERIMENTS
    for name in FIGURE_NAMES[experiment]
    for ext in ("pdf", "png")
]
_here = Path(sys.executable).parent / "kernbench"
KB = str(_here) if _here.exists() else "kernbench"


wildcard_constraints:
    experiment="[a-z_]+",
    topology="[A-Za-z0-9][A-Za-z0-9_.-]*",
    workload="[^/]+",
    variant="[^/]+",


def job_of(wildcards):
    path = f"results/raw/{wildcards.experiment}/{wildcards.topology}/{wildcards.workload}/{wildcards.variant}.json"
    try:
        return JOBS[path]
    except KeyError:
        raise ValueError(f"{path} is not a point of the configured sweep") from None
