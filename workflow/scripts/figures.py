"""Snakemake script: render every figure from the aggregated tables."""
from kernbench.analysis.figures import render_all

render_all(snakemake.input, "results/figures", expected=snakemake.output)  # noqa: F821
