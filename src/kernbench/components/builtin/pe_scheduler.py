"""PE_SCHEDULER: runs the commands PE_CPU dispatches on the PE's engines.

Single-op commands are timed analytically when they arrive: an op starts when
its inputs are ready, its hazards have cleared and its engine is free (FETCH ->
engine -> STORE for compute). A composite goes to the :class:`CompositeFeeder`.
In-flight reads and writes are tracked by address (``hazards.AccessTracker``),
so composites that share read-write handles run in dispatch order (strict
FIFO, ADR-0065 D6.3). The scheduler knows no recipe names.
"""

from __future__ import annotations

import numpy as np

from kernbench.components import numerics
from kernbench.components.builtin.composite_feeder import CompositeFeeder
from kernbench.components.builtin.hazards import AccessTracker
from kernbench.components.builtin.pe_ops import PeOps, ready_at, view_va
from kernbench.triton_emu.pe_commands import (
    BroadcastCmd,
    Completion,
    CompositeCmd,
    CopyCmd,
    DmaReadCmd,
    DmaWriteCmd,
    GemmCmd,
    MathCmd,
    TensorHandle,
)


class PeScheduler:
    def __init__(self, pe) -> None:
        self.pe = pe
        self.node_id = pe.ids["pe_scheduler"]
        self.overhead_ns = pe.spec.pe.overhead_ns["pe_scheduler"]
        self.hazards = AccessTracker()
        self.ops = PeOps(pe)
        self.feeder = CompositeFeeder(pe, self.ops, self.node_id)

    # -- single-op commands -------------------------------------------------------
    def execute(self, cmd, t_rx: float, deps: list[Completion] = ()) -> Completion:
        """Time a single-op command; ``deps`` are hazards with known end times."""
        t = max([t_rx + self.overhead_ns] + [c.done_at for c in deps])
        if isinstance(cmd, (DmaReadCmd, DmaWriteCmd)):
            return self._dma(cmd, t)
        if isinstance(cmd, GemmCmd):
            return self._gemm(cmd, t)
        if isinstance(cmd, MathCmd):
            return self._math(cmd.op, list(cmd.inputs), cmd.out, cmd.axis, t, cmd.scalars)
        if isinstance(cmd, CopyCmd):
            return self._math("copy", [cmd.src], cmd.dst, None, t)
        if isinstance(cmd, BroadcastCmd):
            return self._math("broadcast", [cmd.src], cmd.out, None, t)
        raise TypeError(f"PE_SCHEDULER cannot execute {type(cmd).__name__}")

    def _dma(self, cmd: DmaReadCmd | DmaWriteCmd, t: float) -> Completion:
        """One DMA between an HBM view and a TCM handle; the bytes are the HBM view's."""
        reading = isinstance(cmd, DmaReadCmd)
        hbm, tcm = (cmd.src, cmd.dst) if reading else (cmd.dst, cmd.src)
        move = self.pe.dma.read if reading else self.pe.dma.write
        start, done = move(view_va(hbm, 0, 0), hbm.nbytes, max(t, ready_at(cmd.src)),
                           self.ops.now, params={"handle_id": tcm.id})
        if self.pe.data is not None:
            # The source is sampled when the transfer starts and lands when it ends.
            box = {}
            self.ops.data_at(start, lambda: box.setdefault("v", self.ops.read(cmd.src)))
            self.ops.data_at(done, lambda: self.ops.write(cmd.dst, box["v"]))
        return Completion(done, label="dma_read" if reading else "dma_write")

    def _gemm(self, cmd: GemmCmd, t: float) -> Completion:
        a, b, out = cmd.a, cmd.b, cmd.out
        ready = max(t, ready_at(a), ready_at(b), ready_at(out) if cmd.accumulate else 0.0)
        m, k = a.shape
        n = b.shape[1]
        in_bytes = a.nbytes + b.nbytes + (out.nbytes if cmd.accumulate else 0)
        gemm = self.pe.gemm
        start, end = self.ops.compute_chain(
            ready, in_bytes, out.nbytes, lambda r: gemm.run(r, m, k, n, self.ops.now),
            f"gemm_{a.dtype}", "gemm", {"m": m, "k": k, "n": n, "accumulate": cmd.accumulate},
            "GEMM")
        if self.pe.data is not None:
            box = {}

            def compute():
                acc = self.ops.read(a).astype(np.float32) @ self.ops.read(b).astype(np.float32)
                if cmd.accumulate:
                    acc = acc + self.ops.read(out).astype(np.float32)
                box["v"] = acc

            self.ops.data_at(start, compute)
            self.ops.data_at(end, lambda: self.ops.write(out, box["v"]))
        return Completion(end, label="gemm")

    def _math(self, op: str, inputs: list[TensorHandle], out: TensorHandle, axis, t: float,
              scalars: tuple = ()) -> Completion:
        ready = max([t] + [ready_at(h) for h in inputs])
        elements = max([out.numel] + [h.numel for h in inputs])
        in_bytes = sum(h.nbytes for h in inputs)
        start, end = self.ops.compute_chain(
            ready, in_bytes, out.nbytes, lambda r: self.ops.math_run(r, elements),
            op, "math", {"elements": elements, "axis": axis}, "MATH")
        if self.pe.data is not None:
            box = {}

            def compute():
                vals = [self.ops.read(h) for h in inputs] + [np.float32(s) for s in scalars]
                if op == "broadcast":
                    box["v"] = np.broadcast_to(vals[0], out.shape).copy()
                else:
                    box["v"] = numerics.compute(op, vals, axis)

            self.ops.data_at(start, compute)
            self.ops.data_at(end, lambda: self.ops.write(out, box["v"]))
        return Completion(end, label=op)

    # -- composites ---------------------------------------------------------------
    def start_composite(self, cmd: CompositeCmd, t_rx: float,
                        deps: list[Completion] = ()) -> Completion:
        """Feed ``cmd``'s tile plan from a SimPy process once ``deps`` have completed.

        ``deps`` come from the address hazard table: in-flight ops whose writes
        this composite reads, or whose reads/writes it overwrites. Two composites
        sharing a read-write handle therefore run in dispatch order (strict FIFO).
        """
        comp = Completion(event=self.pe.env.event(), label="composite")
        t0 = t_rx + self.overhead_ns
        self.pe.env.process(self.feeder.run(cmd, t0, comp, list(deps)))
        return comp

