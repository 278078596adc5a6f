"""Semantic checks of a merged topology document: what the schema cannot say (sizes
that must agree, room on the die), each failure one ConfigError naming the key.

The geometry constants of the mesh layout live here because the checks and the mesh
generator (``mesh_gen``) must agree on them.
"""

from __future__ import annotations

import math

from kernbench.errors import ConfigError

# Geometry constants of the mesh layout (see docs/adr/0003-cube-mesh-layout.md).
PE_EDGE_MARGIN_MM = 1.5  # PE centre distance from the cube edge
HBM_HALF_HEIGHT_MM = 1.5  # HBM router rows sit at cube_h/2 -/+ this
HBM_GAP_MM = 1.5  # clearance between PE rows and HBM rows
HBM_MIN_WIDTH_MM = 3.0  # room between west and east PE columns for the HBM block
MIN_ROW_PITCH_MM = 0.5




def check_semantics(d: dict, src: str) -> None:
    """What the schema cannot say: values that must agree with each other."""
    _check_sips(d, src)
    _check_cube(d, src)
    _check_pe(d, src)


def _check_sips(d: dict, src: str) -> None:
    sips = d["system"]["sips"]
    if sips["count"] != sips["w"] * sips["h"]:
        raise ConfigError(src, "system.sips.count",
                          f"{sips['count']} does not equal w x h = {sips['w']} x {sips['h']}")
    if sips["topology"] == "ring_1d" and sips["h"] != 1:
        raise ConfigError(src, "system.sips.h", f"ring_1d needs h = 1, got {sips['h']}")


def _check_cube(d: dict, src: str) -> None:
    """Memory map, and room on the die for the PEs, router rows and placed blocks."""
    cube = d["cube"]
    layout = cube["pe_layout"]
    pes = len(layout["corners"]) * layout["pe_per_corner"]
    mm = cube["memory_map"]
    if mm["pseudo_channels"] % pes:
        raise ConfigError(src, "cube.memory_map.pseudo_channels",
                          f"{mm['pseudo_channels']} cannot be split evenly over {pes} PEs (n_to_one)")
    il = mm["interleave_bytes"]
    if il & (il - 1):
        raise ConfigError(src, "cube.memory_map.interleave_bytes", f"must be a power of two, got {il}")
    w, h = cube["geometry"]["cube_mm"]["w"], cube["geometry"]["cube_mm"]["h"]
    span = PE_EDGE_MARGIN_MM + (layout["pe_per_corner"] - 1) * layout["pe_pitch_mm"]
    need_w = 2 * span + HBM_MIN_WIDTH_MM
    if w < need_w:
        raise ConfigError(src, "cube.geometry.cube_mm.w",
                          f"{w} mm cannot fit {layout['pe_per_corner']} PEs per corner at "
                          f"{layout['pe_pitch_mm']} mm pitch on both sides of the HBM block "
                          f"(needs >= {need_w:g} mm)")
    rows_per_half = math.ceil(max(cube["ucie"]["n_connections"], 2) / 2)
    room = h / 2 - HBM_HALF_HEIGHT_MM - HBM_GAP_MM - PE_EDGE_MARGIN_MM
    need_room = (rows_per_half - 1) * MIN_ROW_PITCH_MM
    if room < need_room:
        need_h = 2 * (HBM_HALF_HEIGHT_MM + HBM_GAP_MM + PE_EDGE_MARGIN_MM + need_room)
        raise ConfigError(src, "cube.geometry.cube_mm.h",
                          f"{h} mm cannot fit {rows_per_half} router row(s) per half around the "
                          f"HBM block (needs >= {need_h:g} mm)")
    for block in ("m_cpu", "sram"):
        x, y = cube["placement"][block]["pos_mm"]
        if x > w or y > h:
            raise ConfigError(src, f"cube.placement.{block}.pos_mm",
                              f"[{x}, {y}] lies outside the {w} x {h} mm cube")


def _check_pe(d: dict, src: str) -> None:
    """TCM reservations, scheduler tiles in flight, weight loading, page size."""
    tcm = d["pe"]["tcm"]
    if tcm["scheduler_reserved_kb"] >= tcm["size_kb"]:
        raise ConfigError(src, "pe.tcm.scheduler_reserved_kb",
                          f"{tcm['scheduler_reserved_kb']} must be smaller than size_kb = {tcm['size_kb']}")
    if tcm["scheduler_reserved_kb"] + tcm["kernel_scratch_kb"] > tcm["size_kb"]:
        raise ConfigError(src, "pe.tcm.kernel_scratch_kb",
                          f"{tcm['kernel_scratch_kb']} + scheduler_reserved_kb "
                          f"{tcm['scheduler_reserved_kb']} exceeds size_kb = {tcm['size_kb']}")
    sch = d["pe"]["scheduler"]
    elem = 2  # composite operands are staged as f16
    tile_bytes = (sch["tile_m"] * sch["tile_k"] + sch["tile_k"] * sch["tile_n"]) * elem
    if tile_bytes * sch["max_inflight_tiles"] > tcm["scheduler_reserved_kb"] * 1024:
        raise ConfigError(src, "pe.scheduler.max_inflight_tiles",
                          f"{sch['max_inflight_tiles']} tiles of {tile_bytes} bytes do not fit in "
                          f"scheduler_reserved_kb = {tcm['scheduler_reserved_kb']}")
    stream = 2 * sch["stream_tile_kb"] * sch["max_inflight_tiles"]  # an A and a B tile each
    if stream > tcm["scheduler_reserved_kb"]:
        raise ConfigError(src, "pe.scheduler.stream_tile_kb",
                          f"{sch['max_inflight_tiles']} streaming tiles of 2 x "
                          f"{sch['stream_tile_kb']} KiB do not fit in scheduler_reserved_kb = "
                          f"{tcm['scheduler_reserved_kb']}")
    gemm = d["pe"]["gemm"]
    if gemm["weight_rows_per_cycle"] > gemm["mac_rows"]:
        raise ConfigError(src, "pe.gemm.weight_rows_per_cycle",
                          f"{gemm['weight_rows_per_cycle']} exceeds mac_rows = {gemm['mac_rows']} "
                          f"(a weight block has only that many rows to load)")
    ps = d["pe"]["mmu"]["page_size"]
    if ps & (ps - 1):
        raise ConfigError(src, "pe.mmu.page_size", f"must be a power of two, got {ps}")


