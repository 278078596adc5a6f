"""What every attention run of the gqa study shares: the model shape, inputs, the
result record, op counts, engine occupancy and the launch-to-finish span."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from kernbench.components.builtin.gemm_array import STATIONARY
from kernbench.errors import UsageError
from kernbench.policy.placement import DPPolicy

# Llama-3 70B attention: 64 query heads over 8 KV heads of dimension 128.
H_Q, H_KV, HEAD_DIM = 64, 8, 128
MODES = ("decode", "prefill", "short")

# Op-count families the study reports (op-log names summed into each).
COUNT_FAMILIES = {
    "gemm": ("composite_gemm", "gemm_f16", "gemm_f32", "gemm_bf16"),
    "ipcq_copy": ("ipcq_copy",),
    "dma_read": ("dma_read", "TileToken/DMA_READ"),
    "dma_write": ("dma_write", "TileToken/DMA_WRITE"),
}
# PE_DMA reports how long its channels were held; occupancy counts a DMA while its
# transfer is in flight instead (the union of the op log's intervals of that stage)
IN_FLIGHT = {"dma_read_channel": ("dma_read", "DMA_READ"),
             "dma_write_channel": ("dma_write", "DMA_WRITE")}


@dataclass(frozen=True)
class Shape:
    """One attention layer's heads: ``heads`` KV heads of G query heads each."""

    heads: int = H_KV
    G: int = H_Q // H_KV
    d: int = HEAD_DIM

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.d)


@dataclass
class AttentionRun:
    """One simulated attention layer and what the study reports about it."""

    mode: str
    topology: str
    context: int
    users: int
    params: dict
    latency_ns: float
    bound_ns: float
    bound_kind: str
    op_counts: dict
    families: dict
    occupancy: dict
    pes: int
    phases: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)  # logical inputs/outputs (data mode)
    max_error: float | None = None
    engine: object = field(default=None, repr=False)

    @property
    def gap(self) -> float:
        """(latency - bound) / bound."""
        return (self.latency_ns - self.bound_ns) / self.bound_ns

    def summary(self) -> dict:
        out = {"mode": self.mode, "topology": self.topology, "context": self.context,
               "users": self.users, **self.params, "latency_ns": self.latency_ns,
               "bound_ns": self.bound_ns, "bound": self.bound_kind, "gap": self.gap,
               "pes": self.pes, "op_counts": self.families, "occupancy_pct": self.occupancy,
               "phases_ns": self.phases}
        if self.max_error is not None:
            out["max_abs_error"] = self.max_error
        return out


def check_positive(name: str, value, allowed: str = "a positive integer") -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UsageError(f"--{name} must be {allowed}, got {value!r}")
    return value


def check_stationary(stationary: str) -> None:
    if stationary not in STATIONARY:
        raise UsageError(f"--stationary must be one of {', '.join(STATIONARY)}, "
                         f"got {stationary!r}")


def user_tag(u: int, head: int, users: int) -> str:
    """The dump-key suffix of user ``u``'s arrays of KV head ``head``."""
    return f"{u}_{head}" if users > 1 else f"{head}"


def random_f16(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float16)


def families(counts: dict) -> dict:
    return {fam: sum(counts.get(n, 0) for n in names) for fam, names in COUNT_FAMILIES.items()}


def occupancy(engine, coords, span_ns: float) -> dict:
    """Mean busy share (%) of each PE unit's report over the participating PEs: the
    units' own busy times (``PeUnit.engine_busy_ns``), DMA while in flight."""
    totals: dict[str, float] = {}
    log = engine.op_log
    for c in coords:
        unit = engine.pe(*c)
        for k, busy in unit.engine_busy_ns().items():
            if k in IN_FLIGHT:
                k, stage = IN_FLIGHT[k]
                busy = sum(e - s for s, e in log.stage_intervals(unit.prefix, stage))
            totals[k] = totals.get(k, 0.0) + busy
    n = max(1, len(coords))
    return {k: 100.0 * v / n / span_ns for k, v in totals.items()}


def span(handles) -> tuple[float, float]:
    """(first kernel start, last kernel end) over launches."""
    spans = [s for h in handles for s in h.kernel_spans]
    return min(s for s, _ in spans), max(e for _, e in spans)


def count_delta(engine, before: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in sorted(engine.op_log.counts.items())
            if v - before.get(k, 0)}


LLAMA3_70B = Shape()


def peak_scratch(engine, coords) -> int:
    """The largest scratch high-water mark (bytes) of the kernels last run on ``coords``."""
    return max(engine.pe(*c).cpu.runner.context.peak_scratch for c in coords)


def group_grid(g, C: int, P: int):
    """The DPPolicy of a CUBE group's C x P ranks (row_wise over its CUBEs and PEs)."""
    return DPPolicy(cube="row_wise", num_cubes=C, cube_start=g.cube_start, pe="row_wise",
                    num_pes=P)


def launch_groups(ctx, groups, name: str, fn, ranks: dict, C: int, P: int, progress=None,
                  scratch_bytes: int | None = None) -> list:
    """Launch ``fn(ranks)`` on every group's ranks, show progress, wait for all."""
    handles = []
    for g in groups:
        ctx.set_device(g.sip)
        handles.append(ctx.launch(f"{name}.h{g.head}", fn, ranks, dp=group_grid(g, C, P),
                                  scratch_bytes=scratch_bytes))
    if progress is not None:
        progress.watch(ctx.engine, handles)
    for h in handles:
        ctx.wait(h)
    return handles
