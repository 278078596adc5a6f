"""The ``llm`` study's figures, drawn from its table (matplotlib, deterministic files).

* ``llm_breakdown``: one layer's time stacked by component, per simulated point;
* ``llm_serving``: tokens/s per system against tokens/s per user (batches joined
  per model and context), the TPOT target as the per-user rate it allows;
* ``llm_comm_share``: the all-reduces' share of a layer against context;
* ``llm_whatif``: a tornado of the step's change per what-if parameter (TPOT for
  decode, TTFT for prefill), one bar per factor.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from kernbench.analysis.plots import STYLE, empty_panel, plt, save
from kernbench.experiments.llm.post_table import COMPONENTS, label, simulated, whatif_rows

PHASES = ("decode", "prefill")
COLORS = dict(zip(COMPONENTS, ("tab:olive", "tab:blue", "tab:cyan", "tab:orange", "tab:green",
                               "tab:red", "tab:purple", "tab:pink"), strict=True))


def _components(df: pd.DataFrame) -> list[str]:
    """The per-layer components the table has: the decode step's, then any other (a
    phase may time its layer in other parts)."""
    found = [c[len("layer_"):-len("_ns")] for c in df.columns
             if c.startswith("layer_") and c.endswith("_ns") and c != "layer_ns"]
    return [c for c in COMPONENTS if c in found] + sorted(set(found) - set(COMPONENTS))


def _breakdown(df: pd.DataFrame, out: Path) -> list[Path]:
    groups = [(ph, m) for ph in PHASES for m in dict.fromkeys(simulated(df, ph)["model"])] \
        if len(df) else []
    with plt.rc_context(STYLE):
        n = max(1, len(groups))
        fig, axes = plt.subplots(n, 1, squeeze=False, figsize=(6.8, 1.9 * n))
        axes = axes[:, 0]
        for ax, (ph, model) in zip(axes, groups, strict=False):
            g = simulated(df, ph)
            g = g[g["model"] == model].sort_values(["topology", "batch", "context"],
                                                  kind="mergesort")
            x, bottom = np.arange(len(g)), np.zeros(len(g))
            for c in _components(df):
                vals = g[f"layer_{c}_ns"].fillna(0).to_numpy(dtype=float) / 1000
                ax.bar(x, vals, 0.7, bottom=bottom, color=COLORS.get(c, "0.6"), label=c)
                bottom = bottom + vals
            ax.set_xticks(x, [label(r).replace(f"{model} ", "") for _, r in g.iterrows()],
                          rotation=45, ha="right")
            ax.set_title(f"{model}, {ph}")
            ax.set_ylabel("one layer (us)")
        if groups:
            axes[0].legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        else:
            empty_panel(axes[0], "no simulated points")
        fig.tight_layout()
        return save(fig, out)


def _serving(df: pd.DataFrame, out: Path) -> list[Path]:
    d = simulated(df, "decode")
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(3.6, 2.6))
        if not len(d):
            empty_panel(ax, "no simulated decode points")
            return save(fig, out)
        for (model, _topo, ctx), g in d.groupby(["model", "topology", "context"], sort=True):
            g = g.sort_values("batch", kind="mergesort")
            ax.plot(g["tokens_per_s_user"], g["tokens_per_s_system"], marker="o", ms=3,
                    label=f"{model}, {int(ctx) // 1024}K" if ctx >= 1024 else f"{model}, {ctx}")
            for _, r in g.iterrows():
                ax.annotate(f"b{int(r['batch'])}", (r["tokens_per_s_user"],
                                                    r["tokens_per_s_system"]), fontsize=5,
                            xytext=(2, 2), textcoords="offset points")
        target = float(d["tpot_target_ms"].iloc[0])
        if target == target:
            ax.axvline(1000.0 / target, color="k", ls="--", lw=0.8,
                       label=f"TPOT target {target:g} ms")
        for col, setter in (("tokens_per_s_user", ax.set_xscale),
                            ("tokens_per_s_system", ax.set_yscale)):
            if d[col].max() > 10 * d[col].min():  # log only where the points span a decade
                setter("log")
        ax.set_xlabel("tokens/s per user")
        ax.set_ylabel("tokens/s per system")
        ax.legend(frameon=False)
        return save(fig, out)


def _comm_share(df: pd.DataFrame, out: Path) -> list[Path]:
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(3.6, 2.4))
        drawn = False
        for ph, style in zip(PHASES, ("-", "--"), strict=True):
            d = simulated(df, ph) if len(df) else df
            for (model, _topo, batch), g in (d.groupby(["model", "topology", "batch"], sort=True)
                                            if len(d) else []):
                g = g.sort_values("context", kind="mergesort")
                ax.plot(g["context"], 100 * g["comm_share"], style, marker="o", ms=3,
                        label=f"{model} {ph}, b{int(batch)}")
                drawn = True
        if drawn:
            ax.set_xscale("log", base=2)
            ax.set_xlabel("context (tokens)")
            ax.set_ylabel("all-reduces (% of a layer)")
            ax.set_ylim(0, 100)
            ax.legend(frameon=False)
        else:
            empty_panel(ax, "no simulated points")
        return save(fig, out)


def _tornado(ax, w: pd.DataFrame, phase: str) -> None:
    weight = w.assign(size=w["change"].abs()).groupby("parameter")["size"].max()
    params = sorted(weight.index, key=lambda p: (weight[p], p))
    y = {p: i for i, p in enumerate(params)}
    factors = sorted(w["factor"].unique())
    h = 0.8 / len(factors)
    for i, f in enumerate(factors):
        g = w[w["factor"] == f]
        ax.barh([y[p] + (i - (len(factors) - 1) / 2) * h for p in g["parameter"]],
                100 * g["change"], h, label=f"x{f:g}",
                color="tab:red" if f < 1 else "tab:green")
    ax.axvline(0, color="k", lw=0.6)
    reach = 115 * max(float(weight.max()), 1e-3)
    ax.set_xlim(-reach, reach)
    ax.set_yticks(range(len(params)), params)
    what = "TPOT" if phase == "decode" else "TTFT"
    ax.set_xlabel(f"{what} change (%)")
    ax.set_title(f"{phase}: {label(w.iloc[0])}")
    ax.legend(frameon=False, loc="lower right")


def _whatif(df: pd.DataFrame, out: Path) -> list[Path]:
    panels = []
    for ph in PHASES:
        w = whatif_rows(df, ph)
        if len(w):
            panels.append((ph, w[w["point"] == sorted(w["point"])[0]]))
    with plt.rc_context(STYLE):
        n = max(1, len(panels))
        fig, axes = plt.subplots(1, n, squeeze=False, figsize=(3.4 * n, 2.4))
        for ax, (ph, w) in zip(axes[0], panels, strict=False):
            _tornado(ax, w, ph)
        if not panels:
            empty_panel(axes[0][0], "no what-if reruns in this configuration")
        fig.tight_layout()
        return save(fig, out)


def render(df: pd.DataFrame, out: Path) -> list[Path]:
    paths = _breakdown(df, out / "llm_breakdown")
    paths += _serving(df, out / "llm_serving")
    paths += _comm_share(df, out / "llm_comm_share")
    paths += _whatif(df, out / "llm_whatif")
    return paths
