"""The ``moe`` study's figures, drawn from its table (matplotlib, deterministic files).

* ``moe_layouts``: the FFN half's time against tokens in flight, expert against
  tensor parallelism (uniform routing), and the expert-parallel time by part;
* ``moe_skew``: each layout's time against the routing skew, and the busiest
  expert's load over the mean;
* ``moe_capacity``: dropped assignments against the FFN half's time, one point per
  capacity factor and layout (uncapped as the reference);
* ``moe_alltoall``: all-to-all time against message size, per algorithm and
  topology.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from kernbench.analysis.plots import STYLE, empty_panel, plt, save
from kernbench.experiments.moe.post_table import PARTS, layers, main_model, of_kind, uncapped

STYLES = {"tp": ("tab:blue", "o", "tensor-parallel"), "ep": ("tab:red", "s", "expert-parallel")}
PART_COLORS = dict(zip(PARTS, ("tab:olive", "tab:gray", "tab:orange", "tab:red", "tab:purple",
                               "tab:brown"), strict=True))


def _layouts(df: pd.DataFrame, out: Path) -> list[Path]:
    main = main_model(df)
    d = uncapped(layers(df, main))
    d = d[d["skew"] == 0] if len(d) else d
    with plt.rc_context(STYLE):
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(6.8, 2.5))
        if not len(d):
            empty_panel(ax, "no layer points")
            empty_panel(bx, "no layer points")
            return save(fig, out)
        for p, (color, marker, name) in STYLES.items():
            g = d[d["parallel"] == p].sort_values("tokens", kind="mergesort")
            ax.plot(g["tokens"], g["latency_ns"] / 1000, marker=marker, color=color, ms=3,
                    label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens in flight")
        ax.set_ylabel("FFN half of a layer (us)")
        ax.set_title(main)
        ax.legend(frameon=False)
        ep = d[d["parallel"] == "ep"].sort_values("tokens", kind="mergesort")
        x, bottom = np.arange(len(ep)), np.zeros(len(ep))
        for part in PARTS:
            vals = ep[f"part_{part}_ns"].fillna(0).to_numpy(dtype=float) / 1000
            bx.bar(x, vals, 0.7, bottom=bottom, color=PART_COLORS[part], label=part)
            bottom = bottom + vals
        bx.set_xticks(x, [str(int(t)) for t in ep["tokens"]])
        bx.set_xlabel("tokens in flight")
        bx.set_ylabel("expert-parallel MoE (us)")
        bx.legend(frameon=False, fontsize=5)
        fig.tight_layout()
        return save(fig, out)


def _skew(df: pd.DataFrame, out: Path) -> list[Path]:
    d = uncapped(layers(df, main_model(df)))
    skewed = d[d["skew"] > 0] if len(d) else d
    tokens = sorted(skewed["tokens"].unique()) if len(skewed) else []
    d = d[d["tokens"] == tokens[0]] if tokens else d.iloc[0:0]
    with plt.rc_context(STYLE):
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(6.8, 2.4))
        if not len(d):
            empty_panel(ax, "no skewed layer points")
            empty_panel(bx, "no skewed layer points")
            return save(fig, out)
        for p, (color, marker, name) in STYLES.items():
            g = d[d["parallel"] == p].sort_values("skew", kind="mergesort")
            ax.plot(g["skew"], g["latency_ns"] / 1000, marker=marker, color=color, ms=3,
                    label=name)
        ax.set_xlabel("routing skew (Zipf exponent)")
        ax.set_ylabel("FFN half of a layer (us)")
        ax.set_title(f"{int(tokens[0])} tokens")
        ax.set_ylim(bottom=0)
        ax.legend(frameon=False)
        g = d[d["parallel"] == "ep"].sort_values("skew", kind="mergesort")
        bx.plot(g["skew"], g["imbalance"], marker="s", color="k", ms=3)
        bx.set_xlabel("routing skew (Zipf exponent)")
        bx.set_ylabel("busiest expert / mean")
        bx.set_ylim(bottom=0)
        fig.tight_layout()
        return save(fig, out)


def _capacity(df: pd.DataFrame, out: Path) -> list[Path]:
    d = layers(df, main_model(df))
    capped = d[d["capacity_factor"].notna()] if len(d) else d
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(3.6, 2.5))
        if not len(capped):
            empty_panel(ax, "no capacity-factor points")
            return save(fig, out)
        for p, (color, marker, name) in STYLES.items():
            g = capped[capped["parallel"] == p].sort_values("capacity_factor", kind="mergesort")
            ref = uncapped(d)
            ref = ref[(ref["parallel"] == p) & ref["skew"].isin(g["skew"])
                      & ref["tokens"].isin(g["tokens"])]
            xs = list(100 * g["drop_share"]) + list(100 * ref["drop_share"])
            ys = list(g["latency_ns"] / 1000) + list(ref["latency_ns"] / 1000)
            ax.plot(xs, ys, marker=marker, color=color, ms=3, label=name)
            for _, r in g.iterrows():
                ax.annotate(f"{r['capacity_factor']:g}", (100 * r["drop_share"],
                                                          r["latency_ns"] / 1000),
                            fontsize=5, xytext=(2, 2), textcoords="offset points")
        ax.set_xlabel("assignments dropped (%)")
        ax.set_ylabel("FFN half of a layer (us)")
        ax.legend(frameon=False)
        return save(fig, out)


def _alltoall(df: pd.DataFrame, out: Path) -> list[Path]:
    d = of_kind(df, "alltoall")
    topologies = sorted(d["topology"].unique()) if len(d) else []
    with plt.rc_context(STYLE):
        n = max(1, len(topologies))
        fig, axes = plt.subplots(1, n, squeeze=False, figsize=(2.4 * n, 2.3), sharey=True)
        for ax, topo in zip(axes[0], topologies, strict=False):
            t = d[d["topology"] == topo]
            for alg, g in t.groupby("algorithm", sort=True):
                g = g.sort_values("bytes", kind="mergesort")
                line, = ax.plot(g["bytes"], g["latency_ns"] / 1000, marker="o", ms=3,
                                label=alg)
                ax.plot(g["bytes"], g["predicted_ns"] / 1000, ls=":", color=line.get_color())
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(topo)
            ax.set_xlabel("bytes per rank")
        axes[0][0].set_ylabel("all-to-all (us; dotted: model)")
        if topologies:
            axes[0][0].legend(frameon=False, fontsize=5)
        else:
            empty_panel(axes[0][0], "no all-to-all points")
        fig.tight_layout()
        return save(fig, out)


def render(df: pd.DataFrame, out: Path) -> list[Path]:
    paths = _layouts(df, out / "moe_layouts")
    paths += _skew(df, out / "moe_skew")
    paths += _capacity(df, out / "moe_capacity")
    paths += _alltoall(df, out / "moe_alltoall")
    return paths
