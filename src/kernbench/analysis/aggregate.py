"""Collect per-job JSON records into tidy CSV tables."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

CATEGORY_ORDER = {"h2d": 0, "d2h": 1, "pe_dma": 2, "mcpu_dma": 3}
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


def write_transfer_table(record_paths: Iterable[str | Path], out_csv: str | Path) -> Path:
    df = transfer_frame(load_records(record_paths))
    out = Path(out_csv)
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
    return out


TABLE_WRITERS = {"transfer": write_transfer_table}


def write_table(experiment: str, record_paths: Iterable[str | Path], out_csv: str | Path) -> Path:
    """Aggregate one experiment's records (dispatch by experiment name)."""
    try:
        writer = TABLE_WRITERS[experiment]
    except KeyError:
        raise KeyError(f"no aggregator for experiment {experiment!r}") from None
    return writer(record_paths, out_csv)
