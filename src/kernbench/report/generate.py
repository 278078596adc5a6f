"""Write ``report/generated/``: metadata, hardware table, study tables, values."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kernbench import __version__
from kernbench.report.hardware_table import hardware_table
from kernbench.report.latex import escape, num, values_file, write
from kernbench.report.transfer_report import transfer_table, transfer_values
from kernbench.topology import load_topology


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
    written = [write(out / "hardware_table.tex", hardware_table(graph))]
    if "transfer" in tables:
        df = pd.read_csv(tables["transfer"])
        values.update(transfer_values(df))
        written.append(write(out / "transfer_table.tex", transfer_table(df)))
    written.insert(0, write(out / "values.tex", values_file(values)))
    if expected is not None:
        missing = sorted(set(map(str, expected)) - {str(p) for p in written})
        if missing:
            raise RuntimeError(f"report generation did not produce: {', '.join(missing)}")
    return written
