"""Post-processing of the ``allreduce`` experiment: table, figures, values, paper tables.

One table holds three kinds of rows (column ``kind``): ``collective`` (one per
algorithm x buffer kind x size x topology), ``pe2pe`` (pair x size) and
``reference`` (one per topology). Every value is derived from it; a quantity
the table cannot give (the smoke run has one topology) is a missing value.
Imported only by aggregation, figures and the report.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from kernbench.analysis.latex import HEADER, escape, tabular
from kernbench.analysis.plots import STYLE, plt, save
from kernbench.analysis.values import MISSING, Value, count, errpct, latex, num, ratio, text

ALGORITHM_ORDER = {"ring": 0, "torus2d": 1, "lrab_hierarchical": 2}
KIND_ORDER = {"ring_1d": 0, "torus_2d": 1, "mesh_2d_no_wrap": 2}
BUFFER_ORDER = {"hbm": 0, "sram": 1, "tcm": 2}


def _pair_rank(pair) -> int:
    """PE0-PE1, PE0-PE4, CUBE0-CUBE1, CUBE0-CUBE<w>, SIP0-SIP1: the table's order."""
    if not isinstance(pair, str):
        return 9
    fixed = {"PE0-PE1": 0, "PE0-PE4": 1, "CUBE0-CUBE1": 2, "SIP0-SIP1": 4}
    return fixed.get(pair, 3 if pair.startswith("CUBE0-") else 5)
PHASES = {"ring": ("reduce_scatter", "all_gather"),
          "torus2d": ("row_reduce_scatter", "col_reduce_scatter", "col_all_gather",
                      "row_all_gather"),
          "lrab_hierarchical": ("intra_cube", "mesh", "inter_sip", "broadcast")}

SUMMARY = (
    "{points} collective points: {algorithms} algorithms x {sizes} sizes ({minsize} B to "
    "{maxsize} B per rank) on {topologies} SIP topologies, {ranks} ranks each",
    "ring at {maxsize} B on {ref/topology}: busbw {ring/busbw} GB/s against "
    "{ring/predbusbw} GB/s predicted (error {ring/busbwerrpct} %); at {minsize} B "
    "{ring/smalllat} us against {ring/smallpred} us ({ring/smallerrpct} %)",
    "fastest at {maxsize} B on {ref/topology}: {best/large} ({best/largelat} us); "
    "at {minsize} B: {best/small} ({best/smalllat} us)",
    "largest model error over all points: {maxerrpct} %; packet reference makespan error "
    "{reference/maxerrpct} %",
    "one {pe2pe/size} B message SIP0 -> SIP1: {pe2pe/sipipcq} ns through IPCQ, "
    "{pe2pe/sipdma} ns as a raw DMA write",
)


# -- aggregation ---------------------------------------------------------------------------
def frame(records: list[dict]) -> pd.DataFrame:
    rows = []
    for r in records:
        m, lab = r["metrics"], r["labels"]
        base = {"topology": r["topology"], "kind": lab["kind"], "sip_kind": lab["sip_kind"],
                "sip_w": lab["sip_w"], "sip_h": lab["sip_h"], "sips": lab["sips"],
                "cube_w": lab["cube_w"], "cube_h": lab["cube_h"],
                "config_hash": r["provenance"]["config_hash"]}
        if lab["kind"] == "collective":
            for p in m["points"]:
                row = dict(base, algorithm=lab["algorithm"], buffer=lab["buffer"],
                           dtype=lab["dtype"], op=lab["op"], ranks=lab["ranks"],
                           size=p["size"], count=p["count"], time_ns=p["time_ns"],
                           predicted_ns=p["predicted_ns"], rel_error=p["rel_error"],
                           algbw_gbs=p["algbw_gbs"], busbw_gbs=p["busbw_gbs"],
                           predicted_busbw_gbs=p["predicted_busbw_gbs"],
                           link_bound_gbs=m["link_bound_gbs"], max_alpha_ns=m["max_alpha_ns"],
                           ipcq_copy=p["ipcq_copy"], ipcq_send=p["ipcq_send"],
                           dma_read=p["dma_read"], dma_write=p["dma_write"])
                for name, t in p["phases"].items():
                    row[f"phase_{name}_ns"] = t["simulated_ns"]
                    row[f"phase_{name}_pred_ns"] = t["predicted_ns"]
                rows.append(row)
        elif lab["kind"] == "pe2pe":
            for p in m["pairs"]:
                rows.append(dict(base, pair=p["pair"], size=p["size"], hops=p["hops"],
                                 ipcq_ns=p["ipcq_ns"], arrival_ns=p["arrival_ns"],
                                 dma_ns=p["dma_ns"], message_ns=p["message_ns"],
                                 predicted_ns=p["predicted_ns"]))
        else:
            rows.append(dict(base, flows=m["flows"], size=m["chunk_bytes"],
                             time_ns=m["latency_ns"], reference_ns=m["reference_ns"],
                             rel_error=m["makespan_rel_error"],
                             mean_rel_error=m["mean_rel_error"]))
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["_k"] = df["sip_kind"].map(KIND_ORDER)
    df["_a"] = df.get("algorithm", pd.Series(index=df.index, dtype=object)).map(ALGORITHM_ORDER)
    df["_b"] = df.get("buffer", pd.Series(index=df.index, dtype=object)).map(BUFFER_ORDER)
    pair = df.get("pair", pd.Series(index=df.index, dtype=object))
    df["_p"] = pair.map(_pair_rank)
    order = ["kind", "_k", "topology", "_a", "_b", "_p", "size"]
    df = df.sort_values(order, kind="mergesort", na_position="last")
    return df.drop(columns=["_k", "_a", "_b", "_p"]).reset_index(drop=True)


