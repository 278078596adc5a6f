"""Post-processing of the ``moe`` experiment: what the workflow calls (``frame``,
``load``, ``values``, ``figures``, ``tables``, ``SUMMARY``) and the site panel.

The table is built in ``post_table``, the values in ``post_values`` and the
figures in ``post_figures``; here are the paper tables and the site's table.
Imported only by aggregation, figures and the report.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kernbench.analysis.latex import HEADER, escape, tabular
from kernbench.experiments.moe.post_figures import render
from kernbench.experiments.moe.post_table import frame, load, of_kind
from kernbench.experiments.moe.post_values import values

__all__ = ["SUMMARY", "figures", "frame", "load", "panel", "tables", "values"]

SUMMARY = (
    "{model} on {topology} ({ranks} ranks), uniform routing: the FFN half takes {lo/tp} us "
    "tensor-parallel and {lo/ep} us expert-parallel at {lo/tokens} token(s), {hi/tp} and "
    "{hi/ep} us at {hi/tokens} tokens (EP/TP {hi/ratio})",
    "routing skew {skew/max} at {skew/tokens} tokens: expert-parallel x{skew/epgrow}, "
    "tensor-parallel x{skew/tpgrow} over uniform",
    "capacity factor {cap/factor}: {cap/droppct} % of assignments dropped, "
    "expert-parallel {cap/epsavepct} % faster",
    "all-to-all, largest size {a2a/hi/size}: fastest is {a2a/hi/best}",
)


def _cell(value, fmt: str) -> str:
    return "--" if value is None or value != value else fmt.format(value)


def _layout(r) -> str:
    """The layout, with a placement other than the default blocks."""
    place = r.get("placement") or "blocks"
    return r["parallel"] if place == "blocks" else f"{r['parallel']} ({place})"


def _layer_rows(df: pd.DataFrame) -> list[list[str]]:
    rows = []
    for kind in ("layer", "step"):
        for _, r in of_kind(df, kind).iterrows():
            what = (f"{int(r['tokens'])} tok" if kind == "layer"
                    else f"prefill {int(r['context'])} tok" if r["phase"] == "prefill"
                    else f"step b{int(r['batch'])}, {int(r['context'])} ctx")
            rows.append([escape(r["model"]), what, _layout(r), _cell(r["skew"], "{:g}"),
                         _cell(r["capacity_factor"], "{:g}"),
                         _cell(100 * r["drop_share"], "{:.1f}"),
                         _cell(100 * r["dispersion"] if r["parallel"] == "ep" else None,
                               "{:.0f}"),
                         _cell(r["latency_ns"] / 1000, "{:,.1f}"),
                         _cell(100 * r["rel_error"], "{:+.0f}")])
    return rows


def _layers_table(df: pd.DataFrame) -> str:
    header = ["Model", "Point", "Layout", "Skew", "Cap.", "Dropped (\\%)", "Off-SIP (\\%)",
              "Time (\\textmu s)", "vs model (\\%)"]
    rows = _layer_rows(df) or [["no layer or step points"] + [""] * (len(header) - 1)]
    return HEADER + tabular("@{}lllrrrrrr@{}", header, rows)


def _alltoall_table(df: pd.DataFrame) -> str:
    d = of_kind(df, "alltoall")
    rows = [[escape(r["topology"]), escape(r["algorithm"]), r["size"],
             f"{r['latency_ns'] / 1000:,.2f}", f"{r['predicted_ns'] / 1000:,.2f}",
             f"{100 * r['rel_error']:+.0f}", f"{r['busbw_gbs']:.1f}"]
            for _, r in d.iterrows()]
    header = ["Topology", "Algorithm", "Bytes/rank", "Time (\\textmu s)", "Model (\\textmu s)",
              "Error (\\%)", "busbw (GB/s)"]
    if not rows:
        rows = [["no all-to-all points"] + [""] * (len(header) - 1)]
    return HEADER + tabular("@{}llrrrrr@{}", header, rows)


def tables(df: pd.DataFrame) -> dict[str, str]:
    return {"moe_table": _layers_table(df), "moe_alltoall_table": _alltoall_table(df)}


def panel(df: pd.DataFrame) -> tuple[str, list[str], list[list[str]]]:
    """The site's table of layer and step points: (title, header, rows of text)."""
    rows = []
    for kind in ("layer", "step"):
        for _, r in of_kind(df, kind).iterrows():
            rows.append([kind if kind == "layer" else f"{r['phase']} step", r["model"],
                         str(int(r["tokens"])), _layout(r),
                         _cell(r["skew"], "{:g}"), _cell(r["capacity_factor"], "{:g}"),
                         _cell(100 * r["drop_share"], "{:.1f}"),
                         _cell(100 * r["dispersion"] if r["parallel"] == "ep" else None,
                               "{:.0f}"),
                         _cell(r["latency_ns"] / 1000, "{:,.1f}")])
    return ("Mixture of experts", ["kind", "model", "tokens", "layout", "skew",
                                   "capacity factor", "dropped (%)", "off-SIP (%)",
                                   "time (us)"], rows)


def figures(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    return render(df, Path(out_dir))
