# Shared set-up: check the config (one-line errors, before any job), fill schema
# defaults, expand the sweep into jobs. Heavy lifting lives in kernbench.experiments.sweep.
import sys
from pathlib import Path

from snakemake.utils import validate

from kernbench.errors import KernbenchError
from kernbench.experiments.checkout import (
    clear_stale_locks,
    simulator_code_hash,
    use_checkout_sources,
)
from kernbench.experiments.sweep import load_sweep

ROOT = Path(workflow.basedir)
use_checkout_sources(ROOT)  # jobs (local, cluster, --use-conda) import this checkout
if clear_stale_locks(Path.cwd()):
    sys.stderr.write("kernbench: removed the locks of an earlier run that was killed\n")


def _config_source():
    files = list(workflow.overwrite_configfiles or []) or list(workflow.configfiles or [])
    return str(files[-1]) if files else "config"


try:
    SWEEP = load_sweep(config, _config_source(), ROOT)
except KernbenchError as _exc:
    sys.stderr.write(f"kernbench: config error: {_exc}\n")
    sys.exit(1)
validate(config, "../schemas/config.schema.yaml", set_default=True)

JOBS = SWEEP.by_output()
SIM_CODE = simulator_code_hash()  # of the kernbench being imported; simulator edits rerun points
EXPERIMENTS = SWEEP.experiments
TABLES = expand("results/tables/{experiment}.csv", experiment=EXPERIMENTS)
FIGURE_NAMES = {
    "transfer": ["transfer_latency", "transfer_bandwidth"],
    "gemm": ["gemm_breakdown", "gemm_util", "gemm_util_vs_roofline"],
}
FIGURES = [
    f"results/figures/{name}.{ext}"
    for experiment in EXPERIMENTS
    for name in FIGURE_NAMES[experiment]
    for ext in ("pdf", "png")
]
# In a conda env the env's python is first on PATH; otherwise use Snakemake's own.
_conda = "conda" in {str(m).lower() for m in workflow.deployment_settings.deployment_method}
PYTHON = "python" if _conda else sys.executable
KB = f"{PYTHON} -m kernbench.cli.main"
CONDA_ENV = "../envs/kernbench.yaml"


localrules:
    all,
    aggregate,
    figures,
    report_generated,
    paper,


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