def load(csv: str | Path) -> pd.DataFrame:
    return pd.read_csv(csv)


def _collective(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["kind"] == "collective"] if "kind" in df else df.iloc[0:0]


def _topologies(df: pd.DataFrame) -> list[str]:
    sub = _collective(df)
    return sorted(sub["topology"].unique(), key=lambda t: (
        KIND_ORDER.get(sub[sub["topology"] == t]["sip_kind"].iloc[0], 9), t))


def _algorithms(df: pd.DataFrame) -> list[str]:
    return sorted(_collective(df)["algorithm"].unique(), key=lambda a: ALGORITHM_ORDER.get(a, 9))


def _hbm(df: pd.DataFrame) -> pd.DataFrame:
    sub = _collective(df)
    return sub[sub["buffer"] == "hbm"]


# -- figures -------------------------------------------------------------------------------
def _panels(n: int, height: float = 2.1):
    return plt.subplots(1, n, squeeze=False, figsize=(2.4 * n + 0.4, height), sharey=False)[1][0]


def _sweep_figure(df: pd.DataFrame, value: str, pred: str | None, ylabel: str, out: Path,
                  bound: str | None = None) -> list[Path]:
    sub = _hbm(df)
    topologies = _topologies(df)
    with plt.rc_context(STYLE):
        fig = plt.figure(figsize=(2.4 * max(1, len(topologies)) + 0.4, 2.3))
        axes = fig.subplots(1, max(1, len(topologies)), squeeze=False)[0]
        for ax, topo in zip(axes, topologies, strict=False):
            t = sub[sub["topology"] == topo]
            for k, algo in enumerate(_algorithms(df)):
                g = t[t["algorithm"] == algo].sort_values("size")
                if g.empty:
                    continue
                ax.plot(g["size"], g[value], "-o", markersize=2.5, linewidth=1.0,
                        color=f"C{k}", label=algo)
                if pred:
                    ax.plot(g["size"], g[pred], ":", linewidth=1.0, color=f"C{k}")
            if bound is not None and len(t):
                ax.axhline(float(t[bound].min()), color="k", linewidth=0.7, linestyle="--",
                           label="slowest link")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{topo} ({t['sip_kind'].iloc[0] if len(t) else ''})")
            ax.set_xlabel("bytes per rank")
            ax.grid(True, linewidth=0.3, alpha=0.5)
        axes[0].set_ylabel(ylabel)
        axes[0].legend(frameon=False, loc="upper left")
        fig.tight_layout()
        return save(fig, out)


