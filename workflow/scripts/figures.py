"""Snakemake script: render every experiment's figures from its aggregated table."""
from kernbench.report.pipeline import render_figures

render_figures(snakemake.input.tables, snakemake.params.out_dir,  # noqa: F821
               snakemake.params.plugins, expected=snakemake.output)  # noqa: F821
