"""The four view projections of a compiled topology (system, sip, cube, pe).

Each view is plain data (boxes with coordinates and labelled edges) so that
rendering (``svg.py``) stays a separate, derived step. Coordinates are in
view units: millimetres for the cube view, abstract layout units elsewhere.
"""

from __future__ import annotations

from kernbench.topology import naming as nm
from kernbench.topology.graph import Edge, Node, View, ViewEdge, ViewNode
from kernbench.topology.mesh_gen import CubeMesh
from kernbench.topology.spec import TopologySpec

BOX_W, BOX_H, GAP = 120.0, 70.0, 60.0


def _fmt_bw(bw: float) -> str:
    return f"{bw:g} GB/s"


def system_view(spec: TopologySpec) -> View:
    g = spec.sips
    width = max(g.w * (BOX_W + GAP) + GAP, 3 * BOX_W)
    nodes = [
        ViewNode(nm.HOST, "Host CPU", "host", width / 2 - BOX_W / 2, 20, BOX_W, 40),
        ViewNode(nm.SWITCH, "PCIe switch", "switch", width / 2 - BOX_W / 2, 100, BOX_W, 40),
    ]
    edges = [ViewEdge(nm.HOST, nm.SWITCH, "pcie", _fmt_bw(spec.pcie.bw_gbs))]
    top = 200.0
    for sip in range(g.count):
        x, y = sip % g.w, sip // g.w
        sid = nm.sip_prefix(sip)
        label = f"SIP {sip} ({spec.cube_w}x{spec.cube_h} CUBEs)"
        nodes.append(ViewNode(sid, label, "sip", GAP + x * (BOX_W + GAP), top + y * (BOX_H + GAP),
                              BOX_W, BOX_H))
        edges.append(ViewEdge(nm.SWITCH, sid, "pcie", _fmt_bw(spec.pcie.bw_gbs)))
    wrap = g.topology in ("ring_1d", "torus_2d")
    seen: set[tuple[str, str]] = set()
    for sip in range(g.count):
        x, y = sip % g.w, sip // g.w
        for dx, dy, size in ((1, 0, g.w), (0, 1, g.h)):
            if size == 1:
                continue
            nx, ny = x + dx, y + dy
            wrapped = nx >= g.w or ny >= g.h
            if wrapped and not wrap:
                continue
            other = (ny % g.h) * g.w + (nx % g.w)
            key = (nm.sip_prefix(sip), nm.sip_prefix(other))
            if key in seen:
                continue
            seen.add(key)
            edges.append(ViewEdge(*key, "inter_sip_wrap" if wrapped else "inter_sip",
                                  _fmt_bw(g.link.bw_gbs)))
    height = top + g.h * (BOX_H + GAP)
    title = f"System: {g.count} SIP(s), {g.topology} {g.w}x{g.h}"
    return View("system", title, width, height, tuple(nodes), tuple(edges))


def sip_view(spec: TopologySpec, sip: int = 0) -> View:
    w, h = spec.cube_w, spec.cube_h
    width = w * (BOX_W + GAP) + GAP
    io_x = width / 2 - 1.5 * BOX_W
    nodes = [
        ViewNode(nm.io_node(sip, "pcie_ep"), "PCIe EP", "pcie_ep", io_x, 20, BOX_W * 0.9, 40),
        ViewNode(nm.io_node(sip, "io_cpu"), "IO CPU", "io_cpu", io_x + BOX_W, 20, BOX_W * 0.9, 40),
        ViewNode(nm.io_node(sip, "io_noc"), "IO NoC", "io_noc", io_x + 2 * BOX_W, 20, BOX_W * 0.9, 40),
    ]
    edges = [
        ViewEdge(nm.io_node(sip, "pcie_ep"), nm.io_node(sip, "io_cpu"), "io_internal"),
        ViewEdge(nm.io_node(sip, "io_cpu"), nm.io_node(sip, "io_noc"), "io_internal"),
    ]
    top = 120.0
    n = spec.geometry.n_connections
    ucie = f"{n} x {_fmt_bw(spec.ucie.bw_gbs)}"
    for cube in range(w * h):
        x, y = cube % w, cube // w
        cid = nm.cube_prefix(sip, cube)
        nodes.append(ViewNode(cid, f"CUBE {cube}", "cube", GAP + x * (BOX_W + GAP),
                              top + y * (BOX_H + GAP), BOX_W, BOX_H))
        if x + 1 < w:
            edges.append(ViewEdge(cid, nm.cube_prefix(sip, cube + 1), "ucie_mesh", ucie))
        if y + 1 < h:
            edges.append(ViewEdge(cid, nm.cube_prefix(sip, cube + w), "ucie_mesh", ucie))
        if y == 0:
            edges.append(ViewEdge(nm.io_node(sip, "io_noc"), cid, "io_to_cube", ucie))
    height = top + h * (BOX_H + GAP)
    return View("sip", f"SIP {sip}: {w}x{h} CUBE mesh + IO chiplet", width, height,
                tuple(nodes), tuple(edges))


