"""The analytic prediction of a model step: a roofline per op, alpha-beta per collective.

Each projection's time is the slower of its rank's HBM traffic at the PE's
slice bandwidth and its FLOPs at the MAC array's peak; attention is the same
over a group's KV cache; RoPE and the cache append are left out (a few KiB
per group). Each all-reduce is the collectives library's own alpha-beta
prediction of the algorithm that ran (``CollectiveResult.predicted_ns``). No
launch or dispatch cost is counted, so the simulated step should not be
below it.
"""

from __future__ import annotations

from kernbench.experiments.gqa.bounds import compute_bound_ns, kv_bound_ns
from kernbench.experiments.llm.layer_run import COMM

F16 = 2


def roofline_ns(spec, nbytes: float, flops: float) -> float:
    """One PE: its HBM slice's time for ``nbytes`` or its array's for ``flops``."""
    return max(kv_bound_ns(spec, nbytes, 1), compute_bound_ns(spec, flops, 1))


def _gemm(spec, T: int, K: int, N: int) -> float:
    """One rank's [T, K] x [K, N] with f16 weights read once, f16 rows in and out."""
    return roofline_ns(spec, (K * N + T * K + T * N) * F16, 2 * T * K * N)


def decode_layer(spec, dims, m, T: int, S: int) -> dict:
    """Per-op lower bounds (ns) of one decode layer on mapping ``m``."""
    s = next(iter(m.slices.values()))
    D, d, G = dims.D, dims.d, dims.G
    keys = S + 1
    kv = T * keys * d * F16 * 2
    qk_flops = 2 * T * G * keys * d * 2
    ranks = m.C * m.P
    return {
        "qkv": _gemm(spec, T, D, s.qk + s.v),
        "attention": roofline_ns(spec, kv / ranks, qk_flops / ranks),
        "o_proj": _gemm(spec, T, s.o, D),
        "ffn": _gemm(spec, T, D, 2 * m.ffn_cols) + _gemm(spec, T, m.ffn_cols, D),
    }


def decode_step(spec, dims, m, T: int, S: int, collectives: list[float]) -> dict:
    """The predicted step; ``collectives`` are the alpha-beta predictions of the
    all-reduces in run order (embedding, then two per simulated layer)."""
    ops = decode_layer(spec, dims, m, T, S)
    ops["allreduce_attn"], ops["allreduce_ffn"] = collectives[-2], collectives[-1]
    layer = sum(ops.values())
    embedding = roofline_ns(spec, T * dims.D * F16, 0) + collectives[0]
    head = _gemm(spec, T, dims.D, m.vocab_cols)
    return {"layer_ns": ops, "layer_total_ns": layer, "embedding_ns": embedding,
            "lm_head_ns": head, "step_ns": embedding + dims.layers * layer + head}


def exposed(spans: dict) -> float:
    """Communication no compute hides: every data-movement step (the host runs the
    steps one after another, so nothing overlaps them)."""
    return sum(spans[p] for p in COMM)
