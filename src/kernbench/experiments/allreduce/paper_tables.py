"""The ``allreduce`` paper tables: each algorithm on each topology against its model,
and the PE-to-PE latencies."""

from __future__ import annotations

import pandas as pd

from kernbench.analysis.latex import HEADER, escape, tabular
from kernbench.analysis.values import count, errpct, latex, num
from kernbench.experiments.allreduce.table import hbm, rows_of_kind, sweep_ends
from kernbench.experiments.allreduce.values import us


def tables(df: pd.DataFrame) -> dict[str, str]:
    col = hbm(df)
    rows = []
    for t, algo, g, lo, hi in sweep_ends(df):
        rows.append([escape(t), escape(algo), latex(us(lo["time_ns"])),
                     latex(us(lo["predicted_ns"])), latex(us(hi["time_ns"])),
                     latex(us(hi["predicted_ns"])), latex(num(hi["busbw_gbs"], 2)),
                     latex(errpct(float(g["rel_error"].abs().max())))])
    sizes = sorted(col["size"].unique()) if len(col) else [0, 0]
    header = ["SIPs", "Algorithm", f"{int(sizes[0])}\\,B (us)", "pred.",
              f"{int(sizes[-1])}\\,B (us)", "pred.", "busbw (GB/s)", "max err (\\%)"]
    out = {"allreduce_table": HEADER + tabular("@{}llrrrrrr@{}", header, rows)}
    p2 = rows_of_kind(df, "pe2pe")
    prow = []
    shown = sorted(p2["size"].unique()) if len(p2) else []
    shown = [s for s in shown if s in (shown[0], shown[-1]) or s == 1024] if shown else []
    for pair, g in (p2.groupby("pair", sort=False) if len(p2) else ()):  # a run without pe2pe
        cells = [escape(pair), latex(count(int(g["hops"].iloc[0])))]
        for s in shown:
            r = g[g["size"] == s].iloc[0]
            cells += [latex(num(r["ipcq_ns"], 1)), latex(num(r["dma_ns"], 1))]
        prow.append(cells)
    pheader = ["Pair", "Hops"] + [h for s in shown for h in (f"IPCQ {int(s)}\\,B", "DMA")]
    out["allreduce_pe2pe_table"] = HEADER + tabular("@{}lr" + "rr" * len(shown) + "@{}",
                                                    pheader, prow)
    return out
