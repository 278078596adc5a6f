"""The ``allreduce`` figures: latency and busbw sweeps, buffer kinds, PE-to-PE
latency, the SIP layouts, and the time of each algorithm's phases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from kernbench.analysis.plots import STYLE, plt, save
from kernbench.experiments.allreduce.table import (
    BUFFER_ORDER,
    collective,
    hbm,
    phases_of,
    rows_of_kind,
    sorted_algorithms,
    sorted_topologies,
    value_tag,
)


def _sweep_figure(df: pd.DataFrame, value: str, pred: str | None, ylabel: str, out: Path,
                  bound: str | None = None) -> list[Path]:
    sub = hbm(df)
    topologies = sorted_topologies(df)
    with plt.rc_context(STYLE):
        fig = plt.figure(figsize=(2.4 * max(1, len(topologies)) + 0.4, 2.3))
        axes = fig.subplots(1, max(1, len(topologies)), squeeze=False)[0]
        for ax, topo in zip(axes, topologies, strict=False):
            t = sub[sub["topology"] == topo]
            for k, algo in enumerate(sorted_algorithms(df)):
                g = t[t["algorithm"] == algo].sort_values("size")
                if g.empty:
                    continue
                ax.plot(g["size"], g[value], "-o", markersize=2.5, linewidth=1.0,
                        color=f"C{k}", label=algo)
                if pred:
                    ax.plot(g["size"], g[pred], ":", linewidth=1.0, color=f"C{k}")
            if bound is not None and len(t):
                ax.axhline(float(t[bound].min()), color="k", linewidth=0.7, linestyle="--",
                           label="slowest link")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{topo} ({t['sip_kind'].iloc[0] if len(t) else ''})")
            ax.set_xlabel("bytes per rank")
            ax.grid(True, linewidth=0.3, alpha=0.5)
        axes[0].set_ylabel(ylabel)
        axes[0].legend(frameon=False, loc="upper left")
        fig.tight_layout()
        return save(fig, out)


def _buffers_figure(df: pd.DataFrame, out: Path) -> list[Path]:
    sub = collective(df)
    kinds = sub.groupby("topology")["buffer"].nunique()
    topo = kinds.idxmax() if len(kinds) else None
    algos = sorted_algorithms(df)
    with plt.rc_context(STYLE):
        fig = plt.figure(figsize=(2.4 * max(1, len(algos)) + 0.4, 2.3))
        axes = fig.subplots(1, max(1, len(algos)), squeeze=False)[0]
        for ax, algo in zip(axes, algos, strict=False):
            t = sub[(sub["topology"] == topo) & (sub["algorithm"] == algo)]
            for buf, g in sorted(t.groupby("buffer"), key=lambda kv: BUFFER_ORDER[kv[0]]):
                g = g.sort_values("size")
                ax.plot(g["size"], g["time_ns"] / 1000, "-o", markersize=2.5, linewidth=1.0,
                        color=f"C{BUFFER_ORDER[buf]}", label=f"buffers in {buf.upper()}")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{algo} on {topo}")
            ax.set_xlabel("bytes per rank")
            ax.grid(True, linewidth=0.3, alpha=0.5)
        axes[0].set_ylabel("all-reduce time (us)")
        axes[0].legend(frameon=False, loc="upper left")
        fig.tight_layout()
        return save(fig, out)


def _pe2pe_figure(df: pd.DataFrame, out: Path) -> list[Path]:
    """One message between PE pairs, by size: IPCQ against a raw DMA write."""
    sub = rows_of_kind(df, "pe2pe")
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(4.2, 2.6))
        pairs = sub.groupby("pair", sort=False) if len(sub) else ()  # a run without pe2pe
        for k, (pair, g) in enumerate(pairs):
            g = g.sort_values("size")
            ax.plot(g["size"], g["ipcq_ns"], "-o", markersize=2.5, linewidth=1.0,
                    color=f"C{k}", label=f"{pair} IPCQ")
            ax.plot(g["size"], g["dma_ns"], "--", linewidth=1.0, color=f"C{k}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message bytes")
        ax.set_ylabel("latency (ns)")
        ax.set_title("PE-to-PE: IPCQ send + receive (solid) vs raw DMA write (dashed)")
        ax.grid(True, linewidth=0.3, alpha=0.5)
        if len(sub):
            ax.legend(frameon=False, fontsize=5, loc="upper left")
        fig.tight_layout()
        return save(fig, out)


def _topology_figure(df: pd.DataFrame, out: Path) -> list[Path]:
    """The SIP layouts: one box per SIP at its grid position, a line per inter-SIP link
    (wrap-around links of rings and tori drawn as arcs)."""
    sub = df.drop_duplicates("topology") if len(df) else df
    topologies = [t for t in sorted_topologies(df)] or list(sub.get("topology", []))
    with plt.rc_context(STYLE):
        fig = plt.figure(figsize=(2.2 * max(1, len(topologies)) + 0.4, 2.0))
        axes = fig.subplots(1, max(1, len(topologies)), squeeze=False)[0]
        for ax, topo in zip(axes, topologies, strict=False):
            row = sub[sub["topology"] == topo].iloc[0]
            w, h, kind = int(row["sip_w"]), int(row["sip_h"]), row["sip_kind"]
            wrap = kind in ("ring_1d", "torus_2d")
            for s in range(w * h):
                x, y = s % w, s // w
                for dx, dy, size in ((1, 0, w), (0, 1, h)):
                    if size == 1:
                        continue
                    nx, ny = x + dx, y + dy
                    if nx < w and ny < h:
                        ax.plot([x, nx], [-y, -ny], "-", color="0.3", linewidth=1.2)
                    elif wrap:
                        tx, ty = nx % w, ny % h
                        bend = 0.35
                        xs = np.linspace(0, 1, 30)
                        px = x + (tx - x) * xs + (bend * np.sin(np.pi * xs) if dy else 0)
                        py = -(y + (ty - y) * xs) + (bend * np.sin(np.pi * xs) if dx else 0)
                        ax.plot(px, py, "--", color="0.5", linewidth=0.9)
                ax.add_patch(plt.Rectangle((x - 0.22, -y - 0.22), 0.44, 0.44, facecolor="#dbeafe",
                                           edgecolor="#1e3a8a", zorder=3))
                ax.text(x, -y, f"SIP{s}", ha="center", va="center", fontsize=5, zorder=4)
            ax.set_title(f"{topo}: {kind} {w}x{h}")
            ax.set_xlim(-0.7, w - 0.3)
            ax.set_ylim(-h + 0.3, 0.9)
            ax.set_aspect("equal")
            ax.axis("off")
        fig.tight_layout()
        return save(fig, out)


def _phases_figure(df: pd.DataFrame, out: Path) -> list[Path]:
    sub = hbm(df)
    topologies = sorted_topologies(df)
    with plt.rc_context(STYLE):
        fig = plt.figure(figsize=(2.4 * max(1, len(topologies)) + 0.4, 2.4))
        axes = fig.subplots(1, max(1, len(topologies)), squeeze=False)[0]
        for ax, topo in zip(axes, topologies, strict=False):
            t = sub[sub["topology"] == topo]
            if t.empty:
                continue
            big = t[t["size"] == t["size"].max()]
            algos = [a for a in sorted_algorithms(df) if a in set(big["algorithm"])]
            for i, algo in enumerate(algos):
                r = big[big["algorithm"] == algo].iloc[0]
                bottom = 0.0
                for k, phase in enumerate(phases_of(algo)):
                    v = r.get(f"phase_{phase}_ns")
                    if v is None or pd.isna(v):
                        continue
                    ax.bar(i, v / 1000, bottom=bottom, color=f"C{k}", width=0.6,
                           edgecolor="white", linewidth=0.4)
                    if v > 0.08 * r["time_ns"]:
                        ax.text(i, bottom + v / 2000, phase.replace("_", " "), ha="center",
                                va="center", fontsize=4.5)
                    bottom += v / 1000
            ax.set_xticks(range(len(algos)), [value_tag(a) for a in algos])
            ax.set_title(f"{topo}, {int(big['size'].iloc[0])} B per rank")
            ax.grid(True, axis="y", linewidth=0.3, alpha=0.5)
        axes[0].set_ylabel("time per phase (us)")
        fig.tight_layout()
        return save(fig, out)


def figures(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    lat = df.assign(time_us=df.get("time_ns", 0) / 1000,
                    predicted_us=df.get("predicted_ns", 0) / 1000)
    paths = _sweep_figure(lat, "time_us", "predicted_us", "all-reduce time (us)",
                          out / "allreduce_latency")
    paths += _sweep_figure(df, "busbw_gbs", "predicted_busbw_gbs", "busbw (GB/s)",
                           out / "allreduce_busbw", bound="link_bound_gbs")
    paths += _buffers_figure(df, out / "allreduce_buffers")
    paths += _pe2pe_figure(df, out / "allreduce_pe2pe")
    paths += _topology_figure(df, out / "allreduce_topologies")
    paths += _phases_figure(df, out / "allreduce_phases")
    return paths

