"""Snakemake script: render one experiment's figures from its aggregated table."""
from kernbench.report.pipeline import render_figures

render_figures([snakemake.input.table], snakemake.params.out_dir,  # noqa: F821
               snakemake.params.plugins, expected=snakemake.output)  # noqa: F821
