"""Topology spec: load a topology YAML (with ``extends:``), validate it, freeze it.

Validation happens in three passes before anything is built:
1. each file of the ``extends`` chain against the schema without ``required``
   (so an unknown key is reported against the file that contains it);
2. the merged document against the full schema;
3. semantic checks the schema cannot express (grid sizes, geometry fits;
   ``spec_checks``).
Each failure is one :class:`ConfigError` line naming file, key path, allowance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernbench.errors import ConfigError
from kernbench.fileio import json_hash
from kernbench.topology.spec_checks import check_semantics
from kernbench.units import gb_to_bytes, kb_to_bytes, mb_to_bytes
from kernbench.validation import load_yaml_file, packaged_schema, validate, without_required

PE_SUBCOMPONENTS = (
    "pe_cpu", "pe_scheduler", "pe_dma", "pe_fetch_store", "pe_gemm",
    "pe_math", "pe_mmu", "pe_tcm", "pe_ipcq",
)

def _schema() -> dict:
    return packaged_schema("kernbench.topology", "topology.schema.yaml")


@dataclass(frozen=True)
class Wire:
    """A link class: bandwidth (GB/s) and physical length (mm) at ns_per_mm."""

    bw_gbs: float
    distance_mm: float
    ns_per_mm: float

    @property
    def wire_ns(self) -> float:
        return self.distance_mm * self.ns_per_mm


@dataclass(frozen=True)
class SipGrid:
    count: int
    topology: str
    w: int
    h: int
    link: Wire
    link_overhead_ns: float


@dataclass(frozen=True)
class CubeGeometry:
    w_mm: float
    h_mm: float
    corners: tuple[str, ...]
    pe_per_corner: int
    pe_pitch_mm: float
    n_connections: int
    hbm_mapping_mode: str
    m_cpu_pos: tuple[float, float]
    sram_pos: tuple[float, float]
    max_spacing_mm: float

    @property
    def pes_per_cube(self) -> int:
        return len(self.corners) * self.pe_per_corner


@dataclass(frozen=True)
class HbmSpec:
    total_bytes: int
    pseudo_channels: int
    pseudo_channel_bw_gbs: float
    interleave_bytes: int
    ctrl_overhead_ns: float
    link_bw_gbs: float


@dataclass(frozen=True)
class GemmArraySpec:
    """The weight-stationary MAC array as stated hardware (docs/topology-format.md): its
    size, how fast weights load, and what overlaps between weight blocks (folds)."""

    mac_rows: int  # rows hold the reduction (k) dimension of a weight block
    mac_cols: int  # columns hold the output (n) dimension
    weight_rows_per_cycle: int  # weight rows loaded per cycle, 1 .. mac_rows
    double_buffered_weights: bool  # the next block loads while this one computes
    pipelined_folds: bool  # the next block's inputs follow without a new fill and skew


@dataclass(frozen=True)
class PeSpec:
    clock_ghz: float
    overhead_ns: dict[str, float]
    link: Wire
    internal_link: Wire
    tcm_bytes: int
    tcm_port_bw_gbs: float
    tcm_reserved_bytes: int
    gemm: GemmArraySpec
    vector_width: int
    page_size: int
    kernel_scratch_bytes: int
    tile_m: int
    tile_k: int
    tile_n: int
    max_inflight_tiles: int
    stream_tile_bytes: int


@dataclass(frozen=True)
class TopologySpec:
    """The validated, frozen topology. ``raw`` keeps the merged document."""

    name: str
    description: str
    source: Path
    sources: tuple[Path, ...]
    raw: dict[str, Any] = field(repr=False, compare=False)
    host_overhead_ns: float
    switch_overhead_ns: float
    pcie: Wire
    sips: SipGrid
    cube_w: int
    cube_h: int
    io_overhead_ns: dict[str, float]
    io_link: Wire
    ucie: Wire
    ucie_overhead_ns: float
    geometry: CubeGeometry
    hbm: HbmSpec
    router_overhead_ns: float
    noc_link_bw_gbs: float
    noc_ns_per_mm: float
    m_cpu_overhead_ns: float
    sram_bytes: int
    sram_port_bw_gbs: float
    sram_overhead_ns: float
    pe: PeSpec
    sharing: str  # how concurrent transfers share a link or an HBM slice: "fair" or "fifo"
    emit_views: tuple[str, ...]

    @property
    def cubes_per_sip(self) -> int:
        return self.cube_w * self.cube_h

    @property
    def pes_per_cube(self) -> int:
        return self.geometry.pes_per_cube

    @property
    def hbm_slice_bytes(self) -> int:
        return self.hbm.total_bytes // self.pes_per_cube

    @property
    def channels_per_slice(self) -> int:
        return self.hbm.pseudo_channels // self.pes_per_cube

    @property
    def slice_bw_gbs(self) -> float:
        return self.channels_per_slice * self.hbm.pseudo_channel_bw_gbs

    def content_hash(self) -> str:
        """Hash of the merged document: identical content, identical hash."""
        return json_hash(self.raw)


def _deep_merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _load_chain(path: Path, seen: tuple[Path, ...] = (), display: str | None = None
                ) -> tuple[dict, tuple[Path, ...]]:
    """Read ``path`` and its ``extends`` ancestors; return merged doc + file chain."""
    name = display or str(path)
    if path in seen:
        chain = " -> ".join(str(p) for p in (*seen, path))
        raise ConfigError(name, "extends", f"circular extends chain: {chain}")
    doc = load_yaml_file(path, name)
    if not isinstance(doc, dict):
        raise ConfigError(name, "", "top level must be a mapping of keys")
    validate(doc, without_required(_schema()), name)
    base_ref = doc.get("extends")
    if base_ref is None:
        return doc, (path,)
    base_path = (path.parent / base_ref).resolve()
    if not base_path.is_file():
        raise ConfigError(name, "extends", f"base topology {base_ref!r} not found next to this file")
    base_doc, chain = _load_chain(base_path, (*seen, path))
    merged = _deep_merge(base_doc, {k: v for k, v in doc.items() if k != "extends"})
    return merged, (*chain, path)


def _override(doc: dict, dotted: str, value: Any, src: str) -> dict:
    """``doc`` with the key at ``dotted`` set to ``value`` (its parents must exist)."""
    *parents, last = dotted.split(".")
    out = dict(doc)
    node = out
    for i, key in enumerate(parents):
        child = node.get(key)
        if not isinstance(child, dict):
            raise ConfigError(src, ".".join(parents[:i + 1]),
                              f"cannot override {dotted!r}: no such section")
        node[key] = dict(child)
        node = node[key]
    node[last] = value
    return out


def value_at(path: str | Path, dotted: str) -> Any:
    """The value at ``dotted`` in the topology at ``path`` (its ``extends`` chain merged):
    what an override of that key replaces. A key the file does not have is one line."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(str(path), "", "topology file not found")
    node: Any = _load_chain(p.resolve(), display=str(path))[0]
    for i, key in enumerate(dotted.split(".")):
        if not isinstance(node, dict) or key not in node:
            raise ConfigError(str(path), ".".join(dotted.split(".")[:i + 1]),
                              f"no such key (asked for {dotted!r})")
        node = node[key]
    return node


