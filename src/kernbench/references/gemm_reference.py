"""SCALE-Sim v3 as the yardstick of the GEMM array (``scalesim_run.py`` does the running).

A shape is (m, k, n) with B (k x n) held in the array. A product whose A is
held instead (``stationary="a"``) computes C^T = B^T A^T, which SCALE-Sim runs
as the weight-stationary product (n, k, m): :func:`as_run` makes that swap,
so both sides time the same dataflow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kernbench.references.environment import run_tool

TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Shape:
    name: str
    m: int
    k: int
    n: int
    stationary: str = "b"  # the operand our array holds: "b", or "a" (run transposed)
    rows: int = 32  # array rows (the k side of a weight block)
    cols: int = 32  # array columns (the n side)

    def as_run(self) -> dict:
        """The weight-stationary layer SCALE-Sim runs for this shape."""
        m, n = (self.n, self.m) if self.stationary == "a" else (self.m, self.n)
        return {"name": self.name, "m": m, "k": self.k, "n": n}


def run_scalesim(shapes: Sequence[Shape]) -> dict:
    """SCALE-Sim's "Total Cycles" of every shape (one SCALE-Sim run per array size):
    ``{"version": str, "cycles": {name: int}, "stalls": {name: int}}``."""
    names = [s.name for s in shapes]
    if len(set(names)) != len(names):
        raise ValueError(f"shape names must be unique, got {names}")
    arrays: dict[tuple[int, int], list[dict]] = {}
    for s in shapes:
        arrays.setdefault((s.rows, s.cols), []).append(s.as_run())
    request = {"arrays": [{"rows": r, "cols": c, "shapes": runs}
                          for (r, c), runs in arrays.items()]}
    answer = run_tool("scalesim_run.py", "scalesim", request, TIMEOUT_S)
    missing = sorted(set(names) - set(answer["cycles"]))
    if missing:
        raise RuntimeError(f"SCALE-Sim answered no cycles for {missing}")
    return answer