def _buffers_figure(df: pd.DataFrame, out: Path) -> list[Path]:
    sub = _collective(df)
    kinds = sub.groupby("topology")["buffer"].nunique()
    topo = kinds.idxmax() if len(kinds) else None
    algos = _algorithms(df)
    with plt.rc_context(STYLE):
        fig = plt.figure(figsize=(2.4 * max(1, len(algos)) + 0.4, 2.3))
        axes = fig.subplots(1, max(1, len(algos)), squeeze=False)[0]
        for ax, algo in zip(axes, algos, strict=False):
            t = sub[(sub["topology"] == topo) & (sub["algorithm"] == algo)]
            for buf, g in sorted(t.groupby("buffer"), key=lambda kv: BUFFER_ORDER[kv[0]]):
                g = g.sort_values("size")
                ax.plot(g["size"], g["time_ns"] / 1000, "-o", markersize=2.5, linewidth=1.0,
                        color=f"C{BUFFER_ORDER[buf]}", label=f"buffers in {buf.upper()}")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{algo} on {topo}")
            ax.set_xlabel("bytes per rank")
            ax.grid(True, linewidth=0.3, alpha=0.5)
        axes[0].set_ylabel("all-reduce time (us)")
        axes[0].legend(frameon=False, loc="upper left")
        fig.tight_layout()
        return save(fig, out)


def _pe2pe_figure(df: pd.DataFrame, out: Path) -> list[Path]:
    sub = df[df["kind"] == "pe2pe"] if "kind" in df else df.iloc[0:0]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(4.2, 2.6))
        for k, (pair, g) in enumerate(sub.groupby("pair", sort=False)):
            g = g.sort_values("size")
            ax.plot(g["size"], g["ipcq_ns"], "-o", markersize=2.5, linewidth=1.0,
                    color=f"C{k}", label=f"{pair} IPCQ")
            ax.plot(g["size"], g["dma_ns"], "--", linewidth=1.0, color=f"C{k}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message bytes")
        ax.set_ylabel("latency (ns)")
        ax.set_title("PE-to-PE: IPCQ send + receive (solid) vs raw DMA write (dashed)")
        ax.grid(True, linewidth=0.3, alpha=0.5)
        ax.legend(frameon=False, fontsize=5, loc="upper left")
        fig.tight_layout()
        return save(fig, out)


def _topology_figure(df: pd.DataFrame, out: Path) -> list[Path]:
    """The SIP layouts: one box per SIP at its grid position, a line per inter-SIP link
    (wrap-around links of rings and tori drawn as arcs)."""
    sub = df.drop_duplicates("topology") if len(df) else df
    topologies = [t for t in _topologies(df)] or list(sub.get("topology", []))
    with plt.rc_context(STYLE):
        fig = plt.figure(figsize=(2.2 * max(1, len(topologies)) + 0.4, 2.0))
        axes = fig.subplots(1, max(1, len(topologies)), squeeze=False)[0]
        for ax, topo in zip(axes, topologies, strict=False):
            row = sub[sub["topology"] == topo].iloc[0]
            w, h, kind = int(row["sip_w"]), int(row["sip_h"]), row["sip_kind"]
            wrap = kind in ("ring_1d", "torus_2d")
            for s in range(w * h):
                x, y = s % w, s // w
                for dx, dy, size in ((1, 0, w), (0, 1, h)):
                    if size == 1:
                        continue
                    nx, ny = x + dx, y + dy
                    if nx < w and ny < h:
                        ax.plot([x, nx], [-y, -ny], "-", color="0.3", linewidth=1.2)
                    elif wrap:
                        tx, ty = nx % w, ny % h
                        bend = 0.35
                        xs = np.linspace(0, 1, 30)
                        px = x + (tx - x) * xs + (bend * np.sin(np.pi * xs) if dy else 0)
                        py = -(y + (ty - y) * xs) + (bend * np.sin(np.pi * xs) if dx else 0)
                        ax.plot(px, py, "--", color="0.5", linewidth=0.9)
                ax.add_patch(plt.Rectangle((x - 0.22, -y - 0.22), 0.44, 0.44, facecolor="#dbeafe",
                                           edgecolor="#1e3a8a", zorder=3))
                ax.text(x, -y, f"SIP{s}", ha="center", va="center", fontsize=5, zorder=4)
            ax.set_title(f"{topo}: {kind} {w}x{h}")
            ax.set_xlim(-0.7, w - 0.3)
            ax.set_ylim(-h + 0.3, 0.9)
            ax.set_aspect("equal")
            ax.axis("off")
        fig.tight_layout()
        return save(fig, out)


