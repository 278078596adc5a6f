"""The ``allreduce`` headline values (``\\kbv{allreduce/...}`` in the paper).

Each block of values is a table of formulas, keyed once: when the rows a block
reads are not in the table (the smoke run has one topology, no PE-to-PE pairs
...), every key of the block is a missing value.
"""

from __future__ import annotations

import pandas as pd

from kernbench.analysis.values import MISSING, Value, count, errpct, num, ratio, text
from kernbench.experiments.allreduce.table import (
    algorithm_phases,
    collective,
    hbm,
    rows_of_kind,
    sorted_algorithms,
    sorted_topologies,
    sweep_ends,
    value_tag,
)

HIERARCHICAL = "lrab_hierarchical"  # the algorithm whose phase shares the paper quotes
BUFFER_KINDS = ("sram", "tcm")  # compared against buffers in HBM
PAIRS = (("intra", "PE0-PE1"), ("sip", "SIP0-SIP1"))  # quoted PE-to-PE pairs


def us(ns) -> Value:
    return num(float(ns) / 1000.0, 2)


def _fill(prefix: str, formulas: dict, rows: tuple | None) -> dict[str, Value]:
    """``prefix + key`` -> ``formula(*rows)``, or missing for every key when ``rows`` is
    None (the rows the formulas read are not in the table)."""
    return {prefix + key: MISSING if rows is None else formula(*rows)
            for key, formula in formulas.items()}


def _ref_topology(df: pd.DataFrame) -> str | None:
    """The first torus layout (the paper's reference), else the first topology."""
    tops = sorted_topologies(df)
    kinds = {t: collective(df)[collective(df)["topology"] == t]["sip_kind"].iloc[0]
             for t in tops}
    for t in tops:
        if kinds[t] == "torus_2d":
            return t
    return tops[0] if tops else None


def _overview(df: pd.DataFrame, topo: str | None) -> dict[str, Value]:
    """What was run, the largest error and the worst point."""
    col, allc = hbm(df), collective(df)
    sizes = sorted(allc["size"].unique()) if len(col) else []
    v = {"points": count(len(allc)), "algorithms": count(len(sorted_algorithms(df))),
         "sizes": count(len(sizes)), "topologies": count(len(sorted_topologies(df)))}
    v.update(_fill("", {
        "minsize": lambda: count(int(sizes[0])),
        "maxsize": lambda: count(int(sizes[-1])),
        "ranks": lambda: count(int(col["ranks"].max())),
        "sips": lambda: count(int(col["sips"].max())),
        "cubes": lambda: count(int((col["cube_w"] * col["cube_h"]).max())),
    }, () if len(col) else None))
    v.update(_fill("ref/", {"topology": text}, (topo,) if topo else None))
    v.update(_fill("", {"maxerrpct": lambda: errpct(float(allc["rel_error"].abs().max()))},
                   () if len(col) else None))
    v.update(_fill("worst/", {
        "topology": lambda w: text(w["topology"]),
        "algorithm": lambda w: text(w["algorithm"]),
        "errpct": lambda w: errpct(abs(float(w["rel_error"]))),
        "kind": lambda w: text(str(w["sip_kind"])),
    }, (allc.loc[allc["rel_error"].abs().idxmax()],) if len(allc) else None))
    v.update(_fill("", {"linkbound": lambda: num(float(col["link_bound_gbs"].min()), 0)},
                   () if len(col) else None))
    return v


def _per_topology(df: pd.DataFrame) -> dict[str, Value]:
    """Each algorithm on each topology: both ends of the sweep and its largest error."""
    v: dict[str, Value] = {}
    for t, algo, g, lo, hi in sweep_ends(df):
        p = f"{t.replace('_', '')}/{value_tag(algo)}/"
        v[p + "smalllat"] = us(lo["time_ns"])
        v[p + "largelat"] = us(hi["time_ns"])
        v[p + "busbw"] = num(hi["busbw_gbs"], 2)
        v[p + "errpct"] = errpct(float(g["rel_error"].abs().max()))
    return v


def _ring(col: pd.DataFrame, topo: str | None) -> dict[str, Value]:
    """The ring against its model, on the reference topology."""
    ring = col[(col["topology"] == topo) & (col["algorithm"] == "ring")].sort_values("size")

    def steps(hi) -> int:
        return 2 * (int(hi["ranks"]) - 1)

    return _fill("ring/", {
        "busbw": lambda lo, hi: num(hi["busbw_gbs"], 2),
        "predbusbw": lambda lo, hi: num(hi["predicted_busbw_gbs"], 2),
        "busbwerrpct": lambda lo, hi: errpct(abs(hi["busbw_gbs"] - hi["predicted_busbw_gbs"])
                                             / hi["predicted_busbw_gbs"]),
        "smalllat": lambda lo, hi: us(lo["time_ns"]),
        "smallpred": lambda lo, hi: us(lo["predicted_ns"]),
        "smallerrpct": lambda lo, hi: errpct(abs(lo["rel_error"])),
        "steps": lambda lo, hi: count(steps(hi)),
        "stepns": lambda lo, hi: num(lo["predicted_ns"] / steps(hi), 1),
        "alpha": lambda lo, hi: num(hi["max_alpha_ns"], 1),
        "linkutil": lambda lo, hi: num(100 * hi["busbw_gbs"] / hi["link_bound_gbs"], 1),
    }, (ring.iloc[0], ring.iloc[-1]) if len(ring) else None)


