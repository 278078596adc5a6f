"""Post-processing of the ``llm`` experiment: what the workflow calls (``frame``,
``load``, ``values``, ``figures``, ``tables``, ``SUMMARY``) and the site panel.

The table is built in ``post_table``, the values in ``post_values`` and the
figures in ``post_figures``; here are the paper tables and the site's table.
Imported only by aggregation, figures and the report.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kernbench.analysis.latex import HEADER, escape, tabular
from kernbench.experiments.llm.post_figures import render
from kernbench.experiments.llm.post_table import GIB, defaults, frame, load, whatif_rows
from kernbench.experiments.llm.post_values import values

__all__ = ["SUMMARY", "figures", "frame", "load", "panel", "tables", "values"]

SUMMARY = (
    "{dec/model} decode on {dec/topology}, batch {dec/batch} at {dec/context} tokens: TPOT "
    "{dec/tpotms} ms, {dec/tpsuser} tokens/s per user (analytic {dec/analyticms} ms, "
    "{dec/errpct} % off)",
    "most tokens/s per system within the {target} ms TPOT target: {best/tpssystem} "
    "({best/model}, batch {best/batch} at {best/context} tokens, {best/tpsuser} per user)",
    "all-reduces take {comm/lo} % of a layer at {comm/locontext} tokens and {comm/hi} % at "
    "{comm/hicontext} ({dec/model}, batch {dec/batch})",
    "what-if on {wi/decode/point}: {wi/decode/top/param} carries the most weight "
    "(TPOT {wi/decode/top/pct} % at x{wi/decode/top/factor})",
    "{notfit} of {points} points do not fit the HBM",
)


# -- paper tables --------------------------------------------------------------------------
def _time_cells(r) -> list[str]:
    if not bool(r["fits"]):
        return [f"needs {float(r['bytes_needed']) / GIB:,.0f} of "
                f"{float(r['bytes_available']) / GIB:,.0f} GiB", "--", "--", "--", "--"]
    ms = r["tpot_ms"] if r["phase"] == "decode" else r["ttft_ms"]
    return [f"{ms:.3f}", f"{r['tokens_per_s_user']:,.1f}", f"{r['tokens_per_s_system']:,.1f}",
            f"{float(r['analytic_step_ns']) / 1e6:.3f}", f"{100 * r['analytic_error']:+.1f}"]


def _points_table(df: pd.DataFrame) -> str:
    rows = [[escape(r["model"]), escape(r["topology"]), escape(r["phase"]),
             f"{int(r['batch'])}", f"{int(r['context'])}", *_time_cells(r)]
            for _, r in defaults(df).iterrows()]
    header = ["Model", "Topology", "Phase", "Batch", "Context", "TPOT/TTFT (ms)",
              "tok/s/user", "tok/s/system", "Analytic (ms)", "Error (\\%)"]
    if not rows:
        rows = [["no points in this configuration"] + [""] * (len(header) - 1)]
    return HEADER + tabular("@{}lllrrrrrrr@{}", header, rows)


def _whatif_table(df: pd.DataFrame) -> str:
    cells: dict[str, dict[str, str]] = {}
    factors = sorted({float(f) for ph in ("decode", "prefill")
                      for f in whatif_rows(df, ph)["factor"]}) if len(df) else []
    cols = [(ph, f) for ph in ("decode", "prefill") if len(whatif_rows(df, ph))
            for f in factors]
    for ph, f in cols:
        w = whatif_rows(df, ph)
        for _, r in w[w["factor"] == f].iterrows():
            cells.setdefault(r["parameter"], {})[f"{ph}{f}"] = f"{100 * r['change']:+.1f}"
    rows = [[escape(p)] + [cells[p].get(f"{ph}{f}", "--") for ph, f in cols]
            for p in sorted(cells)]
    names = {"decode": "TPOT", "prefill": "TTFT"}
    header = ["Parameter"] + [f"{names[ph]} x{f:g} (\\%)" for ph, f in cols]
    if not rows:
        return HEADER + tabular("@{}l@{}", ["What-if"], [["no what-if reruns in this "
                                                          "configuration"]])
    return HEADER + tabular("@{}l" + "r" * len(cols) + "@{}", header, rows)


def tables(df: pd.DataFrame) -> dict[str, str]:
    return {"llm_table": _points_table(df), "llm_whatif_table": _whatif_table(df)}


# -- results site --------------------------------------------------------------------------
def panel(df: pd.DataFrame) -> tuple[str, list[str], list[list[str]]]:
    """The site's table of points: (title, header, rows of text)."""
    rows = []
    for _, r in defaults(df).iterrows():
        fits = bool(r["fits"])
        ms = (r["tpot_ms"] if r["phase"] == "decode" else r["ttft_ms"]) if fits else None
        rows.append([r["model"], r["topology"], r["phase"], str(int(r["batch"])),
                     str(int(r["context"])),
                     "yes" if fits else f"no: {float(r['bytes_needed']) / GIB:,.0f} of "
                                        f"{float(r['bytes_available']) / GIB:,.0f} GiB",
                     f"{ms:.3f}" if fits else "",
                     f"{r['tokens_per_s_user']:,.1f}" if fits else "",
                     f"{r['tokens_per_s_system']:,.1f}" if fits else ""])
    return ("Model steps", ["model", "topology", "phase", "batch", "context", "fits",
                            "TPOT / TTFT (ms)", "tokens/s per user", "tokens/s per system"],
            rows)


def figures(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    return render(df, Path(out_dir))
