"""The FFN half of a decoder layer alone: what the MoE study times at many points.

A layer's steps are launches the host waits for one after another, so its FFN
half (the RMSNorm fused into the router or FFN composite, the (MoE) FFN, the
FFN all-reduce) starts on a machine with nothing in flight, in the step as
here. Timing it alone costs a fraction of a whole step: attention, whose merges
grow with users x PEs, is left out. It runs on the step's own machinery (the
mapping, the collectives, ``DecodeLayer.ffn_block``), ``rounds`` times with fresh
weights and, for a MoE model, a fresh routing each round. Token rows are rows:
``tokens`` decode users and a prefill of ``tokens`` prompt tokens run the same
FFN half.
"""

from __future__ import annotations

import numpy as np

from kernbench.experiments.llm import analytic
from kernbench.experiments.llm.layer_run import DecodeLayer, LayerWeights
from kernbench.experiments.llm.mapping import Dims
from kernbench.experiments.llm.moe_run import MoeSettings, check_settings
from kernbench.experiments.llm.step import StepRun, StepState, _positive

BLOCK = ("norms", "ffn", "allreduce_ffn")


def run_ffn_block(graph, dims: Dims, tokens: int, *, tp: int | None = None,
                  rounds: int = 2, data: bool = False, seed: int = 0, model: str = "",
                  algorithm: str = "lrab_hierarchical",
                  moe: MoeSettings | None = None) -> StepRun:
    """Run the FFN half ``rounds`` times over ``tokens`` rows; the record reports the
    last round (``block_ns``), every round's total and the analytic prediction."""
    _positive("tokens", tokens)
    _positive("rounds", rounds)
    moe = check_settings(moe, dims)
    st = StepState(graph, dims, tokens, np.zeros(tokens, np.int64), tp, data, seed, algorithm)
    layer = DecodeLayer(st.ctx, st._all_reduce, st.place, dims, tokens, 1,
                        use_queues=st.use_queues, moe=moe)
    layout = layer.moe.layout if layer.moe else None
    if data:  # every rank starts from the same rows h, as after the attention all-reduce
        x = st.rng.standard_normal((tokens, dims.D)).astype(np.float16)
        st.bufs = (st.place.per_rank("h", (tokens, dims.D), "f16", lambda r: x), st.bufs[1])
        st.arrays["x"] = x.astype(np.float32)
    spans = []
    for l in range(rounds):
        w = LayerWeights(st.place, dims, l, st.rng, layout, attention=False)
        for k, v in w.arrays.items():
            st.arrays[f"l{l}.{k}"] = v.astype(np.float32)
        spans.append(layer.ffn_block(w, st.bufs))
        st.bufs = st.bufs[::-1]  # the output is the next round's input
    if data:
        st.arrays["out"] = st.read_x()
    return StepRun(_record(st, layer, spans, model, graph.spec), st.arrays, st.engine)


def _record(st: StepState, layer, spans: list[dict], model: str, spec) -> dict:
    dims, m, T = st.dims, st.mapping, st.T
    last = spans[-1]
    ops = {"norms": analytic.norms_ns(spec, dims, T) / 2}  # one of the layer's two norms
    if layer.moe is not None:
        moe = layer.moe
        ops["ffn"] = analytic.moe_ffn_ns(spec, dims, m, T, moe.counts, moe.layout,
                                         moe.moved_ns)
    else:
        ops["ffn"] = analytic.ffn_ns(spec, dims, m, T)
    ops["allreduce_ffn"] = st.collectives[-1]
    total = sum(last[p] for p in BLOCK)
    predicted = sum(ops.values())
    rec = {"model": model, "topology": spec.name, "links": spec.sharing, "tokens": T,
           "tp": m.tp, "pes": len(m.ranks), "collective": st.collective,
           "rounds": len(spans), "block_ns": {p: last[p] for p in BLOCK},
           "block_total_ns": total,
           "round_totals_ns": [sum(s[p] for p in BLOCK) for s in spans],
           "analytic": {"block_ns": ops, "total_ns": predicted},
           "analytic_error": (total - predicted) / predicted}
    if layer.moe is not None:
        rec["mixture"] = layer.moe.record(dims)
    return rec
