"""PE_GEMM: a weight-stationary MAC array of ``mac_rows x mac_cols`` at the PE clock.

How long a product occupies the array, and when its result leaves it, comes
from the array's stated hardware (``gemm_array``: weight-load rate, weight
double buffering, fold pipelining; docs/adr/0032-gemm-array-as-hardware.md).
The drain after the array frees delays the result but does not occupy the
array. The unit executes ``tl.dot`` (``GemmCmd``).
"""

from __future__ import annotations

import numpy as np

from kernbench.components.builtin import gemm_array
from kernbench.components.builtin.dispatch import executes
from kernbench.components.builtin.engine import Engine
from kernbench.isa.commands import GemmCmd
from kernbench.isa.handles import Completion, ready_at


class GemmEngine(Engine):
    __slots__ = ("array", "clock_ghz", "fill_ns", "_busy", "_last", "_last_ns")

    def __init__(self, node_id: str, overhead_ns: float, array, clock_ghz: float) -> None:
        super().__init__(node_id, overhead_ns)
        self.array, self.clock_ghz = array, clock_ghz
        self.fill_ns = gemm_array.drain_cycles(array) / clock_ghz
        self._busy: dict[tuple, float] = {}  # (m, k, n, stationary) -> ns; shapes repeat
        # the shape asked last and its time: a composite's tiles mostly share one, and
        # comparing four fields costs less than building and hashing the key (ADR 0068)
        self._last: tuple[int, int, int, str] = (-1, -1, -1, "")
        self._last_ns = 0.0

    def idle_twin(self) -> GemmEngine:
        return GemmEngine(self.node_id, self.overhead_ns, self.array, self.clock_ghz)

    def busy_report(self) -> dict[str, float]:
        return {"gemm": self.busy_ns}

    def cycles(self, m: int, k: int, n: int, stationary: str = "b") -> int:
        return gemm_array.busy_cycles(m, k, n, self.array, stationary)

    def service_ns(self, m: int, k: int, n: int, stationary: str = "b") -> float:
        lm, lk, ln, held = self._last
        if m == lm and k == lk and n == ln and stationary == held:
            return self._last_ns
        key = (m, k, n, stationary)
        ns = self._busy.get(key)
        if ns is None:
            ns = self._busy[key] = self.cycles(m, k, n, stationary) / self.clock_ghz
        self._last, self._last_ns = (m, k, n, stationary), ns
        return ns

    def run(self, ready: float, m: int, k: int, n: int, now: float,
            stationary: str = "b") -> tuple[float, float, float]:
        """(start, free_at, result_at): the array frees before the result drains out."""
        start, free_at = self.book(ready, self.service_ns(m, k, n, stationary), now)
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
    held = gemm_array.resolve(m, k, n, gemm.array, cmd.stationary)
    params: dict = {"m": m, "k": k, "n": n, "accumulate": cmd.accumulate}
    if held != "b":
        params["stationary"] = held
    start, end = ops.compute_chain(
        ready, in_bytes, out.nbytes, lambda r: gemm.run(r, m, k, n, ops.floor, held),
        f"gemm_{a.dtype}", "gemm", params)
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
