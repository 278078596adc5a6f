"""The ``gemm`` table: one row per record, and the vocabulary the other outputs share.

The kernels are those of ``kernels/gemm.py`` ``VARIANTS``, in its order; the
composite is the one the others are measured against.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kernbench.experiments.gemm import STAGES
from kernbench.kernels.gemm import VARIANTS

KERNELS = tuple(VARIANTS)
REFERENCE_KERNEL = "composite"  # the kernel every other one is compared with
OTHER_KERNELS = tuple(k for k in KERNELS if k != REFERENCE_KERNEL)
GROUPS = ("decode", "prefill", "synthetic")
BOUNDS = ("compute", "memory")  # shape families by arithmetic intensity (ideal-array bound)
GEMM_GROUP_ORDER = {g: i for i, g in enumerate(GROUPS)}
GEMM_KERNEL_ORDER = {k: i for i, k in enumerate(KERNELS)}


def short_name(kernel: str) -> str:
    """The kernel's tag in value keys and table headers (``prim``, ``pref``)."""
    return kernel[:4]


def busy_column(stage: str) -> str:
    """Column of the gemm table holding a stage's per-PE busy time."""
    return f"busy_{stage.lower()}_ns"


def _row(r: dict) -> dict:
    """One record as a table row (before the comparison with the composite)."""
    m, p, lab = r["metrics"], r["prediction"], r["labels"]
    busy = m["stage_busy_ns"]
    return {
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
        **{busy_column(s): float(busy.get(s, 0.0)) for s in STAGES},
        "config_hash": r["provenance"]["config_hash"],
    }


def frame(records: list[dict]) -> pd.DataFrame:
    """One row per GEMM record; ``vs_composite`` = latency over the composite kernel's
    latency for the same topology, shape and PE count (empty when there is none)."""
    df = pd.DataFrame([_row(r) for r in records])
    if df.empty:
        return df
    key = ["topology", "shape", "pes"]
    comp = df[(df["kernel"] == REFERENCE_KERNEL) & (df["stationary"] == "b")]
    comp = comp.drop_duplicates(key)[key + ["latency_ns"]]
    df = df.merge(comp.rename(columns={"latency_ns": "_comp"}), on=key, how="left")
    df.insert(df.columns.get_loc("rel_error") + 1, "vs_composite", df["latency_ns"] / df["_comp"])
    df["_g"] = df["group"].map(GEMM_GROUP_ORDER).fillna(len(GEMM_GROUP_ORDER))
    df["_k"] = df["kernel"].map(GEMM_KERNEL_ORDER).fillna(len(GEMM_KERNEL_ORDER))
    df = df.sort_values(["topology", "_g", "m", "k", "n", "shape", "pes", "_k", "variant"],
                        kind="mergesort").drop(columns=["_g", "_k", "_comp"])
    return df.reset_index(drop=True)


def load(table_csv: str | Path) -> pd.DataFrame:
    """Read the table back (empty groups stay empty strings, not NaN)."""
    df = pd.read_csv(table_csv, keep_default_na=False, na_values={"vs_composite": [""]})
    df["group"] = df["group"].astype(str)
    return df


def held_b(df: pd.DataFrame) -> pd.DataFrame:
    """The kernels as the study compares them: B (the weights) held in the array. The
    variants that hold A only feed the operand-mapping values."""
    return df[df["stationary"] == "b"] if "stationary" in df else df
