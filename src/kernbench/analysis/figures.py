"""Figures for the studies. Deterministic output: fixed style, no timestamps."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

CATEGORY_TITLES = {"h2d": "Host -> HBM (H2D)", "d2h": "HBM -> host (D2H)",
                   "pe_dma": "PE DMA -> HBM", "mcpu_dma": "M_CPU DMA -> HBM"}
STYLE = {"font.size": 8, "axes.titlesize": 8, "legend.fontsize": 6, "figure.dpi": 150,
         "svg.hashsalt": "kernbench", "pdf.fonttype": 42}


def _save(fig, out_base: Path) -> list[Path]:
    out_base.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext, meta in (("pdf", {"CreationDate": None, "ModDate": None, "Producer": None,
                               "Creator": None}),
                      ("png", {"Software": None})):
        path = out_base.with_suffix(f".{ext}")
        fig.savefig(path, metadata=meta, bbox_inches="tight")
        paths.append(path)
    plt.close(fig)
    return paths


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
                for flow, g in sub.groupby("flow", sort=True):
                    for _, gv in g.groupby("concurrent_flows", sort=True):
                        gv = gv.sort_values("size_bytes")
                        style = "-" if gv["concurrent_flows"].iloc[0] == 1 else "--"
                        ax.plot(gv["size_bytes"] / 1024, gv[value], style, marker="o",
                                markersize=2.5, linewidth=1.0, color=colour[flow])
                    if bound:
                        ax.axhline(g[bound].iloc[0], color=colour[flow], linewidth=0.6,
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
        return _save(fig, out_base)


def transfer_figures(table_csv: str | Path, out_dir: str | Path) -> list[Path]:
    """Latency and effective bandwidth vs size, per flow, one panel per category."""
    df = pd.read_csv(table_csv)
    out = Path(out_dir)
    paths = _grid(df, "latency_ns", "latency (ns)", out / "transfer_latency", logy=True)
    paths += _grid(df, "eff_bw_gbs", "effective BW (GB/s)", out / "transfer_bandwidth",
                   logy=False, bound="bottleneck_gbs")
    return paths


FIGURE_RENDERERS = {"transfer": transfer_figures}


def render_all(tables: list[str], out_dir: str | Path, expected: list[str] | None = None) -> list[Path]:
    """Render the figures of every table (named ``{experiment}.csv``)."""
    paths: list[Path] = []
    for table in tables:
        paths += FIGURE_RENDERERS[Path(table).stem](table, out_dir)
    if expected is not None:
        missing = sorted(set(map(str, expected)) - {str(p) for p in paths})
        if missing:
            raise RuntimeError(f"figure renderers did not produce: {', '.join(missing)}")
    return paths
