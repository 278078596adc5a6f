"""The probe's case catalog, derived from the topology.

Cube and PE indices come from the mesh shape, so the catalog adapts to any
topology: H2D/D2H walk down cube column 0 (one more UCIe hop per row from the
IO chiplet on the north edge), PE DMA cases move the destination from the PE's
own slice to the far corner of the mesh, and M_CPU cases cover local and far.
"""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from kernbench.components.flows import FlowSpec
from kernbench.errors import ConfigError, UsageError
from kernbench.policy.address.phys_addr import PhysAddr
from kernbench.sim_engine.engine import GraphEngine
from kernbench.topology.spec import TopologySpec

CATEGORIES = ("h2d", "d2h", "pe_dma", "mcpu_dma")


@dataclass(frozen=True)
class ProbeCase:
    name: str
    category: str
    description: str
    sip: int
    cube: int  # initiator cube (PE / M_CPU cases) or target cube (host cases)
    pe: int  # initiator PE (PE DMA) or target slice (host cases)
    dst_sip: int
    dst_cube: int
    dst_pe: int  # HBM slice index

    def target(self, spec: TopologySpec, offset: int = 0) -> PhysAddr:
        return PhysAddr.pe_hbm_addr(self.dst_sip, self.dst_cube, self.dst_pe, offset,
                                    spec.hbm_slice_bytes)

    def flow(self, engine: GraphEngine, nbytes: int, offset: int = 0) -> FlowSpec:
        pa = self.target(engine.graph.spec, offset)
        fb = engine.flows
        if self.category == "h2d":
            return fb.h2d_write(pa, nbytes)
        if self.category == "d2h":
            return fb.d2h_read(pa, nbytes)
        if self.category == "pe_dma":
            return fb.pe_dma_write(self.sip, self.cube, self.pe, pa, nbytes)
        return fb.mcpu_dma_write(self.sip, self.cube, pa, nbytes)

    def submit(self, engine: GraphEngine, nbytes: int, offset: int = 0) -> simpy.Event:
        return engine.submit(self.flow(engine, nbytes, offset))


def build_catalog(spec: TopologySpec) -> list[ProbeCase]:
    w, h = spec.cube_w, spec.cube_h
    cases: list[ProbeCase] = []
    for category, verb in (("h2d", "host writes"), ("d2h", "host reads")):
        for row in range(h):
            cube = row * w
            cases.append(ProbeCase(
                f"{category}-{row + 1}hop", category,
                f"{verb} 1 slice of cube {cube} ({row + 1} UCIe hop(s) from the IO chiplet)",
                0, cube, 0, 0, cube, 0))
    pes = spec.pes_per_cube
    pe_cases = [("pe-local-hbm", 0, 0, "PE 0 writes its own HBM slice")]
    if pes > 1:
        pe_cases.append(("pe-same-half-hbm", 0, 1, "PE 0 writes PE 1's slice (same corner group)"))
    if pes // 2 > 1:
        pe_cases.append(("pe-cross-half-hbm", 0, pes // 2,
                         f"PE 0 writes PE {pes // 2}'s slice (other half of the cube)"))
    for name, dst_cube, dst_pe, text in pe_cases:
        cases.append(ProbeCase(name, "pe_dma", text, 0, 0, 0, 0, dst_cube, dst_pe))
    last = w * h - 1
    if last >= 1:
        cases.append(ProbeCase("pe-cross-cube-hbm-best", "pe_dma",
                               "PE 0 of cube 0 writes slice 0 of the adjacent cube 1",
                               0, 0, 0, 0, 1, 0))
    if last > 1:
        cases.append(ProbeCase("pe-cross-cube-hbm-worst", "pe_dma",
                               f"PE 0 of cube 0 writes slice 0 of the far-corner cube {last}",
                               0, 0, 0, 0, last, 0))
    if spec.sips.count > 1:
        cases.append(ProbeCase("pe-cross-sip-hbm", "pe_dma",
                               "PE 0 of SIP 0 cube 0 writes slice 0 of SIP 1 cube 0",
                               0, 0, 0, 1, 0, 0))
    cases.append(ProbeCase("mcpu-local-hbm", "mcpu_dma", "M_CPU of cube 0 writes slice 0 of cube 0",
                           0, 0, 0, 0, 0, 0))
    if last >= 1:
        cases.append(ProbeCase("mcpu-cross-cube-hbm", "mcpu_dma",
                               f"M_CPU of cube 0 writes slice 0 of cube {last}",
                               0, 0, 0, 0, last, 0))
    return cases


def find_case(spec: TopologySpec, name: str) -> ProbeCase:
    for case in build_catalog(spec):
        if case.name == name:
            return case
    names = ", ".join(c.name for c in build_catalog(spec))
    raise UsageError(f"unknown probe case {name!r} (available: {names})")


def select_flows(spec: TopologySpec, flows, source: str, key: str) -> list[str]:
    """The probe case names a config asks for: ``"all"`` or a list, each checked
    against this topology's catalog (a ConfigError names ``key[i]`` otherwise)."""
    catalog = [c.name for c in build_catalog(spec)]
    chosen = catalog if flows == "all" else list(flows)
    for i, flow in enumerate(chosen):
        if flow not in catalog:
            raise ConfigError(source, f"{key}[{i}]", f"unknown flow {flow!r} for topology "
                              f"{spec.name} (allowed: {', '.join(catalog)})")
    return chosen
