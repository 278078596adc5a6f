"""Figure style and deterministic saving, shared by every experiment's figures."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

STYLE = {"font.size": 8, "axes.titlesize": 8, "legend.fontsize": 6, "figure.dpi": 150,
         "svg.hashsalt": "kernbench", "pdf.fonttype": 42}
EXTENSIONS = ("pdf", "png")  # PDF for the paper, PNG for the HTML report and the site


def empty_panel(ax, message: str) -> None:
    """A panel with nothing to draw says why, without axes."""
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def save(fig, out_base: Path) -> list[Path]:
    """Write ``out_base``.pdf and .png without timestamps or tool versions, then close."""
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
