"""Post-processing of the ``allreduce`` experiment: table, figures, values, paper tables.

One table holds three kinds of rows (column ``kind``): ``collective`` (one per
algorithm x buffer kind x size x topology), ``pe2pe`` (pair x size) and
``reference`` (one per topology). Every value is derived from it; a quantity
the table cannot give (the smoke run has one topology) is a missing value.
Imported only by aggregation, figures and the report. The table is built in
``table``, figures in ``figures``, values in ``values``, the paper tables in
``paper_tables``; this module is their entry point.
"""

from __future__ import annotations

from kernbench.experiments.allreduce.figures import figures
from kernbench.experiments.allreduce.paper_tables import tables
from kernbench.experiments.allreduce.table import frame, load
from kernbench.experiments.allreduce.values import values

__all__ = ["SUMMARY", "figures", "frame", "load", "tables", "values"]

SUMMARY = (
    "{points} collective points: {algorithms} algorithms x {sizes} sizes ({minsize} B to "
    "{maxsize} B per rank) on {topologies} SIP topologies, {ranks} ranks each",
    "ring at {maxsize} B on {ref/topology}: busbw {ring/busbw} GB/s against "
    "{ring/predbusbw} GB/s predicted (error {ring/busbwerrpct} %); at {minsize} B "
    "{ring/smalllat} us against {ring/smallpred} us ({ring/smallerrpct} %)",
    "fastest at {maxsize} B on {ref/topology}: {best/large} ({best/largelat} us); "
    "at {minsize} B: {best/small} ({best/smalllat} us)",
    "largest model error over all points: {maxerrpct} %; packet reference makespan error "
    "{reference/maxerrpct} %",
    "one {pe2pe/size} B message SIP0 -> SIP1: {pe2pe/sipipcq} ns through IPCQ, "
    "{pe2pe/sipdma} ns as a raw DMA write",
)
