"""The ``llm`` experiment: whole-model inference steps on a system.

Workloads per topology: every entry of ``points`` (a model, a phase and a
batch x context grid) gives points ``<model>-<phase>-b<batch>-s<context>``; one
variant, ``base``. A point that fits the HBM runs one step (decode: TPOT;
prefill: TTFT) with the per-layer breakdown, tokens per second per user and
per system and the analytic prediction with its error; one that does not is
recorded with the bytes it needs and the system has. Hardware what-if reruns
(config ``whatif``) join the study's table beside the default points.

The study is this package: the decoder layer and the step (``layer_run``,
``step``, ``mapping``, ``tensors``, ``analytic``, ``reference``), the HBM fit
(``fit``), the points (``study``), table, values and paper tables (``post``),
figures (``post_figures``), the schema and the paper text.
"""

from __future__ import annotations

import sys

from kernbench.experiments.llm import study
from kernbench.experiments.registry import (
    Experiment,
    package_files,
    package_schema,
    package_text,
    register,
)

register(Experiment(
    name=study.NAME,
    title="Whole-model inference",
    topic="whole-model inference steps with tensor parallelism and hardware what-ifs",
    schema=package_schema(__name__),
    expand=study.expand,
    run=study.run,
    post=f"{__name__}.post",
    figures=("llm_breakdown", "llm_serving", "llm_comm_share", "llm_whatif"),
    tables=("llm_table", "llm_whatif_table"),
    section=package_text(__name__, "section.tex"),
    abstract=package_text(__name__, "abstract.tex"),
    conclusion=package_text(__name__, "conclusion.tex"),
    order=50,
    files=package_files(sys.modules[__name__]),
    whatif=True,
    post_keys=("tpot_target_ms",),
))
