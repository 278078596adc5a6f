"""PE_MATH: a vector engine of ``vector_width`` lanes; ceil(elements / width) cycles.

The unit executes the elementwise, reduction, copy and broadcast commands
(``MathCmd``, ``CopyCmd``, ``BroadcastCmd``): FETCH the inputs -> the vector
engine -> STORE the result.
"""

from __future__ import annotations

import math

import numpy as np

from kernbench.components import numerics
from kernbench.components.builtin.dispatch import executes
from kernbench.components.builtin.engine import Engine
from kernbench.isa.commands import BroadcastCmd, CopyCmd, MathCmd
from kernbench.isa.handles import Completion, TensorHandle, ready_at


def math_cycles(elements: int, vector_width: int) -> int:
    return max(1, math.ceil(elements / vector_width))


class MathEngine(Engine):
    __slots__ = ("vector_width", "clock_ghz")

    def __init__(self, node_id: str, overhead_ns: float, vector_width: int,
                 clock_ghz: float) -> None:
        super().__init__(node_id, overhead_ns)
        self.vector_width, self.clock_ghz = vector_width, clock_ghz

    def idle_twin(self) -> MathEngine:
        return MathEngine(self.node_id, self.overhead_ns, self.vector_width, self.clock_ghz)

    def busy_report(self) -> dict[str, float]:
        return {"math": self.busy_ns}

    def service_ns(self, elements: int) -> float:
        return math_cycles(elements, self.vector_width) / self.clock_ghz


@executes(MathCmd)
def execute_math(pe, cmd: MathCmd, t_issue: float, deps) -> Completion:
    return _vector_op(pe, cmd.op, list(cmd.inputs), cmd.out, cmd.axis,
                      pe.scheduler.accept(t_issue, deps), cmd.scalars)


@executes(CopyCmd)
def execute_copy(pe, cmd: CopyCmd, t_issue: float, deps) -> Completion:
    return _vector_op(pe, "copy", [cmd.src], cmd.dst, None, pe.scheduler.accept(t_issue, deps))


@executes(BroadcastCmd)
def execute_broadcast(pe, cmd: BroadcastCmd, t_issue: float, deps) -> Completion:
    return _vector_op(pe, "broadcast", [cmd.src], cmd.out, None,
                      pe.scheduler.accept(t_issue, deps))


def _vector_op(pe, op: str, inputs: list[TensorHandle], out: TensorHandle, axis, t: float,
               scalars: tuple = ()) -> Completion:
    ops = pe.scheduler.ops
    ready = max([t] + [ready_at(h) for h in inputs])
    elements = max([out.numel] + [h.numel for h in inputs])
    in_bytes = sum(h.nbytes for h in inputs)
    start, end = ops.compute_chain(
        ready, in_bytes, out.nbytes, lambda r: ops.math_run(r, elements),
        op, "math", {"elements": elements, "axis": axis})
    if pe.data is not None:
        box = {}

        def compute():
            vals = [ops.read(h) for h in inputs] + [np.float32(s) for s in scalars]
            if op == "broadcast":
                box["v"] = np.broadcast_to(vals[0], out.shape).copy()
            else:
                box["v"] = numerics.compute(op, vals, axis)

        ops.data_at(start, compute)
        ops.data_at(end, lambda: ops.write(out, box["v"]))
    return Completion(end, label=op)
