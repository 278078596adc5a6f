"""The analytic prediction of a model step: a roofline per op, alpha-beta per collective.

Each projection's time is the slower of its rank's HBM traffic at the PE's
slice bandwidth and its FLOPs at the MAC array's peak; each RMSNorm is four
passes over its rows on the vector engine (square, sum of squares, divide by
the RMS, times the weight); attention is the same
over a group's KV cache (decode) or its causal query-key pairs (prefill); RoPE,
the cache append and the prefill's layout copies are left out. Each all-reduce
is the collectives library's own alpha-beta prediction of the algorithm that ran
(``CollectiveResult.predicted_ns``, summed over the pieces a long prompt's rows
are reduced in). No launch or dispatch cost is counted, so the simulated step
should not be below it.
"""

from __future__ import annotations

from kernbench.experiments.gqa.bounds import compute_bound_ns, kv_bound_ns, query_key_pairs, work
from kernbench.experiments.gqa.common import Shape
from kernbench.experiments.llm.layer_run import COMM

F16 = 2


def roofline_ns(spec, nbytes: float, flops: float) -> float:
    """One PE: its HBM slice's time for ``nbytes`` or its array's for ``flops``."""
    return max(kv_bound_ns(spec, nbytes, 1), compute_bound_ns(spec, flops, 1))


def _gemm(spec, T: int, K: int, N: int) -> float:
    """One rank's [T, K] x [K, N] with f16 weights read once, f16 rows in and out."""
    return roofline_ns(spec, (K * N + T * K + T * N) * F16, 2 * T * K * N)


NORM_PASSES = 4  # x*x, sum(x*x), x / rms, * weight: each touches every element once


def norms_ns(spec, dims, T: int) -> float:
    """The layer's two RMSNorms over ``T`` rows of width D at the vector engine's peak."""
    return 2 * NORM_PASSES * T * dims.D / (spec.pe.vector_width * spec.pe.clock_ghz)


def _projections(spec, dims, m, T: int) -> dict:
    s = next(iter(m.slices.values()))
    D = dims.D
    return {"norms": norms_ns(spec, dims, T), "qkv": _gemm(spec, T, D, s.qk + s.v),
            "o_proj": _gemm(spec, T, s.o, D),
            "ffn": ffn_ns(spec, dims, m, T)}


def ffn_ns(spec, dims, m, T: int) -> float:
    """The dense SwiGLU FFN on one rank: its gate and up columns, then its down rows."""
    return _gemm(spec, T, dims.D, 2 * m.ffn_cols) + _gemm(spec, T, m.ffn_cols, dims.D)


def moe_ffn_ns(spec, dims, m, T: int, counts: list[int], layout, moved_ns: float = 0.0
               ) -> float:
    """The MoE FFN: the router over ``T`` rows, then the busiest rank's expert slices
    over the tokens routed to them (``counts`` per expert; its columns of gate and up,
    its rows of down), plus ``moved_ns``: the all-to-alls' alpha-beta predictions
    (expert parallelism)."""
    cf = layout.cols

    def rank_ns(idx: int) -> float:
        experts = [layout.slot(idx, s)[0] for s in range(layout.slots)]
        return sum(_gemm(spec, counts[e], dims.D, 2 * cf) + _gemm(spec, counts[e], cf, dims.D)
                   for e in experts if counts[e])

    ranks = range(layout.ranks) if layout.parallel == "ep" else range(1)  # tp: all alike
    return _gemm(spec, T, dims.D, dims.experts) + max(rank_ns(i) for i in ranks) + moved_ns


def decode_layer(spec, dims, m, T: int, S: int) -> dict:
    """Per-op lower bounds (ns) of one decode layer on mapping ``m``."""
    d, G = dims.d, dims.G
    keys = S + 1
    kv = T * keys * d * F16 * 2
    qk_flops = 2 * T * G * keys * d * 2
    ranks = m.C * m.P
    return {**_projections(spec, dims, m, T),
            "attention": roofline_ns(spec, kv / ranks, qk_flops / ranks)}


def prefill_layer(spec, dims, m, S: int) -> dict:
    """Per-op lower bounds (ns) of one causal prefill layer of ``S`` tokens: attention is
    a group's query-key pairs at the array's peak, or its K and V read once, over its
    ranks."""
    shape = Shape(dims.Hkv, dims.G, dims.d)
    flops = work(shape, S, 1, query_key_pairs(S, True))["flops"] / dims.Hkv
    ranks = m.C * m.P
    return {**_projections(spec, dims, m, S),
            "attention": roofline_ns(spec, S * dims.d * F16 * 2 / ranks, flops / ranks)}


def step(spec, dims, m, ops: dict, rows: int, head_rows: int, collectives: list[float]) -> dict:
    """The predicted step from one layer's op bounds; ``collectives`` are the alpha-beta
    predictions of the all-reduces in run order (embedding, then two per simulated
    layer); ``rows`` token rows are embedded and ``head_rows`` reach the LM head."""
    ops = dict(ops)
    ops["allreduce_attn"], ops["allreduce_ffn"] = collectives[-2], collectives[-1]
    layer = sum(ops.values())
    embedding = roofline_ns(spec, rows * dims.D * F16, 0) + collectives[0]
    head = _gemm(spec, head_rows, dims.D, m.vocab_cols)
    return {"layer_ns": ops, "layer_total_ns": layer, "embedding_ns": embedding,
            "lm_head_ns": head, "step_ns": embedding + dims.layers * layer + head}


def exposed(spans: dict) -> float:
    """Communication no compute hides: every data-movement step (the host runs the
    steps one after another, so nothing overlaps them)."""
    return sum(spans[p] for p in COMM)