def _wire(d: dict) -> Wire:
    return Wire(float(d["bw_gbs"]), float(d["distance_mm"]), float(d["ns_per_mm"]))


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> TopologySpec:
    """Load, merge, validate and freeze a topology file. ``overrides`` (dotted key ->
    value, e.g. ``{"fabric.sharing": "fifo"}``) are applied to the merged document
    before validation: a derived topology, with its own content hash."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ConfigError(str(path), "", "topology file not found")
    if not p.is_file():
        raise ConfigError(str(path), "", "topology path is not a file")
    p = p.resolve()
    doc, chain = _load_chain(p, display=str(path))
    src = str(path)
    for key, value in sorted((overrides or {}).items()):
        doc = _override(doc, key, value, src)
    validate(doc, _schema(), src)
    check_semantics(doc, src)
    return _freeze(doc, p, chain)


def _geometry(cu: dict) -> CubeGeometry:
    """What the mesh generator needs of a CUBE (its hash decides if the cached mesh is stale)."""
    return CubeGeometry(
        w_mm=float(cu["geometry"]["cube_mm"]["w"]),
        h_mm=float(cu["geometry"]["cube_mm"]["h"]),
        corners=tuple(cu["pe_layout"]["corners"]),
        pe_per_corner=int(cu["pe_layout"]["pe_per_corner"]),
        pe_pitch_mm=float(cu["pe_layout"]["pe_pitch_mm"]),
        n_connections=int(cu["ucie"]["n_connections"]),
        hbm_mapping_mode=cu["memory_map"]["hbm_mapping_mode"],
        m_cpu_pos=tuple(float(v) for v in cu["placement"]["m_cpu"]["pos_mm"]),
        sram_pos=tuple(float(v) for v in cu["placement"]["sram"]["pos_mm"]),
        max_spacing_mm=float(cu["noc"]["max_spacing_mm"]),
    )


def _hbm(cu: dict) -> HbmSpec:
    """One CUBE's HBM: memory map and controller."""
    mm = cu["memory_map"]
    return HbmSpec(
        total_bytes=gb_to_bytes(mm["hbm_total_gb"]),
        pseudo_channels=int(mm["pseudo_channels"]),
        pseudo_channel_bw_gbs=float(mm["pseudo_channel_bw_gbs"]),
        interleave_bytes=int(mm["interleave_bytes"]),
        ctrl_overhead_ns=float(cu["hbm_ctrl"]["overhead_ns"]),
        link_bw_gbs=float(cu["hbm_ctrl"]["link_bw_gbs"]),
    )


