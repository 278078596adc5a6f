"""The validation figures, one per reference (each takes that reference's rows)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kernbench.analysis.plots import STYLE, plt, save


def _diagonal(ax, sub: pd.DataFrame) -> None:
    lo = min(sub["reference_value"].min(), sub["simulated"].min()) / 1.5
    hi = max(sub["reference_value"].max(), sub["simulated"].max()) * 1.5
    ax.plot([lo, hi], [lo, hi], color="k", linewidth=0.6, label="simulated = reference")
    ax.set_xscale("log")
    ax.set_yscale("log")


def scalesim(sub: pd.DataFrame, out: Path) -> list[Path]:
    """Left: simulated array cycles against SCALE-Sim's, by group. Right: the difference
    in cycles of every shape."""
    with plt.rc_context(STYLE):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7.0, 2.6),
                                       gridspec_kw={"width_ratios": [1, 1.4], "wspace": 0.3})
        if len(sub):
            _diagonal(ax1, sub)
            for i, (group, grp) in enumerate(sub.groupby("workload", sort=True)):
                ax1.scatter(grp["reference_value"], grp["simulated"], s=8, color=f"C{i % 10}",
                            label=group.removeprefix("scalesim-"), zorder=3)
                ax2.bar(grp.index, grp["simulated"] - grp["reference_value"], color=f"C{i % 10}")
            ax1.legend(frameon=False, fontsize=5, loc="upper left")
        ax1.set_xlabel("SCALE-Sim v3 compute cycles")
        ax1.set_ylabel("simulated array cycles")
        ax1.set_title("every shape")
        ax2.set_xticks([])
        ax2.set_xlabel("shape (grouped as on the left)")
        ax2.set_ylabel("simulated - SCALE-Sim (cycles)")
        ax2.set_title("difference per shape")
        ax2.grid(True, axis="y", linewidth=0.3, alpha=0.5)
        return save(fig, out)


def packet(sub: pd.DataFrame, out: Path, target: float) -> list[Path]:
    """Left: every lone flow, analytic against reference. Right: each contended scenario's
    makespan and mean-completion error, with the makespan target."""
    alone = sub[sub["metric"] == "completion_ns"]
    mk = sub[sub["metric"] == "makespan_ns"]
    mean = sub[sub["metric"] == "mean_completion_ns"]
    fifo = {m: sub[sub["metric"] == f"{m}/fifo"].set_index("scenario")["rel_err"]
            for m in ("makespan_ns", "mean_completion_ns")}
    with plt.rc_context(STYLE):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7.0, 2.6),
                                       gridspec_kw={"width_ratios": [1, 1.3], "wspace": 0.35})
        if len(alone):
            _diagonal(ax1, alone)
            for i, (_, grp) in enumerate(alone.groupby("nbytes", sort=True)):
                label = grp["scenario"].iloc[0].rsplit("/", 1)[-1]
                ax1.scatter(grp["reference_value"], grp["simulated"], s=8, color=f"C{i % 10}",
                            label=label, zorder=3)
            ax1.legend(frameon=False, fontsize=5, loc="upper left")
        ax1.set_xlabel("packet-level reference (ns)")
        ax1.set_ylabel("analytic engine (ns)")
        ax1.set_title("lone flows (every probe flow)")
        x = range(len(mk))
        names = list(mk["scenario"])
        bars = [("makespan", mk["rel_err"], "C0", None), ("mean completion", mean["rel_err"],
                                                          "C1", None),
                ("makespan, FIFO links", fifo["makespan_ns"].reindex(names), "C0", "//"),
                ("mean, FIFO links", fifo["mean_completion_ns"].reindex(names), "C1", "//")]
        for j, (label, err, color, hatch) in enumerate(bars):
            ax2.bar([i - 0.3 + 0.2 * j for i in x], 100 * err.to_numpy(), width=0.2,
                    color="white" if hatch else color, edgecolor=color, hatch=hatch,
                    label=label)
        ax2.axhline(100 * target, color="k", linewidth=0.6, linestyle="--",
                    label=f"{100 * target:g} % makespan target")
        ax2.set_xticks(list(x))
        ax2.set_xticklabels(names, rotation=20, ha="right", fontsize=6)
        ax2.set_ylabel("error vs reference (%)")
        ax2.set_title("contended scenarios")
        ax2.legend(frameon=False, fontsize=5)
        ax2.grid(True, axis="y", linewidth=0.3, alpha=0.5)
        return save(fig, out)


def ns3(sub: pd.DataFrame, out: Path) -> list[Path]:
    """Every flow's completion time on the packet reference and on ns-3, and the error."""
    labels = [f"{s}\n{m.removeprefix('completion_ns/')}"
              for s, m in zip(sub["scenario"], sub["metric"], strict=True)]
    x = range(len(sub))
    with plt.rc_context(STYLE):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7.0, 2.6),
                                       gridspec_kw={"width_ratios": [1.4, 1], "wspace": 0.3})
        ax1.bar([i - 0.2 for i in x], sub["reference_value"] / 1e3, width=0.4, color="C0",
                label="ns-3")
        ax1.bar([i + 0.2 for i in x], sub["simulated"] / 1e3, width=0.4, color="C1",
                label="packet reference")
        ax1.set_ylabel("flow completion (us)")
        ax1.set_title("every flow of every scenario")
        ax1.legend(frameon=False, fontsize=5)
        ax2.bar(list(x), 100 * sub["rel_err"], color="C2")
        ax2.set_ylabel("difference from ns-3 (%)")
        ax2.set_title("per flow")
        for ax in (ax1, ax2):
            ax.set_xticks(list(x))
            ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=4.5)
            ax.grid(True, axis="y", linewidth=0.3, alpha=0.5)
        return save(fig, out)
