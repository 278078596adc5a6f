"""PE_MATH: a vector engine of ``vector_width`` lanes; ceil(elements / width) cycles."""

from __future__ import annotations

import math

from kernbench.components.builtin.engine import Engine


def math_cycles(elements: int, vector_width: int) -> int:
    return max(1, math.ceil(elements / vector_width))


class MathEngine(Engine):
    __slots__ = ("vector_width", "clock_ghz")

    def __init__(self, node_id: str, overhead_ns: float, vector_width: int,
                 clock_ghz: float) -> None:
        super().__init__(node_id, overhead_ns)
        self.vector_width, self.clock_ghz = vector_width, clock_ghz

    def service_ns(self, elements: int) -> float:
        return math_cycles(elements, self.vector_width) / self.clock_ghz
