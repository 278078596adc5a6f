"""PE_GEMM: a weight-stationary MAC array of ``rows x cols`` at the PE clock.

An (m, k, n) product is split into ceil(k/rows) x ceil(n/cols) weight blocks;
each block holds its weights while the m rows of the streaming operand pass
through, one row per cycle, so a block costs m cycles (at least one). With
double-buffered weight registers, weight loading overlaps the previous block
(its bandwidth is the FETCH stage's job). A result leaves the array after a
pipeline fill of rows + cols cycles, which delays the result but does not
occupy the array (docs/adr/0008-pe-pipeline-timing.md).
"""

from __future__ import annotations

import math

from kernbench.components.builtin.engine import Engine


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
