"""Snakemake script: write report/generated/ (values, tables, the experiments' sections)."""
from pathlib import Path

from kernbench.experiments.registry import load_plugins
from kernbench.report.generate import generate

load_plugins(snakemake.params.plugins)  # noqa: F821
config = {"topologies": snakemake.params.topologies, "report": snakemake.params.report,  # noqa: F821
          "sensitivity": {"settings": snakemake.params.settings},  # noqa: F821
          "whatif": snakemake.params.whatif}  # noqa: F821
tables = {Path(t).stem: t for t in snakemake.input.tables}  # noqa: F821
sensitivity = next(iter(snakemake.input.sensitivity), None)  # noqa: F821
generate(config, tables, snakemake.params.out_dir, expected=snakemake.output,  # noqa: F821
         sensitivity=sensitivity)
