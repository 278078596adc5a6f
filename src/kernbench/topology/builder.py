"""Compile a topology spec into a :class:`TopologyGraph` (stage order: docs/adr/0022-op-log-and-placement.md).

Stages run in a fixed order because later ones reference nodes made earlier:
system nodes -> per SIP (IO chiplet, cubes, inter-cube UCIe, IO <-> cube) ->
switch <-> IO PCIe links -> inter-SIP links -> view projections.
"""

from __future__ import annotations

from pathlib import Path

from kernbench.collector import quiet_collector
from kernbench.topology import naming as nm
from kernbench.topology.elements import Edge, Node
from kernbench.topology.graph import TopologyGraph
from kernbench.topology.mesh_gen import CubeMesh, ensure_mesh
from kernbench.topology.spec import PE_SUBCOMPONENTS, TopologySpec, Wire, load_spec
from kernbench.topology.views import build_views

MIN_WIRE_MM = 0.5  # shortest on-die hop we model; keeps every hop's wire delay > 0

# PE-internal datapaths (undirected pairs; each becomes two directed edges).
PE_INTERNAL_LINKS = (
    ("pe_cpu", "pe_scheduler"), ("pe_scheduler", "pe_dma"), ("pe_scheduler", "pe_fetch_store"),
    ("pe_scheduler", "pe_gemm"), ("pe_scheduler", "pe_math"), ("pe_scheduler", "pe_ipcq"),
    ("pe_dma", "pe_tcm"), ("pe_dma", "pe_mmu"), ("pe_fetch_store", "pe_tcm"),
    ("pe_fetch_store", "pe_gemm"), ("pe_fetch_store", "pe_math"), ("pe_ipcq", "pe_dma"),
    ("pe_ipcq", "pe_tcm"),
)

_OPPOSITE = {"n": "s", "s": "n", "e": "w", "w": "e"}


def _manhattan(a: tuple[float, float], b: tuple[float, float]) -> float:
    return max(MIN_WIRE_MM, abs(a[0] - b[0]) + abs(a[1] - b[1]))


