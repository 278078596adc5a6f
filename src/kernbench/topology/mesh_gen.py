"""Cube NoC layout: router grid, HBM exclusion zone and block attachments.

The layout is derived from a few geometric fields of the cube spec and cached
in a ``<topology>.cube_mesh.yaml`` file next to the topology, keyed by a hash
of exactly those fields (plus the algorithm version). A change to any hashed
field regenerates the file; other edits (bandwidths, latencies) reuse it. When
the topology folder is read-only the cache lives in the user cache directory.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from kernbench.fileio import json_hash, write_atomic
from kernbench.topology.spec import CubeGeometry
from kernbench.topology.spec_checks import HBM_GAP_MM, HBM_HALF_HEIGHT_MM, PE_EDGE_MARGIN_MM
from kernbench.validation import safe_load

MESH_ALGO_VERSION = 1
TOP_CORNERS = ("nw", "ne")
BOTTOM_CORNERS = ("sw", "se")
WEST_CORNERS = ("nw", "sw")


@dataclass(frozen=True)
class PePlacement:
    pe: int
    corner: str
    pos_mm: tuple[float, float]
    router: tuple[int, int]
    hbm_anchor_mm: tuple[float, float]


@dataclass(frozen=True)
class Attachment:
    """A block (M_CPU, SRAM or a UCIe PHY) tied to one router."""

    name: str
    pos_mm: tuple[float, float]
    router: tuple[int, int]


@dataclass(frozen=True)
class CubeMesh:
    source_hash: str
    cube_mm: tuple[float, float]
    cols_mm: tuple[float, ...]
    rows_mm: tuple[float, ...]
    rows_per_half: int
    hbm_rows: tuple[int, int]
    hbm_cols: tuple[int, int]
    hbm_box_mm: tuple[float, float, float, float]
    pes: tuple[PePlacement, ...]
    m_cpu: Attachment
    sram: Attachment
    ucie: tuple[tuple[str, tuple[Attachment, ...]], ...]  # (direction, PHYs c0..)

    @property
    def n_rows(self) -> int:
        return len(self.rows_mm)

    @property
    def n_cols(self) -> int:
        return len(self.cols_mm)

    def has_router(self, row: int, col: int) -> bool:
        if not (0 <= row < self.n_rows and 0 <= col < self.n_cols):
            return False
        in_rows = self.hbm_rows[0] <= row <= self.hbm_rows[1]
        in_cols = self.hbm_cols[0] <= col <= self.hbm_cols[1]
        return not (in_rows and in_cols)

    def routers(self) -> list[tuple[int, int]]:
        return [(r, c) for r in range(self.n_rows) for c in range(self.n_cols) if self.has_router(r, c)]

    def router_pos(self, row: int, col: int) -> tuple[float, float]:
        return (self.cols_mm[col], self.rows_mm[row])

    def ucie_phys(self, direction: str) -> tuple[Attachment, ...]:
        return dict(self.ucie)[direction]


def source_hash(geo: CubeGeometry) -> str:
    """Hash of the fields that shape the mesh (geometry, PE layout, pitch and spacing)."""
    fields = {
        "algo": MESH_ALGO_VERSION,
        "cube_mm": [geo.w_mm, geo.h_mm],
        "pe_layout": [list(geo.corners), geo.pe_per_corner, geo.pe_pitch_mm],
        "ucie_n_connections": geo.n_connections,
        "hbm_mapping_mode": geo.hbm_mapping_mode,
        "placement": [list(geo.m_cpu_pos), list(geo.sram_pos)],
        "max_spacing_mm": geo.max_spacing_mm,
    }
    return json_hash(fields)


def _side_xs(geo: CubeGeometry) -> tuple[list[float], list[float]]:
    west = [PE_EDGE_MARGIN_MM + k * geo.pe_pitch_mm for k in range(geo.pe_per_corner)]
    east = sorted(geo.w_mm - x for x in west)
    return west, east


def _relays(a: float, b: float, count: int) -> list[float]:
    step = (b - a) / (count + 1)
    return [round(a + step * (i + 1), 6) for i in range(count)]


def _columns(geo: CubeGeometry) -> list[float]:
    west, east = _side_xs(geo)
    cols: list[float] = []
    for side in (west, east):
        for i, x in enumerate(side):
            if i:
                gap = x - side[i - 1]
                cols += _relays(side[i - 1], x, max(0, math.ceil(gap / geo.max_spacing_mm) - 1))
            cols.append(x)
        if side is west:
            gap = east[0] - west[-1]
            mid = max(2, math.ceil(gap / geo.max_spacing_mm) - 1)
            mid += mid % 2  # keep the HBM block centred between the relay columns
            cols += _relays(west[-1], east[0], mid)
    return sorted(cols)


def _rows(geo: CubeGeometry) -> tuple[list[float], int]:
    rows_per_half = math.ceil(max(geo.n_connections, 2) / 2)
    top_last = geo.h_mm / 2 - HBM_HALF_HEIGHT_MM - HBM_GAP_MM
    if rows_per_half == 1:
        top = [PE_EDGE_MARGIN_MM]
    else:
        pitch = (top_last - PE_EDGE_MARGIN_MM) / (rows_per_half - 1)
        top = [round(PE_EDGE_MARGIN_MM + i * pitch, 6) for i in range(rows_per_half)]
    hbm = [geo.h_mm / 2 - HBM_HALF_HEIGHT_MM, geo.h_mm / 2 + HBM_HALF_HEIGHT_MM]
    bottom = sorted(round(geo.h_mm - y, 6) for y in top)
    return top + hbm + bottom, rows_per_half


def _nearest_router(mesh_routers: list[tuple[int, int]], cols, rows, pos) -> tuple[int, int]:
    def dist(rc):
        r, c = rc
        return (cols[c] - pos[0]) ** 2 + (rows[r] - pos[1]) ** 2

    return min(mesh_routers, key=dist)  # min keeps the first (row-major) on ties


def _pe_placements(geo: CubeGeometry, cols, rows, rph: int, hbm_rows, box) -> tuple:
    """Each PE at its corner's row, on the router column nearest to it, with the point
    on the HBM box edge it reaches HBM through (spread evenly along the edge)."""
    n_rows, n_cols = len(rows), len(cols)
    west_xs, east_xs = _side_xs(geo)
    placements: list[tuple[int, str, float, int]] = []  # pe, corner, x, row
    top_present = [c for c in TOP_CORNERS if c in geo.corners]
    bottom_present = [c for c in BOTTOM_CORNERS if c in geo.corners]
    pe = 0
    for corner in geo.corners:
        xs = west_xs if corner in WEST_CORNERS else east_xs
        if corner in TOP_CORNERS:
            row = min(top_present.index(corner), rph - 1)
        else:
            row = min(hbm_rows[1] + 1 + bottom_present.index(corner), n_rows - 1)
        for x in xs:
            placements.append((pe, corner, x, row))
            pe += 1
    top_pes = [p for p in placements if p[1] in TOP_CORNERS]
    bottom_pes = [p for p in placements if p[1] in BOTTOM_CORNERS]
    anchors: dict[int, tuple[float, float]] = {}
    for group, y in ((top_pes, box[1]), (bottom_pes, box[3])):
        for k, p in enumerate(group):
            x = box[0] + (k + 0.5) * (box[2] - box[0]) / len(group)
            anchors[p[0]] = (round(x, 6), y)
    return tuple(
        PePlacement(pe=p, corner=corner, pos_mm=(x, rows[row]),
                    router=(row, min(range(n_cols), key=lambda c: abs(cols[c] - x))),
                    hbm_anchor_mm=anchors[p])
        for p, corner, x, row in placements
    )


def _ucie_attachments(geo: CubeGeometry, cols, rows, rph: int, hbm_rows) -> tuple:
    """The UCIe connections of each side: north and south split between the left and
    right PE columns, east and west on the PE rows."""
    n_rows, n_cols = len(rows), len(cols)
    n = geo.n_connections
    pe_rows = list(range(rph)) + list(range(hbm_rows[1] + 1, n_rows))
    left_cols = list(range(geo.pe_per_corner))
    right_cols = list(range(n_cols - geo.pe_per_corner, n_cols))
    half = math.ceil(n / 2)

    def ns_cols(i: int) -> int:
        group = left_cols if i < half else right_cols
        return group[(i if i < half else i - half) % len(group)]

    return (
        ("n", tuple(Attachment(f"c{i}", (cols[ns_cols(i)], 0.0), (0, ns_cols(i))) for i in range(n))),
        ("s", tuple(Attachment(f"c{i}", (cols[ns_cols(i)], geo.h_mm), (n_rows - 1, ns_cols(i)))
                    for i in range(n))),
        ("e", tuple(Attachment(f"c{i}", (geo.w_mm, rows[pe_rows[i]]), (pe_rows[i], n_cols - 1))
                    for i in range(n))),
        ("w", tuple(Attachment(f"c{i}", (0.0, rows[pe_rows[i]]), (pe_rows[i], 0)) for i in range(n))),
    )


def generate_mesh(geo: CubeGeometry) -> CubeMesh:
    """Compute the router grid and attachments for one cube (pure function)."""
    cols = _columns(geo)
    rows, rph = _rows(geo)
    n_rows, n_cols = len(rows), len(cols)
    hbm_rows = (rph, rph + 1)
    hbm_cols = (n_cols // 2 - 1, n_cols // 2)
    box = (
        round(cols[hbm_cols[0] - 1] + 0.5, 6),
        round(rows[rph - 1] + 0.5, 6),
        round(cols[hbm_cols[1] + 1] - 0.5, 6),
        round(rows[rph + 2] - 0.5, 6),
    )
    pes = _pe_placements(geo, cols, rows, rph, hbm_rows, box)
    grid = [(r, c) for r in range(n_rows) for c in range(n_cols)
            if not (hbm_rows[0] <= r <= hbm_rows[1] and hbm_cols[0] <= c <= hbm_cols[1])]
    m_cpu = Attachment("m_cpu", geo.m_cpu_pos, _nearest_router(grid, cols, rows, geo.m_cpu_pos))
    sram = Attachment("sram", geo.sram_pos, _nearest_router(grid, cols, rows, geo.sram_pos))
    return CubeMesh(
        source_hash=source_hash(geo), cube_mm=(geo.w_mm, geo.h_mm), cols_mm=tuple(cols),
        rows_mm=tuple(rows), rows_per_half=rph, hbm_rows=hbm_rows, hbm_cols=hbm_cols,
        hbm_box_mm=box, pes=pes, m_cpu=m_cpu, sram=sram,
        ucie=_ucie_attachments(geo, cols, rows, rph, hbm_rows),
    )


def _tuplify(value):
    if isinstance(value, list):
        return tuple(_tuplify(v) for v in value)
    return value


def mesh_to_dict(mesh: CubeMesh) -> dict:
    def plain(v):
        if isinstance(v, tuple | list):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    d = plain(asdict(mesh))
    d["ucie"] = {direction: phys for direction, phys in d["ucie"]}
    return {"generator": f"kernbench.topology.mesh_gen v{MESH_ALGO_VERSION}", **d}


def mesh_from_dict(d: dict) -> CubeMesh:
    att = lambda a: Attachment(a["name"], _tuplify(a["pos_mm"]), _tuplify(a["router"]))  # noqa: E731
    return CubeMesh(
        source_hash=d["source_hash"], cube_mm=_tuplify(d["cube_mm"]), cols_mm=_tuplify(d["cols_mm"]),
        rows_mm=_tuplify(d["rows_mm"]), rows_per_half=d["rows_per_half"],
        hbm_rows=_tuplify(d["hbm_rows"]), hbm_cols=_tuplify(d["hbm_cols"]),
        hbm_box_mm=_tuplify(d["hbm_box_mm"]),
        pes=tuple(PePlacement(p["pe"], p["corner"], _tuplify(p["pos_mm"]), _tuplify(p["router"]),
                              _tuplify(p["hbm_anchor_mm"])) for p in d["pes"]),
        m_cpu=att(d["m_cpu"]), sram=att(d["sram"]),
        ucie=tuple((k, tuple(att(a) for a in d["ucie"][k])) for k in ("n", "s", "e", "w")),
    )


@dataclass(frozen=True)
class MeshResult:
    mesh: CubeMesh
    path: Path | None  # where the cached copy lives (None if nothing was writable)
    regenerated: bool


def mesh_path_for(topology_path: Path) -> Path:
    return topology_path.with_name(topology_path.stem + ".cube_mesh.yaml")


def user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernbench" / "meshes"


def _read_cached(path: Path, want_hash: str) -> CubeMesh | None:
    try:
        d = safe_load(path.read_text(encoding="utf-8"))
        if isinstance(d, dict) and d.get("source_hash") == want_hash:
            return mesh_from_dict(d)
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError):
        return None  # unreadable or stale cache: regenerate
    return None


def _write_atomic(path: Path, text: str) -> bool:
    """Write the cache atomically; False if the folder refuses (the cache is optional)."""
    try:
        write_atomic(path, text)
        return True
    except OSError:
        return False


def ensure_mesh(geo: CubeGeometry, topology_path: Path) -> MeshResult:
    """Return the cube mesh, reusing a cache file whose source_hash matches."""
    want = source_hash(geo)
    local = mesh_path_for(topology_path)
    shared = user_cache_dir() / f"{want}.cube_mesh.yaml"
    for candidate in (local, shared):
        mesh = _read_cached(candidate, want) if candidate.exists() else None
        if mesh is not None:
            return MeshResult(mesh, candidate, regenerated=False)
    mesh = generate_mesh(geo)
    header = (f"# Generated by kernbench from {topology_path.name}; do not edit.\n"
              f"# Regenerated whenever the cube geometry fields hash differently.\n")
    text = header + yaml.safe_dump(mesh_to_dict(mesh), sort_keys=False)
    for candidate in (local, shared):
        if _write_atomic(candidate, text):
            return MeshResult(mesh, candidate, regenerated=True)
    return MeshResult(mesh, None, regenerated=True)
