"""Snakemake script: pair every sensitivity rerun with its default run (one CSV)."""
from kernbench.report.sensitivity import write_csv

write_csv(snakemake.input, snakemake.output[0])  # noqa: F821
