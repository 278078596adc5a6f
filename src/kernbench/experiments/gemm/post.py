"""Post-processing of the ``gemm`` experiment: table, figures, values, paper table.

Everything is derived from the aggregated table, so the same keys exist for
the full sweep and the smoke run. Reference shapes are chosen from what is
present: the largest compute-intensive and the largest memory-intensive shape
(the bound an ideal array would have, ``roofline.intensity``) of the one-PE
composite kernel on the first topology. A quantity that cannot be
formed from the table (no memory-bound shape, no CUBE variant, ...) is a
missing value (typeset as ``--``). Imported only by aggregation, figures and
the report.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kernbench.analysis.latex import HEADER, escape, tabular
from kernbench.analysis.plots import STYLE, plt, save
from kernbench.analysis.values import MISSING, Value, count, latex, num, pct, ratio, text, us
from kernbench.components.builtin.pe_cost_model import PeCostModel
from kernbench.experiments.gemm import STAGES

L = latex


def Lus(ns) -> str:
    return latex(us(ns))


def Lpct(value) -> str:
    return latex(pct(value))


def Lratio(value) -> str:
    return latex(ratio(value))


GEMM_GROUP_ORDER = {"decode": 0, "prefill": 1, "synthetic": 2}
GEMM_KERNEL_ORDER = {"primitive": 0, "prefetch": 1, "composite": 2}
GEMM_STAGES = STAGES
KERNELS = ("primitive", "prefetch", "composite")
BOUNDS = ("compute", "memory")  # shape families by arithmetic intensity (ideal-array bound)
GROUPS = ("decode", "prefill", "synthetic")

SUMMARY = (
    "{records} points: {shapes} shapes x {variants} variants on {topology}",
    "composite on one PE, {comp/compute/count} compute-intensive shapes: {comp/compute/errpctmin}-"
    "{comp/compute/errpctmax} % above the roofline, MAC utilisation {comp/compute/utilmin}-"
    "{comp/compute/utilmax} %, {comp/compute/excessmin}-{comp/compute/excessmax} us over it",
    "composite on one PE, {comp/memory/count} memory-intensive shapes: {comp/memory/errpctmin}-"
    "{comp/memory/errpctmax} % above the roofline, MAC utilisation {comp/memory/utilmin}-"
    "{comp/memory/utilmax} %, {comp/memory/excessmin}-{comp/memory/excessmax} us over it",
    "primitive kernel: {prim/slowdownmin}-{prim/slowdownmax}x slower than the composite; "
    "{prim/commandsmin}-{prim/commandsmax} commands, PE_CPU dispatch {prim/cpusharemin}-"
    "{prim/cpusharemax} % of its time",
    "prefetch kernel: {pref/slowdownmin}-{pref/slowdownmax}x slower than the composite; "
    "{pref/commandsmin}-{pref/commandsmax} commands, PE_CPU dispatch {pref/cpusharemin}-"
    "{pref/cpusharemax} % of its time",
    "composite split over {cubepes} PEs: {cube/speedupmin}-{cube/speedupmax}x faster than one PE",
)


# -- aggregation ---------------------------------------------------------------------------

def busy_column(stage: str) -> str:
    """Column of the gemm table holding a stage's per-PE busy time."""
    return f"busy_{stage.lower()}_ns"


