"""The ``validation`` experiment: each timing model against an outside reference.

Three checks, each a family of workloads (docs/adr/0035):

* ``scalesim-<group>``: GEMM shapes as one ``tl.dot`` on the simulated array
  against SCALE-Sim v3 (``array_check``);
* ``alone-<flow>`` and the contended scenarios: the analytic fabric against
  the packet-level reference (``fabric_check``);
* ``ns3``: the packet reference against ns-3 (``ns3_check``).

Every record lists its comparisons under ``metrics.rows`` in the columns of
``results/tables/validation.csv`` (reference, scenario, metric, simulated,
reference_value, rel_err). SCALE-Sim and ns-3 run in the reference
environment (``kernbench.references``); a missing tool fails the job with one
line saying how to install it. Its paper text is the validation section.
"""

from __future__ import annotations

import sys

from kernbench.experiments.registry import (
    Experiment,
    package_files,
    package_schema,
    package_text,
    register,
)
from kernbench.experiments.validation import array_check, fabric_check, ns3_check
from kernbench.topology.graph import TopologyGraph
from kernbench.topology.spec import TopologySpec

NAME = "validation"
VARIANT = "ref"  # one variant: each reference's settings are in its own block


def expand(block: dict, spec: TopologySpec, source: str):
    key = f"experiments.{NAME}"
    workloads = []
    if "scalesim" in block:
        workloads += array_check.shapes_of(block["scalesim"], source, f"{key}.scalesim")
    if "packet" in block:
        workloads += fabric_check.workloads(block["packet"], spec, source, f"{key}.packet")
    if "ns3" in block:
        workloads += ns3_check.workloads(block["ns3"], source, f"{key}.ns3")
    return workloads, [(VARIANT, {})]


RUNS = {"scalesim": array_check.run, "alone": fabric_check.run_alone,
        "contended": fabric_check.run_contended, "ns-3": ns3_check.run}


def run(graph: TopologyGraph, workload: dict, variant: dict) -> dict:
    return RUNS[workload["kind"]](graph, workload)


def batch(workload_id: str, workload: dict) -> str | None:
    """The lone flows share one job (each takes a fraction of a process start)."""
    return "alone-flows" if workload["kind"] == "alone" else None


register(Experiment(
    name=NAME,
    title="Validation against outside references",
    topic="the validation of the GEMM array and the fabric against SCALE-Sim, a packet-level "
          "reference and ns-3",
    schema=package_schema(__name__),
    expand=expand,
    run=run,
    post=f"{__name__}.post",
    figures=("validation_scalesim", "validation_packet", "validation_ns3"),
    tables=("validation_table", "validation_contended_table"),
    section=package_text(__name__, "section.tex"),
    abstract=package_text(__name__, "abstract.tex"),
    conclusion=package_text(__name__, "conclusion.tex"),
    order=5,
    batch=batch,
    files=package_files(sys.modules[__name__]),
))
