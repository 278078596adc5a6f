"""SVG rendering of the topology views (system, sip, cube, pe).

Views are plain data (``views.py``); this module only turns them into pictures,
so drawing choices never leak into the graph. The output is deterministic
(fixed number formatting, no ids or timestamps, view order everywhere) so the
diagrams can be committed and diffed: a file changes only when the topology does.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from kernbench.errors import UsageError
from kernbench.topology import naming as nm
from kernbench.topology.graph import TopologyGraph, View, ViewNode

VIEW_NAMES = ("system", "sip", "cube", "pe")
TARGET_PX = 1200.0  # width of the drawn content; margins come on top
MARGIN, TITLE_H, LEGEND_ROW = 24.0, 64.0, 26.0
FONT = "DejaVu Sans Mono, monospace"
CHAR_W = 0.6  # monospace advance per em, used to fit labels into boxes

NODE_STYLE = {  # kind -> (fill, stroke)
    "host": ("#fef3c7", "#b45309"), "switch": ("#e0e7ff", "#4338ca"),
    "sip": ("#ede9fe", "#6d28d9"), "cube": ("#ecfdf5", "#047857"),
    "pcie_ep": ("#e0f2fe", "#0369a1"), "io_cpu": ("#cffafe", "#0e7490"),
    "io_noc": ("#ccfbf1", "#0f766e"), "router": ("#ffffff", "#64748b"),
    "pe": ("#faf5ff", "#9333ea"), "m_cpu": ("#fff7ed", "#d97706"),
    "sram": ("#ffedd5", "#c2410c"), "ucie_phy": ("#e2e8f0", "#334155"),
    "pe_cpu": ("#fef3c7", "#b45309"), "pe_scheduler": ("#fef3c7", "#b45309"),
    "pe_dma": ("#e0f2fe", "#0369a1"), "pe_ipcq": ("#e0f2fe", "#0369a1"),
    "pe_mmu": ("#e0f2fe", "#0369a1"), "pe_fetch_store": ("#ede9fe", "#6d28d9"),
    "pe_gemm": ("#fee2e2", "#b91c1c"), "pe_math": ("#fee2e2", "#b91c1c"),
    "pe_tcm": ("#ecfdf5", "#047857"),
}
FALLBACK_NODE = ("#f1f5f9", "#475569")
EDGE_STYLE = {  # kind -> (colour, width px, dash or "")
    "pcie": ("#2563eb", 2.0, ""), "inter_sip": ("#7c3aed", 2.5, ""),
    "inter_sip_wrap": ("#7c3aed", 2.5, "8,5"), "io_internal": ("#475569", 2.0, ""),
    "io_to_cube": ("#0891b2", 2.0, ""), "ucie_mesh": ("#64748b", 2.0, ""),
    "pe_internal": ("#94a3b8", 1.5, ""), "router_mesh": ("#cbd5e1", 2.5, ""),
    "router_to_ucie_conn": ("#64748b", 1.5, ""), "pe_to_router": ("#a855f7", 1.5, ""),
    "command": ("#a855f7", 1.0, "3,3"), "hbm_to_router": ("#10b981", 2.0, "7,4"),
    "router_to_hbm": ("#10b981", 2.0, "7,4"), "mcpu_to_router": ("#d97706", 1.5, ""),
    "router_to_sram": ("#c2410c", 1.5, ""),
}
FALLBACK_EDGE = ("#64748b", 1.5, "")
SLICE_COLOURS = ("#3b82f6", "#06b6d4", "#6366f1", "#64748b",
                 "#f59e0b", "#eab308", "#ef4444", "#ec4899")
Point = tuple[float, float]


def _num(v: float) -> str:
    """Two decimals, trailing zeros stripped: stable text for equal floats."""
    s = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def _attr(v: Any) -> str:
    return _num(v) if isinstance(v, float | int) else escape(str(v), {'"': "&quot;"})


class _Svg:
    """Collects elements; the root (which needs the final size) is added by ``finish``."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def el(self, tag: str, text: str | None = None, **attrs: Any) -> None:
        # Python names -> SVG names: class_ -> class, font_size -> font-size.
        a = "".join(f' {k.rstrip("_").replace("_", "-")}="{_attr(v)}"'
                    for k, v in attrs.items() if v is not None and v != "")
        self.parts.append(f"<{tag}{a}/>" if text is None else f"<{tag}{a}>{escape(text)}</{tag}>")

    def text(self, p: Point, s: str, size: float, fill: str = "#1f2937", anchor: str = "middle",
             bold: bool = False, class_: str | None = None) -> None:
        """Text vertically centred on ``p`` (baseline shifted by ~0.35 em)."""
        self.el("text", s, class_=class_, x=p[0], y=p[1] + 0.35 * size, text_anchor=anchor,
                font_size=size, font_weight="bold" if bold else None, fill=fill)

    def finish(self, w: float, h: float) -> str:
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_num(w)}" height="{_num(h)}" '
                f'viewBox="0 0 {_num(w)} {_num(h)}" font-family="{FONT}">')
        bg = f'<rect width="{_num(w)}" height="{_num(h)}" fill="#ffffff"/>'
        return "\n".join([head, bg, *self.parts, "</svg>"]) + "\n"


