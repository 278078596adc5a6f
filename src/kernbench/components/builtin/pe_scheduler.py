"""PE_SCHEDULER: receives the commands PE_CPU dispatches and drives the engines.

It owns the PE's hazard table (``hazards.AccessTracker``: in-flight reads and
writes by address, so commands sharing memory run in dispatch order) and the
composite feeder. The command types themselves are executed by the units
that registered for them (``dispatch.executes`` in ``pe_dma``, ``pe_gemm``,
``pe_math``, ``composite_feeder``); the scheduler knows none of them and no
recipe names.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernbench.components.builtin.composite_feeder import CompositeFeeder
from kernbench.components.builtin.hazards import AccessTracker
from kernbench.components.builtin.pe_ops import PeOps
from kernbench.isa.handles import Completion


class PeScheduler:
    def __init__(self, pe) -> None:
        self.pe = pe
        self.node_id = pe.ids["pe_scheduler"]
        self.overhead_ns = pe.spec.pe.overhead_ns["pe_scheduler"]
        self.hazards = AccessTracker()
        self.ops = PeOps(pe)
        self.feeder = CompositeFeeder(pe, self.ops, self.node_id)

    def accept(self, t_issue: float, deps: Sequence[Completion] = ()) -> float:
        """When a command handed over at ``t_issue`` may start: after the scheduler's
        own handling and after every dependency (whose end times are known)."""
        t = t_issue + self.overhead_ns
        for c in deps:
            if c.done_at > t:
                t = c.done_at
        return t
