"""LaTeX artefacts of the GEMM study: a results table and headline values.

Everything is derived from the aggregated table (``results/tables/gemm.csv``),
so the same keys exist for the full sweep and the smoke run. Reference shapes
are chosen from what is present: the largest compute-bound and the largest
memory-bound shape of the one-PE composite kernel on the first topology. A
quantity that cannot be formed from the table (no memory-bound shape, no
CUBE variant, ...) is typeset as ``--``.
"""

from __future__ import annotations

import math

import pandas as pd

from kernbench.report.latex import escape, num, sig, tabular

MISSING = "--"
KERNELS = ("primitive", "prefetch", "composite")
BOUNDS = ("compute", "memory")
GROUPS = ("decode", "prefill", "synthetic")


# -- formatting ----------------------------------------------------------------------------

def us(ns: float) -> str:
    """Nanoseconds as microseconds with three to four significant digits."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return MISSING
    value = ns / 1000.0
    digits = 2 if value < 10 else 1 if value < 100 else 0
    return num(value, digits)


def pct(value: float) -> str:
    """A percentage: one decimal, two significant digits below 1 %."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return sig(value, 2) if abs(value) < 1 else num(value, 1)


def ratio(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return num(value, 2) if value < 10 else num(value, 1)


def _opt(fmt, value) -> str:
    return MISSING if value is None else fmt(value)


# -- selections ----------------------------------------------------------------------------

def _macs(df: pd.DataFrame) -> pd.Series:
    return df["m"] * df["k"] * df["n"]


def reference_topology(df: pd.DataFrame) -> str:
    return str(df["topology"].iloc[0])


def _variant(df: pd.DataFrame, kernel: str, pes: int) -> pd.DataFrame:
    topo = reference_topology(df)
    return df[(df["topology"] == topo) & (df["kernel"] == kernel) & (df["pes"] == pes)]


def _largest(sub: pd.DataFrame) -> pd.Series | None:
    """The largest shape of ``sub`` by MACs (then by roofline memory time, then name)."""
    if sub.empty:
        return None
    sub = sub.assign(_macs=_macs(sub))
    return sub.sort_values(["_macs", "memory_ns", "shape"], kind="mergesort").iloc[-1]


def reference_shapes(df: pd.DataFrame) -> dict[str, pd.Series | None]:
    """bound -> the composite one-PE row of the largest shape with that roofline bound."""
    comp = _variant(df, "composite", 1)
    return {b: _largest(comp[comp["bound"] == b]) for b in BOUNDS}


def _row(df: pd.DataFrame, shape: str, kernel: str, pes: int) -> pd.Series | None:
    sub = _variant(df, kernel, pes)
    sub = sub[sub["shape"] == shape]
    return None if sub.empty else sub.iloc[0]


def _slowdowns(df: pd.DataFrame, kernel: str, pes: int = 1) -> pd.DataFrame:
    """Latency of ``kernel`` over the composite's, per shape present in both."""
    a = _variant(df, kernel, pes)[["shape", "group", "bound", "latency_ns"]]
    c = _variant(df, "composite", pes)[["shape", "latency_ns"]]
    j = a.merge(c, on="shape", suffixes=("", "_c"))
    return j.assign(ratio=j["latency_ns"] / j["latency_ns_c"])


def _cube_speedups(df: pd.DataFrame) -> pd.DataFrame:
    """One-PE composite latency over the CUBE composite's, per shape present in both."""
    topo = reference_topology(df)
    comp = df[(df["topology"] == topo) & (df["kernel"] == "composite")]
    one = comp[comp["pes"] == 1][["shape", "group", "bound", "latency_ns", "m", "k", "n"]]
    many = comp[comp["pes"] > 1][["shape", "pes", "latency_ns", "predicted_ns", "rel_error",
                                  "bound", "mac_util_pct", "roofline_util_pct"]]
    j = one.merge(many, on="shape", suffixes=("", "_cube"))
    return j.assign(speedup=j["latency_ns"] / j["latency_ns_cube"])


def _range(series: pd.Series) -> tuple[float | None, float | None]:
    if series.empty:
        return None, None
    return float(series.min()), float(series.max())


def _argext(frame: pd.DataFrame, col: str, largest: bool) -> pd.Series | None:
    if frame.empty:
        return None
    f = frame.sort_values([col, "shape"], kind="mergesort")
    return f.iloc[-1] if largest else f.iloc[0]


# -- headline ------------------------------------------------------------------------------

def gemm_headline(df: pd.DataFrame) -> dict:
    """Headline quantities (raw numbers, names and reference rows) of the GEMM study."""
    h: dict = {
        "records": len(df), "shapes": df["shape"].nunique(), "variants": df["variant"].nunique(),
        "topology": reference_topology(df),
        "groups": [g for g in GROUPS if g in set(df["group"])],
        "cube_pes": int(df["pes"].max()) if (df["pes"] > 1).any() else None,
    }
    comp = _variant(df, "composite", 1)
    for b in BOUNDS:
        sub = comp[comp["bound"] == b]
        h[f"{b}_count"] = len(sub)
        h[f"{b}_err"] = _range(100.0 * sub["rel_error"])
        h[f"{b}_util"] = _range(sub["mac_util_pct"])
        h[f"{b}_excess"] = _range(sub["latency_ns"] - sub["predicted_ns"])
    h["comp_excess"] = _range(comp["latency_ns"] - comp["predicted_ns"])
    cb = comp[comp["bound"] == "compute"]
    # compute-bound: time the array is not busy, and array busy time beyond the roofline
    h["compute_tail"] = _range(cb["latency_ns"] - cb["busy_gemm_ns"])
    h["compute_arrayover"] = _range(100.0 * (cb["busy_gemm_ns"] - cb["compute_ns"])
                                    / cb["compute_ns"])
    h["comp_dispatch_ns"] = _range(comp["busy_pe_cpu_ns"])
    h["comp_util_best"] = _argext(comp, "mac_util_pct", largest=True)
    h["comp_smallest"] = _argext(comp.assign(_macs=_macs(comp)), "_macs", largest=False)
    h["comp_cycles"] = _range(comp["dispatch_cycles_per_pe"])
    h["comp_commands"] = _range(comp["commands_per_pe"])
    for kern in ("primitive", "prefetch"):
        s = _slowdowns(df, kern)
        h[f"{kern}_slowdown"] = _range(s["ratio"])
        for b in BOUNDS:
            h[f"{kern}_slowdown_{b}"] = _range(s[s["bound"] == b]["ratio"])
        rows = _variant(df, kern, 1)
        h[f"{kern}_cycles"] = _range(rows["dispatch_cycles_per_pe"])
        h[f"{kern}_commands"] = _range(rows["commands_per_pe"])
        h[f"{kern}_cpu_share"] = _range(100.0 * rows["busy_pe_cpu_ns"] / rows["latency_ns"])
        h[f"{kern}_util_best"] = _argext(rows, "mac_util_pct", largest=True)
    h["refs"] = reference_shapes(df)
    cube = _cube_speedups(df)
    h["cube"] = cube
    h["cube_speedup"] = _range(cube["speedup"])
    dec = cube[cube["group"] == "decode"]
    h["cube_decode_speedup"] = _range(dec["speedup"])
    h["cube_best"] = _argext(cube, "speedup", largest=True)
    h["cube_worst"] = _argext(cube, "speedup", largest=False)
    h["cube_decode_best"] = _argext(dec, "speedup", largest=True)
    h["cube_decode_worst"] = _argext(dec, "speedup", largest=False)
    h["cube_err"] = _range(100.0 * cube["rel_error"])
    return h


def _ref_values(df: pd.DataFrame, tag: str, ref: pd.Series | None, h: dict) -> dict[str, str]:
    """Values of one reference shape under ``gemm/<tag>/...``."""
    keys = ("shape", "group", "m", "k", "n", "roof", "lat", "errpct", "util", "roofutil",
            "computeus", "memoryus", "excess", "gemmshare", "dmashare", "cpushare",
            "primlat", "preflat", "primx", "prefx", "primcycles", "primcommands",
            "primcpushare", "primdmashare", "primgemmshare", "prefdmashare", "prefcpushare",
            "cubelat", "cubex", "cubeerrpct", "cubeutil", "cuberoof", "cuben", "overroof",
            "steps", "compstepns", "primstepns", "prefstepns", "primdispstepns",
            "primdmastepns", "primcyclespercmd")
    v = {f"gemm/{tag}/{k}": MISSING for k in keys}
    if ref is None:
        return v
    p = f"gemm/{tag}/"
    lat = ref["latency_ns"]
    v.update({
        p + "shape": escape(ref["shape"]), p + "group": escape(ref["group"] or MISSING),
        p + "m": num(int(ref["m"]), 0), p + "k": num(int(ref["k"]), 0),
        p + "n": num(int(ref["n"]), 0),
        p + "roof": us(ref["predicted_ns"]), p + "lat": us(lat),
        p + "errpct": pct(100.0 * ref["rel_error"]), p + "util": pct(ref["mac_util_pct"]),
        p + "roofutil": pct(ref["roofline_util_pct"]),
        p + "computeus": us(ref["compute_ns"]), p + "memoryus": us(ref["memory_ns"]),
        p + "excess": us(lat - ref["predicted_ns"]),
        p + "gemmshare": pct(100.0 * ref["busy_gemm_ns"] / lat),
        p + "dmashare": pct(100.0 * ref["busy_dma_read_ns"] / lat),
        p + "cpushare": pct(100.0 * ref["busy_pe_cpu_ns"] / lat),
        p + "overroof": ratio(lat / ref["predicted_ns"]),
    })
    steps = int(ref["supertiles_per_pe"])  # the kernels step through the scheduler's supertiles
    v[p + "steps"] = num(steps, 0)
    v[p + "compstepns"] = num(lat / steps, 1)
    for kern, short in (("primitive", "prim"), ("prefetch", "pref")):
        r = _row(df, ref["shape"], kern, 1)
        if r is None:
            continue
        rl = r["latency_ns"]
        v[p + f"{short}lat"] = us(rl)
        v[p + f"{short}x"] = ratio(rl / lat)
        v[p + f"{short}cpushare"] = pct(100.0 * r["busy_pe_cpu_ns"] / rl)
        v[p + f"{short}dmashare"] = pct(100.0 * r["busy_dma_read_ns"] / rl)
        v[p + f"{short}stepns"] = num(rl / steps, 0)
        if kern == "primitive":
            v[p + "primdispstepns"] = num(r["busy_pe_cpu_ns"] / steps, 0)
            v[p + "primdmastepns"] = num(r["busy_dma_read_ns"] / steps, 0)
            v[p + "primcyclespercmd"] = num(r["dispatch_cycles_per_pe"] / r["commands_per_pe"], 1)
            v[p + "primcycles"] = num(r["dispatch_cycles_per_pe"], 0)
            v[p + "primcommands"] = num(r["commands_per_pe"], 0)
            v[p + "primgemmshare"] = pct(100.0 * r["busy_gemm_ns"] / rl)
    cube = h["cube"]
    c = cube[cube["shape"] == ref["shape"]]
    if len(c):
        c = c.iloc[0]
        v.update({p + "cubelat": us(c["latency_ns_cube"]), p + "cubex": ratio(c["speedup"]),
                  p + "cubeerrpct": pct(100.0 * c["rel_error"]),
                  p + "cubeutil": pct(c["mac_util_pct"]), p + "cuberoof": us(c["predicted_ns"]),
                  p + "cuben": num(int(ref["n"]) // int(c["pes"]), 0)})
    return v


def _range_values(key: str, rng: tuple[float | None, float | None], fmt) -> dict[str, str]:
    lo, hi = rng
    return {f"{key}min": _opt(fmt, lo), f"{key}max": _opt(fmt, hi)}


def gemm_values(df: pd.DataFrame, cost_model=None) -> dict[str, str]:
    """The headline quantities as LaTeX strings under stable ``\\kbv{gemm/...}`` keys.

    ``cost_model`` (a :class:`~kernbench.components.builtin.pe_cost_model.PeCostModel`) turns the
    composite's measured dispatch cycles into its descriptor size in bytes.
    """
    h = gemm_headline(df)
    v = {
        "gemm/records": num(h["records"], 0),
        "gemm/shapes": num(h["shapes"], 0),
        "gemm/variants": num(h["variants"], 0),
        "gemm/topology": escape(h["topology"]),
        "gemm/groups": escape(", ".join(h["groups"]) or MISSING),
        "gemm/cubepes": _opt(lambda x: num(x, 0), h["cube_pes"]),
    }
    for b in BOUNDS:
        v[f"gemm/comp/{b}/count"] = num(h[f"{b}_count"], 0)
        v.update(_range_values(f"gemm/comp/{b}/errpct", h[f"{b}_err"], pct))
        v.update(_range_values(f"gemm/comp/{b}/util", h[f"{b}_util"], pct))
        v.update(_range_values(f"gemm/comp/{b}/excess", h[f"{b}_excess"], us))
    v.update(_range_values("gemm/comp/excess", h["comp_excess"], us))
    v.update(_range_values("gemm/comp/compute/tail", h["compute_tail"], us))
    v.update(_range_values("gemm/comp/compute/arrayoverpct", h["compute_arrayover"], pct))
    v.update(_range_values("gemm/comp/dispatchns", h["comp_dispatch_ns"], lambda x: num(x, 0)))
    best = h["comp_util_best"]
    v["gemm/comp/bestutil"] = _opt(lambda r: pct(r["mac_util_pct"]), best)
    v["gemm/comp/bestutilshape"] = _opt(lambda r: escape(r["shape"]), best)
    small = h["comp_smallest"]
    v["gemm/comp/smallest/shape"] = _opt(lambda r: escape(r["shape"]), small)
    v["gemm/comp/smallest/lat"] = _opt(lambda r: us(r["latency_ns"]), small)
    v["gemm/comp/smallest/roof"] = _opt(lambda r: us(r["predicted_ns"]), small)
    v["gemm/comp/smallest/errpct"] = _opt(lambda r: pct(100.0 * r["rel_error"]), small)
    v.update(_range_values("gemm/comp/cycles", h["comp_cycles"], lambda x: num(x, 1)))
    v.update(_range_values("gemm/comp/commands", h["comp_commands"], lambda x: num(x, 0)))
    lo = h["comp_cycles"][0]
    if cost_model is not None and lo is not None:
        v["gemm/comp/descbytes"] = num(
            round((lo - cost_model.fixed_per_cmd_cycles) / cost_model.byte_cycles_recip), 0)
    else:
        v["gemm/comp/descbytes"] = MISSING
    for kern, short in (("primitive", "prim"), ("prefetch", "pref")):
        v.update(_range_values(f"gemm/{short}/slowdown", h[f"{kern}_slowdown"], ratio))
        for b in BOUNDS:
            v.update(_range_values(f"gemm/{short}/{b}/slowdown", h[f"{kern}_slowdown_{b}"],
                                   ratio))
        v.update(_range_values(f"gemm/{short}/cycles", h[f"{kern}_cycles"],
                               lambda x: num(x, 0)))
        v.update(_range_values(f"gemm/{short}/commands", h[f"{kern}_commands"],
                               lambda x: num(x, 0)))
        v.update(_range_values(f"gemm/{short}/cpushare", h[f"{kern}_cpu_share"], pct))
        b = h[f"{kern}_util_best"]
        v[f"gemm/{short}/bestutil"] = _opt(lambda r: pct(r["mac_util_pct"]), b)
    v.update(_range_values("gemm/cube/speedup", h["cube_speedup"], ratio))
    v.update(_range_values("gemm/cube/decode/speedup", h["cube_decode_speedup"], ratio))
    v.update(_range_values("gemm/cube/errpct", h["cube_err"], pct))
    for tag in ("best", "worst", "decode/best", "decode/worst"):
        r = h[f"cube_{tag.replace('/', '_')}"]
        p = f"gemm/cube/{tag}/"
        v[p + "shape"] = _opt(lambda r: escape(r["shape"]), r)
        v[p + "speedup"] = _opt(lambda r: ratio(r["speedup"]), r)
        v[p + "onelat"] = _opt(lambda r: us(r["latency_ns"]), r)
        v[p + "lat"] = _opt(lambda r: us(r["latency_ns_cube"]), r)
        v[p + "roof"] = _opt(lambda r: us(r["predicted_ns"]), r)
        v[p + "overroof"] = _opt(lambda r: ratio(r["latency_ns_cube"] / r["predicted_ns"]), r)
        v[p + "errpct"] = _opt(lambda r: pct(100.0 * r["rel_error"]), r)
        v[p + "bound"] = _opt(lambda r: escape(r["bound_cube"]), r)
        v[p + "roofutil"] = _opt(lambda r: pct(r["roofline_util_pct"]), r)
        v[p + "util"] = _opt(lambda r: pct(r["mac_util_pct"]), r)
        v[p + "n"] = _opt(lambda r: num(int(r["n"]) // int(r["pes"]), 0), r)
    refs = h["refs"]
    v.update(_ref_values(df, "ref/compute", refs["compute"], h))
    v.update(_ref_values(df, "ref/memory", refs["memory"], h))
    return v


# -- table ---------------------------------------------------------------------------------

def gemm_table(df: pd.DataFrame) -> str:
    """Per shape on the reference topology: roofline, composite latency and error, MAC
    utilisation, primitive and prefetch slowdowns, and the CUBE split (latencies in us)."""
    comp = _variant(df, "composite", 1)
    slow = {k: _slowdowns(df, k).set_index("shape")["ratio"] for k in ("primitive", "prefetch")}
    cube = _cube_speedups(df).set_index("shape")
    rows = []
    last_group = None
    for _, r in comp.iterrows():
        # a rule between shape families (booktabs' \midrule may open a row)
        rule = "\\midrule\n" if last_group is not None and r["group"] != last_group else ""
        last_group = r["group"]
        c = cube.loc[r["shape"]] if r["shape"] in cube.index else None
        rows.append([
            rule + escape(r["shape"]), num(int(r["m"]), 0), num(int(r["k"]), 0), num(int(r["n"]), 0),
            escape(r["bound"][:3] + "."), us(r["predicted_ns"]), us(r["latency_ns"]),
            pct(100.0 * r["rel_error"]), pct(r["mac_util_pct"]),
            ratio(slow["primitive"].get(r["shape"], float("nan"))),
            ratio(slow["prefetch"].get(r["shape"], float("nan"))),
            us(c["latency_ns_cube"]) if c is not None else MISSING,
            ratio(c["speedup"]) if c is not None else MISSING,
        ])
    pes = _cube_pes(df)
    header = ["Shape", "$m$", "$k$", "$n$", "Bound", "Roof.", "Comp.", r"Err.\,\%",
              r"Util.\,\%", r"Prim.\,$\times$", r"Pref.\,$\times$", f"{pes} PEs",
              r"Gain\,$\times$"]
    body = tabular("@{}lrrrlrrrrrrrr@{}", header, rows)
    return "% Generated by kernbench; do not edit.\n" + body


def _cube_pes(df: pd.DataFrame) -> str:
    many = df[df["pes"] > 1]["pes"]
    return num(int(many.max()), 0) if len(many) else MISSING
