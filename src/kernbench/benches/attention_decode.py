"""Decode-attention benches: one PE sweeps a KV shard with opt3 or opt2 tiles.

Environment variables (docs/adr/0020-bench-modules.md): ATTN_G (query heads per KV head, default
8), ATTN_D (head dim, 128), ATTN_S (KV length, 1024), ATTN_TILE (64).
"""

from __future__ import annotations

import math

from kernbench.benches._shapes import bench_input, env_int
from kernbench.benches.registry import bench
from kernbench.kernels.attention_decode import VARIANTS


def run_decode(torch, variant: str):
    G, d = env_int("ATTN_G", 8), env_int("ATTN_D", 128)
    S, tile = env_int("ATTN_S", 1024), env_int("ATTN_TILE", 64)
    q = bench_input(torch, (G, d), "f16", "Q")
    kT = bench_input(torch, (d, S), "f16", "K_T")
    v = bench_input(torch, (S, d), "f16", "V")
    m = torch.empty((G, 1), "f32", name="m")
    l_ = torch.empty((G, 1), "f32", name="l")
    o = torch.empty((G, d), "f32", name="O")
    handle = torch.launch(f"decode-{variant}", VARIANTS[variant], q, kT, v, m, l_, o, G, d, S,
                          tile, 1.0 / math.sqrt(d))
    torch.wait(handle)
    return handle


@bench(name="decode-attention-opt3",
       description="Decode attention on one PE: software-pipelined primitives (opt3).")
def run_opt3(torch):
    return run_decode(torch, "opt3")


@bench(name="decode-attention-opt2",
       description="Decode attention on one PE: two composites per tile with softmax_merge.")
def run_opt2(torch):
    return run_decode(torch, "opt2")