def _beside_router(pos, router, w, h, gap=0.55):
    """Top-left corner of a w x h box next to its router, on the side of ``pos``."""
    dx, dy = pos[0] - router[0], pos[1] - router[1]
    if abs(dy) >= abs(dx) and dy:
        top = router[1] - gap - h if dy < 0 else router[1] + gap
        return router[0] - w / 2, top
    left = router[0] - gap - w if dx < 0 else router[0] + gap
    return left, router[1] - h / 2


def cube_view(spec: TopologySpec, mesh: CubeMesh, edges: list[Edge], sip: int = 0,
              cube: int = 0) -> View:
    r_size = 0.9
    nodes: list[ViewNode] = []
    for r, c in mesh.routers():
        x, y = mesh.router_pos(r, c)
        nodes.append(ViewNode(nm.router(sip, cube, r, c), f"r{r}c{c}", "router",
                              x - r_size / 2, y - r_size / 2, r_size, r_size))
    for p in mesh.pes:
        x, y = p.pos_mm
        nodes.append(ViewNode(nm.pe_prefix(sip, cube, p.pe), f"PE{p.pe}", "pe",
                              x - 0.7, y - 1.25 if p.corner in ("nw", "ne") else y + 0.55, 1.4, 0.7))
    for att, kind in ((mesh.m_cpu, "m_cpu"), (mesh.sram, "sram")):
        x, y = _beside_router(att.pos_mm, mesh.router_pos(*att.router), 1.6, 0.7)
        node_id = nm.m_cpu(sip, cube) if kind == "m_cpu" else nm.sram(sip, cube)
        nodes.append(ViewNode(node_id, kind.upper(), kind, x, y, 1.6, 0.7))
    for direction, phys in mesh.ucie:
        for conn, phy in enumerate(phys):
            x, y = phy.pos_mm
            nodes.append(ViewNode(nm.cube_ucie(sip, cube, direction, conn), f"{direction.upper()}c{conn}",
                                  "ucie_phy", x - 0.45, y - 0.3, 0.9, 0.6))
    prefix = nm.cube_prefix(sip, cube) + "."
    vedges: list[ViewEdge] = []
    for e in edges:
        if not (e.src.startswith(prefix) and e.dst.startswith(prefix)) or e.src > e.dst:
            continue
        if e.kind in ("pe_internal",):
            continue
        src, dst = e.src, e.dst
        if ".pe" in src and ".pe_" in src:
            src = src.rsplit(".", 1)[0]
        if ".pe" in dst and ".pe_" in dst:
            dst = dst.rsplit(".", 1)[0]
        label = _fmt_bw(e.bw_gbs) if e.kind in ("router_to_hbm", "hbm_to_router") else ""
        vedges.append(ViewEdge(src, dst, e.kind, label))
    channels = spec.channels_per_slice
    slices = [{"pe": p.pe, "anchor_mm": p.hbm_anchor_mm, "channels": channels,
               "router": nm.router(sip, cube, *p.router)} for p in mesh.pes]
    extras = {
        "hbm_box_mm": mesh.hbm_box_mm,
        "hbm_slices": slices,
        "pseudo_channels": spec.hbm.pseudo_channels,
        "pseudo_channel_bw_gbs": spec.hbm.pseudo_channel_bw_gbs,
        "total_bw_gbs": spec.hbm.pseudo_channels * spec.hbm.pseudo_channel_bw_gbs,
    }
    w, h = mesh.cube_mm
    title = (f"CUBE {cube}: {w:g} x {h:g} mm, {mesh.n_rows}x{mesh.n_cols} router grid, "
             f"{spec.hbm.pseudo_channels} pseudo-channels")
    return View("cube", title, w, h, tuple(nodes), tuple(vedges), extras)


PE_LAYOUT = {
    "pe_cpu": (0, 0), "pe_scheduler": (1, 0), "pe_mmu": (3, 0),
    "pe_dma": (2, 1), "pe_ipcq": (3, 1), "pe_fetch_store": (1, 1),
    "pe_gemm": (0, 2), "pe_math": (1, 2), "pe_tcm": (2, 2),
}


def pe_view(spec: TopologySpec, nodes: dict[str, Node], edges: list[Edge], sip: int = 0,
            cube: int = 0, pe: int = 0) -> View:
    vnodes = []
    for unit, (cx, cy) in PE_LAYOUT.items():
        node_id = nm.pe_unit(sip, cube, pe, unit)
        label = f"{unit.upper()} ({nodes[node_id].overhead_ns:g} ns)"
        vnodes.append(ViewNode(node_id, label, unit, 30 + cx * 200, 60 + cy * 120, 160, 60))
    prefix = nm.pe_prefix(sip, cube, pe) + "."
    vedges = tuple(
        ViewEdge(e.src, e.dst, e.kind, _fmt_bw(e.bw_gbs))
        for e in edges
        if e.kind == "pe_internal" and e.src.startswith(prefix) and e.src < e.dst
    )
    return View("pe", f"PE {pe}: nine sub-components", 4 * 200 + 20, 3 * 120 + 60,
                tuple(vnodes), vedges)


def build_views(spec: TopologySpec, mesh: CubeMesh, nodes: dict[str, Node],
                edges: list[Edge]) -> dict[str, View]:
    return {
        "system": system_view(spec),
        "sip": sip_view(spec),
        "cube": cube_view(spec, mesh, edges),
        "pe": pe_view(spec, nodes, edges),
    }
