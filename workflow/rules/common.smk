# Shared set-up: check the config (one-line errors, before any job), fill schema
# defaults, expand the sweep into jobs. The workflow owns its paths (below); the
# experiments and what they produce come from the registry, so no rule names one.
import sys
from pathlib import Path

from kernbench.errors import KernbenchError
from kernbench.experiments.checkout import (
    clear_stale_locks,
    share_bytecode,
    simulator_code_hash,
    use_checkout_sources,
)
from kernbench.experiments.sweep import load_sweep
from kernbench.report.generate import generated_files

ROOT = Path(workflow.basedir)
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
RESULTS = "results"
RAW = f"{RESULTS}/raw"
TABLE_DIR = f"{RESULTS}/tables"
FIGURE_DIR = f"{RESULTS}/figures"
LOG_DIR = f"{RESULTS}/logs"
BENCH_DIR = f"{RESULTS}/benchmarks"
GENERATED_DIR = "report/generated"
PAPER = "report/build/paper.pdf"

use_checkout_sources(ROOT)  # jobs (local, cluster, --use-conda) import this checkout
share_bytecode(Path(".snakemake", "pycache"))  # jobs compile the sources once, not each
if clear_stale_locks(Path.cwd()):
    sys.stderr.write("kernbench: removed the locks of an earlier run that was killed\n")


def _config_source():
    files = list(workflow.overwrite_configfiles or []) or list(workflow.configfiles or [])
    return str(files[-1]) if files else "config"


try:
    SWEEP = load_sweep(config, _config_source(), ROOT, SCHEMA, RAW)
except KernbenchError as _exc:
    sys.stderr.write(f"kernbench: config error: {_exc}\n")
    sys.exit(1)
CONFIG = SWEEP.config  # with schema defaults filled in

JOBS = SWEEP.by_output()
SIM_CODE = simulator_code_hash()  # of the kernbench being imported; simulator edits rerun points
EXPERIMENTS = SWEEP.experiments
EXPS = [SWEEP.experiment(name) for name in EXPERIMENTS]
PLUGINS = SWEEP.plugins
TABLES = expand(f"{TABLE_DIR}/{{experiment}}.csv", experiment=EXPERIMENTS)
FIGURES = [f"{FIGURE_DIR}/{stem}.{ext}" for exp in EXPS for stem in exp.figures
           for ext in ("pdf", "png")]
GENERATED = generated_files(EXPS, GENERATED_DIR)
# the sensitivity reruns' comparison (config `sensitivity`), when the config asks for any
SENSITIVITY = [f"{TABLE_DIR}/sensitivity.csv"] if SWEEP.sensitivity_outputs() else []
SETTINGS = CONFIG.get("sensitivity", {}).get("settings", {})
REPORT_SOURCES = sorted({f for exp in EXPS for f in exp.files})


def figure_caption(path):
    """The experiment's own caption (<stem>.rst next to its code), else a generic one."""
    stem = Path(path).stem
    for exp in EXPS:
        if stem in exp.figures:
            for f in exp.files:
                if Path(f).parent.joinpath(f"{stem}.rst").is_file():
                    return str(Path(f).parent / f"{stem}.rst")
    return "../report/figure.rst"


# In a conda env the env's python is first on PATH; otherwise use Snakemake's own.
_conda = "conda" in {str(m).lower() for m in workflow.deployment_settings.deployment_method}
PYTHON = "python" if _conda else sys.executable
KB = f"{PYTHON} -m kernbench.cli.main"
PLUGIN_ARGS = " ".join(f"--plugin {p}" for p in PLUGINS)
CONDA_ENV = "../envs/kernbench.yaml"


localrules:
    all,
    aggregate,
    sensitivity,
    report_generated,
    paper,
    site,


wildcard_constraints:
    experiment="[a-z][a-z0-9_]*",
    topology="[A-Za-z0-9][A-Za-z0-9_.-]*",
    workload="[^/]+",
    variant="[^/]+",


def job_estimate(wildcards):
    """A job's resource estimate from its experiment ({} without one)."""
    return SWEEP.estimate(job_of(wildcards))


BATCH_MEM_MB = 1000  # a batch of short points peaked at 463 MB (gqa decode, C = 8)


def job_resource(key, default):
    """A point's scheduler resource: its experiment's estimate, else the default."""

    def get(wildcards):
        value = job_estimate(wildcards).get(key)
        floor = default
        if key == "mem_mb" and "workloads" in job_of(wildcards).slice:
            floor = max(default, BATCH_MEM_MB)
        return floor if value is None else max(floor, int(value))

    return get


def job_priority(wildcards):
    """Long points start first (the scheduler's priority), so they do not trail the
    sweep: their experiment's runtime estimate in minutes, 0 without one."""
    return int(job_estimate(wildcards).get("runtime", 0))


def job_of(wildcards):
    path = f"{RAW}/{wildcards.experiment}/{wildcards.topology}/{wildcards.workload}/{wildcards.variant}.json"
    try:
        return JOBS[path]
    except KeyError:
        raise ValueError(f"{path} is not a point of the configured sweep") from None
