"""One PE: its nine sub-components wired together, created on first use."""

from __future__ import annotations

from kernbench.components.builtin.pe_cpu import PeCpu
from kernbench.components.builtin.pe_dma import PeDma
from kernbench.components.builtin.pe_fetch_store import FetchStore
from kernbench.components.builtin.pe_gemm import GemmEngine
from kernbench.components.builtin.pe_ipcq import PeIpcq
from kernbench.components.builtin.pe_math import MathEngine
from kernbench.components.builtin.pe_mmu import PeMmu
from kernbench.components.builtin.pe_scheduler import PeScheduler
from kernbench.topology import naming as nm
from kernbench.topology.spec import PE_SUBCOMPONENTS


class PeUnit:
    """Bundles one PE's units. ``services`` is the engine's narrow interface
    (``components.services.PeServices``)."""

    def __init__(self, sip: int, cube: int, pe: int, services, spec, cost_model) -> None:
        self.sip, self.cube, self.pe = sip, cube, pe
        self.prefix = nm.pe_prefix(sip, cube, pe)
        self.ids = {u: nm.pe_unit(sip, cube, pe, u) for u in PE_SUBCOMPONENTS}
        self.spec = spec
        self.cost_model = cost_model
        self.env = services.env
        self.op_log = services.op_log
        self.data = services.data
        self.network = services.network
        self.services = services
        ovh = spec.pe.overhead_ns
        p = spec.pe
        self.mmu = PeMmu(self.ids["pe_mmu"], ovh["pe_mmu"], p.page_size)
        self.dma = PeDma(sip, cube, pe, self.ids["pe_dma"], ovh["pe_dma"], self.mmu, services)
        self.fetch_store = FetchStore(self.ids["pe_fetch_store"], ovh["pe_fetch_store"],
                                      p.tcm_port_bw_gbs)
        self.gemm = GemmEngine(self.ids["pe_gemm"], ovh["pe_gemm"], p.gemm, p.clock_ghz)
        self.math = MathEngine(self.ids["pe_math"], ovh["pe_math"], p.vector_width, p.clock_ghz)
        self.scheduler = PeScheduler(self)
        self.cpu = PeCpu(self)
        self.ipcq = PeIpcq(self)

    def engine_busy_ns(self) -> dict[str, float]:
        fs = self.fetch_store
        return {
            "dma_read_channel": self.dma.read_ch.busy_ns,
            "dma_write_channel": self.dma.write_ch.busy_ns,
            "fetch": fs.fetch.busy_ns,
            "store": fs.store.busy_ns,
            "gemm": self.gemm.busy_ns,
            "math": self.math.busy_ns,
            "pe_cpu_dispatch": self.cpu.dispatch_cycles / self.spec.pe.clock_ghz,
        }
