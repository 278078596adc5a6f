"""PE_CPU: runs the kernel and pays the dispatch cost of every command.

The CPU keeps its own clock, which runs ahead of SimPy time: issuing a
command costs its dispatch cycles (ADR-0064) and hands it to PE_SCHEDULER,
whose engines are timed analytically, so a kernel only yields to SimPy when
it must (a DMA is handed to the shared fabric at its issue time, a wait on
work whose end is not yet known, the end of the kernel). Events per command
stay O(1) and the timing is the same as stepping the CPU cycle by cycle.
"""

from __future__ import annotations

import inspect

from kernbench.components.builtin.hazards import access_ranges, byte_range
from kernbench.triton_emu.kernel_runner import KernelRunner
from kernbench.triton_emu.pe_commands import (
    Completion,
    CompositeCmd,
    DmaReadCmd,
    DmaWriteCmd,
    PeCpuOverheadCmd,
)
from kernbench.triton_emu.tl_context import TLContext

_DMA = (DmaReadCmd, DmaWriteCmd)


class PeCpu:
    def __init__(self, pe) -> None:
        self.pe = pe
        self.node_id = pe.ids["pe_cpu"]
        self.clock_ghz = pe.spec.pe.clock_ghz
        self.cost = pe.cost_model
        self.t = 0.0
        self.runner: KernelRunner | None = None
        self.tl: TLContext | None = None
        self._latest = 0.0
        self._open: list[Completion] = []
        self.commands = 0
        self.dispatch_cycles = 0.0

    # -- the executor interface TLContext calls ------------------------------------------
    def submit(self, cmd) -> Completion:
        """Dispatch ``cmd``: auto-wait for inputs if it blocks, pay dispatch, hand it on.

        Hazards are resolved by address (``hazards.AccessTracker``): a blocking op
        waits on the CPU for the producers of its inputs (ADR-0062's auto-wait at
        first use); every other dependency delays the op on its engine, not the CPU.
        """
        sched = self.pe.scheduler
        tracker = sched.hazards
        tracker.prune(min(self.t, self.pe.env.now))
        reads, writes = access_ranges(cmd)
        raw, other = tracker.deps(reads, writes)
        lazy = isinstance(cmd, DmaReadCmd | CompositeCmd)
        if not lazy:
            for comp in raw:
                self.wait(comp)
        if not isinstance(cmd, CompositeCmd):
            for comp in (other if not lazy else raw + other):  # analytic ops need known times
                if comp.done_at is None:
                    self.runner.wait(comp.event, f"{comp.label} completion")
        deps = raw + other
        cycles = self.cost.dispatch_cycles(cmd)
        t0 = self.t
        self.t = t0 + cycles / self.clock_ghz
        self.commands += 1
        self.dispatch_cycles += cycles
        self.pe.op_log.record(t0, self.t, self.node_id, "control", "dispatch",
                              {"cmd": type(cmd).__name__, "cycles": cycles,
                               "logical_bytes": cmd.logical_bytes}, "PE_CPU")
        if isinstance(cmd, PeCpuOverheadCmd):
            return Completion(self.t, label="cycles")
        if isinstance(cmd, _DMA):
            # hand the request to the shared fabric at its issue time (bookings in time order)
            self.runner.sleep_until(self.t, "DMA issue at")
        if isinstance(cmd, CompositeCmd):
            comp = sched.start_composite(cmd, self.t, deps)
            self._open.append(comp)
        else:
            comp = sched.execute(cmd, self.t, deps)
            self._latest = max(self._latest, comp.done_at)
        tracker.record(reads, writes, comp)
        return comp

    def wait(self, comp: Completion) -> None:
        if comp.done_at is None:
            self.runner.wait(comp.event, f"{comp.label} completion")
        self.t = max(self.t, comp.done_at)

    def wait_all(self) -> None:
        for comp in self._open:
            if comp.done_at is None:
                self.runner.wait(comp.event, f"{comp.label} completion")
            self._latest = max(self._latest, comp.done_at)
        self._open.clear()
        self.t = max(self.t, self._latest)

    def write_now(self, handle, value) -> None:
        """Initialise a new TCM tensor (tl.zeros/full/arange) at the CPU's time, after
        any op still using that (possibly recycled) memory."""
        tracker = self.pe.scheduler.hazards
        written = [byte_range(handle)]
        raw, other = tracker.deps([], written)
        t = self.t
        for comp in raw + other:
            if comp.done_at is None:
                self.runner.wait(comp.event, f"{comp.label} completion")
            t = max(t, comp.done_at)
        tracker.record([], written, Completion(t, label="init"))
        data = self.pe.data
        if data is not None:
            data.at(t, lambda: data.write(handle, value, self.pe.mmu))

    # -- kernel lifecycle ---------------------------------------------------------------------
    def launch(self, name: str, fn, args: tuple, kwargs: dict, start_at: float, *,
               program: tuple[int, int, int, int], scratch: tuple[int, int]):
        """Start ``fn`` on this PE at ``start_at``; returns the SimPy process (an event).

        ``program`` is (pe_id, num_programs, cube_id, num_cubes); ``scratch`` the
        (encoded TCM base address, size) of the kernel's scratch region.
        """
        if self.runner is not None and not self.runner.finished:
            raise RuntimeError(f"{self.node_id} is already running kernel {self.runner.name!r}")
        pe_id, num_programs, cube_id, num_cubes = program
        spec = self.pe.spec.pe
        tl = TLContext(pe_id=pe_id, num_programs=num_programs, cube_id=cube_id,
                       num_cubes=num_cubes, executor=self, scratch_base=scratch[0],
                       scratch_size=scratch[1], cost_model=self.cost,
                       tile_shape=(spec.tile_m, spec.tile_k, spec.tile_n))
        self.tl = tl
        self._latest = 0.0
        self._open = []

        def body():
            self.t = self.pe.env.now
            start = self.t
            fn(*args, tl=tl, **kwargs)
            self.wait_all()
            self.runner.sleep_until(self.t, "kernel end")
            return start, self.t

        try:
            kernel_file = inspect.getsourcefile(fn)
        except TypeError:
            kernel_file = None
        self.runner = KernelRunner(self.pe.env, name, self.pe.prefix, body, kernel_file,
                                   on_resume=lambda: TLContext._set_active(tl),
                                   on_leave=lambda: TLContext._set_active(None))
        return self.pe.env.process(self.runner.process(start_at))
