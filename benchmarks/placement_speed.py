"""Wall time of placing a model's layers in memory, layer after layer, with no simulation.

    python benchmarks/placement_speed.py [--json] [--only NAME ...] [--out PATH]

A decode step places each layer's weights and its users' KV caches before it runs
the layer (``kernbench model`` with ``--layers N``). Every placement allocates HBM in
each PE's slice and maps the tensor into the MMU of each PE that holds a shard. The
time per layer must stay flat as layers accumulate; a step that simulates every
layer places all of them. Workloads (each in a fresh process, the cyclic collector
off as ``kernbench model`` runs):

- ``decode_70b_40``: Llama 3 70B on llama70b_4sip (512 PEs), batch 16, context 32K,
  40 layers (the first half of the model);
- ``decode_8b_32``: Llama 3 8B on the default topology (256 PEs), batch 8, context 8K,
  all 32 layers.

Reports the total wall time, the first and last layer's placement time and their
ratio (1 means flat), next to the bare SimPy loop of the same run. Writes
benchmarks/out/placement_speed.json (or --out); asserts nothing.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

import numpy as np
import workload_report

from kernbench.experiments.llm.layer_run import DecodeLayer, LayerWeights
from kernbench.experiments.llm.mapping import Dims
from kernbench.experiments.llm.step import StepState
from kernbench.models import load_model
from kernbench.topology import load_topology

ROOT = Path(__file__).resolve().parents[1]

WORKLOADS = {
    "decode_70b_40": {"model": "llama3-70b", "topology": "llama70b_4sip", "batch": 16,
                      "context": 32768, "layers": 40},
    "decode_8b_32": {"model": "llama3-8b", "topology": "default", "batch": 8,
                     "context": 8192, "layers": 32},
}


def _place_layers(w: dict) -> list[float]:
    """Each layer's placement wall time (weights, then the KV caches), in order."""
    graph = load_topology(ROOT / "config" / "topologies" / f"{w['topology']}.yaml")
    dims = Dims.of(load_model(w["model"]))
    users, context = w["batch"], w["context"]
    st = StepState(graph, dims, users, np.full(users, context), None, False, 0,
               "lrab_hierarchical")
    layer = DecodeLayer(st.ctx, None, st.place, dims, users, context)  # places, never reduces
    times = []
    for l in range(w["layers"]):
        t0 = time.perf_counter()
        LayerWeights(st.place, dims, l, st.rng)
        layer.caches(l, st.rng)
        times.append(time.perf_counter() - t0)
    return times


def measure(name: str) -> dict:
    w = WORKLOADS[name]
    collecting = gc.isenabled()
    gc.freeze()
    gc.disable()
    try:
        t0 = time.perf_counter()
        times = _place_layers(w)
        wall = time.perf_counter() - t0
    finally:
        gc.unfreeze()
        if collecting:
            gc.enable()
    return {"layers": w["layers"], "wall_s": round(wall, 2),
            "first_layer_s": round(times[0], 3), "last_layer_s": round(times[-1], 3),
            "last_over_first": round(times[-1] / times[0], 2)}


def _line(name: str, w: dict) -> str:
    return (f"{name:>14s}: {w['wall_s']:7.1f} s for {w['layers']} layers, first "
            f"{w['first_layer_s']:.3f} s, last {w['last_layer_s']:.3f} s "
            f"(x{w['last_over_first']})")


if __name__ == "__main__":
    workload_report.run(__doc__, WORKLOADS, measure,
                        ROOT / "benchmarks" / "out" / "placement_speed.json", _line)