def _fastest(t: pd.DataFrame) -> dict[str, Value]:
    """The fastest algorithm at both ends of the sweep, on the reference topology."""
    v: dict[str, Value] = {}
    for end, pick in (("small", min), ("large", max)):
        at = t[t["size"] == pick(t["size"])].sort_values("time_ns").iloc[0] if len(t) else None
        v.update(_fill("best/", {end: lambda r: text(r["algorithm"]),
                                 f"{end}lat": lambda r: us(r["time_ns"])},
                       (at,) if at is not None else None))
    return v


def _phase_share(r: pd.Series, phase: str) -> Value:
    x = r.get(f"phase_{phase}_ns")
    return num(100 * x / r["time_ns"], 0) if x is not None and not pd.isna(x) else MISSING


def _hierarchical(t: pd.DataFrame) -> dict[str, Value]:
    """The share of each phase of the hierarchical algorithm at the largest size."""
    lr = t[t["algorithm"] == HIERARCHICAL]
    formulas = {f"{phase.replace('_', '')}pct": (lambda r, phase=phase: _phase_share(r, phase))
                for phase in algorithm_phases().get(HIERARCHICAL, ())}
    formulas["errpct"] = lambda r: errpct(float(lr["rel_error"].abs().max()))
    largest = lr[lr["size"] == lr["size"].max()].iloc[0] if len(lr) else None
    return _fill(f"{value_tag(HIERARCHICAL)}/", formulas,
                 (largest,) if largest is not None else None)


def _buffer_ratio(g: pd.DataFrame, kind: str) -> Value:
    """Time with buffers in ``kind`` over time in HBM, at the largest size every kind ran."""
    common = g.groupby("size")["buffer"].nunique()  # sizes every kind ran
    common = common[common == common.max()].index if len(common) else []
    big = g[g["size"] == max(common)] if len(common) else g
    base = big[big["buffer"] == "hbm"]["time_ns"]
    other = big[big["buffer"] == kind]["time_ns"]
    return ratio(float(other.iloc[0] / base.iloc[0])) if len(base) and len(other) else MISSING


def _buffers(df: pd.DataFrame) -> dict[str, Value]:
    """Buffer kinds, on the topology that ran the most of them."""
    allk = collective(df)
    kinds = allk.groupby("topology")["buffer"].nunique()
    btopo = kinds.idxmax() if len(kinds) and kinds.max() > 1 else None

    def size(topo) -> Value:
        per = allk[allk["topology"] == topo].groupby("size")["buffer"].nunique()
        return count(int(per[per == per.max()].index.max()))

    formulas = {"topology": text, "size": size}
    for algo in algorithm_phases():
        for kind in BUFFER_KINDS:
            formulas[f"{value_tag(algo)}/{kind}ratio"] = (
                lambda topo, algo=algo, kind=kind: _buffer_ratio(
                    allk[(allk["topology"] == topo) & (allk["algorithm"] == algo)], kind))
    return _fill("buffers/", formulas, (btopo,) if btopo is not None else None)


def _pair_cell(rows: pd.DataFrame, pair: str, column: str) -> Value:
    s = rows[rows["pair"] == pair]
    return num(s[column].iloc[0], 1) if len(s) else MISSING


def _pe2pe(df: pd.DataFrame) -> dict[str, Value]:
    """One message between PE pairs: IPCQ against a raw DMA write, smallest and largest."""
    p2 = rows_of_kind(df, "pe2pe")
    formulas = {"size": lambda p2, small, large: count(int(small["size"].iloc[0])),
                "largesize": lambda p2, small, large: count(int(large["size"].iloc[0]))}
    for label, pair in PAIRS:
        for end in ("", "large"):
            for name in ("ipcq", "dma"):
                formulas[f"{label}{end}{name}"] = (
                    lambda p2, small, large, pair=pair, end=end, name=name: _pair_cell(
                        large if end else small, pair, f"{name}_ns"))
    formulas["maxerrpct"] = lambda p2, small, large: errpct(float(
        ((p2["message_ns"] - p2["predicted_ns"]).abs() / p2["predicted_ns"]).max()))
    formulas["copyns"] = lambda p2, small, large: num(
        float((large["ipcq_ns"] - large["arrival_ns"]).max()), 1)
    rows = (p2, p2[p2["size"] == p2["size"].min()],
            p2[p2["size"] == p2["size"].max()]) if len(p2) else None
    return _fill("pe2pe/", formulas, rows)


def _reference(df: pd.DataFrame) -> dict[str, Value]:
    """The packet-level reference on a contended step."""
    ref = rows_of_kind(df, "reference")
    return _fill("reference/", {
        "maxerrpct": lambda: errpct(float(ref["rel_error"].abs().max())),
        "flows": lambda: count(int(ref["flows"].max())),
    }, () if len(ref) else None)


def values(df: pd.DataFrame, ctx=None) -> dict[str, Value]:
    """Every headline value; the same keys whatever the table holds."""
    col = hbm(df)
    topo = _ref_topology(df)
    on_reference = col[col["topology"] == topo]
    v = _overview(df, topo)
    v.update(_per_topology(df))
    v.update(_ring(col, topo))
    v.update(_fastest(on_reference))
    v.update(_hierarchical(on_reference))
    v.update(_buffers(df))
    v.update(_pe2pe(df))
    v.update(_reference(df))
    return v
