"""Snakemake script: write report/generated/ (values, hardware and study tables)."""
from pathlib import Path

from kernbench.report.generate import generate

config = {"topologies": snakemake.params.topologies, "report": snakemake.params.report}  # noqa: F821
tables = {Path(t).stem: t for t in snakemake.input.tables}  # noqa: F821
generate(config, tables, "report/generated", expected=snakemake.output)  # noqa: F821
