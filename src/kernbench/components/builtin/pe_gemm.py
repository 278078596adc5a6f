"""PE_GEMM: a weight-stationary MAC array of ``rows x cols`` at the PE clock.

An (m, k, n) product is split into ceil(k/rows) x ceil(n/cols) weight blocks;
each block holds its weights while the m rows of the streaming operand pass
through, one row per cycle, so a block costs m cycles (at least one). With
double-buffered weight registers, weight loading overlaps the previous block
(its bandwidth is the FETCH stage's job). A result leaves the array after a
pipeline fill of rows + cols cycles, which delays the result but does not
occupy the array (docs/adr/0008-pe-pipeline-timing.md). The unit executes
``tl.dot`` (``GemmCmd``).
"""

from __future__ import annotations

import math

import numpy as np

from kernbench.components.builtin.dispatch import executes
from kernbench.components.builtin.engine import Engine
from kernbench.components.builtin.pe_ops import ready_at
from kernbench.isa.commands import GemmCmd
from kernbench.isa.handles import Completion


def gemm_cycles(m: int, k: int, n: int, rows: int, cols: int) -> int:
    return math.ceil(k / rows) * math.ceil(n / cols) * max(m, 1)


class GemmEngine(Engine):
    __slots__ = ("rows", "cols", "clock_ghz")

    def __init__(self, node_id: str, overhead_ns: float, rows: int, cols: int,
                 clock_ghz: float) -> None:
        super().__init__(node_id, overhead_ns)
        self.rows, self.cols, self.clock_ghz = rows, cols, clock_ghz

    def service_ns(self, m: int, k: int, n: int) -> float:
        return gemm_cycles(m, k, n, self.rows, self.cols) / self.clock_ghz

    @property
    def fill_ns(self) -> float:
        return (self.rows + self.cols) / self.clock_ghz

    def run(self, ready: float, m: int, k: int, n: int, now: float) -> tuple[float, float, float]:
        """(start, free_at, result_at): the array frees before the result drains out."""
        start, free_at = self.book(ready, self.service_ns(m, k, n), now)
        return start, free_at, free_at + self.fill_ns


@executes(GemmCmd)
def execute_gemm(pe, cmd: GemmCmd, t_issue: float, deps) -> Completion:
    """FETCH a and b (and the accumulator) -> the array -> STORE the result."""
    a, b, out = cmd.a, cmd.b, cmd.out
    ops = pe.scheduler.ops
    t = pe.scheduler.accept(t_issue, deps)
    ready = max(t, ready_at(a), ready_at(b), ready_at(out) if cmd.accumulate else 0.0)
    m, k = a.shape
    n = b.shape[1]
    in_bytes = a.nbytes + b.nbytes + (out.nbytes if cmd.accumulate else 0)
    gemm = pe.gemm
    start, end = ops.compute_chain(
        ready, in_bytes, out.nbytes, lambda r: gemm.run(r, m, k, n, ops.now),
        f"gemm_{a.dtype}", "gemm", {"m": m, "k": k, "n": n, "accumulate": cmd.accumulate},
        "GEMM")
    if pe.data is not None:
        box = {}

        def compute():
            acc = ops.read(a).astype(np.float32) @ ops.read(b).astype(np.float32)
            if cmd.accumulate:
                acc = acc + ops.read(out).astype(np.float32)
            box["v"] = acc

        ops.data_at(start, compute)
        ops.data_at(end, lambda: ops.write(out, box["v"]))
    return Completion(end, label="gemm")
