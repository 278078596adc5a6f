"""Post-processing of the ``transfer`` experiment: table, figures, values, paper table.

Imported only by aggregation, figures and the report (pandas, matplotlib).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kernbench.analysis.latex import HEADER, escape, tabular
from kernbench.analysis.plots import STYLE, plt, save
from kernbench.analysis.values import MISSING, Value, count, errpct, latex, num, text

CATEGORY_ORDER = {"h2d": 0, "d2h": 1, "pe_dma": 2, "mcpu_dma": 3}
CATEGORY_TITLES = {"h2d": "Host -> HBM (H2D)", "d2h": "HBM -> host (D2H)",
                   "pe_dma": "PE DMA -> HBM", "mcpu_dma": "M_CPU DMA -> HBM"}
REFERENCE_FLOW = "pe-local-hbm"

SUMMARY = (
    "{records} points: {flows} flows x sizes {sizes} on {topologies} topology file(s)",
    "largest deviation from Ovhd + Wire + k x Drain: {maxrelerrpct} %",
    "{ref/flow} on {ref/topology}: {ref/smalllat} ns at {ref/smallsize} ({ref/smallutil} % of "
    "{ref/bnbw} GB/s), {ref/largelat} ns at {ref/largesize} ({ref/largeutil} %)",
    "least efficient lone flow at {largesize}: {worst/flow} on {worst/topology} ({worst/util} %)",
    "{contention/flows} flows sharing a route: the last finishes {contention/ratio}x later than "
    "a lone flow at {ref/largesize}",
)


# -- aggregation ---------------------------------------------------------------------------

def frame(records: list[dict]) -> pd.DataFrame:
    """One row per (topology, flow, size, variant): a record holds a flow's size sweep."""
    rows = []
    keys = ("latency_ns", "predicted_ns", "rel_error", "eff_bw_gbs", "bottleneck_gbs",
            "util_pct", "overhead_ns", "wire_ns", "drain_ns", "wait_ns", "hops")
    for r in records:
        lab = r["labels"]
        for p in r["metrics"]["points"]:
            rows.append({
                "topology": r["topology"],
                "category": lab["category"],
                "flow": lab["flow"],
                "size": p["size"],
                "size_bytes": p["size_bytes"],
                "variant": r["variant"],
                "concurrent_flows": r["config"]["variant"]["concurrent_flows"],
                **{k: p[k] for k in keys},
                "config_hash": r["provenance"]["config_hash"],
            })
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["_cat"] = df["category"].map(CATEGORY_ORDER)
    df = df.sort_values(["topology", "_cat", "flow", "size_bytes", "concurrent_flows", "variant"],
                        kind="mergesort").drop(columns="_cat")
    return df.reset_index(drop=True)


def load(csv: str | Path) -> pd.DataFrame:
    return pd.read_csv(csv)


# -- figures -----------------------------------------------------------------------------

def _grid(df: pd.DataFrame, value: str, ylabel: str, out_base: Path, logy: bool,
          bound: str | None = None) -> list[Path]:
    """Rows = topologies, columns = flow categories; colour = flow, dash = contention."""
    from matplotlib.lines import Line2D

    topologies = sorted(df["topology"].unique())
    cats = [c for c in CATEGORY_TITLES if c in set(df["category"])]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(topologies), len(cats), squeeze=False,
                                 figsize=(2.2 * len(cats) + 0.6, 1.8 * len(topologies) + 1.4),
                                 sharex=True)
        for j, cat in enumerate(cats):
            flows = sorted(df[df["category"] == cat]["flow"].unique())
            colour = {f: f"C{k % 10}" for k, f in enumerate(flows)}
            for i, topo in enumerate(topologies):
                ax = axes[i][j]
                sub = df[(df["topology"] == topo) & (df["category"] == cat)]
                for flow, grp in sub.groupby("flow", sort=True):
                    for _, gv in grp.groupby("concurrent_flows", sort=True):
                        gv = gv.sort_values("size_bytes")
                        style = "-" if gv["concurrent_flows"].iloc[0] == 1 else "--"
                        ax.plot(gv["size_bytes"] / 1024, gv[value], style, marker="o",
                                markersize=2.5, linewidth=1.0, color=colour[flow])
                    if bound:
                        ax.axhline(grp[bound].iloc[0], color=colour[flow], linewidth=0.6,
                                   linestyle=":")
                ax.set_xscale("log", base=2)
                if logy:
                    ax.set_yscale("log")
                ax.grid(True, linewidth=0.3, alpha=0.5)
                if i == 0:
                    ax.set_title(CATEGORY_TITLES[cat])
                if j == 0:
                    ax.set_ylabel(f"{topo}\n{ylabel}")
                if i == len(topologies) - 1:
                    ax.set_xlabel("transfer size (KiB)")
            handles = [Line2D([], [], color=colour[f], marker="o", markersize=2.5, label=f)
                       for f in flows]
            axes[-1][j].legend(handles=handles, loc="upper center", frameon=False,
                               bbox_to_anchor=(0.5, -0.32), ncol=1)
        styles = [Line2D([], [], color="k", linestyle="-", label="one flow"),
                  Line2D([], [], color="k", linestyle="--", label="concurrent flows sharing the route")]
        if bound:
            styles.append(Line2D([], [], color="k", linestyle=":", label="bottleneck bandwidth"))
        fig.legend(handles=styles, loc="upper center", ncol=len(styles), frameon=False,
                   bbox_to_anchor=(0.5, 1.02))
        fig.tight_layout()
        return save(fig, out_base)


