"""Values of the platform section: the reference topology's hardware and cost model."""

from __future__ import annotations

from kernbench import __version__
from kernbench.analysis.values import Value, count, dims, g, num, text
from kernbench.components.builtin.pe_cost_model import PeCostModel
from kernbench.topology.graph import TopologyGraph


def platform_values(graph: TopologyGraph, title: str) -> dict[str, Value]:
    """``title``, ``version`` and the ``hw/...`` keys the platform section uses."""
    s = graph.spec
    pe = s.pe
    cost = PeCostModel.from_spec(s)
    macs = pe.gemm.mac_rows * pe.gemm.mac_cols
    return {
        "title": text(title),
        "version": text(__version__),
        "hw/topology": text(s.name),
        "hw/sips": count(s.sips.count),
        "hw/cubes": count(s.sips.count * s.cubes_per_sip),
        "hw/pes": count(s.sips.count * s.cubes_per_sip * s.pes_per_cube),
        "hw/pespercube": count(s.pes_per_cube),
        "hw/slicebw": num(s.slice_bw_gbs, 0),
        "hw/cubebw": num(s.hbm.pseudo_channels * s.hbm.pseudo_channel_bw_gbs, 0),
        "hw/channels": count(s.hbm.pseudo_channels),
        "hw/channelbw": num(s.hbm.pseudo_channel_bw_gbs, 0),
        "hw/meshbw": num(s.noc_link_bw_gbs, 0),
        "hw/routerns": num(s.router_overhead_ns, 1),
        "hw/nspermm": num(s.noc_ns_per_mm, 2),
        "hw/uciebw": num(s.ucie.bw_gbs, 0),
        "hw/grid": dims(graph.mesh.n_rows, graph.mesh.n_cols),
        "hw/clock": num(pe.clock_ghz, 1),
        "hw/macrows": count(pe.gemm.mac_rows),
        "hw/maccols": count(pe.gemm.mac_cols),
        "hw/macs": count(macs),
        "hw/petflops": g(round(2 * macs * pe.clock_ghz / 1000, 3)),
        "hw/fillcycles": count(pe.gemm.mac_rows + pe.gemm.mac_cols),
        "hw/weightrows": count(pe.gemm.weight_rows_per_cycle),
        "hw/weightload": count(-(-pe.gemm.mac_rows // pe.gemm.weight_rows_per_cycle)),
        "hw/doublebuffered": text("double-buffered" if pe.gemm.double_buffered_weights
                                  else "single-buffered"),
        "hw/pipelined": text("pipelined" if pe.gemm.pipelined_folds else "not pipelined"),
        "hw/sharing": text(s.sharing),
        "hw/gemmns": num(pe.overhead_ns["pe_gemm"], 1),
        "hw/tile/m": count(pe.tile_m),
        "hw/tile/k": count(pe.tile_k),
        "hw/tile/n": count(pe.tile_n),
        "hw/tile/kib": num((pe.tile_m * pe.tile_k + pe.tile_k * pe.tile_n) * 2 / 1024, 0),
        "hw/inflight": count(pe.max_inflight_tiles),
        "hw/tcmreservedkib": count(pe.tcm_reserved_bytes // 1024),
        "hw/dmans": num(pe.overhead_ns["pe_dma"], 0),
        "hw/hbmns": num(s.hbm.ctrl_overhead_ns, 0),
        "hw/dispatch/fixedcomposite": num(cost.fixed_per_cmd_cycles, 0),
        "hw/dispatch/fixedsingle": num(cost.fixed_per_single_op_cmd_cycles, 0),
        "hw/dispatch/r": g(cost.byte_cycles_recip),
        "hw/dispatch/bytespercycle": (num(1.0 / cost.byte_cycles_recip, 0)
                                      if cost.byte_cycles_recip else num(float("inf"))),
        "hw/dispatch/cap": count(cost.max_composite_logical_bytes),
    }