def frame(records: list[dict]) -> pd.DataFrame:
    """One row per GEMM record; ``vs_composite`` = latency over the composite kernel's
    latency for the same topology, shape and PE count (empty when there is none)."""
    rows = []
    for r in records:
        m, p, lab = r["metrics"], r["prediction"], r["labels"]
        busy = m["stage_busy_ns"]
        rows.append({
            "topology": r["topology"],
            "group": lab.get("group") or "",
            "shape": lab["shape"],
            "m": lab["m"], "k": lab["k"], "n": lab["n"],
            "variant": r["variant"],
            "kernel": lab["kernel"],
            "pes": lab["pes"],
            "stationary": lab.get("stationary", "b"),
            "latency_ns": m["latency_ns"],
            "host_ns": m["host_ns"],
            "predicted_ns": p["latency_ns"],
            "compute_ns": p["compute_ns"],
            "memory_ns": p["memory_ns"],
            "bound": p["bound"],
            "intensity": p["intensity"],
            "rel_error": p["rel_error"],
            "mac_util_pct": m["mac_util_pct"],
            "roofline_util_pct": p["util_pct"],
            "tflops": m["tflops"],
            "dispatch_cycles_per_pe": m["dispatch_cycles_per_pe"],
            "commands_per_pe": m["commands_per_pe"],
            "supertiles_per_pe": m["supertiles_per_pe"],
            **{busy_column(s): float(busy.get(s, 0.0)) for s in GEMM_STAGES},
            "config_hash": r["provenance"]["config_hash"],
        })
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    key = ["topology", "shape", "pes"]
    comp = df[(df["kernel"] == "composite") & (df["stationary"] == "b")]
    comp = comp.drop_duplicates(key)[key + ["latency_ns"]]
    df = df.merge(comp.rename(columns={"latency_ns": "_comp"}), on=key, how="left")
    df.insert(df.columns.get_loc("rel_error") + 1, "vs_composite", df["latency_ns"] / df["_comp"])
    df["_g"] = df["group"].map(GEMM_GROUP_ORDER).fillna(len(GEMM_GROUP_ORDER))
    df["_k"] = df["kernel"].map(GEMM_KERNEL_ORDER).fillna(len(GEMM_KERNEL_ORDER))
    df = df.sort_values(["topology", "_g", "m", "k", "n", "shape", "pes", "_k", "variant"],
                        kind="mergesort").drop(columns=["_g", "_k", "_comp"])
    return df.reset_index(drop=True)


# -- figures ---------------------------------------------------------------------------

GEMM_GROUPS = {"decode": "decode", "prefill": "prefill", "synthetic": "synthetic",
               "": "ungrouped"}
GEMM_KERNELS = ("primitive", "prefetch", "composite")
GEMM_KERNEL_LETTER = {"primitive": "P", "prefetch": "F", "composite": "C"}
GEMM_KERNEL_COLOUR = {"primitive": "#d62728", "prefetch": "#ff7f0e", "composite": "#1f77b4"}
GEMM_KERNEL_MARKER = {"primitive": "s", "prefetch": "^", "composite": "o"}
# stage -> (table column, legend label, colour); drawn bottom-up in this order
GEMM_STAGE_STYLE = (
    ("busy_pe_cpu_ns", "PE_CPU dispatch", "#7f7f7f"),
    ("busy_dma_read_ns", "DMA read", "#1f77b4"),
    ("busy_fetch_ns", "fetch", "#aec7e8"),
    ("busy_gemm_ns", "GEMM array", "#2ca02c"),
    ("busy_math_ns", "vector (MATH)", "#bcbd22"),
    ("busy_store_ns", "store", "#ffbb78"),
    ("busy_dma_write_ns", "DMA write", "#ff7f0e"),
)


def _gemm_groups(df: pd.DataFrame) -> list[str]:
    present = set(df["group"])
    return [g for g in GEMM_GROUPS if g in present]


def _shape_order(sub: pd.DataFrame) -> list[str]:
    """Shapes in table order (the aggregate sorts by group, then m, k, n)."""
    return list(dict.fromkeys(sub["shape"]))


def _gemm_variants(df: pd.DataFrame, pes_list: list[int]) -> list[tuple[str, int]]:
    """(kernel, pes) pairs present, kernel-major (legend columns read kernel by kernel)."""
    return [(k, p) for k in GEMM_KERNELS for p in pes_list
            if ((df["kernel"] == k) & (df["pes"] == p)).any()]


