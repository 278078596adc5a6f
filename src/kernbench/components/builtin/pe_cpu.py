"""PE_CPU: runs the kernel program and pays the dispatch cost of every command.

What it owns: the CPU's own clock (which runs ahead of SimPy time), the
dispatch cost accounting, the issue rules of each command (from the
command's traits), and the set of commands still open at the end of the
kernel. What it does not own: the program itself and the ``tl`` surface --
those are handed to it from above (``attach``) by whoever launches a kernel,
so this layer never imports the kernel side.

Issuing a command costs its dispatch cycles and hands it to the unit
registered for its type (``dispatch.executor_for``); engines are timed
analytically, so a kernel only yields to SimPy when it must: a command that
books the shared fabric is handed over at its issue time, a wait on work
whose end is not yet known, the end of the kernel. Events per command stay
O(1) and the timing equals stepping the CPU cycle by cycle.
"""

from __future__ import annotations

from typing import Any

from kernbench.components.builtin.dispatch import executes, executor_for
from kernbench.components.builtin.hazards import AccessTracker, access_ranges
from kernbench.components.clock import sim_now
from kernbench.components.stage_report import StageReport
from kernbench.errors import KernelStateError
from kernbench.isa.commands import PeCpuOverheadCmd
from kernbench.isa.handles import Completion


class PeCpu:
    def __init__(self, pe) -> None:
        self.pe = pe
        self.node_id = pe.ids["pe_cpu"]
        self.clock_ghz = pe.spec.pe.clock_ghz
        self.cost = pe.cost_model
        self.t = 0.0
        self.runner: Any = None  # the program driver: wait(event, what), sleep_until(t, what)
        self._latest = 0.0
        self._open: list[Completion] = []
        self.commands = 0
        self.dispatch_cycles = 0.0
        self.marks: list[tuple[float, str]] = []  # (time, label) of tl.mark calls
        self._dispatched: StageReport = pe.op_log.sink(self.node_id, "control", "PE_CPU")
        self._keep_records: bool = pe.op_log.keep_records  # (fixed for an engine's life)

    def busy_report(self) -> dict[str, float]:
        """Time spent dispatching commands (the CPU's own busy time)."""
        return {"pe_cpu_dispatch": self.dispatch_cycles / self.clock_ghz}

    def attach(self, runner) -> None:
        """Take the next program's driver (a kernel runner); one program at a time."""
        if self.runner is not None and not self.runner.finished:
            raise KernelStateError(f"{self.node_id} is already running {self.runner.name!r}; "
                                   f"wait for it before launching another kernel there")
        self.runner = runner
        self._latest = 0.0
        self._open = []

    def begin(self) -> float:
        """The program starts now: the CPU clock joins simulated time."""
        self.t = sim_now(self.pe.env)
        return self.t

    # -- the executor interface the tl context calls ------------------------------------
    def submit(self, cmd) -> Completion:
        """Dispatch ``cmd``: auto-wait for inputs if it blocks, pay dispatch, hand it on.

        Hazards are resolved by address (``hazards.AccessTracker``): a blocking op
        waits on the CPU for the producers of its inputs (auto-wait at first use);
        every other dependency delays the op on its unit, not the CPU.
        """
        pe = self.pe
        tracker: AccessTracker = pe.scheduler.hazards  # (typed: called directly, compiled)
        tracker.prune(min(self.t, sim_now(pe.env)))
        reads, writes = access_ranges(cmd)
        raw, other = tracker.deps(reads, writes)
        if cmd.waits_for_inputs:
            for comp in raw:
                self.wait(comp)
        deps = raw + other if other else raw
        if cmd.needs_known_deps:  # the unit times it on arrival: every end must be known
            for comp in (other if cmd.waits_for_inputs else deps):
                if comp.done_at is None:
                    self.runner.wait(comp.waitable(pe.env), f"{comp.label} completion")
        cycles = self.cost.dispatch_cycles(cmd)
        t0 = self.t
        self.t = t0 + cycles / self.clock_ghz
        self.commands += 1
        self.dispatch_cycles += cycles
        self._dispatched.add(t0, self.t, "dispatch", {
            "cmd": type(cmd).__name__, "cycles": cycles, "logical_bytes": cmd.logical_bytes}
            if self._keep_records else None)
        if cmd.hands_to_fabric:  # bookings on the shared fabric happen in time order
            self.runner.sleep_until(self.t, "issue at")
        comp = executor_for(type(cmd))(pe, cmd, self.t, deps)
        if comp.done_at is None:
            self._open.append(comp)
        elif comp.done_at > self._latest:
            self._latest = comp.done_at
        if writes or (reads and cmd.records_reads):
            tracker.record(reads if cmd.records_reads else [], writes, comp)
        return comp

    def wait(self, comp: Completion) -> None:
        if comp.done_at is None:
            self.runner.wait(comp.waitable(self.pe.env), waiting_text(comp))
        self.t = max(self.t, comp.done_at)  # type: ignore[type-var,assignment]  # known after the wait

    def mark(self, label: str) -> None:
        """``tl.mark``: a zero-cost label at the CPU's current time (phase boundaries)."""
        self.pe.op_log.record(self.t, self.t, self.node_id, "control", "mark",
                              {"label": label})
        self.marks.append((self.t, label))

    def wait_all(self) -> None:
        for comp in self._open:
            if comp.done_at is None:
                self.runner.wait(comp.waitable(self.pe.env), waiting_text(comp))
            self._latest = max(self._latest, comp.done_at)  # type: ignore[type-var,assignment]
        self._open.clear()
        self.t = max(self.t, self._latest)

    def finish(self) -> float:
        """End of the program: wait for everything still open, let time catch up."""
        self.wait_all()
        self.runner.sleep_until(self.t, "kernel end")
        return self.t

    def write_now(self, handle, value) -> None:
        """Initialise a new TCM tensor (tl.zeros/full/arange) at the CPU's time, after
        any op still using that (possibly recycled) memory; ``value()`` is called for
        the array only in data mode."""
        tracker: AccessTracker = self.pe.scheduler.hazards
        written = [handle.byte_range()]
        raw, other = tracker.deps([], written)
        t = self.t
        for comp in raw + other:
            if comp.done_at is None:
                self.runner.wait(comp.waitable(self.pe.env), f"{comp.label} completion")
            t = max(t, comp.done_at)  # type: ignore[type-var,assignment]
        tracker.record([], written, Completion(t, label="init"))
        data = self.pe.data
        if data is not None:
            array = value()
            data.at(t, lambda: data.write(handle, array, self.pe.mmu))


def waiting_text(comp: Completion) -> str:
    """What a kernel blocked on ``comp`` waits for (deadlock reports): a label that
    starts with "for " says it itself ("for a message from ..."), others name an op."""
    label = comp.label
    return label[4:] if label.startswith("for ") else f"{label} completion"


@executes(PeCpuOverheadCmd)
def execute_cycles(pe, cmd: PeCpuOverheadCmd, t_issue: float, deps) -> Completion:
    """``tl.cycles(n)``: the dispatch cost is the whole command; nothing else runs."""
    return Completion(t_issue, label="cycles")
