"""One GEMM on one PE, issued as one ``tl.dot``: the array's cost in isolation.

``kernbench gemm`` and the validation experiment's SCALE-Sim comparison both
run this: A and B are loaded into the PE's TCM, multiplied by a single
``tl.dot`` (so the array sees the whole product, as SCALE-Sim does) and C is
stored back. The result carries the array's busy cycles, the kernel time on
the PE and the busy time of every pipeline stage.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.components.builtin import gemm_array
from kernbench.errors import UsageError
from kernbench.isa.dtypes import dtype_bytes
from kernbench.runtime_api.context import RuntimeContext
from kernbench.sim_engine.engine import GraphEngine
from kernbench.topology.graph import TopologyGraph

STAGES = ("PE_CPU", "DMA_READ", "FETCH", "GEMM", "STORE", "DMA_WRITE")
IN_DTYPES = ("f16", "bf16", "f32", "i8")
ALIGN = 64


@dataclass(frozen=True)
class SingleGemm:
    m: int
    k: int
    n: int
    dtype: str
    stationary: str  # as asked
    held: str  # the operand the array held ("a" or "b")
    topology: str
    array_cycles: int  # busy cycles of the array for the whole product
    array_ns: float  # what the GEMM unit was booked for (cycles / clock + its overhead)
    pe_ns: float  # kernel start to end on the PE
    stage_busy_ns: dict[str, float]

    def summary(self, array) -> dict:
        """The JSON document of ``kernbench gemm --json``."""
        return {"m": self.m, "k": self.k, "n": self.n, "dtype": self.dtype,
                "topology": self.topology, "stationary": self.stationary, "held": self.held,
                "array_cycles": self.array_cycles, "array_ns": self.array_ns,
                "pe_ns": self.pe_ns, "stage_busy_ns": self.stage_busy_ns,
                "array": {"mac_rows": array.mac_rows, "mac_cols": array.mac_cols,
                          "weight_rows_per_cycle": array.weight_rows_per_cycle,
                          "double_buffered_weights": array.double_buffered_weights,
                          "pipelined_folds": array.pipelined_folds}}


def _aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGN) * ALIGN


def check_shape(graph: TopologyGraph, m: int, k: int, n: int, dtype: str) -> int:
    """The TCM scratch the product needs; one line naming the limit when it does not fit."""
    for name, v in (("m", m), ("k", k), ("n", n)):
        if not isinstance(v, int) or v < 1:
            raise UsageError(f"--{name} must be a positive integer, got {v!r}")
    if dtype not in IN_DTYPES:
        raise UsageError(f"--dtype must be one of {', '.join(IN_DTYPES)}, got {dtype!r}")
    e = dtype_bytes(dtype)
    need = _aligned(m * k * e) + _aligned(k * n * e) + _aligned(m * n * 4)
    pe = graph.spec.pe
    room = pe.tcm_bytes - pe.tcm_reserved_bytes
    if need > room:
        raise UsageError(f"({m}, {k}, {n}) {dtype}: A, B and C need {need // 1024} KiB of TCM but "
                         f"a PE of {graph.spec.name} has {room // 1024} KiB beside the "
                         f"scheduler's reservation (one tl.dot holds the whole product); "
                         f"use a smaller shape or the composite GEMM (kernbench run --bench "
                         f"gemm-composite)")
    return need


def _booked_cycles(gemm) -> int:
    """The array cycles the GEMM unit was booked for (its one op, less its node overhead),
    read back from the simulation rather than recomputed from the formula."""
    if gemm.ops != 1:
        raise RuntimeError(f"one tl.dot should book the GEMM unit once, it was booked {gemm.ops} "
                           f"times")
    return round((gemm.busy_ns - gemm.overhead_ns) * gemm.clock_ghz)


def _kernel(pa, pb, pc, m, k, n, dtype, stationary, *, tl):
    a = tl.load(pa, (m, k), dtype)
    b = tl.load(pb, (k, n), dtype)
    tl.store(pc, tl.dot(a, b, stationary=stationary))


def run_single_gemm(graph: TopologyGraph, m: int, k: int, n: int, dtype: str = "f16",
                    stationary: str = "b") -> SingleGemm:
    """Simulate ``C = A @ B`` as one ``tl.dot`` on PE 0 of CUBE 0 of SIP 0."""
    scratch = check_shape(graph, m, k, n, dtype)
    if stationary not in gemm_array.STATIONARY:
        raise UsageError(f"--stationary must be one of {', '.join(gemm_array.STATIONARY)}, "
                         f"got {stationary!r}")
    engine = GraphEngine(graph, keep_records=False)
    ctx = RuntimeContext(engine)
    a, b = ctx.empty((m, k), dtype, name="A"), ctx.empty((k, n), dtype, name="B")
    c = ctx.empty((m, n), "f32", name="C")
    handle = ctx.wait(ctx.launch("gemm-one-dot", _kernel, a, b, c, m, k, n, dtype, stationary,
                                 scratch_bytes=scratch))
    unit = engine.pe(0, 0, 0)
    array = graph.spec.pe.gemm
    busy = engine.op_log.stage_busy().get(unit.prefix, {})
    return SingleGemm(
        m=m, k=k, n=n, dtype=dtype, stationary=stationary,
        held=gemm_array.resolve(m, k, n, array, stationary), topology=graph.spec.name,
        array_cycles=_booked_cycles(unit.gemm), array_ns=unit.gemm.busy_ns,
        pe_ns=handle.kernel_ns, stage_busy_ns={s: busy.get(s, 0.0) for s in STAGES})
