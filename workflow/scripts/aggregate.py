"""Snakemake script: aggregate one experiment's records into its CSV table."""
from kernbench.analysis.aggregate import write_table

write_table(snakemake.wildcards.experiment, snakemake.input, snakemake.output[0])  # noqa: F821
