"""PE_DMA: read and write channels that hand requests to the fabric.

A channel is held only while a request is translated (PE_MMU) and its
descriptor is processed (PE_DMA overhead), i.e. until it is handed to the
fabric (docs/adr/0008-pe-pipeline-timing.md); many requests can then be in
flight, and the fabric's link and pseudo-channel bookings serialise their
data. READ and WRITE channels run in parallel. The unit executes the
``tl.load`` / ``tl.store`` commands (``DmaReadCmd``, ``DmaWriteCmd``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernbench.components.builtin.dispatch import executes
from kernbench.components.builtin.engine import Engine
from kernbench.components.builtin.pe_mmu import PeMmu
from kernbench.components.builtin.pe_ops import view_va
from kernbench.components.clock import sim_now
from kernbench.components.stage_report import StageReport
from kernbench.isa.commands import DmaReadCmd, DmaWriteCmd
from kernbench.isa.handles import Completion, ready_at

if TYPE_CHECKING:
    from kernbench.components.flows import FlowBuilder


class PeDma:
    def __init__(self, sip: int, cube: int, pe: int, node_id: str, overhead_ns: float,
                 mmu: PeMmu, services) -> None:
        self.sip, self.cube, self.pe = sip, cube, pe
        self.node_id = node_id
        self.mmu = mmu
        self.services = services
        self.flows: FlowBuilder = services.flows  # (typed: the compiled twin calls it directly)
        self._send = services.network.send  # (bound once: not looked up per transfer)
        self.read_ch = Engine(node_id, 0.0)
        self.write_ch = Engine(node_id, 0.0)
        self.translate_ns = mmu.overhead_ns
        self.hold_ns = mmu.overhead_ns + overhead_ns
        self._sinks: dict[str, StageReport] = {}  # stage -> where its transfers are recorded
        self._keep_records: bool = services.op_log.keep_records  # (fixed for an engine's life)

    def busy_report(self) -> dict[str, float]:
        """Time each channel was held (translation and descriptor processing)."""
        return {"dma_read_channel": self.read_ch.busy_ns,
                "dma_write_channel": self.write_ch.busy_ns}

    def read(self, va: int, nbytes: int, ready: float, now: float, op_name: str = "dma_read",
             stage: str = "DMA_READ", params: dict | None = None) -> tuple[float, Completion]:
        """HBM (virtual address) -> this PE's TCM. Returns (start, arrival)."""
        return self._transfer(self.read_ch, True, va, nbytes, ready, now, op_name, stage, params)

    def write(self, va: int, nbytes: int, ready: float, now: float, op_name: str = "dma_write",
              stage: str = "DMA_WRITE", params: dict | None = None) -> tuple[float, Completion]:
        """This PE's TCM -> HBM (virtual address). Returns (start, arrival)."""
        return self._transfer(self.write_ch, False, va, nbytes, ready, now, op_name, stage, params)

    def _transfer(self, channel: Engine, is_read: bool, va: int, nbytes: int, ready: float,
                  now: float, op_name: str, stage: str,
                  params: dict | None) -> tuple[float, Completion]:
        pa = self.mmu.translate_pa(va)
        start, _ = channel.book(max(ready, now), self.hold_ns, now)
        if is_read:
            flow = self.flows.pe_dma_read(self.sip, self.cube, self.pe, pa, nbytes)
        else:
            flow = self.flows.pe_dma_write(self.sip, self.cube, self.pe, pa, nbytes)
        arrival: Completion = self._send(flow, start + self.translate_ns)
        sink = self._sinks.get(stage)
        if sink is None:
            sink = self._sinks[stage] = self.services.op_log.sink(self.node_id, "memory", stage)
        p = None  # the record's parameters, built only when records are kept
        if self._keep_records:
            p = {"va": va, "pa": pa.encode(), "nbytes": nbytes}
            if params:
                p.update(params)
        arrival.then(lambda c: sink.add(start, c.done_at, op_name, p))
        return start, arrival


@executes(DmaReadCmd)
def execute_dma_read(pe, cmd: DmaReadCmd, t_issue: float, deps) -> Completion:
    """HBM view ``src`` -> TCM handle ``dst`` (the bytes are the HBM view's)."""
    return _move(pe, cmd, cmd.src, cmd.dst, pe.dma.read, "dma_read", t_issue, deps)


@executes(DmaWriteCmd)
def execute_dma_write(pe, cmd: DmaWriteCmd, t_issue: float, deps) -> Completion:
    """TCM handle ``src`` -> HBM view ``dst``."""
    return _move(pe, cmd, cmd.dst, cmd.src, pe.dma.write, "dma_write", t_issue, deps)


def _move(pe, cmd, hbm, tcm, move, label: str, t_issue: float, deps) -> Completion:
    ops = pe.scheduler.ops
    t = pe.scheduler.accept(t_issue, deps)
    start, done = move(view_va(hbm, 0, 0), hbm.nbytes, max(t, ready_at(cmd.src)), sim_now(ops.pe.env),
                       params={"handle_id": tcm.id})
    done.label = label
    if pe.data is not None:
        # The source is sampled when the transfer starts and lands when it ends.
        box: dict = {}
        ops.data_at(start, lambda: box.setdefault("v", ops.read(cmd.src)))
        done.then(lambda c: ops.data_at(c.done_at, lambda: ops.write(cmd.dst, box["v"])))
    return done
