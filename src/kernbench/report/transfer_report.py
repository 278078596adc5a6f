"""LaTeX artefacts of the transfer study: a results table and headline values."""

from __future__ import annotations

import pandas as pd

from kernbench.report.latex import error_pct, escape, num, tabular

REFERENCE_FLOW = "pe-local-hbm"


def _reference(df: pd.DataFrame) -> tuple[str, str]:
    topo = df["topology"].iloc[0]
    flows = list(df[df["topology"] == topo]["flow"])
    return topo, (REFERENCE_FLOW if REFERENCE_FLOW in flows else flows[0])


def transfer_headline(df: pd.DataFrame) -> dict:
    """Headline quantities (raw numbers and names) of the transfer study."""
    topo, flow = _reference(df)
    single = df[df["concurrent_flows"] == 1]
    ref = single[(single["topology"] == topo) & (single["flow"] == flow)].sort_values("size_bytes")
    small, large = ref.iloc[0], ref.iloc[-1]
    big = single[single["size_bytes"] == single["size_bytes"].max()]
    worst = big.sort_values(["util_pct", "flow"]).iloc[0]
    h = {
        "records": len(df), "topologies": df["topology"].nunique(), "flows": df["flow"].nunique(),
        "sizes": list(df.sort_values("size_bytes")["size"].unique()),
        "max_rel_error": float(df["rel_error"].max()),
        "ref_topology": topo, "ref_flow": flow,
        "ref_small_size": small["size"], "ref_large_size": large["size"],
        "ref_small_latency_ns": float(small["latency_ns"]),
        "ref_large_latency_ns": float(large["latency_ns"]),
        "ref_small_util_pct": float(small["util_pct"]),
        "ref_large_util_pct": float(large["util_pct"]),
        "ref_overhead_ns": float(small["overhead_ns"]),
        "ref_bottleneck_gbs": float(small["bottleneck_gbs"]),
        "worst_flow": worst["flow"], "worst_topology": worst["topology"],
        "worst_util_pct": float(worst["util_pct"]), "large_size": worst["size"],
        "contention_flows": None, "contention_ratio": None, "contention_max_rel_error": None,
    }
    multi = df[df["concurrent_flows"] > 1]
    if len(multi):
        k = int(multi["concurrent_flows"].min())
        pair = df[(df["topology"] == topo) & (df["flow"] == flow)
                  & (df["size_bytes"] == large["size_bytes"])]
        one = pair[pair["concurrent_flows"] == 1]["latency_ns"].iloc[0]
        many = pair[pair["concurrent_flows"] == k]["latency_ns"].iloc[0]
        h.update(contention_flows=k, contention_ratio=float(many / one),
                 contention_max_rel_error=float(multi["rel_error"].max()))
    return h


def transfer_values(df: pd.DataFrame) -> dict[str, str]:
    """The headline quantities as LaTeX strings under stable ``\\kbv`` keys."""
    h = transfer_headline(df)
    v = {
        "transfer/records": num(h["records"], 0),
        "transfer/topologies": num(h["topologies"], 0),
        "transfer/flows": num(h["flows"], 0),
        "transfer/sizes": escape(", ".join(h["sizes"])),
        "transfer/maxrelerrpct": error_pct(h["max_rel_error"]),
        "transfer/ref/topology": escape(h["ref_topology"]),
        "transfer/ref/flow": escape(h["ref_flow"]),
        "transfer/ref/smallsize": escape(h["ref_small_size"]),
        "transfer/ref/largesize": escape(h["ref_large_size"]),
        "transfer/ref/smalllat": num(h["ref_small_latency_ns"]),
        "transfer/ref/largelat": num(h["ref_large_latency_ns"]),
        "transfer/ref/smallutil": num(h["ref_small_util_pct"]),
        "transfer/ref/largeutil": num(h["ref_large_util_pct"]),
        "transfer/ref/overhead": num(h["ref_overhead_ns"]),
        "transfer/ref/bnbw": num(h["ref_bottleneck_gbs"], 0),
        "transfer/worst/flow": escape(h["worst_flow"]),
        "transfer/worst/topology": escape(h["worst_topology"]),
        "transfer/worst/util": num(h["worst_util_pct"]),
        "transfer/largesize": escape(h["large_size"]),
    }
    if h["contention_flows"] is None:
        for key in ("flows", "ratio", "maxrelerrpct"):
            v[f"transfer/contention/{key}"] = "--"
    else:
        v["transfer/contention/flows"] = num(h["contention_flows"], 0)
        v["transfer/contention/ratio"] = num(h["contention_ratio"], 2)
        v["transfer/contention/maxrelerrpct"] = error_pct(h["contention_max_rel_error"])
    return v


def transfer_table(df: pd.DataFrame) -> str:
    """Per flow on the reference topology: smallest and largest size, lone flow."""
    topo, _ = _reference(df)
    sub = df[(df["topology"] == topo) & (df["concurrent_flows"] == 1)]
    small_n, large_n = sub["size_bytes"].min(), sub["size_bytes"].max()
    rows = []
    for flow, g in sub.groupby("flow", sort=False):
        s = g[g["size_bytes"] == small_n].iloc[0]
        lg = g[g["size_bytes"] == large_n].iloc[0]
        rows.append([escape(flow), num(s["hops"], 0), num(s["overhead_ns"]), num(s["latency_ns"]),
                     num(lg["latency_ns"]), num(lg["bottleneck_gbs"], 0), num(lg["util_pct"]),
                     error_pct(max(s["rel_error"], lg["rel_error"]))])
    header = ["Flow", "Hops", "Ovhd (ns)", f"Lat. {escape(sub[sub['size_bytes'] == small_n]['size'].iloc[0])}",
              f"Lat. {escape(sub[sub['size_bytes'] == large_n]['size'].iloc[0])}", "BN (GB/s)",
              "Util. (\\%)", "Err. (\\%)"]
    return "% Generated by kernbench; do not edit.\n" + tabular("@{}lrrrrrrr@{}", header, rows)