def _pe(pe: dict) -> PeSpec:
    """One PE's units, memories and scheduler."""
    return PeSpec(
        clock_ghz=float(pe["clock_ghz"]),
        overhead_ns={k: float(pe["overhead_ns"][k]) for k in PE_SUBCOMPONENTS},
        link=_wire(pe["link"]),
        internal_link=_wire(pe["internal_link"]),
        tcm_bytes=kb_to_bytes(pe["tcm"]["size_kb"]),
        tcm_port_bw_gbs=float(pe["tcm"]["port_bw_gbs"]),
        tcm_reserved_bytes=kb_to_bytes(pe["tcm"]["scheduler_reserved_kb"]),
        gemm=GemmArraySpec(
            mac_rows=int(pe["gemm"]["mac_rows"]),
            mac_cols=int(pe["gemm"]["mac_cols"]),
            weight_rows_per_cycle=int(pe["gemm"]["weight_rows_per_cycle"]),
            double_buffered_weights=bool(pe["gemm"]["double_buffered_weights"]),
            pipelined_folds=bool(pe["gemm"]["pipelined_folds"]),
        ),
        vector_width=int(pe["math"]["vector_width"]),
        page_size=int(pe["mmu"]["page_size"]),
        kernel_scratch_bytes=kb_to_bytes(pe["tcm"]["kernel_scratch_kb"]),
        tile_m=int(pe["scheduler"]["tile_m"]),
        tile_k=int(pe["scheduler"]["tile_k"]),
        tile_n=int(pe["scheduler"]["tile_n"]),
        max_inflight_tiles=int(pe["scheduler"]["max_inflight_tiles"]),
        stream_tile_bytes=kb_to_bytes(pe["scheduler"]["stream_tile_kb"]),
    )


def _freeze(d: dict, path: Path, chain: tuple[Path, ...]) -> TopologySpec:
    sy, sp, cu, pe = d["system"], d["sip"], d["cube"], d["pe"]
    return TopologySpec(
        name=d["name"],
        description=d.get("description", ""),
        source=path,
        sources=chain,
        raw=d,
        host_overhead_ns=float(sy["host"]["overhead_ns"]),
        switch_overhead_ns=float(sy["switch"]["overhead_ns"]),
        pcie=_wire(sy["pcie"]),
        sips=SipGrid(
            count=int(sy["sips"]["count"]), topology=sy["sips"]["topology"],
            w=int(sy["sips"]["w"]), h=int(sy["sips"]["h"]),
            link=_wire(sy["sips"]["link"]),
            link_overhead_ns=float(sy["sips"]["link"]["overhead_ns"]),
        ),
        cube_w=int(sp["cube_mesh"]["w"]),
        cube_h=int(sp["cube_mesh"]["h"]),
        io_overhead_ns={k: float(sp["io"][k]["overhead_ns"]) for k in ("pcie_ep", "io_cpu", "io_noc")},
        io_link=_wire(sp["io"]["link"]),
        ucie=_wire(sp["ucie"]),
        ucie_overhead_ns=float(sp["ucie"]["overhead_ns"]),
        geometry=_geometry(cu),
        hbm=_hbm(cu),
        router_overhead_ns=float(cu["noc"]["router_overhead_ns"]),
        noc_link_bw_gbs=float(cu["noc"]["link_bw_gbs"]),
        noc_ns_per_mm=float(cu["noc"]["ns_per_mm"]),
        m_cpu_overhead_ns=float(cu["m_cpu"]["overhead_ns"]),
        sram_bytes=mb_to_bytes(cu["sram"]["size_mb"]),
        sram_port_bw_gbs=float(cu["sram"]["port_bw_gbs"]),
        sram_overhead_ns=float(cu["sram"]["overhead_ns"]),
        pe=_pe(pe),
        sharing=d["fabric"]["sharing"],
        emit_views=tuple(d.get("visualization", {}).get("emit_views", ["system", "sip", "cube"])),
    )
