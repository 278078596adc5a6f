"""Rows the ``gemm`` values and table are built from: reference topology and shapes,
slowdowns against the composite, CUBE speed-ups, and the headline numbers."""

from __future__ import annotations

import pandas as pd

from kernbench.experiments.gemm.table import BOUNDS, GROUPS, OTHER_KERNELS, REFERENCE_KERNEL


def macs(df: pd.DataFrame) -> pd.Series:
    return df["m"] * df["k"] * df["n"]


def reference_topology(df: pd.DataFrame) -> str:
    return str(df["topology"].iloc[0])


def variant_rows(df: pd.DataFrame, kernel: str, pes: int) -> pd.DataFrame:
    topo = reference_topology(df)
    return df[(df["topology"] == topo) & (df["kernel"] == kernel) & (df["pes"] == pes)]


def _largest(sub: pd.DataFrame) -> pd.Series | None:
    """The largest shape of ``sub`` by MACs (then by roofline memory time, then name)."""
    if sub.empty:
        return None
    sub = sub.assign(_macs=macs(sub))
    return sub.sort_values(["_macs", "memory_ns", "shape"], kind="mergesort").iloc[-1]


def reference_shapes(df: pd.DataFrame) -> dict[str, pd.Series | None]:
    """bound -> the composite one-PE row of the largest shape with that roofline bound."""
    comp = variant_rows(df, REFERENCE_KERNEL, 1)
    return {b: _largest(comp[comp["intensity"] == b]) for b in BOUNDS}


def kernel_row(df: pd.DataFrame, shape: str, kernel: str, pes: int) -> pd.Series | None:
    sub = variant_rows(df, kernel, pes)
    sub = sub[sub["shape"] == shape]
    return None if sub.empty else sub.iloc[0]


def slowdowns(df: pd.DataFrame, kernel: str, pes: int = 1) -> pd.DataFrame:
    """Latency of ``kernel`` over the composite's, per shape present in both."""
    a = variant_rows(df, kernel, pes)[["shape", "group", "intensity", "latency_ns"]]
    c = variant_rows(df, REFERENCE_KERNEL, pes)[["shape", "latency_ns"]]
    j = a.merge(c, on="shape", suffixes=("", "_c"))
    return j.assign(ratio=j["latency_ns"] / j["latency_ns_c"])


def cube_speedups(df: pd.DataFrame) -> pd.DataFrame:
    """One-PE composite latency over the CUBE composite's, per shape present in both."""
    topo = reference_topology(df)
    comp = df[(df["topology"] == topo) & (df["kernel"] == REFERENCE_KERNEL)]
    one = comp[comp["pes"] == 1][["shape", "group", "bound", "latency_ns", "m", "k", "n"]]
    many = comp[comp["pes"] > 1][["shape", "pes", "latency_ns", "predicted_ns", "rel_error",
                                  "bound", "mac_util_pct", "roofline_util_pct"]]
    j = one.merge(many, on="shape", suffixes=("", "_cube"))
    return j.assign(speedup=j["latency_ns"] / j["latency_ns_cube"])


def value_range(series: pd.Series) -> tuple[float | None, float | None]:
    """(min, max), or (None, None) for no rows: a missing value rather than an error."""
    if series.empty:
        return None, None
    return float(series.min()), float(series.max())


def extreme_row(frame: pd.DataFrame, col: str, largest: bool) -> pd.Series | None:
    """The row with the largest (or smallest) ``col``, ties broken by shape name."""
    if frame.empty:
        return None
    f = frame.sort_values([col, "shape"], kind="mergesort")
    return f.iloc[-1] if largest else f.iloc[0]


def gemm_headline(df: pd.DataFrame) -> dict:
    """Headline quantities (raw numbers, names and reference rows) of the GEMM study."""
    h: dict = {
        "records": len(df), "shapes": df["shape"].nunique(), "variants": df["variant"].nunique(),
        "topology": reference_topology(df),
        "groups": [g for g in GROUPS if g in set(df["group"])],
        "cube_pes": int(df["pes"].max()) if (df["pes"] > 1).any() else None,
    }
    comp = variant_rows(df, REFERENCE_KERNEL, 1)
    for b in BOUNDS:
        sub = comp[comp["intensity"] == b]
        h[f"{b}_count"] = len(sub)
        h[f"{b}_err"] = value_range(100.0 * sub["rel_error"])
        h[f"{b}_util"] = value_range(sub["mac_util_pct"])
        h[f"{b}_excess"] = value_range(sub["latency_ns"] - sub["predicted_ns"])
    h["comp_excess"] = value_range(comp["latency_ns"] - comp["predicted_ns"])
    cb = comp[comp["intensity"] == "compute"]
    # compute-bound: time the array is not busy, and array busy time beyond the roofline
    h["compute_tail"] = value_range(cb["latency_ns"] - cb["busy_gemm_ns"])
    h["compute_arrayover"] = value_range(100.0 * (cb["busy_gemm_ns"] - cb["compute_ns"])
                                    / cb["compute_ns"])
    h["comp_dispatch_ns"] = value_range(comp["busy_pe_cpu_ns"])
    h["comp_util_best"] = extreme_row(comp, "mac_util_pct", largest=True)
    h["comp_smallest"] = extreme_row(comp.assign(_macs=macs(comp)), "_macs", largest=False)
    h["comp_cycles"] = value_range(comp["dispatch_cycles_per_pe"])
    h["comp_commands"] = value_range(comp["commands_per_pe"])
    for kern in OTHER_KERNELS:
        s = slowdowns(df, kern)
        h[f"{kern}_slowdown"] = value_range(s["ratio"])
        for b in BOUNDS:
            h[f"{kern}_slowdown_{b}"] = value_range(s[s["intensity"] == b]["ratio"])
        rows = variant_rows(df, kern, 1)
        h[f"{kern}_cycles"] = value_range(rows["dispatch_cycles_per_pe"])
        h[f"{kern}_commands"] = value_range(rows["commands_per_pe"])
        h[f"{kern}_cpu_share"] = value_range(100.0 * rows["busy_pe_cpu_ns"] / rows["latency_ns"])
        h[f"{kern}_util_best"] = extreme_row(rows, "mac_util_pct", largest=True)
    h["refs"] = reference_shapes(df)
    cube = cube_speedups(df)
    h["cube"] = cube
    h["cube_speedup"] = value_range(cube["speedup"])
    dec = cube[cube["group"] == "decode"]
    h["cube_decode_speedup"] = value_range(dec["speedup"])
    h["cube_best"] = extreme_row(cube, "speedup", largest=True)
    h["cube_worst"] = extreme_row(cube, "speedup", largest=False)
    h["cube_decode_best"] = extreme_row(dec, "speedup", largest=True)
    h["cube_decode_worst"] = extreme_row(dec, "speedup", largest=False)
    h["cube_err"] = value_range(100.0 * cube["rel_error"])
    return h

