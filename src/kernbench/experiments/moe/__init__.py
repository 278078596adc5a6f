"""The ``moe`` experiment: mixture-of-experts layers, expert against tensor parallelism.

Points per topology (``study``): the FFN half of a MoE layer for tokens in
flight x layout x routing skew x capacity factor, whole decode and prefill steps in each
layout, and all-to-all algorithms against message size. One variant, ``base``,
carrying the study's topology overrides where layers or steps run. The layer
and the step are the ``llm`` study's own (``experiments.llm.block``, ``step``);
this package holds the points, the table, values and figures (``post``,
``post_values``, ``post_figures``) and the paper text.
"""

from __future__ import annotations

import sys

from kernbench.experiments.moe import study
from kernbench.experiments.registry import (
    Experiment,
    package_files,
    package_schema,
    package_text,
    register,
)

register(Experiment(
    name=study.NAME,
    title="Mixture of experts",
    topic="mixture-of-experts layers under expert and tensor parallelism with all-to-all",
    schema=package_schema(__name__),
    expand=study.expand,
    run=study.run,
    post=f"{__name__}.post",
    figures=("moe_layouts", "moe_skew", "moe_capacity", "moe_alltoall"),
    tables=("moe_table", "moe_alltoall_table"),
    section=package_text(__name__, "section.tex"),
    abstract=package_text(__name__, "abstract.tex"),
    conclusion=package_text(__name__, "conclusion.tex"),
    order=60,
    batch=study.batch,
    files=package_files(sys.modules[__name__]),
))