def _legend_ncol(n_variants: int, n_pes: int, extra: int) -> int:
    """Columns so that each kernel's PE counts share a column and extras get one."""
    return max(1, -(-n_variants // n_pes) + (1 if extra else 0))


def _pe_label(pes: int) -> str:
    return "1 PE" if pes == 1 else f"{pes} PEs (one CUBE)"


def _scatter_variant(ax, x, y, kernel: str, pes: int) -> None:
    """One GEMM variant's points: marker by kernel, hollow when split over PEs."""
    ax.scatter(x, y, s=12, marker=GEMM_KERNEL_MARKER[kernel], linewidths=0.8,
               facecolors=GEMM_KERNEL_COLOUR[kernel] if pes == 1 else "none",
               edgecolors=GEMM_KERNEL_COLOUR[kernel], zorder=3)


def _variant_handles(variants: list[tuple[str, int]]) -> list:
    """Legend entries matching :func:`_scatter_variant`."""
    from matplotlib.lines import Line2D

    return [Line2D([], [], linestyle="", marker=GEMM_KERNEL_MARKER[k], markersize=4,
                   markerfacecolor=GEMM_KERNEL_COLOUR[k] if p == 1 else "none",
                   markeredgecolor=GEMM_KERNEL_COLOUR[k], label=f"{k}, {_pe_label(p)}")
            for k, p in variants]


def load(table_csv: str | Path) -> pd.DataFrame:
    """Read the table back (empty groups stay empty strings, not NaN)."""
    df = pd.read_csv(table_csv, keep_default_na=False, na_values={"vs_composite": [""]})
    df["group"] = df["group"].astype(str)
    return df


def _gemm_breakdown(df: pd.DataFrame, out_base: Path) -> list[Path]:
    """Stage busy time / latency, stacked; rows = shape groups, columns = PE counts."""
    from matplotlib.patches import Patch
    from matplotlib.transforms import blended_transform_factory

    groups = _gemm_groups(df)
    pes_list = sorted(df["pes"].unique())
    widths = [max(len(_shape_order(df[df["group"] == g])), 2) for g in groups]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            len(groups), len(pes_list), squeeze=False, sharey=True,
            figsize=(3.6 * len(pes_list) + 0.4, 1.75 * len(groups) + 0.9),
            gridspec_kw={"hspace": 0.95, "wspace": 0.06})
        ymax = 1.0
        for i, grp in enumerate(groups):
            shapes = _shape_order(df[df["group"] == grp])
            for j, pes in enumerate(pes_list):
                ax = axes[i][j]
                sub = df[(df["group"] == grp) & (df["pes"] == pes)]
                kernels = [k for k in GEMM_KERNELS if k in set(sub["kernel"])]
                slot = len(kernels) + 1
                minor_pos, minor_lab = [], []
                for si, shape in enumerate(shapes):
                    for ki, kern in enumerate(kernels):
                        row = sub[(sub["shape"] == shape) & (sub["kernel"] == kern)]
                        if row.empty:
                            continue
                        row = row.iloc[0]
                        x = si * slot + ki
                        bottom = 0.0
                        for col, _, colour in GEMM_STAGE_STYLE:
                            h = row[col] / row["latency_ns"]
                            ax.bar(x, h, bottom=bottom, width=0.85, color=colour,
                                   linewidth=0)
                            bottom += h
                        ymax = max(ymax, bottom)
                        minor_pos.append(x)
                        minor_lab.append(GEMM_KERNEL_LETTER[kern])
                ax.axhline(1.0, color="k", linewidth=0.6, linestyle="--")
                # variant letters as tick labels, shape names below them
                ax.set_xticks(minor_pos)
                ax.set_xticklabels(minor_lab, fontsize=5)
                ax.tick_params(axis="x", pad=1, length=0)
                names = blended_transform_factory(ax.transData, ax.transAxes)
                for si, shape in enumerate(shapes):
                    ax.text(si * slot + (len(kernels) - 1) / 2, -0.1, shape, transform=names,
                            rotation=30, ha="right", va="top", fontsize=6,
                            rotation_mode="anchor")
                ax.set_xlim(-0.8, max(len(shapes), widths[i]) * slot - 1.2)
                ax.grid(True, axis="y", linewidth=0.3, alpha=0.5)
                ax.set_axisbelow(True)
                ax.set_title(f"{GEMM_GROUPS[grp]}, {_pe_label(pes)}")
                if j == 0:
                    ax.set_ylabel("busy time / latency")
        for ax in axes.flat:
            ax.set_ylim(0, ymax * 1.05)
        handles = [Patch(color=c, label=lab) for _, lab, c in GEMM_STAGE_STYLE]
        handles.append(plt.Line2D([], [], color="k", linewidth=0.6, linestyle="--",
                                  label="kernel latency"))
        fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False,
                   bbox_to_anchor=(0.5, 1.0 - 0.35 / fig.get_figheight()))
        fig.text(0.5, 1.0 - 0.08 / fig.get_figheight(),
                 "bars per shape: P = primitive, F = prefetch, C = composite; stages overlap "
                 "where a bar exceeds the dashed line", ha="center", va="top", fontsize=6)
        return save(fig, out_base)