class _Frame:
    """Uniform view-unit -> pixel map; content sits below the title band."""

    def __init__(self, box: tuple[float, float, float, float]) -> None:
        self.x0, self.y0, x1, y1 = box
        self.s = TARGET_PX / (x1 - self.x0)
        self.w, self.h = (x1 - self.x0) * self.s, (y1 - self.y0) * self.s

    def pt(self, x: float, y: float) -> Point:
        return MARGIN + (x - self.x0) * self.s, MARGIN + TITLE_H + (y - self.y0) * self.s


def _bbox(view: View, extra: Iterable[Point] = ()) -> tuple[float, float, float, float]:
    xs = [0.0, view.width] + [n.x for n in view.nodes] + [n.x + n.w for n in view.nodes]
    ys = [0.0, view.height] + [n.y for n in view.nodes] + [n.y + n.h for n in view.nodes]
    for x, y in extra:
        xs.append(x)
        ys.append(y)
    return min(xs), min(ys), max(xs), max(ys)


def _centre(n: ViewNode) -> Point:
    return n.x + n.w / 2, n.y + n.h / 2


def _fit(label: str, w_px: float, h_px: float, size: float = 14.0) -> float:
    """Largest font size <= ``size`` that fits the label inside a w x h box."""
    return min(size, 0.5 * h_px, 0.9 * w_px / (CHAR_W * max(1, len(label))))


def _box(svg: _Svg, f: _Frame, n: ViewNode, bold: bool = False, size: float = 14.0) -> None:
    fill, stroke = NODE_STYLE.get(n.kind, FALLBACK_NODE)
    x, y = f.pt(n.x, n.y)
    w, h = n.w * f.s, n.h * f.s
    svg.el("rect", class_=n.kind, x=x, y=y, width=w, height=h, rx=min(6.0, h / 4), fill=fill,
           stroke=stroke, stroke_width=1.5)
    svg.text(f.pt(*_centre(n)), n.label, _fit(n.label, w, h, size), stroke, bold=bold)


def _title(svg: _Svg, title: str, subtitle: str, width_px: float) -> None:
    svg.text((width_px / 2, MARGIN + 8), title, 18.0, bold=True)
    if subtitle:
        svg.text((width_px / 2, MARGIN + 32), subtitle, 14.0, fill="#475569")


def _legend(svg: _Svg, items: list[tuple[str, str, str]], y: float, width_px: float) -> float:
    """Draw (shape, colour, label) swatches left to right, wrapping; return the height used."""
    x, rows = MARGIN, 1
    for shape, colour, label in items:
        step = 34 + CHAR_W * 13 * len(label) + 18
        if x + step > width_px - MARGIN and x > MARGIN:
            x, rows = MARGIN, rows + 1
        cy = y + (rows - 0.5) * LEGEND_ROW
        if shape == "line" or shape == "dash":
            svg.el("line", x1=x, y1=cy, x2=x + 26, y2=cy, stroke=colour, stroke_width=2.5,
                   stroke_dasharray="7,4" if shape == "dash" else None)
        elif shape == "circle":
            svg.el("circle", cx=x + 13, cy=cy, r=8.0, fill="#ffffff", stroke=colour, stroke_width=1.5)
        else:
            svg.el("rect", x=x + 4, y=cy - 8, width=18.0, height=16.0, rx=3.0, fill=colour)
        svg.text((x + 34, cy), label, 13.0, anchor="start")
        x += step
    return rows * LEGEND_ROW


