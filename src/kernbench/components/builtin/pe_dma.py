"""PE_DMA: read and write channels that hand requests to the fabric.

A channel is held only while a request is translated (PE_MMU) and its
descriptor is processed (PE_DMA overhead), i.e. until it is handed to the
fabric (ADR-0014); many requests can then be in flight, and the fabric's link
and pseudo-channel bookings serialise their data. READ and WRITE channels run
in parallel.
"""

from __future__ import annotations

from kernbench.components.builtin.engine import Engine
from kernbench.components.builtin.pe_mmu import PeMmu


class PeDma:
    def __init__(self, sip: int, cube: int, pe: int, node_id: str, overhead_ns: float,
                 mmu: PeMmu, services) -> None:
        self.sip, self.cube, self.pe = sip, cube, pe
        self.node_id = node_id
        self.mmu = mmu
        self.services = services
        self.read_ch = Engine(node_id, 0.0)
        self.write_ch = Engine(node_id, 0.0)
        self.translate_ns = mmu.overhead_ns
        self.hold_ns = mmu.overhead_ns + overhead_ns

    def read(self, va: int, nbytes: int, ready: float, now: float, op_name: str = "dma_read",
             stage: str = "DMA_READ", params: dict | None = None) -> tuple[float, float]:
        """HBM (virtual address) -> this PE's TCM. Returns (start, done)."""
        return self._transfer(self.read_ch, True, va, nbytes, ready, now, op_name, stage, params)

    def write(self, va: int, nbytes: int, ready: float, now: float, op_name: str = "dma_write",
              stage: str = "DMA_WRITE", params: dict | None = None) -> tuple[float, float]:
        """This PE's TCM -> HBM (virtual address). Returns (start, done)."""
        return self._transfer(self.write_ch, False, va, nbytes, ready, now, op_name, stage, params)

    def _transfer(self, channel: Engine, is_read: bool, va: int, nbytes: int, ready: float,
                  now: float, op_name: str, stage: str, params: dict | None) -> tuple[float, float]:
        pa = self.mmu.translate_pa(va)
        start, _ = channel.book(max(ready, now), self.hold_ns, now)
        flows = self.services.flows
        if is_read:
            flow = flows.pe_dma_read(self.sip, self.cube, self.pe, pa, nbytes)
        else:
            flow = flows.pe_dma_write(self.sip, self.cube, self.pe, pa, nbytes)
        done = self.services.book_flow(flow, start + self.translate_ns)
        p = {"va": va, "pa": pa.encode(), "nbytes": nbytes}
        if params:
            p.update(params)
        self.services.op_log.record(start, done, self.node_id, "memory", op_name, p, stage)
        return start, done