def _gemm_util(df: pd.DataFrame, out_base: Path) -> list[Path]:
    """Measured MAC utilisation per shape and variant; roofline bound as a dash."""
    from matplotlib.lines import Line2D

    groups = _gemm_groups(df)
    pes_list = sorted(df["pes"].unique())
    variants = _gemm_variants(df, pes_list)
    placed = sorted(variants, key=lambda v: (v[1], GEMM_KERNELS.index(v[0])))
    offset = {v: (i - (len(placed) - 1) / 2) * 0.8 / max(len(placed), 1)
              for i, v in enumerate(placed)}
    widths = [len(_shape_order(df[df["group"] == g])) for g in groups]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(groups), squeeze=False, sharey=True,
                                 figsize=(7.2, 2.8),
                                 gridspec_kw={"width_ratios": widths, "wspace": 0.05})
        for j, grp in enumerate(groups):
            ax = axes[0][j]
            sub = df[df["group"] == grp]
            shapes = _shape_order(sub)
            xpos = {s: i for i, s in enumerate(shapes)}
            for p in pes_list:
                roof = sub[sub["pes"] == p].drop_duplicates("shape")
                for _, r in roof.iterrows():
                    x = xpos[r["shape"]]
                    ax.hlines(r["roofline_util_pct"], x - 0.45, x + 0.45, color="k",
                              linewidth=0.8, linestyle="-" if p == 1 else ":")
            for (kern, p) in variants:
                g = sub[(sub["kernel"] == kern) & (sub["pes"] == p)]
                _scatter_variant(ax, [xpos[s] + offset[(kern, p)] for s in g["shape"]],
                                 g["mac_util_pct"], kern, p)
            ax.set_yscale("log")
            ax.set_xticks(range(len(shapes)))
            ax.set_xticklabels(shapes, rotation=40, ha="right", fontsize=5.5)
            ax.set_xlim(-0.6, len(shapes) - 0.4)
            for x in range(1, len(shapes)):
                ax.axvline(x - 0.5, color="0.85", linewidth=0.4)
            ax.grid(True, axis="y", which="major", linewidth=0.3, alpha=0.5)
            ax.set_title(GEMM_GROUPS[grp])
            if j == 0:
                ax.set_ylabel("MAC utilisation (%)")
        handles = _variant_handles(variants)
        handles += [Line2D([], [], color="k", linewidth=0.8, linestyle="-" if p == 1 else ":",
                           label=f"roofline bound, {_pe_label(p)}") for p in pes_list]
        fig.legend(handles=handles, loc="lower center", frameon=False,
                   ncol=_legend_ncol(len(variants), len(pes_list), 1),
                   bbox_to_anchor=(0.5, 0.97))
        return save(fig, out_base)