def _bend(a: Point, b: Point, limit: float) -> Point:
    """Control point bowing a wrap-around link down/right so it clears the straight links."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    length = max((dx * dx + dy * dy) ** 0.5, 1e-9)
    nx, ny = -dy / length, dx / length
    if ny < 0 or (ny == 0 and nx < 0):
        nx, ny = -nx, -ny
    off = min(0.5 * length, limit)
    return (a[0] + b[0]) / 2 + nx * off, (a[1] + b[1]) / 2 + ny * off


def _rect_of(f: _Frame, n: ViewNode) -> tuple[float, float, float, float]:
    (x0, y0), (x1, y1) = f.pt(n.x, n.y), f.pt(n.x + n.w, n.y + n.h)
    return x0, y0, x1, y1


def _draw_labels(svg: _Svg, pending: list[tuple[Point, Point, str]], obstacles: list,
                 colour: str, size: float = 12.0) -> None:
    """Label each a->b link at the first spot (middle outwards, then beside the line) whose
    box hits no node or earlier label, so labels stay readable on dense views."""
    for a, b, label in pending:
        w, h = CHAR_W * size * len(label) + 8, size + 4
        dx, dy = b[0] - a[0], b[1] - a[1]
        length = (dx * dx + dy * dy) ** 0.5
        nx, ny = (-dy / length, dx / length) if length else (0.0, 1.0)
        spots = [(a[0] + t * dx + nx * off, a[1] + t * dy + ny * off)
                 for off in (0.0, -h, h) for t in (0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8)]
        free = [p for p in spots if not any(
            p[0] - w / 2 < o[2] and o[0] < p[0] + w / 2 and p[1] - h / 2 < o[3] and o[1] < p[1] + h / 2
            for o in obstacles)]
        x, y = (free or spots)[0]
        obstacles.append((x - w / 2, y - h / 2, x + w / 2, y + h / 2))
        svg.el("rect", x=x - w / 2, y=y - h / 2, width=w, height=h, rx=3.0, fill="#ffffff",
               fill_opacity=0.9)
        svg.text((x, y), label, size, colour, class_="edge-label")


def _render_generic(view: View) -> str:
    """Boxes + straight links; wrap-around links are drawn as bowed curves."""
    nodes = {n.id: n for n in view.nodes}
    edges = [e for e in view.edges if e.src in nodes and e.dst in nodes]
    limit = 1.2 * max((n.h for n in view.nodes), default=1.0)
    bends = {i: _bend(_centre(nodes[e.src]), _centre(nodes[e.dst]), limit)
             for i, e in enumerate(edges) if e.kind.endswith("_wrap")}
    f = _Frame(_bbox(view, bends.values()))
    width = f.w + 2 * MARGIN
    svg = _Svg()
    _title(svg, view.title, "", width)
    labels: list[tuple[Point, Point, str]] = []
    for i, e in enumerate(edges):
        colour, sw, dash = EDGE_STYLE.get(e.kind, FALLBACK_EDGE)
        a, b = f.pt(*_centre(nodes[e.src])), f.pt(*_centre(nodes[e.dst]))
        if i in bends:
            c = f.pt(*bends[i])
            d = f"M {_num(a[0])} {_num(a[1])} Q {_num(c[0])} {_num(c[1])} {_num(b[0])} {_num(b[1])}"
            svg.el("path", class_=e.kind, d=d, fill="none", stroke=colour, stroke_width=sw,
                   stroke_dasharray=dash)
            mid = ((a[0] + b[0]) / 4 + c[0] / 2, (a[1] + b[1]) / 4 + c[1] / 2)
            a = b = mid  # label the curve at its apex
        else:
            svg.el("line", class_=e.kind, x1=a[0], y1=a[1], x2=b[0], y2=b[1], stroke=colour,
                   stroke_width=sw, stroke_dasharray=dash)
        if e.label:
            labels.append((a, b, e.label))
    for n in view.nodes:
        _box(svg, f, n)
    _draw_labels(svg, labels, [_rect_of(f, n) for n in view.nodes], "#334155")
    kinds = list(dict.fromkeys(n.kind for n in view.nodes))
    # One box per kind (pe view) means the box labels already name them: no legend entry.
    items = [("rect", NODE_STYLE.get(k, FALLBACK_NODE)[1], k.replace("_", " "))
             for k in (kinds if len(kinds) < len(view.nodes) else [])]
    items += [("dash" if EDGE_STYLE.get(k, FALLBACK_EDGE)[2] else "line",
               EDGE_STYLE.get(k, FALLBACK_EDGE)[0], k.replace("_", " ") + " link")
              for k in dict.fromkeys(e.kind for e in edges)]
    top = MARGIN + TITLE_H + f.h + 16
    return svg.finish(width, top + _legend(svg, items, top, width) + MARGIN)


def _slice_spans(extras: dict[str, Any]) -> list[tuple[dict[str, Any], float, float, bool]]:
    """(slice, x_left, x_right, on_top) per PE slice: anchors centre equal slices on an edge."""
    x0, y0, x1, _ = extras["hbm_box_mm"]
    groups: dict[float, list[dict[str, Any]]] = {}
    for s in extras["hbm_slices"]:
        groups.setdefault(s["anchor_mm"][1], []).append(s)
    out = []
    for y, group in groups.items():
        half = (x1 - x0) / len(group) / 2
        out += [(s, s["anchor_mm"][0] - half, s["anchor_mm"][0] + half, y == y0) for s in group]
    return out


def _draw_hbm(svg: _Svg, f: _Frame, ex: dict) -> tuple[tuple, dict[str, Point]]:
    """The central HBM block and each PE's slice of pseudo-channels; returns the block's
    pixel box and, per HBM controller, the point its link leaves the block."""
    hx0, hy0, hx1, hy1 = ex["hbm_box_mm"]
    (px0, py0), (px1, py1) = f.pt(hx0, hy0), f.pt(hx1, hy1)
    svg.el("rect", class_="hbm", x=px0, y=py0, width=px1 - px0, height=py1 - py0, rx=8.0,
           fill="#ecfdf5", stroke="#047857", stroke_width=2.0)
    svg.text(((px0 + px1) / 2, (py0 + py1) / 2 - 12), "HBM", 20.0, "#047857", bold=True)
    svg.text(((px0 + px1) / 2, (py0 + py1) / 2 + 14),
             f"{ex['pseudo_channels']} pseudo-channels, {ex['total_bw_gbs']:g} GB/s", 14.0, "#047857")
    anchors: dict[str, Point] = {}
    for k, (s, sx0, sx1, top) in enumerate(_slice_spans(ex)):
        colour = SLICE_COLOURS[k % len(SLICE_COLOURS)]
        (ax, _), (bx, _) = f.pt(sx0, 0.0), f.pt(sx1, 0.0)
        row_y = py0 + 6 if top else py1 - 22
        pitch = (bx - ax - 8) / s["channels"]
        for ch in range(s["channels"]):
            svg.el("rect", class_="pch", x=ax + 4 + ch * pitch + 1, y=row_y, width=pitch - 2,
                   height=16.0, rx=2.0, fill=colour)
        svg.text(((ax + bx) / 2, row_y + 30 if top else row_y - 14),
                 f"PE{s['pe']} x{s['channels']}ch", 13.0, colour, bold=True)
        sip_cube = nm.cube_of(s["router"])
        if sip_cube is not None:
            anchors[nm.hbm_ctrl(*sip_cube, s["pe"])] = s["anchor_mm"]
    return (px0, py0, px1, py1), anchors


def _draw_cube_edges(svg: _Svg, f: _Frame, view: View, anchors: dict[str, Point]):
    """One line per linked pair (parallel edges drawn once); returns the edge labels to
    place and the dots that mark where HBM links end."""
    nodes = {n.id: n for n in view.nodes}
    labels: list[tuple[Point, Point, str]] = []
    dots: list[Point] = []
    drawn: set[frozenset[str]] = set()
    for e in view.edges:
        src, dst = (e.dst, e.src) if e.dst in anchors else (e.src, e.dst)  # anchor end first
        ends = [_centre(nodes[i]) if i in nodes else anchors.get(i) for i in (src, dst)]
        if ends[0] is None or ends[1] is None or frozenset((src, dst)) in drawn:
            continue  # endpoint not drawn here, or a parallel edge (e.g. command) already shown
        drawn.add(frozenset((src, dst)))
        hbm = src in anchors
        colour, sw, dash = EDGE_STYLE.get("hbm_to_router" if hbm else e.kind, FALLBACK_EDGE)
        a, b = f.pt(*ends[0]), f.pt(*ends[1])
        svg.el("line", class_="hbm-link" if hbm else e.kind, x1=a[0], y1=a[1], x2=b[0], y2=b[1],
               stroke=colour, stroke_width=sw, stroke_dasharray=dash)
        if hbm and dst in nodes:  # dots mark where the link ends: slice edge and router rim
            r = min(nodes[dst].w, nodes[dst].h) / 2 * f.s
            d = max(1e-9, ((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) ** 0.5)
            dots += [a, (b[0] + (a[0] - b[0]) * r / d, b[1] + (a[1] - b[1]) * r / d)]
        if e.label:
            labels.append((a, b, e.label))
    return labels, dots


def _render_cube(view: View) -> str:
    """Floorplan in mm: router grid, central HBM block with its pseudo-channels, attachments."""
    ex = view.extras
    f = _Frame(_bbox(view))
    width = f.w + 2 * MARGIN
    svg = _Svg()
    per_slice = sorted({s["channels"] for s in ex["hbm_slices"]})
    bw = ex["pseudo_channel_bw_gbs"]
    sub = (f"per PE slice: {'/'.join(map(str, per_slice))} ch x {bw:g} GB/s"
           f" | cube total: {ex['pseudo_channels']} x {bw:g} = {ex['total_bw_gbs']:g} GB/s")
    _title(svg, view.title, sub, width)
    ox, oy = f.pt(0.0, 0.0)
    svg.el("rect", x=ox, y=oy, width=view.width * f.s, height=view.height * f.s, rx=8.0,
           fill="none", stroke="#94a3b8", stroke_width=2.0, stroke_dasharray="10,5")
    hbm_box, anchors = _draw_hbm(svg, f, ex)
    labels, dots = _draw_cube_edges(svg, f, view, anchors)
    for n in view.nodes:
        if n.kind == "router":
            (cx, cy), r = f.pt(*_centre(n)), min(n.w, n.h) / 2 * f.s
            fill, stroke = NODE_STYLE["router"]
            svg.el("circle", class_="router", cx=cx, cy=cy, r=r, fill=fill, stroke=stroke,
                   stroke_width=1.5)
            svg.text((cx, cy), n.label, _fit(n.label, 2 * r, 2 * r, 13.0), "#1f2937")
        else:
            _box(svg, f, n, bold=n.kind in ("pe", "m_cpu", "sram"), size=15.0)
    for p in dots:
        svg.el("circle", cx=p[0], cy=p[1], r=4.0, fill=EDGE_STYLE["hbm_to_router"][0])
    _draw_labels(svg, labels, [_rect_of(f, n) for n in view.nodes] + [hbm_box], "#047857")
    items = [("circle", NODE_STYLE["router"][1], "NoC router"), ("rect", "#9333ea", "PE"),
             ("rect", "#d97706", "M_CPU"), ("rect", "#c2410c", "SRAM"),
             ("rect", "#334155", "UCIe PHY"), ("rect", SLICE_COLOURS[0], "HBM pseudo-channel"),
             ("line", EDGE_STYLE["router_mesh"][0], "mesh link"),
             ("dash", EDGE_STYLE["hbm_to_router"][0], "HBM link (slice -> router)")]
    top = MARGIN + TITLE_H + f.h + 16
    return svg.finish(width, top + _legend(svg, items, top, width) + MARGIN)


def render_view_svg(view: View) -> str:
    """One view as a standalone SVG document (deterministic text)."""
    return _render_cube(view) if view.name == "cube" else _render_generic(view)


def emit_diagrams(graph: TopologyGraph, out_dir: str | Path,
                  views: Iterable[str] | None = None) -> list[Path]:
    """Write ``{view}.svg`` per requested view (default all four); return paths in that order."""
    names = list(VIEW_NAMES if views is None else views)
    bad = [n for n in names if n not in VIEW_NAMES or n not in graph.views]
    if bad:
        raise UsageError(f"unknown view(s) {', '.join(map(repr, bad))}; "
                         f"allowed: {', '.join(VIEW_NAMES)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        path = out / f"{name}.svg"
        path.write_bytes(render_view_svg(graph.views[name]).encode("utf-8"))
        paths.append(path)
    return paths
