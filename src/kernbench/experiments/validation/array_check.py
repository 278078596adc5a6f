"""The GEMM array against SCALE-Sim v3: one group of shapes, cycle for cycle.

Each shape runs as one ``tl.dot`` on a simulated PE (``run_single_gemm``) and
on SCALE-Sim in the reference environment; the simulated cycles are what the
GEMM unit was booked for, read back from its timeline, not the formula that
booked it. SCALE-Sim counts from cycle 0, so under the SCALE-Sim array setting
the two differ by one cycle by construction (docs/adr/0032).
"""

from __future__ import annotations

from kernbench.errors import ConfigError
from kernbench.references.gemm_reference import Shape, run_scalesim
from kernbench.topology import load_topology
from kernbench.topology.graph import TopologyGraph
from kernbench.workloads.gemm_single import run_single_gemm

REFERENCE = "scalesim"
METRIC = "compute_cycles"


def shapes_of(groups: dict, source: str, key: str) -> list[tuple[str, dict]]:
    """One workload per group; shape names must be unique over all groups."""
    seen: dict[str, str] = {}
    workloads = []
    for group, block in groups.items():
        for i, shape in enumerate(block["shapes"]):
            if shape["name"] in seen:
                raise ConfigError(source, f"{key}.{group}.shapes[{i}].name",
                                  f"{shape['name']!r} is already a shape of group "
                                  f"{seen[shape['name']]!r}; names must be unique")
            seen[shape["name"]] = group
        workloads.append((f"scalesim-{group}", {"kind": REFERENCE, "group": group,
                                                "array": block.get("array"),
                                                "shapes": block["shapes"]}))
    return workloads


def _graph_for(graph: TopologyGraph, array: dict | None) -> TopologyGraph:
    """``graph``, or the same topology with the group's array size."""
    if not array:
        return graph
    return load_topology(graph.spec.source, {"pe.gemm.mac_rows": array["rows"],
                                             "pe.gemm.mac_cols": array["cols"]})


def run(graph: TopologyGraph, workload: dict) -> dict:
    """Every shape of the group on the simulated array and on SCALE-Sim."""
    target = _graph_for(graph, workload.get("array"))
    gemm = target.spec.pe.gemm
    shapes = [Shape(s["name"], s["m"], s["k"], s["n"], s.get("stationary", "b"),
                    gemm.mac_rows, gemm.mac_cols) for s in workload["shapes"]]
    answer = run_scalesim(shapes)
    rows = []
    for shape in shapes:
        ours = run_single_gemm(target, shape.m, shape.k, shape.n, "f16", shape.stationary)
        theirs = answer["cycles"][shape.name]
        rows.append({"reference": REFERENCE, "scenario": shape.name, "metric": METRIC,
                     "simulated": ours.array_cycles, "reference_value": theirs,
                     "rel_err": abs(ours.array_cycles - theirs) / theirs,
                     "diff_cycles": ours.array_cycles - theirs,
                     "stall_cycles": answer["stalls"][shape.name],
                     "m": shape.m, "k": shape.k, "n": shape.n, "stationary": shape.stationary,
                     "mac_rows": shape.rows, "mac_cols": shape.cols})
    worst = max(rows, key=lambda r: abs(r["diff_cycles"]))
    return {
        "metrics": {"rows": rows, "max_rel_error": max(r["rel_err"] for r in rows),
                    "max_abs_diff_cycles": abs(worst["diff_cycles"]),
                    "reference_version": answer["version"]},
        "prediction": {"model": f"SCALE-Sim v{answer['version']}, weight-stationary "
                                f"{gemm.mac_rows} x {gemm.mac_cols}, ample SRAM and bandwidth",
                       "rel_error": max(r["rel_err"] for r in rows)},
        "op_counts": {"shapes": len(rows),
                      "reference_cycles": sum(r["reference_value"] for r in rows)},
        "labels": {"kind": REFERENCE, "group": workload["group"]},
    }
