"""Collect per-job JSON records into tidy CSV tables."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

CATEGORY_ORDER = {"h2d": 0, "d2h": 1, "pe_dma": 2, "mcpu_dma": 3}
GEMM_GROUP_ORDER = {"decode": 0, "prefill": 1, "synthetic": 2}
GEMM_KERNEL_ORDER = {"primitive": 0, "prefetch": 1, "composite": 2}
GEMM_STAGES = ("DMA_READ", "FETCH", "GEMM", "MATH", "STORE", "DMA_WRITE", "PE_CPU")
FLOAT_FORMAT = "%.6g"


def load_records(paths: Iterable[str | Path]) -> list[dict]:
    return [json.loads(Path(p).read_text()) for p in paths]


def transfer_frame(records: list[dict]) -> pd.DataFrame:
    rows = []
    for r in records:
        m, p, lab = r["metrics"], r["prediction"], r["labels"]
        cfg = r["config"]
        rows.append({
            "topology": r["topology"],
            "category": lab["category"],
            "flow": lab["flow"],
            "size": lab["size"],
            "size_bytes": cfg["workload"]["nbytes"],
            "variant": r["variant"],
            "concurrent_flows": cfg["variant"]["concurrent_flows"],
            "latency_ns": m["latency_ns"],
            "predicted_ns": p["latency_ns"],
            "rel_error": p["rel_error"],
            "eff_bw_gbs": m["eff_bw_gbs"],
            "bottleneck_gbs": m["bottleneck_gbs"],
            "util_pct": m["util_pct"],
            "overhead_ns": m["overhead_ns"],
            "wire_ns": m["wire_ns"],
            "drain_ns": m["drain_ns"],
            "wait_ns": m["wait_ns"],
            "hops": m["hops"],
            "config_hash": r["provenance"]["config_hash"],
        })
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["_cat"] = df["category"].map(CATEGORY_ORDER)
    df = df.sort_values(["topology", "_cat", "flow", "size_bytes", "concurrent_flows", "variant"],
                        kind="mergesort").drop(columns="_cat")
    return df.reset_index(drop=True)


def busy_column(stage: str) -> str:
    """Column of the gemm table holding a stage's per-PE busy time."""
    return f"busy_{stage.lower()}_ns"


def gemm_frame(records: list[dict]) -> pd.DataFrame:
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
            "latency_ns": m["latency_ns"],
            "host_ns": m["host_ns"],
            "predicted_ns": p["latency_ns"],
            "compute_ns": p["compute_ns"],
            "memory_ns": p["memory_ns"],
            "bound": p["bound"],
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
    comp = df[df["kernel"] == "composite"].drop_duplicates(key)[key + ["latency_ns"]]
    df = df.merge(comp.rename(columns={"latency_ns": "_comp"}), on=key, how="left")
    df.insert(df.columns.get_loc("rel_error") + 1, "vs_composite", df["latency_ns"] / df["_comp"])
    df["_g"] = df["group"].map(GEMM_GROUP_ORDER).fillna(len(GEMM_GROUP_ORDER))
    df["_k"] = df["kernel"].map(GEMM_KERNEL_ORDER).fillna(len(GEMM_KERNEL_ORDER))
    df = df.sort_values(["topology", "_g", "m", "k", "n", "shape", "pes", "_k", "variant"],
                        kind="mergesort").drop(columns=["_g", "_k", "_comp"])
    return df.reset_index(drop=True)


FRAME_BUILDERS = {"transfer": transfer_frame, "gemm": gemm_frame}


def write_table(experiment: str, record_paths: Iterable[str | Path], out_csv: str | Path) -> Path:
    """Aggregate one experiment's records into a CSV (frame chosen by experiment name)."""
    try:
        build = FRAME_BUILDERS[experiment]
    except KeyError:
        raise KeyError(f"no aggregator for experiment {experiment!r}") from None
    df = build(load_records(record_paths))
    out = Path(out_csv)
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
    return out