def _phases_figure(df: pd.DataFrame, out: Path) -> list[Path]:
    sub = _hbm(df)
    topologies = _topologies(df)
    with plt.rc_context(STYLE):
        fig = plt.figure(figsize=(2.4 * max(1, len(topologies)) + 0.4, 2.4))
        axes = fig.subplots(1, max(1, len(topologies)), squeeze=False)[0]
        for ax, topo in zip(axes, topologies, strict=False):
            t = sub[sub["topology"] == topo]
            if t.empty:
                continue
            big = t[t["size"] == t["size"].max()]
            algos = [a for a in _algorithms(df) if a in set(big["algorithm"])]
            for i, algo in enumerate(algos):
                r = big[big["algorithm"] == algo].iloc[0]
                bottom = 0.0
                for k, phase in enumerate(PHASES.get(algo, ())):
                    v = r.get(f"phase_{phase}_ns")
                    if v is None or pd.isna(v):
                        continue
                    ax.bar(i, v / 1000, bottom=bottom, color=f"C{k}", width=0.6,
                           edgecolor="white", linewidth=0.4)
                    if v > 0.08 * r["time_ns"]:
                        ax.text(i, bottom + v / 2000, phase.replace("_", " "), ha="center",
                                va="center", fontsize=4.5)
                    bottom += v / 1000
            ax.set_xticks(range(len(algos)), [a.replace("_hierarchical", "") for a in algos])
            ax.set_title(f"{topo}, {int(big['size'].iloc[0])} B per rank")
            ax.grid(True, axis="y", linewidth=0.3, alpha=0.5)
        axes[0].set_ylabel("time per phase (us)")
        fig.tight_layout()
        return save(fig, out)


