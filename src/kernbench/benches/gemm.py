"""GEMM benches: C = A @ B with the primitive, prefetching and composite kernels.

Environment variables (docs/adr/0020-bench-modules.md): GEMM_M, GEMM_K, GEMM_N set the shape
(default 128 x 256 x 128).
"""

from __future__ import annotations

from kernbench.benches._shapes import bench_input, env_int
from kernbench.benches.registry import bench
from kernbench.errors import UsageError
from kernbench.kernels.gemm import VARIANTS
from kernbench.policy.placement import DPPolicy


def _shape() -> tuple[int, int, int]:
    return env_int("GEMM_M", 128), env_int("GEMM_K", 256), env_int("GEMM_N", 128)


def run_gemm(torch, variant: str, pes: int = 1):
    """Deploy A (replicated), B and C (split by columns over ``pes`` PEs) and run one variant."""
    M, K, N = _shape()
    if N % pes:
        raise UsageError(f"GEMM_N = {N} must divide evenly over the {pes} PEs of a CUBE")
    split = DPPolicy(pe="column_wise", num_pes=pes) if pes > 1 else DPPolicy()
    a = bench_input(torch, (M, K), "f16", "A", DPPolicy(num_pes=pes))
    b = bench_input(torch, (K, N), "f16", "B", split)
    c = torch.empty((M, N), "f32", dp=split, name="C")
    handle = torch.launch(f"gemm-{variant}", VARIANTS[variant], a, b, c, M, K, N // pes,
                          dp=DPPolicy(num_pes=pes))
    torch.wait(handle)
    return handle


@bench(name="gemm-primitive", description="GEMM on one PE with tl.load/tl.dot/tl.store per tile.")
def run_primitive(torch):
    return run_gemm(torch, "primitive")


@bench(name="gemm-prefetch", description="GEMM on one PE, next tiles loaded while this one computes.")
def run_prefetch(torch):
    return run_gemm(torch, "prefetch")


@bench(name="gemm-composite", description="GEMM on one PE as a single tl.composite(op='gemm').")
def run_composite(torch):
    return run_gemm(torch, "composite")


@bench(name="gemm-composite-cube",
       description="GEMM split by columns over the 8 PEs of a CUBE, each a composite.")
def run_composite_cube(torch):
    return run_gemm(torch, "composite", pes=torch.spec.pes_per_cube)
