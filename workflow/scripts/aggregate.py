"""Snakemake script: aggregate one experiment's records into its CSV table."""
from kernbench.report.pipeline import aggregate

aggregate(snakemake.wildcards.experiment, snakemake.input, snakemake.output[0],  # noqa: F821
          snakemake.params.plugins, snakemake.params.settings)  # noqa: F821
