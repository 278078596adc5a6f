"""Write ``report/generated/``: metadata, hardware table, study tables, values."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kernbench import __version__
from kernbench.components.builtin.pe_cost_model import PeCostModel
from kernbench.report.gemm_report import gemm_table, gemm_values
from kernbench.report.hardware_table import hardware_table
from kernbench.report.latex import escape, num, values_file, write
from kernbench.report.transfer_report import transfer_table, transfer_values
from kernbench.topology import load_topology


def pe_values(spec) -> dict[str, str]:
    """PE compute, scheduler and dispatch cost-model constants of a topology."""
    pe = spec.pe
    cost = PeCostModel.from_spec(spec)
    macs = pe.mac_rows * pe.mac_cols
    return {
        "hw/clock": num(pe.clock_ghz, 1),
        "hw/macrows": num(pe.mac_rows, 0),
        "hw/maccols": num(pe.mac_cols, 0),
        "hw/macs": num(macs, 0),
        "hw/petflops": num(2 * macs * pe.clock_ghz / 1000, 3).rstrip("0").rstrip("."),
        "hw/fillcycles": num(pe.mac_rows + pe.mac_cols, 0),
        "hw/gemmns": num(pe.overhead_ns["pe_gemm"], 1),
        "hw/tile/m": num(pe.tile_m, 0),
        "hw/tile/k": num(pe.tile_k, 0),
        "hw/tile/n": num(pe.tile_n, 0),
        "hw/tile/kib": num((pe.tile_m * pe.tile_k + pe.tile_k * pe.tile_n) * 2 / 1024, 0),
        "hw/inflight": num(pe.max_inflight_tiles, 0),
        "hw/tcmreservedkib": num(pe.tcm_reserved_bytes // 1024, 0),
        "hw/dmans": num(pe.overhead_ns["pe_dma"], 0),
        "hw/hbmns": num(spec.hbm.ctrl_overhead_ns, 0),
        "hw/dispatch/fixedcomposite": num(cost.fixed_per_cmd_cycles, 0),
        "hw/dispatch/fixedsingle": num(cost.fixed_per_single_op_cmd_cycles, 0),
        "hw/dispatch/r": f"{cost.byte_cycles_recip:g}",
        "hw/dispatch/bytespercycle": num(1.0 / cost.byte_cycles_recip, 0)
        if cost.byte_cycles_recip else r"$\infty$",
        "hw/dispatch/cap": num(cost.max_composite_logical_bytes, 0),
    }


def generate(config: dict, tables: dict[str, str | Path], out_dir: str | Path,
             expected: list[str] | None = None) -> list[Path]:
    """``tables`` maps experiment name -> its aggregated CSV."""
    out = Path(out_dir)
    first_topology = next(iter(config["topologies"].values()))
    graph = load_topology(first_topology)
    s = graph.spec
    values = {
        "title": escape(config["report"]["title"]),
        "version": escape(__version__),
        "hw/topology": escape(s.name),
        "hw/sips": num(s.sips.count, 0),
        "hw/cubes": num(s.sips.count * s.cubes_per_sip, 0),
        "hw/pes": num(s.sips.count * s.cubes_per_sip * s.pes_per_cube, 0),
        "hw/pespercube": num(s.pes_per_cube, 0),
        "hw/slicebw": num(s.slice_bw_gbs, 0),
        "hw/cubebw": num(s.hbm.pseudo_channels * s.hbm.pseudo_channel_bw_gbs, 0),
        "hw/channels": num(s.hbm.pseudo_channels, 0),
        "hw/channelbw": num(s.hbm.pseudo_channel_bw_gbs, 0),
        "hw/meshbw": num(s.noc_link_bw_gbs, 0),
        "hw/routerns": num(s.router_overhead_ns, 1),
        "hw/nspermm": num(s.noc_ns_per_mm, 2),
        "hw/uciebw": num(s.ucie.bw_gbs, 0),
        "hw/grid": f"{graph.mesh.n_rows}$\\times${graph.mesh.n_cols}",
    }
    values.update(pe_values(s))
    written = [write(out / "hardware_table.tex", hardware_table(graph))]
    if "transfer" in tables:
        df = pd.read_csv(tables["transfer"])
        values.update(transfer_values(df))
        written.append(write(out / "transfer_table.tex", transfer_table(df)))
    # the paper typesets the GEMM study only when the sweep ran it (\ifnum\kbv{gemm/present})
    values["gemm/present"] = "1" if "gemm" in tables else "0"
    values["transfer/present"] = "1" if "transfer" in tables else "0"
    if "gemm" in tables:
        df = pd.read_csv(tables["gemm"], keep_default_na=False,
                         na_values={"vs_composite": [""]})
        topo = str(df["topology"].iloc[0]) if len(df) else None
        spec = load_topology(config["topologies"][topo]).spec if topo in config["topologies"] else s
        values.update(gemm_values(df, PeCostModel.from_spec(spec)))
        written.append(write(out / "gemm_table.tex", gemm_table(df)))
    written.insert(0, write(out / "values.tex", values_file(values)))
    if expected is not None:
        missing = sorted(set(map(str, expected)) - {str(p) for p in written})
        if missing:
            raise RuntimeError(f"report generation did not produce: {', '.join(missing)}")
    return written