class _GraphBuilder:
    def __init__(self, spec: TopologySpec, mesh: CubeMesh) -> None:
        self.spec = spec
        self.mesh = mesh
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []

    # -- primitives -------------------------------------------------------
    def node(self, node_id: str, kind: str, overhead_ns: float, **attrs) -> str:
        if node_id in self.nodes:
            raise AssertionError(f"duplicate node {node_id}")
        self.nodes[node_id] = Node(node_id, kind, overhead_ns, attrs)
        return node_id

    def link(self, a: str, b: str, kind_ab: str, kind_ba: str, bw_gbs: float,
             distance_mm: float, ns_per_mm: float) -> None:
        self.edges.append(Edge(a, b, kind_ab, bw_gbs, distance_mm, ns_per_mm))
        self.edges.append(Edge(b, a, kind_ba, bw_gbs, distance_mm, ns_per_mm))

    def wire_link(self, a: str, b: str, kind_ab: str, kind_ba: str, wire: Wire) -> None:
        self.link(a, b, kind_ab, kind_ba, wire.bw_gbs, wire.distance_mm, wire.ns_per_mm)

    # -- stages -----------------------------------------------------------
    def system(self) -> None:
        s = self.spec
        self.node(nm.HOST, "host", s.host_overhead_ns)
        self.node(nm.SWITCH, "switch", s.switch_overhead_ns)
        self.wire_link(nm.HOST, nm.SWITCH, "pcie", "pcie", s.pcie)

    def io_chiplet(self, sip: int) -> None:
        s = self.spec
        for comp in ("pcie_ep", "io_cpu", "io_noc"):
            self.node(nm.io_node(sip, comp), comp, s.io_overhead_ns[comp], sip=sip)
        self.wire_link(nm.io_node(sip, "pcie_ep"), nm.io_node(sip, "io_cpu"),
                       "io_internal", "io_internal", s.io_link)
        self.wire_link(nm.io_node(sip, "io_cpu"), nm.io_node(sip, "io_noc"),
                       "io_internal", "io_internal", s.io_link)

    def cube(self, sip: int, cube: int) -> None:
        s, mesh = self.spec, self.mesh
        noc_ns = s.noc_ns_per_mm
        for r, c in mesh.routers():
            self.node(nm.router(sip, cube, r, c), "router", s.router_overhead_ns,
                      sip=sip, cube=cube, row=r, col=c, pos_mm=mesh.router_pos(r, c))
        for r, c in mesh.routers():
            for dr, dc in ((0, 1), (1, 0)):
                if mesh.has_router(r + dr, c + dc):
                    dist = _manhattan(mesh.router_pos(r, c), mesh.router_pos(r + dr, c + dc))
                    self.link(nm.router(sip, cube, r, c), nm.router(sip, cube, r + dr, c + dc),
                              "router_mesh", "router_mesh", s.noc_link_bw_gbs, dist, noc_ns)
        for p in mesh.pes:
            self._pe(sip, cube, p)
        for name, att, kinds, bw, ovh in (
            ("m_cpu", mesh.m_cpu, ("router_to_mcpu", "mcpu_to_router"), s.noc_link_bw_gbs,
             s.m_cpu_overhead_ns),
            ("sram", mesh.sram, ("router_to_sram", "sram_to_router"), s.sram_port_bw_gbs,
             s.sram_overhead_ns),
        ):
            node_id = nm.m_cpu(sip, cube) if name == "m_cpu" else nm.sram(sip, cube)
            self.node(node_id, name, ovh, sip=sip, cube=cube, pos_mm=att.pos_mm)
            rid = nm.router(sip, cube, *att.router)
            dist = _manhattan(att.pos_mm, mesh.router_pos(*att.router))
            self.link(rid, node_id, kinds[0], kinds[1], bw, dist, noc_ns)
        for direction, phys in mesh.ucie:
            for conn, phy in enumerate(phys):
                pid = self.node(nm.cube_ucie(sip, cube, direction, conn), "ucie_phy",
                                s.ucie_overhead_ns, sip=sip, cube=cube, side=direction,
                                conn=conn, pos_mm=phy.pos_mm)
                dist = _manhattan(phy.pos_mm, mesh.router_pos(*phy.router))
                self.link(nm.router(sip, cube, *phy.router), pid, "router_to_ucie_conn",
                          "ucie_conn_to_router", s.ucie.bw_gbs, dist, noc_ns)

    def _pe(self, sip: int, cube: int, p) -> None:
        s, mesh = self.spec, self.mesh
        pe = p.pe
        for unit in PE_SUBCOMPONENTS:
            self.node(nm.pe_unit(sip, cube, pe, unit), unit, s.pe.overhead_ns[unit],
                      sip=sip, cube=cube, pe=pe, pos_mm=p.pos_mm)
        for a, b in PE_INTERNAL_LINKS:
            bw = s.pe.tcm_port_bw_gbs if "pe_tcm" in (a, b) else s.pe.internal_link.bw_gbs
            self.link(nm.pe_unit(sip, cube, pe, a), nm.pe_unit(sip, cube, pe, b), "pe_internal",
                      "pe_internal", bw, s.pe.internal_link.distance_mm, s.pe.internal_link.ns_per_mm)
        rid = nm.router(sip, cube, *p.router)
        self.wire_link(nm.pe_unit(sip, cube, pe, "pe_dma"), rid, "pe_to_router", "pe_to_router",
                       s.pe.link)
        self.wire_link(nm.pe_unit(sip, cube, pe, "pe_cpu"), rid, "command", "command", s.pe.link)
        hid = self.node(nm.hbm_ctrl(sip, cube, pe), "hbm_ctrl", s.hbm.ctrl_overhead_ns,
                        sip=sip, cube=cube, pe=pe, pos_mm=p.hbm_anchor_mm,
                        channels=s.channels_per_slice)
        dist = _manhattan(mesh.router_pos(*p.router), p.hbm_anchor_mm)
        self.link(rid, hid, "router_to_hbm", "hbm_to_router", s.hbm.link_bw_gbs, dist, s.noc_ns_per_mm)

    def inter_cube(self, sip: int) -> None:
        s = self.spec
        w, h = s.cube_w, s.cube_h
        for cube in range(w * h):
            x, y = cube % w, cube // w
            for direction, (dx, dy) in (("e", (1, 0)), ("s", (0, 1))):
                nx, ny = x + dx, y + dy
                if nx >= w or ny >= h:
                    continue
                other = ny * w + nx
                for conn in range(s.geometry.n_connections):
                    self.wire_link(nm.cube_ucie(sip, cube, direction, conn),
                                   nm.cube_ucie(sip, other, _OPPOSITE[direction], conn),
                                   "ucie_mesh", "ucie_mesh", s.ucie)

    def io_to_cubes(self, sip: int) -> None:
        """The IO chiplet sits north of the cube mesh and reaches every row-0 cube."""
        s = self.spec
        noc = nm.io_node(sip, "io_noc")
        for cube in range(s.cube_w):
            for conn in range(s.geometry.n_connections):
                phy = self.node(nm.io_cube_phy(sip, cube, conn), "io_phy", s.ucie_overhead_ns,
                                sip=sip, cube=cube, conn=conn)
                self.wire_link(noc, phy, "io_internal", "io_internal", s.io_link)
                self.wire_link(phy, nm.cube_ucie(sip, cube, "n", conn), "io_to_cube",
                               "cube_to_io", s.ucie)

    def switch_to_io(self) -> None:
        for sip in range(self.spec.sips.count):
            self.wire_link(nm.SWITCH, nm.io_node(sip, "pcie_ep"), "pcie", "pcie", self.spec.pcie)

    def inter_sip(self) -> None:
        g = self.spec.sips
        wrap = g.topology in ("ring_1d", "torus_2d")
        used: set[str] = set()

        def phy(sip: int, direction: str) -> str:
            node_id = nm.sip_link_phy(sip, direction)
            if node_id not in used:
                used.add(node_id)
                self.node(node_id, "sip_link_phy", g.link_overhead_ns, sip=sip, side=direction)
                self.wire_link(nm.io_node(sip, "io_noc"), node_id, "io_internal", "io_internal",
                               self.spec.io_link)
            return node_id

        for sip in range(g.count):
            x, y = sip % g.w, sip // g.w
            for direction, (dx, dy), size in (("e", (1, 0), g.w), ("s", (0, 1), g.h)):
                if size == 1:
                    continue
                nx, ny = x + dx, y + dy
                if nx >= g.w or ny >= g.h:
                    if not wrap:
                        continue
                    nx, ny = nx % g.w, ny % g.h
                other = ny * g.w + nx
                self.wire_link(phy(sip, direction), phy(other, _OPPOSITE[direction]),
                               "inter_sip", "inter_sip", g.link)

    def build(self) -> TopologyGraph:
        self.system()
        for sip in range(self.spec.sips.count):
            self.io_chiplet(sip)
            for cube in range(self.spec.cubes_per_sip):
                self.cube(sip, cube)
            self.inter_cube(sip)
            self.io_to_cubes(sip)
        self.switch_to_io()
        self.inter_sip()
        spec, mesh, nodes, edges = self.spec, self.mesh, self.nodes, self.edges
        return TopologyGraph(spec, mesh, nodes, edges,
                             lambda: build_views(spec, mesh, nodes, edges))


def compile_topology(spec: TopologySpec, mesh: CubeMesh) -> TopologyGraph:
    return _GraphBuilder(spec, mesh).build()


def load_topology(path: str | Path, overrides: dict | None = None) -> TopologyGraph:
    """Validate ``path`` (with ``overrides``: dotted key -> value, applied after its
    ``extends`` chain), reuse or regenerate its cube mesh, and compile the graph (with
    the cyclic collector off: its nodes and edges are thousands of objects that live on)."""
    with quiet_collector():
        spec = load_spec(path, overrides)
        mesh = ensure_mesh(spec.geometry, spec.source).mesh
        return compile_topology(spec, mesh)
