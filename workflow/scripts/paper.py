"""Snakemake script: compile the paper with Tectonic or latexmk."""
from kernbench.report.build import build_pdf

build_pdf("report/paper.tex", snakemake.output.pdf, snakemake.params.engine,  # noqa: F821
          log=snakemake.log[0])  # noqa: F821
