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

    @property
    def units(self) -> dict:
        """The PE's units by name, in wiring order; a unit with a ``busy_report()``
        reports its own busy time (ns) under names of its choosing."""
        return {"pe_mmu": self.mmu, "pe_dma": self.dma, "pe_fetch_store": self.fetch_store,
                "pe_gemm": self.gemm, "pe_math": self.math, "pe_scheduler": self.scheduler,
                "pe_cpu": self.cpu, "pe_ipcq": self.ipcq}

    def engine_busy_ns(self) -> dict[str, float]:
        """Every unit's busy report, merged."""
        busy: dict[str, float] = {}
        for unit in self.units.values():
            report = getattr(unit, "busy_report", None)
            if report is not None:
                busy.update(report())
        return busy