def figures(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Latency and effective bandwidth vs size, per flow, one panel per category."""
    out = Path(out_dir)
    paths = _grid(df, "latency_ns", "latency (ns)", out / "transfer_latency", logy=True)
    paths += _grid(df, "eff_bw_gbs", "effective BW (GB/s)", out / "transfer_bandwidth",
                   logy=False, bound="bottleneck_gbs")
    return paths


# -- values ------------------------------------------------------------------------------

def _reference(df: pd.DataFrame) -> tuple[str, str]:
    topo = df["topology"].iloc[0]
    flows = list(df[df["topology"] == topo]["flow"])
    return topo, (REFERENCE_FLOW if REFERENCE_FLOW in flows else flows[0])


def values(df: pd.DataFrame, ctx=None) -> dict[str, Value]:
    """Headline quantities of the study (keys are prefixed with ``transfer/`` in the paper)."""
    topo, flow = _reference(df)
    single = df[df["concurrent_flows"] == 1]
    ref = single[(single["topology"] == topo) & (single["flow"] == flow)].sort_values("size_bytes")
    small, large = ref.iloc[0], ref.iloc[-1]
    big = single[single["size_bytes"] == single["size_bytes"].max()]
    worst = big.sort_values(["util_pct", "flow"]).iloc[0]
    v = {
        "records": count(len(df)),
        "topologies": count(df["topology"].nunique()),
        "flows": count(df["flow"].nunique()),
        "sizes": text(", ".join(df.sort_values("size_bytes")["size"].unique())),
        "maxrelerrpct": errpct(float(df["rel_error"].max())),
        "ref/topology": text(topo),
        "ref/flow": text(flow),
        "ref/smallsize": text(small["size"]),
        "ref/largesize": text(large["size"]),
        "ref/smalllat": num(float(small["latency_ns"])),
        "ref/largelat": num(float(large["latency_ns"])),
        "ref/smallutil": num(float(small["util_pct"])),
        "ref/largeutil": num(float(large["util_pct"])),
        "ref/overhead": num(float(small["overhead_ns"])),
        "ref/bnbw": num(float(small["bottleneck_gbs"]), 0),
        "worst/flow": text(worst["flow"]),
        "worst/topology": text(worst["topology"]),
        "worst/util": num(float(worst["util_pct"])),
        "largesize": text(worst["size"]),
        "contention/flows": MISSING,
        "contention/ratio": MISSING,
        "contention/maxrelerrpct": MISSING,
    }
    multi = df[df["concurrent_flows"] > 1]
    if len(multi):
        k = int(multi["concurrent_flows"].min())
        pair = df[(df["topology"] == topo) & (df["flow"] == flow)
                  & (df["size_bytes"] == large["size_bytes"])]
        one = pair[pair["concurrent_flows"] == 1]["latency_ns"].iloc[0]
        many = pair[pair["concurrent_flows"] == k]["latency_ns"].iloc[0]
        v["contention/flows"] = count(k)
        v["contention/ratio"] = Value(float(many / one), "fixed", 2)
        v["contention/maxrelerrpct"] = errpct(float(multi["rel_error"].max()))
    return v


# -- paper table -------------------------------------------------------------------------

def tables(df: pd.DataFrame) -> dict[str, str]:
    """Per flow on the reference topology: smallest and largest size, lone flow."""
    topo, _ = _reference(df)
    sub = df[(df["topology"] == topo) & (df["concurrent_flows"] == 1)]
    small_n, large_n = sub["size_bytes"].min(), sub["size_bytes"].max()
    rows = []
    for flow, grp in sub.groupby("flow", sort=False):
        s = grp[grp["size_bytes"] == small_n].iloc[0]
        lg = grp[grp["size_bytes"] == large_n].iloc[0]
        rows.append([escape(flow), latex(count(int(s["hops"]))), latex(num(s["overhead_ns"])),
                     latex(num(s["latency_ns"])), latex(num(lg["latency_ns"])),
                     latex(num(lg["bottleneck_gbs"], 0)), latex(num(lg["util_pct"])),
                     latex(errpct(max(s["rel_error"], lg["rel_error"])))])
    small_label = escape(sub[sub["size_bytes"] == small_n]["size"].iloc[0])
    large_label = escape(sub[sub["size_bytes"] == large_n]["size"].iloc[0])
    header = ["Flow", "Hops", "Ovhd (ns)", f"Lat. {small_label}", f"Lat. {large_label}",
              "BN (GB/s)", "Util. (\\%)", "Err. (\\%)"]
    return {"transfer_table": HEADER + tabular("@{}lrrrrrrr@{}", header, rows)}


