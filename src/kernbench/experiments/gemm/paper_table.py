"""The ``gemm`` paper table: one row per shape of the one-PE composite on the
reference topology, with the other kernels' slowdowns and the CUBE split."""

from __future__ import annotations

import pandas as pd

from kernbench.analysis.latex import HEADER, escape, tabular
from kernbench.analysis.values import MISSING, count, latex, pct, ratio, us
from kernbench.experiments.gemm.selections import cube_speedups, slowdowns, variant_rows
from kernbench.experiments.gemm.table import OTHER_KERNELS, REFERENCE_KERNEL, held_b, short_name

L = latex


def Lus(ns) -> str:
    return latex(us(ns))


def Lpct(value) -> str:
    return latex(pct(value))


def Lratio(value) -> str:
    return latex(ratio(value))


def tables(df: pd.DataFrame) -> dict[str, str]:
    return {"gemm_table": _gemm_table(held_b(df))}


def _gemm_table(df: pd.DataFrame) -> str:
    """Per shape on the reference topology: roofline, composite latency and error, MAC
    utilisation, primitive and prefetch slowdowns, and the CUBE split (latencies in us)."""
    comp = variant_rows(df, REFERENCE_KERNEL, 1)
    slow = {k: slowdowns(df, k).set_index("shape")["ratio"] for k in OTHER_KERNELS}
    cube = cube_speedups(df).set_index("shape")
    rows = []
    last_group = None
    for _, r in comp.iterrows():
        # a rule between shape families (booktabs' \midrule may open a row)
        rule = "\\midrule\n" if last_group is not None and r["group"] != last_group else ""
        last_group = r["group"]
        c = cube.loc[r["shape"]] if r["shape"] in cube.index else None
        rows.append([
            rule + escape(r["shape"]), L(count(int(r["m"]))), L(count(int(r["k"]))), L(count(int(r["n"]))),
            escape(r["bound"][:3] + "."), Lus(r["predicted_ns"]), Lus(r["latency_ns"]),
            Lpct(100.0 * r["rel_error"]), Lpct(r["mac_util_pct"]),
            *(Lratio(slow[k].get(r["shape"], float("nan"))) for k in OTHER_KERNELS),
            Lus(c["latency_ns_cube"]) if c is not None else L(MISSING),
            Lratio(c["speedup"]) if c is not None else L(MISSING),
        ])
    pes = _cube_pes(df)
    header = ["Shape", "$m$", "$k$", "$n$", "Bound", "Roof.", "Comp.", r"Err.\,\%",
              r"Util.\,\%",
              *(short_name(k).capitalize() + r".\,$\times$" for k in OTHER_KERNELS),
              f"{pes} PEs", r"Gain\,$\times$"]
    columns = "@{}lrrrlrrrr" + "r" * len(OTHER_KERNELS) + "rr@{}"
    return HEADER + tabular(columns, header, rows)


def _cube_pes(df: pd.DataFrame) -> str:
    many = df[df["pes"] > 1]["pes"]
    return L(count(int(many.max()))) if len(many) else L(MISSING)