def _gemm_util_vs_roofline(df: pd.DataFrame, out_base: Path) -> list[Path]:
    """Measured utilisation against the roofline's; y = x is a kernel at the roofline."""
    from matplotlib.lines import Line2D

    groups = _gemm_groups(df)
    pes_list = sorted(df["pes"].unique())
    variants = _gemm_variants(df, pes_list)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(groups), squeeze=False, sharex=True, sharey=True,
                                 figsize=(2.3 * len(groups) + 0.5, 2.6),
                                 gridspec_kw={"wspace": 0.08})
        xlo = max(df["roofline_util_pct"].min() / 1.5, 1e-3)
        ylo = max(min(df["mac_util_pct"].min(), df["roofline_util_pct"].min()) / 1.5, 1e-3)
        for j, grp in enumerate(groups):
            ax = axes[0][j]
            sub = df[df["group"] == grp]
            ax.plot([ylo, 100], [ylo, 100], color="k", linewidth=0.6)
            for (kern, p) in variants:
                g = sub[(sub["kernel"] == kern) & (sub["pes"] == p)]
                _scatter_variant(ax, g["roofline_util_pct"], g["mac_util_pct"], kern, p)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(xlo, 130)
            ax.set_ylim(ylo, 130)
            ax.grid(True, which="major", linewidth=0.3, alpha=0.5)
            ax.set_title(GEMM_GROUPS[grp])
            ax.set_xlabel("roofline utilisation (%)")
            if j == 0:
                ax.set_ylabel("measured utilisation (%)")
        handles = _variant_handles(variants)
        handles.append(Line2D([], [], color="k", linewidth=0.6, label="measured = roofline"))
        fig.legend(handles=handles, loc="lower center", frameon=False,
                   ncol=_legend_ncol(len(variants), len(pes_list), 1),
                   bbox_to_anchor=(0.5, 0.97))
        return save(fig, out_base)


def held_b(df: pd.DataFrame) -> pd.DataFrame:
    """The kernels as the study compares them: B (the weights) held in the array. The
    variants that hold A only feed the operand-mapping values."""
    return df[df["stationary"] == "b"] if "stationary" in df else df


