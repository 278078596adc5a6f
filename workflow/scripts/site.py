"""Snakemake script: build results/site/ (figures, headline numbers, capacity planner)."""
from pathlib import Path

from kernbench.capacity.planner import Chip, Efficiency
from kernbench.capacity.steps import site_grids
from kernbench.experiments.registry import load_plugins
from kernbench.report.site import build, planner_data, study_panels
from kernbench.report.summary import headline_lines

sm = snakemake  # noqa: F821
load_plugins(sm.params.plugins)
tables = {Path(t).stem: t for t in sm.input.tables}
config = {"topologies": sm.params.topologies, "report": sm.params.report}
heads = headline_lines(list(tables), tables, config)
figures = [(png, Path(cap).read_text().strip()) for png, cap in zip(sm.input.figures,
                                                                     sm.params.captions,
                                                                     strict=True)]
chips = [Chip.from_topology(path) for path in sm.params.topologies.values()]
study = tables.get(sm.params.efficiency_table)  # the attention study's table, when it ran
eff = Efficiency.from_table(Path(study)) if study else None
steps = tables.get(sm.params.steps_table)  # the llm study's simulated steps, when it ran
build(Path(sm.output.index).parent, sm.params.report["title"], heads, figures,
      planner_data(chips, eff, site_grids(Path(steps)) if steps else None),
      study_panels(tables))
