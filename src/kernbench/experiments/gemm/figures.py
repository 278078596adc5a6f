"""The ``gemm`` figures: stage breakdown, measured MAC utilisation, and utilisation
against the roofline."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pandas as pd

from kernbench.analysis.plots import STYLE, plt, save
from kernbench.experiments.gemm.table import KERNELS, held_b


class KernelStyle(NamedTuple):
    letter: str  # under the breakdown's bars
    colour: str
    marker: str


GEMM_GROUPS = {"decode": "decode", "prefill": "prefill", "synthetic": "synthetic",
               "": "ungrouped"}
_KERNEL_STYLE = {"primitive": KernelStyle("P", "#d62728", "s"),
                 "prefetch": KernelStyle("F", "#ff7f0e", "^"),
                 "composite": KernelStyle("C", "#1f77b4", "o")}


def kernel_style(kernel: str) -> KernelStyle:
    """How a kernel of ``kernels/gemm.py`` is drawn; a kernel without a style is a bug."""
    try:
        return _KERNEL_STYLE[kernel]
    except KeyError:
        raise LookupError(f"gemm figures: kernel {kernel!r} has no style (add it to "
                            f"_KERNEL_STYLE in {__name__})") from None


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
    return [(k, p) for k in KERNELS for p in pes_list
            if ((df["kernel"] == k) & (df["pes"] == p)).any()]


def _legend_ncol(n_variants: int, n_pes: int, extra: int) -> int:
    """Columns so that each kernel's PE counts share a column and extras get one."""
    return max(1, -(-n_variants // n_pes) + (1 if extra else 0))


def _pe_label(pes: int) -> str:
    return "1 PE" if pes == 1 else f"{pes} PEs (one CUBE)"


def _scatter_variant(ax, x, y, kernel: str, pes: int) -> None:
    """One GEMM variant's points: marker by kernel, hollow when split over PEs."""
    ax.scatter(x, y, s=12, marker=kernel_style(kernel).marker, linewidths=0.8,
               facecolors=kernel_style(kernel).colour if pes == 1 else "none",
               edgecolors=kernel_style(kernel).colour, zorder=3)


def _variant_handles(variants: list[tuple[str, int]]) -> list:
    """Legend entries matching :func:`_scatter_variant`."""
    from matplotlib.lines import Line2D

    return [Line2D([], [], linestyle="", marker=kernel_style(k).marker, markersize=4,
                   markerfacecolor=kernel_style(k).colour if p == 1 else "none",
                   markeredgecolor=kernel_style(k).colour, label=f"{k}, {_pe_label(p)}")
            for k, p in variants]

def _breakdown_panel(ax, sub: pd.DataFrame, shapes: list[str], width: int) -> float:
    """One group's shapes at one PE count: a stacked bar of stage busy time over latency
    per kernel, kernel letters as ticks and shape names below; returns the tallest bar."""
    from matplotlib.transforms import blended_transform_factory

    kernels = [k for k in KERNELS if k in set(sub["kernel"])]
    slot = len(kernels) + 1
    tallest = 0.0
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
                ax.bar(x, h, bottom=bottom, width=0.85, color=colour, linewidth=0)
                bottom += h
            tallest = max(tallest, bottom)
            minor_pos.append(x)
            minor_lab.append(kernel_style(kern).letter)
    ax.axhline(1.0, color="k", linewidth=0.6, linestyle="--")
    # variant letters as tick labels, shape names below them
    ax.set_xticks(minor_pos)
    ax.set_xticklabels(minor_lab, fontsize=5)
    ax.tick_params(axis="x", pad=1, length=0)
    names = blended_transform_factory(ax.transData, ax.transAxes)
    for si, shape in enumerate(shapes):
        ax.text(si * slot + (len(kernels) - 1) / 2, -0.1, shape, transform=names,
                rotation=30, ha="right", va="top", fontsize=6, rotation_mode="anchor")
    ax.set_xlim(-0.8, max(len(shapes), width) * slot - 1.2)
    ax.grid(True, axis="y", linewidth=0.3, alpha=0.5)
    ax.set_axisbelow(True)
    return tallest


def _breakdown_legend(fig) -> None:
    """Stage colours and the latency line above the panels, the kernel letters below."""
    from matplotlib.patches import Patch

    handles = [Patch(color=c, label=lab) for _, lab, c in GEMM_STAGE_STYLE]
    handles.append(plt.Line2D([], [], color="k", linewidth=0.6, linestyle="--",
                              label="kernel latency"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False,
               bbox_to_anchor=(0.5, 1.0 - 0.35 / fig.get_figheight()))
    letters = ", ".join(f"{kernel_style(k).letter} = {k}" for k in KERNELS)
    fig.text(0.5, 1.0 - 0.08 / fig.get_figheight(),
             f"bars per shape: {letters}; stages overlap where a bar exceeds the dashed line",
             ha="center", va="top", fontsize=6)


def _gemm_breakdown(df: pd.DataFrame, out_base: Path) -> list[Path]:
    """Stage busy time / latency, stacked; rows = shape groups, columns = PE counts."""
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
                ymax = max(ymax, _breakdown_panel(ax, sub, shapes, widths[i]))
                ax.set_title(f"{GEMM_GROUPS[grp]}, {_pe_label(pes)}")
                if j == 0:
                    ax.set_ylabel("busy time / latency")
        for ax in axes.flat:
            ax.set_ylim(0, ymax * 1.05)
        _breakdown_legend(fig)
        return save(fig, out_base)


def _gemm_util(df: pd.DataFrame, out_base: Path) -> list[Path]:
    """Measured MAC utilisation per shape and variant; roofline bound as a dash."""
    from matplotlib.lines import Line2D

    groups = _gemm_groups(df)
    pes_list = sorted(df["pes"].unique())
    variants = _gemm_variants(df, pes_list)
    placed = sorted(variants, key=lambda v: (v[1], KERNELS.index(v[0])))
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

def figures(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Stage breakdown, measured utilisation, and utilisation against the roofline."""
    df = held_b(df)
    out = Path(out_dir)
    paths = _gemm_breakdown(df, out / "gemm_breakdown")
    paths += _gemm_util(df, out / "gemm_util")
    paths += _gemm_util_vs_roofline(df, out / "gemm_util_vs_roofline")
    return paths