def figures(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    lat = df.assign(time_us=df.get("time_ns", 0) / 1000,
                    predicted_us=df.get("predicted_ns", 0) / 1000)
    paths = _sweep_figure(lat, "time_us", "predicted_us", "all-reduce time (us)",
                          out / "allreduce_latency")
    paths += _sweep_figure(df, "busbw_gbs", "predicted_busbw_gbs", "busbw (GB/s)",
                           out / "allreduce_busbw", bound="link_bound_gbs")
    paths += _buffers_figure(df, out / "allreduce_buffers")
    paths += _pe2pe_figure(df, out / "allreduce_pe2pe")
    paths += _topology_figure(df, out / "allreduce_topologies")
    paths += _phases_figure(df, out / "allreduce_phases")
    return paths


# -- values --------------------------------------------------------------------------------
def _us(ns) -> Value:
    return num(float(ns) / 1000.0, 2)


def _ref_topology(df: pd.DataFrame) -> str | None:
    tops = _topologies(df)
    kinds = {t: _collective(df)[_collective(df)["topology"] == t]["sip_kind"].iloc[0]
             for t in tops}
    for t in tops:
        if kinds[t] == "torus_2d":
            return t
    return tops[0] if tops else None


def values(df: pd.DataFrame, ctx=None) -> dict[str, Value]:
    col = _hbm(df)
    v: dict[str, Value] = {}
    topo = _ref_topology(df)
    sizes = sorted(_collective(df)["size"].unique()) if len(col) else []
    v["points"] = count(len(_collective(df)))
    v["algorithms"] = count(len(_algorithms(df)))
    v["sizes"] = count(len(sizes))
    v["topologies"] = count(len(_topologies(df)))
    v["minsize"] = count(int(sizes[0])) if sizes else MISSING
    v["maxsize"] = count(int(sizes[-1])) if sizes else MISSING
    v["ranks"] = count(int(col["ranks"].max())) if len(col) else MISSING
    v["sips"] = count(int(col["sips"].max())) if len(col) else MISSING
    v["cubes"] = count(int((col["cube_w"] * col["cube_h"]).max())) if len(col) else MISSING
    v["ref/topology"] = text(topo) if topo else MISSING
    v["maxerrpct"] = errpct(float(_collective(df)["rel_error"].abs().max())) if len(col) \
        else MISSING
    allc = _collective(df)
    if len(allc):
        worst = allc.loc[allc["rel_error"].abs().idxmax()]
        v["worst/topology"] = text(worst["topology"])
        v["worst/algorithm"] = text(worst["algorithm"])
        v["worst/errpct"] = errpct(abs(float(worst["rel_error"])))
        v["worst/kind"] = text(str(worst["sip_kind"]))
    else:
        v["worst/topology"] = v["worst/algorithm"] = v["worst/errpct"] = v["worst/kind"] = MISSING
    v["linkbound"] = num(float(col["link_bound_gbs"].min()), 0) if len(col) else MISSING
    for t in _topologies(df):
        key = t.replace("_", "")
        for algo in _algorithms(df):
            g = col[(col["topology"] == t) & (col["algorithm"] == algo)].sort_values("size")
            a = algo.replace("_hierarchical", "")
            if g.empty:
                continue
            lo, hi = g.iloc[0], g.iloc[-1]
            v[f"{key}/{a}/smalllat"] = _us(lo["time_ns"])
            v[f"{key}/{a}/largelat"] = _us(hi["time_ns"])
            v[f"{key}/{a}/busbw"] = num(hi["busbw_gbs"], 2)
            v[f"{key}/{a}/errpct"] = errpct(float(g["rel_error"].abs().max()))
    # the ring against its model, on the reference topology
    ring = col[(col["topology"] == topo) & (col["algorithm"] == "ring")].sort_values("size")
    if len(ring):
        lo, hi = ring.iloc[0], ring.iloc[-1]
        v["ring/busbw"] = num(hi["busbw_gbs"], 2)
        v["ring/predbusbw"] = num(hi["predicted_busbw_gbs"], 2)
        v["ring/busbwerrpct"] = errpct(abs(hi["busbw_gbs"] - hi["predicted_busbw_gbs"])
                                       / hi["predicted_busbw_gbs"])
        v["ring/smalllat"] = _us(lo["time_ns"])
        v["ring/smallpred"] = _us(lo["predicted_ns"])
        v["ring/smallerrpct"] = errpct(abs(lo["rel_error"]))
        v["ring/steps"] = count(2 * (int(hi["ranks"]) - 1))
        v["ring/stepns"] = num(lo["predicted_ns"] / (2 * (int(hi["ranks"]) - 1)), 1)
        v["ring/alpha"] = num(hi["max_alpha_ns"], 1)
        v["ring/linkutil"] = num(100 * hi["busbw_gbs"] / hi["link_bound_gbs"], 1)
    else:
        for k in ("busbw", "predbusbw", "busbwerrpct", "smalllat", "smallpred", "smallerrpct",
                  "steps", "stepns", "alpha", "linkutil"):
            v[f"ring/{k}"] = MISSING
    # the fastest algorithm at both ends, on the reference topology
    t = col[col["topology"] == topo]
    for end, pick in (("small", min), ("large", max)):
        if len(t):
            at = t[t["size"] == pick(t["size"])].sort_values("time_ns")
            v[f"best/{end}"] = text(at.iloc[0]["algorithm"])
            v[f"best/{end}lat"] = _us(at.iloc[0]["time_ns"])
        else:
            v[f"best/{end}"] = v[f"best/{end}lat"] = MISSING
    # lrab: the share of each phase at the largest size on the reference topology
    lr = t[t["algorithm"] == "lrab_hierarchical"]
    if len(lr):
        r = lr[lr["size"] == lr["size"].max()].iloc[0]
        for phase in PHASES["lrab_hierarchical"]:
            x = r.get(f"phase_{phase}_ns")
            v[f"lrab/{phase.replace('_', '')}pct"] = (
                num(100 * x / r["time_ns"], 0) if x is not None and not pd.isna(x) else MISSING)
        v["lrab/errpct"] = errpct(float(lr["rel_error"].abs().max()))
    else:
        for phase in PHASES["lrab_hierarchical"]:
            v[f"lrab/{phase.replace('_', '')}pct"] = MISSING
        v["lrab/errpct"] = MISSING
    # buffer kinds
    allk = _collective(df)
    kinds = allk.groupby("topology")["buffer"].nunique()
    btopo = kinds.idxmax() if len(kinds) and kinds.max() > 1 else None
    v["buffers/topology"] = text(btopo) if btopo else MISSING
    if btopo is not None:
        g = allk[allk["topology"] == btopo]
        per = g.groupby("size")["buffer"].nunique()
        v["buffers/size"] = count(int(per[per == per.max()].index.max()))
    else:
        v["buffers/size"] = MISSING
    for algo in ALGORITHM_ORDER:
        a = algo.replace("_hierarchical", "")
        for kind in ("sram", "tcm"):
            key = f"buffers/{a}/{kind}ratio"
            if btopo is None:
                v[key] = MISSING
                continue
            g = allk[(allk["topology"] == btopo) & (allk["algorithm"] == algo)]
            common = g.groupby("size")["buffer"].nunique()  # sizes every kind ran
            common = common[common == common.max()].index if len(common) else []
            big = g[g["size"] == max(common)] if len(common) else g
            base = big[big["buffer"] == "hbm"]["time_ns"]
            other = big[big["buffer"] == kind]["time_ns"]
            v[key] = ratio(float(other.iloc[0] / base.iloc[0])) if len(base) and len(other) \
                else MISSING
    # PE-to-PE
    p2 = df[df["kind"] == "pe2pe"] if "kind" in df else df.iloc[0:0]
    if len(p2):
        small = p2[p2["size"] == p2["size"].min()]
        large = p2[p2["size"] == p2["size"].max()]
        v["pe2pe/size"] = count(int(small["size"].iloc[0]))
        v["pe2pe/largesize"] = count(int(large["size"].iloc[0]))
        for label, pair in (("intra", "PE0-PE1"), ("sip", "SIP0-SIP1")):
            s = small[small["pair"] == pair]
            lg = large[large["pair"] == pair]
            v[f"pe2pe/{label}ipcq"] = num(s["ipcq_ns"].iloc[0], 1) if len(s) else MISSING
            v[f"pe2pe/{label}dma"] = num(s["dma_ns"].iloc[0], 1) if len(s) else MISSING
            v[f"pe2pe/{label}largeipcq"] = num(lg["ipcq_ns"].iloc[0], 1) if len(lg) else MISSING
            v[f"pe2pe/{label}largedma"] = num(lg["dma_ns"].iloc[0], 1) if len(lg) else MISSING
        v["pe2pe/maxerrpct"] = errpct(float(((p2["message_ns"] - p2["predicted_ns"]).abs()
                                             / p2["predicted_ns"]).max()))
        v["pe2pe/copyns"] = num(float((large["ipcq_ns"] - large["arrival_ns"]).max()), 1)
    else:
        for k in ("size", "largesize", "intraipcq", "intradma", "intralargeipcq",
                  "intralargedma", "sipipcq", "sipdma", "siplargeipcq", "siplargedma",
                  "maxerrpct", "copyns"):
            v[f"pe2pe/{k}"] = MISSING
    ref = df[df["kind"] == "reference"] if "kind" in df else df.iloc[0:0]
    v["reference/maxerrpct"] = errpct(float(ref["rel_error"].abs().max())) if len(ref) \
        else MISSING
    v["reference/flows"] = count(int(ref["flows"].max())) if len(ref) else MISSING
    return v


# -- paper tables --------------------------------------------------------------------------
def tables(df: pd.DataFrame) -> dict[str, str]:
    col = _hbm(df)
    rows = []
    for t in _topologies(df):
        for algo in _algorithms(df):
            g = col[(col["topology"] == t) & (col["algorithm"] == algo)].sort_values("size")
            if g.empty:
                continue
            lo, hi = g.iloc[0], g.iloc[-1]
            rows.append([escape(t), escape(algo), latex(_us(lo["time_ns"])),
                         latex(_us(lo["predicted_ns"])), latex(_us(hi["time_ns"])),
                         latex(_us(hi["predicted_ns"])), latex(num(hi["busbw_gbs"], 2)),
                         latex(errpct(float(g["rel_error"].abs().max())))])
    sizes = sorted(col["size"].unique()) if len(col) else [0, 0]
    header = ["SIPs", "Algorithm", f"{int(sizes[0])}\\,B (us)", "pred.",
              f"{int(sizes[-1])}\\,B (us)", "pred.", "busbw (GB/s)", "max err (\\%)"]
    out = {"allreduce_table": HEADER + tabular("@{}llrrrrrr@{}", header, rows)}
    p2 = df[df["kind"] == "pe2pe"] if "kind" in df else df.iloc[0:0]
    prow = []
    shown = sorted(p2["size"].unique()) if len(p2) else []
    shown = [s for s in shown if s in (shown[0], shown[-1]) or s == 1024] if shown else []
    for pair, g in p2.groupby("pair", sort=False):
        cells = [escape(pair), latex(count(int(g["hops"].iloc[0])))]
        for s in shown:
            r = g[g["size"] == s].iloc[0]
            cells += [latex(num(r["ipcq_ns"], 1)), latex(num(r["dma_ns"], 1))]
        prow.append(cells)
    pheader = ["Pair", "Hops"] + [h for s in shown for h in (f"IPCQ {int(s)}\\,B", "DMA")]
    out["allreduce_pe2pe_table"] = HEADER + tabular("@{}lr" + "rr" * len(shown) + "@{}",
                                                    pheader, prow)
    return out
