"""Post-processing of the ``gemm`` experiment: table, figures, values, paper table.

Everything is derived from the aggregated table, so the same keys exist for
the full sweep and the smoke run. Reference shapes are chosen from what is
present: the largest compute-intensive and the largest memory-intensive shape
(the bound an ideal array would have, ``roofline.intensity``) of the one-PE
composite kernel on the first topology. A quantity that cannot be
formed from the table (no memory-bound shape, no CUBE variant, ...) is a
missing value (typeset as ``--``). Imported only by aggregation, figures and
the report. The table is built in ``table``, figures in ``figures``, values in
``values``, the paper table in ``paper_table``; this module is their entry point.
"""

from __future__ import annotations

from kernbench.experiments.gemm.figures import figures
from kernbench.experiments.gemm.paper_table import tables
from kernbench.experiments.gemm.table import busy_column, frame, held_b, load
from kernbench.experiments.gemm.values import values

__all__ = ["SUMMARY", "busy_column", "figures", "frame", "held_b", "load", "tables", "values"]

SUMMARY = (
    "{records} points: {shapes} shapes x {variants} variants on {topology}",
    "composite on one PE, {comp/compute/count} compute-intensive shapes: {comp/compute/errpctmin}-"
    "{comp/compute/errpctmax} % above the roofline, MAC utilisation {comp/compute/utilmin}-"
    "{comp/compute/utilmax} %, {comp/compute/excessmin}-{comp/compute/excessmax} us over it",
    "composite on one PE, {comp/memory/count} memory-intensive shapes: {comp/memory/errpctmin}-"
    "{comp/memory/errpctmax} % above the roofline, MAC utilisation {comp/memory/utilmin}-"
    "{comp/memory/utilmax} %, {comp/memory/excessmin}-{comp/memory/excessmax} us over it",
    "primitive kernel: {prim/slowdownmin}-{prim/slowdownmax}x slower than the composite; "
    "{prim/commandsmin}-{prim/commandsmax} commands, PE_CPU dispatch {prim/cpusharemin}-"
    "{prim/cpusharemax} % of its time",
    "prefetch kernel: {pref/slowdownmin}-{pref/slowdownmax}x slower than the composite; "
    "{pref/commandsmin}-{pref/commandsmax} commands, PE_CPU dispatch {pref/cpusharemin}-"
    "{pref/cpusharemax} % of its time",
    "composite split over {cubepes} PEs: {cube/speedupmin}-{cube/speedupmax}x faster than one PE",
)
