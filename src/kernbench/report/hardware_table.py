"""The paper's hardware table, generated from a topology file and its comments."""

from __future__ import annotations

from kernbench.analysis.latex import escape, tabular
from kernbench.components.builtin.pe_cost_model import PeCostModel
from kernbench.report.yaml_comments import chain_comments
from kernbench.topology.graph import TopologyGraph

Row = tuple[str, str, str, str]


def hardware_rows(graph: TopologyGraph) -> list[Row]:
    """(component, parameter, value with unit, source key path) for the table."""
    return _system_rows(graph.spec) + _cube_rows(graph.spec, graph.mesh) + _pe_rows(graph.spec)


def _system_rows(s) -> list[Row]:
    """The system and SIP levels: host link, inter-SIP links, the CUBE mesh."""
    return [
        ("System", "SIPs", f"{s.sips.count} ({s.sips.topology.replace('_', ' ')}, "
                           f"{s.sips.w}x{s.sips.h})", "system.sips.topology"),
        ("System", "PCIe link", f"{s.pcie.bw_gbs:g} GB/s", "system.pcie.bw_gbs"),
        ("System", "PCIe switch latency", f"{s.switch_overhead_ns:g} ns", "system.switch.overhead_ns"),
        ("System", "Inter-SIP link", f"{s.sips.link.bw_gbs:g} GB/s, {s.sips.link_overhead_ns:g} ns",
         "system.sips.link.bw_gbs"),
        ("System", "Link sharing", s.sharing, "fabric.sharing"),
        ("SIP", "CUBE mesh", f"{s.cube_w}x{s.cube_h}", "sip.cube_mesh"),
        ("SIP", "UCIe per connection", f"{s.ucie.bw_gbs:g} GB/s x {s.geometry.n_connections} per side",
         "sip.ucie.bw_gbs"),
        ("SIP", "UCIe PHY latency", f"{s.ucie_overhead_ns:g} ns", "sip.ucie.overhead_ns"),
        ("SIP", "IO CPU latency", f"{s.io_overhead_ns['io_cpu']:g} ns", "sip.io.io_cpu.overhead_ns"),
    ]


def _cube_rows(s, mesh) -> list[Row]:
    """One CUBE: its NoC, HBM and SRAM."""
    return [
        ("CUBE", "Die size", f"{s.geometry.w_mm:g} x {s.geometry.h_mm:g} mm", "cube.geometry.cube_mm.w"),
        ("CUBE", "Router grid", f"{mesh.n_rows}x{mesh.n_cols} ({len(mesh.routers())} routers)",
         "cube.noc.max_spacing_mm"),
        ("CUBE", "Router latency", f"{s.router_overhead_ns:g} ns", "cube.noc.router_overhead_ns"),
        ("CUBE", "Mesh link", f"{s.noc_link_bw_gbs:g} GB/s", "cube.noc.link_bw_gbs"),
        ("CUBE", "Wire delay", f"{s.noc_ns_per_mm:g} ns/mm", "cube.noc.ns_per_mm"),
        ("CUBE", "HBM capacity", f"{s.hbm.total_bytes / 2**30:g} GiB", "cube.memory_map.hbm_total_gb"),
        ("CUBE", "HBM pseudo-channels",
         f"{s.hbm.pseudo_channels} x {s.hbm.pseudo_channel_bw_gbs:g} GB/s = "
         f"{s.hbm.pseudo_channels * s.hbm.pseudo_channel_bw_gbs:g} GB/s",
         "cube.memory_map.pseudo_channel_bw_gbs"),
        ("CUBE", "HBM access latency", f"{s.hbm.ctrl_overhead_ns:g} ns", "cube.hbm_ctrl.overhead_ns"),
        ("CUBE", "SRAM", f"{s.sram_bytes / 2**20:g} MiB, {s.sram_port_bw_gbs:g} GB/s", "cube.sram.size_mb"),
    ]


def _pe_rows(s) -> list[Row]:
    """One PE: compute, memories, scheduler and dispatch cost."""
    pe = s.pe
    macs = pe.gemm.mac_rows * pe.gemm.mac_cols
    cost = PeCostModel.from_spec(s)
    return [
        ("PE", "Count per CUBE", f"{s.pes_per_cube}", "cube.pe_layout.corners"),
        ("PE", "Clock", f"{pe.clock_ghz:g} GHz", "pe.clock_ghz"),
        ("PE", "GEMM array", f"{pe.gemm.mac_rows}x{pe.gemm.mac_cols} MAC = "
                             f"{2 * macs * pe.clock_ghz / 1000:g} TFLOP/s", "pe.gemm.mac_rows"),
        ("PE", "GEMM weight load", f"{pe.gemm.weight_rows_per_cycle} row(s)/cycle",
         "pe.gemm.weight_rows_per_cycle"),
        ("PE", "GEMM weight registers",
         "double-buffered" if pe.gemm.double_buffered_weights else "single",
         "pe.gemm.double_buffered_weights"),
        ("PE", "GEMM weight blocks",
         "pipelined" if pe.gemm.pipelined_folds else "fill and skew each",
         "pe.gemm.pipelined_folds"),
        ("PE", "Vector unit", f"{pe.vector_width} lanes", "pe.math.vector_width"),
        ("PE", "TCM", f"{pe.tcm_bytes / 2**20:g} MiB, {pe.tcm_port_bw_gbs:g} GB/s",
         "pe.tcm.size_kb"),
        ("PE", "HBM slice", f"{s.hbm_slice_bytes / 2**30:g} GiB, {s.slice_bw_gbs:g} GB/s",
         "cube.memory_map.pseudo_channels"),
        ("PE", "DMA latency", f"{pe.overhead_ns['pe_dma']:g} ns", "pe.overhead_ns.pe_dma"),
        ("PE", "Supertile (m, k, n)", f"{pe.tile_m} x {pe.tile_k} x {pe.tile_n}",
         "pe.scheduler.tile_k"),
        ("PE", "Tiles in flight", f"{pe.max_inflight_tiles}", "pe.scheduler.max_inflight_tiles"),
        ("PE", "Dispatch, composite", f"F = {cost.fixed_per_cmd_cycles:g} cycles",
         "pe.pe_cost_model.fixed_per_cmd_cycles"),
        ("PE", "Dispatch, single op", f"F = {cost.fixed_per_single_op_cmd_cycles:g} cycles",
         "pe.pe_cost_model.fixed_per_single_op_cmd_cycles"),
        ("PE", "Dispatch, per byte", f"R = {cost.byte_cycles_recip:g} cycles",
         "pe.pe_cost_model.byte_cycles_recip"),
        ("PE", "Composite size cap", f"{cost.max_composite_logical_bytes} bytes",
         "pe.pe_cost_model.max_composite_logical_bytes"),
    ]


def hardware_table(graph: TopologyGraph) -> str:
    comments = chain_comments(graph.spec.sources)
    rows = [[escape(c), escape(p), escape(v), escape(comments.get(key, ""))]
            for c, p, v, key in hardware_rows(graph)]
    body = tabular(r"@{}lllX@{}", [r"\textbf{Block}", r"\textbf{Parameter}", r"\textbf{Value}",
                                   r"\textbf{Source / rationale}"], rows,
                   env="tabularx", width=r"\textwidth")
    return "% Generated by kernbench from " + escape(graph.spec.name) + "; do not edit.\n" + body
