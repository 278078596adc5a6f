"""Wall time of whole-model steps (``kernbench model``), against the issue's targets.

    python benchmarks/llm_speed.py [--json] [--only NAME ...] [--out PATH]

Workloads (timing mode, each in a fresh process, one core, the cyclic collector off as
``kernbench model`` runs):

- ``decode_70b``: Llama 3 70B on llama70b_4sip (all 512 PEs), 80 layers, batch 16,
  context 32K; three layers simulated, the step counting the last for the other 77
  (target: <= 60 s);
- ``decode_70b_fifo``: the same step with FIFO link bookings (``fabric.sharing: fifo``),
  the link model the default study runs with (docs/adr/0042), two layers simulated;
- ``decode_8b``: Llama 3 8B on the default topology (256 PEs), batch 8, context 8K,
  three layers simulated (the default study's heaviest point);
- ``decode_tiny``: the two-layer tiny-gqa model on small_2x2 (the smoke study's size);
- ``prefill_8b``: Llama 3 8B on the default topology, one 256-token prompt, one layer
  simulated (the default study's longest prefill point);
- ``prefill_tiny``: the tiny model's two layers over a 300-token prompt;
- ``prefill_8b_every_piece``: ``prefill_8b`` with every all-reduce piece simulated
  (``--simulate-every-piece``), the baseline of the replayed pieces (docs/adr/0050);
- ``prefill_70b_1k`` / ``prefill_70b_8k``: Llama 3 70B on llama70b_4sip, one prompt of
  1,024 / 8,192 tokens, one layer simulated, FIFO links (the issue's target for 8K:
  <= 5 minutes). Each [S, D] all-reduce is S / 64 pieces of 1 MiB, of which one is
  simulated; each projection launch (61 / 482 row blocks of 17 token rows) is
  simulated with 2 and 3 blocks and counts the rest (docs/adr/0057), so attention and
  the ring layout's copies grow with S. ``prefill_70b_1k_every_block`` simulates every
  block of the 1K prompt, the baseline of the counted ones (about half an hour on a
  machine whose bare SimPy loop runs 0.5 M events/s: time it alone with ``--only``);
- ``decode_mixtral_tp`` / ``decode_mixtral_ep``: Mixtral 8x7B (32 layers, 8 experts,
  top 2) on the default topology, batch 16, context 4K, FIFO links, two layers
  simulated, experts tensor- or expert-parallel (the MoE issue's target: <= 60 s);
- ``study_mixtral_tp`` / ``study_mixtral_ep``: the same step as the ``moe`` study runs it
  (llama70b_4sip, 64 ranks: one PE per CUBE, context 512, FIFO links), two layers
  simulated.

Each reports wall seconds, the simulated step (TPOT or TTFT), the spread of the
simulated layers after the first, the all-reduce pieces simulated and replayed, and the
bare SimPy events per second of the same run (so machines compare). Writes benchmarks/out/llm_speed.json (or --out); asserts nothing.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

import workload_report

from kernbench.experiments.llm.mapping import Dims
from kernbench.experiments.llm.moe_run import MoeSettings
from kernbench.experiments.llm.study import step_function
from kernbench.models import load_model
from kernbench.topology import load_topology

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGIES = ROOT / "config" / "topologies"

TINY = str(ROOT / "config/models/tiny-gqa.yaml")
FIFO = {"fabric.sharing": "fifo"}


def _workload(model: str, topology: str, phase: str, batch: int, context: int, layers: int,
              overrides: dict | None = None, moe: MoeSettings | None = None,
              tp: int | None = None, replay: bool = True, count_blocks: bool = True) -> dict:
    """One step to time: ``layers`` decoder layers simulated, ``tp`` ranks (None: the
    mapping's default, every PE); ``replay`` False simulates every all-reduce piece,
    ``count_blocks`` False every projection row block."""
    return {"model": model, "topology": topology, "phase": phase, "batch": batch,
            "context": context, "layers": layers, "overrides": overrides, "moe": moe, "tp": tp,
            "replay": replay, "count_blocks": count_blocks}


WORKLOADS = {
    "decode_70b": _workload("llama3-70b", "llama70b_4sip", "decode", 16, 32768, 3),
    "decode_70b_fifo": _workload("llama3-70b", "llama70b_4sip", "decode", 16, 32768, 2, FIFO),
    "decode_8b": _workload("llama3-8b", "default", "decode", 8, 8192, 3),
    "decode_tiny": _workload(TINY, "small_2x2", "decode", 2, 64, 2),
    "prefill_8b": _workload("llama3-8b", "default", "prefill", 1, 256, 1),
    "prefill_tiny": _workload(TINY, "small_2x2", "prefill", 1, 300, 2),
    "prefill_8b_every_piece": _workload("llama3-8b", "default", "prefill", 1, 256, 1,
                                        replay=False),
    "prefill_70b_1k": _workload("llama3-70b", "llama70b_4sip", "prefill", 1, 1024, 1, FIFO),
    "prefill_70b_8k": _workload("llama3-70b", "llama70b_4sip", "prefill", 1, 8192, 1, FIFO),
    "prefill_70b_1k_every_block": _workload("llama3-70b", "llama70b_4sip", "prefill", 1, 1024,
                                            1, FIFO, count_blocks=False),
    "decode_mixtral_tp": _workload("mixtral-8x7b", "default", "decode", 16, 4096, 2, FIFO,
                                   MoeSettings(parallel="tp")),
    "decode_mixtral_ep": _workload("mixtral-8x7b", "default", "decode", 16, 4096, 2, FIFO,
                                   MoeSettings(parallel="ep")),
    "study_mixtral_tp": _workload("mixtral-8x7b", "llama70b_4sip", "decode", 16, 512, 2, FIFO,
                                  MoeSettings(parallel="tp"), tp=64),
    "study_mixtral_ep": _workload("mixtral-8x7b", "llama70b_4sip", "decode", 16, 512, 2, FIFO,
                                  MoeSettings(parallel="ep"), tp=64),
}


def measure(name: str) -> dict:
    """One step, timed as ``kernbench model`` runs it: with the cyclic collector off
    (the command turns it off at start, ADR 0047). Left on, it rescans the step's
    tensors and page tables while the host places them, between the engine's runs."""
    w = WORKLOADS[name]
    graph = load_topology(TOPOLOGIES / f"{w['topology']}.yaml", w["overrides"])
    dims = Dims.of(load_model(w["model"]))
    extra = {k: w[k] for k in ("moe", "tp") if w[k] is not None}
    extra["replay"], extra["count_blocks"] = w["replay"], w["count_blocks"]
    collecting = gc.isenabled()
    gc.freeze()
    gc.disable()
    try:
        t0 = time.perf_counter()
        rec = step_function(w["phase"])(graph, dims, w["batch"], w["context"],
                                        layers=w["layers"], **extra).record
        wall = time.perf_counter() - t0
    finally:
        gc.unfreeze()
        if collecting:
            gc.enable()
    return {"phase": w["phase"], "wall_s": round(wall, 2), "step_ns": rec["step_ns"],
            "layers": rec["layers"], "simulated_layers": rec["simulated_layers"],
            "layer_spread": rec["layer_spread"], "pes": rec["pes"],
            "links": graph.spec.sharing,
            "all_reduce_pieces": {k: rec["collective"][k]
                                  for k in ("simulated_pieces", "replayed_pieces")},
            "row_blocks": rec["row_blocks"]}


def _line(name: str, w: dict) -> str:
    what = "TPOT" if w["phase"] == "decode" else "TTFT"
    return (f"{name:>12s}: {w['wall_s']:8.1f} s wall, {what} {w['step_ns'] / 1e6:.3f} ms "
            f"({w['simulated_layers']} of {w['layers']} layers, spread {w['layer_spread']}, "
            f"{w['links']} links)")


def main() -> None:
    workload_report.run(__doc__, WORKLOADS, measure, ROOT / "benchmarks" / "out" / "llm_speed.json",
                        _line)


if __name__ == "__main__":
    main()