def figures(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Stage breakdown, measured utilisation, and utilisation against the roofline."""
    df = held_b(df)
    out = Path(out_dir)
    paths = _gemm_breakdown(df, out / "gemm_breakdown")
    paths += _gemm_util(df, out / "gemm_util")
    paths += _gemm_util_vs_roofline(df, out / "gemm_util_vs_roofline")
    return paths


# -- values ------------------------------------------------------------------------------

def _opt(fmt, value) -> Value:
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
    return {b: _largest(comp[comp["intensity"] == b]) for b in BOUNDS}


def _row(df: pd.DataFrame, shape: str, kernel: str, pes: int) -> pd.Series | None:
    sub = _variant(df, kernel, pes)
    sub = sub[sub["shape"] == shape]
    return None if sub.empty else sub.iloc[0]


def _slowdowns(df: pd.DataFrame, kernel: str, pes: int = 1) -> pd.DataFrame:
    """Latency of ``kernel`` over the composite's, per shape present in both."""
    a = _variant(df, kernel, pes)[["shape", "group", "intensity", "latency_ns"]]
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
        sub = comp[comp["intensity"] == b]
        h[f"{b}_count"] = len(sub)
        h[f"{b}_err"] = _range(100.0 * sub["rel_error"])
        h[f"{b}_util"] = _range(sub["mac_util_pct"])
        h[f"{b}_excess"] = _range(sub["latency_ns"] - sub["predicted_ns"])
    h["comp_excess"] = _range(comp["latency_ns"] - comp["predicted_ns"])
    cb = comp[comp["intensity"] == "compute"]
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
            h[f"{kern}_slowdown_{b}"] = _range(s[s["intensity"] == b]["ratio"])
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


def _ref_values(df: pd.DataFrame, tag: str, ref: pd.Series | None, h: dict) -> dict[str, Value]:
    """Values of one reference shape under ``<tag>/...``."""
    keys = ("shape", "group", "m", "k", "n", "roof", "lat", "errpct", "util", "roofutil",
            "computeus", "memoryus", "excess", "gemmshare", "dmashare", "cpushare",
            "primlat", "preflat", "primx", "prefx", "primcycles", "primcommands",
            "primcpushare", "primdmashare", "primgemmshare", "prefdmashare", "prefcpushare",
            "cubelat", "cubex", "cubeerrpct", "cubeutil", "cuberoof", "cuben", "overroof",
            "steps", "compstepns", "primstepns", "prefstepns", "primdispstepns",
            "primdmastepns", "primcyclespercmd")
    v = {f"{tag}/{k}": MISSING for k in keys}
    if ref is None:
        return v
    p = f"{tag}/"
    lat = ref["latency_ns"]
    v.update({
        p + "shape": text(ref["shape"]), p + "group": text(ref["group"] or None),
        p + "m": count(int(ref["m"])), p + "k": count(int(ref["k"])),
        p + "n": count(int(ref["n"])),
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
    v[p + "steps"] = count(steps)
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


def _range_values(key: str, rng: tuple[float | None, float | None], fmt) -> dict[str, Value]:
    lo, hi = rng
    return {f"{key}min": _opt(fmt, lo), f"{key}max": _opt(fmt, hi)}


def values(df: pd.DataFrame, ctx=None) -> dict[str, Value]:
    """The headline quantities (``\\kbv{gemm/...}`` in the paper).

    ``ctx.topology(id)`` gives the topology of the table's reference rows, whose
    dispatch cost model turns the composite's measured dispatch cycles into its
    descriptor size in bytes.
    """
    mapping = _mapping_values(df)
    df = held_b(df)
    h = gemm_headline(df)
    cost_model = None
    if ctx is not None and len(df):
        cost_model = PeCostModel.from_spec(ctx.topology(reference_topology(df)).spec)
    v = {
        "records": count(h["records"]),
        "shapes": count(h["shapes"]),
        "variants": count(h["variants"]),
        "topology": text(h["topology"]),
        "groups": text(", ".join(h["groups"]) or None),
        "cubepes": _opt(count, h["cube_pes"]),
    }
    for b in BOUNDS:
        v[f"comp/{b}/count"] = count(h[f"{b}_count"])
        v.update(_range_values(f"comp/{b}/errpct", h[f"{b}_err"], pct))
        v.update(_range_values(f"comp/{b}/util", h[f"{b}_util"], pct))
        v.update(_range_values(f"comp/{b}/excess", h[f"{b}_excess"], us))
    v.update(_range_values("comp/excess", h["comp_excess"], us))
    v.update(_range_values("comp/compute/tail", h["compute_tail"], us))
    v.update(_range_values("comp/compute/arrayoverpct", h["compute_arrayover"], pct))
    v.update(_range_values("comp/dispatchns", h["comp_dispatch_ns"], lambda x: num(x, 0)))
    best = h["comp_util_best"]
    v["comp/bestutil"] = _opt(lambda r: pct(r["mac_util_pct"]), best)
    v["comp/bestutilshape"] = _opt(lambda r: text(r["shape"]), best)
    small = h["comp_smallest"]
    v["comp/smallest/shape"] = _opt(lambda r: text(r["shape"]), small)
    v["comp/smallest/lat"] = _opt(lambda r: us(r["latency_ns"]), small)
    v["comp/smallest/roof"] = _opt(lambda r: us(r["predicted_ns"]), small)
    v["comp/smallest/errpct"] = _opt(lambda r: pct(100.0 * r["rel_error"]), small)
    v.update(_range_values("comp/cycles", h["comp_cycles"], lambda x: num(x, 1)))
    v.update(_range_values("comp/commands", h["comp_commands"], lambda x: num(x, 0)))
    lo = h["comp_cycles"][0]
    if cost_model is not None and lo is not None:
        v["comp/descbytes"] = num(
            round((lo - cost_model.fixed_per_cmd_cycles) / cost_model.byte_cycles_recip), 0)
    else:
        v["comp/descbytes"] = MISSING
    v.update(_kernel_values(h))
    v.update(_cube_values(h))
    refs = h["refs"]
    v.update(_ref_values(df, "ref/compute", refs["compute"], h))
    v.update(_ref_values(df, "ref/memory", refs["memory"], h))
    v.update(mapping)
    return v


def _kernel_values(h: dict) -> dict[str, Value]:
    """The primitive and prefetch kernels against the composite."""
    v: dict[str, Value] = {}
    for kern, short in (("primitive", "prim"), ("prefetch", "pref")):
        v.update(_range_values(f"{short}/slowdown", h[f"{kern}_slowdown"], ratio))
        for b in BOUNDS:
            v.update(_range_values(f"{short}/{b}/slowdown", h[f"{kern}_slowdown_{b}"],
                                   ratio))
        v.update(_range_values(f"{short}/cycles", h[f"{kern}_cycles"],
                               lambda x: num(x, 0)))
        v.update(_range_values(f"{short}/commands", h[f"{kern}_commands"],
                               lambda x: num(x, 0)))
        v.update(_range_values(f"{short}/cpushare", h[f"{kern}_cpu_share"], pct))
        b = h[f"{kern}_util_best"]
        v[f"{short}/bestutil"] = _opt(lambda r: pct(r["mac_util_pct"]), b)
    return v


def _cube_values(h: dict) -> dict[str, Value]:
    """The composite split over a CUBE: speed-ups and its best and worst shapes."""
    v: dict[str, Value] = {}
    v.update(_range_values("cube/speedup", h["cube_speedup"], ratio))
    v.update(_range_values("cube/decode/speedup", h["cube_decode_speedup"], ratio))
    v.update(_range_values("cube/errpct", h["cube_err"], pct))
    for tag in ("best", "worst", "decode/best", "decode/worst"):
        r = h[f"cube_{tag.replace('/', '_')}"]
        p = f"cube/{tag}/"
        v[p + "shape"] = _opt(lambda r: text(r["shape"]), r)
        v[p + "speedup"] = _opt(lambda r: ratio(r["speedup"]), r)
        v[p + "onelat"] = _opt(lambda r: us(r["latency_ns"]), r)
        v[p + "lat"] = _opt(lambda r: us(r["latency_ns_cube"]), r)
        v[p + "roof"] = _opt(lambda r: us(r["predicted_ns"]), r)
        v[p + "overroof"] = _opt(lambda r: ratio(r["latency_ns_cube"] / r["predicted_ns"]), r)
        v[p + "errpct"] = _opt(lambda r: pct(100.0 * r["rel_error"]), r)
        v[p + "bound"] = _opt(lambda r: text(r["bound_cube"]), r)
        v[p + "roofutil"] = _opt(lambda r: pct(r["roofline_util_pct"]), r)
        v[p + "util"] = _opt(lambda r: pct(r["mac_util_pct"]), r)
        v[p + "n"] = _opt(lambda r: num(int(r["n"]) // int(r["pes"]), 0), r)
    return v


def _mapping_values(df: pd.DataFrame) -> dict[str, Value]:
    """Composite holding A against holding B, one PE, per shape family: the latency
    ratio (below 1: holding A is faster)."""
    v: dict[str, Value] = {}
    held_a = df[(df["stationary"] == "a") & (df["kernel"] == "composite") & (df["pes"] == 1)]
    ratios = held_a.assign(r=held_a["vs_composite"]) if len(held_a) else held_a
    for b in BOUNDS:
        sub = ratios[ratios["intensity"] == b] if len(ratios) else ratios
        v[f"mapping/{b}/count"] = count(len(sub))
        v.update(_range_values(f"mapping/{b}/ratio",
                               _range(sub["r"]) if len(sub) else (None, None), ratio))
    return v


# -- table ---------------------------------------------------------------------------------

def tables(df: pd.DataFrame) -> dict[str, str]:
    return {"gemm_table": _gemm_table(held_b(df))}


def _gemm_table(df: pd.DataFrame) -> str:
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
            rule + escape(r["shape"]), L(count(int(r["m"]))), L(count(int(r["k"]))), L(count(int(r["n"]))),
            escape(r["bound"][:3] + "."), Lus(r["predicted_ns"]), Lus(r["latency_ns"]),
            Lpct(100.0 * r["rel_error"]), Lpct(r["mac_util_pct"]),
            Lratio(slow["primitive"].get(r["shape"], float("nan"))),
            Lratio(slow["prefetch"].get(r["shape"], float("nan"))),
            Lus(c["latency_ns_cube"]) if c is not None else L(MISSING),
            Lratio(c["speedup"]) if c is not None else L(MISSING),
        ])
    pes = _cube_pes(df)
    header = ["Shape", "$m$", "$k$", "$n$", "Bound", "Roof.", "Comp.", r"Err.\,\%",
              r"Util.\,\%", r"Prim.\,$\times$", r"Pref.\,$\times$", f"{pes} PEs",
              r"Gain\,$\times$"]
    return HEADER + tabular("@{}lrrrlrrrrrrrr@{}", header, rows)


def _cube_pes(df: pd.DataFrame) -> str:
    many = df[df["pes"] > 1]["pes"]
    return L(count(int(many.max()))) if len(many) else L(MISSING)
