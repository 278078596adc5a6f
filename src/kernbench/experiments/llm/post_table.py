"""The ``llm`` study's table: one row per point and setting, and the selections the
figures and values share.

``setting`` is ``default`` for the sweep's own run, else the what-if setting
(``parameter`` scaled by ``factor``), whose ``change`` is its step time over the
default's, minus one. A point that does not fit the HBM keeps its bytes and has
no times.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from kernbench.analysis.values import Value, num

COMPONENTS = ("norms", "qkv", "rope", "attention", "o_proj", "allreduce_attn", "ffn",
              "allreduce_ffn")
GIB = 2**30


def _row(r: dict) -> dict:
    m, lab = r["metrics"], r["labels"]
    wi = r.get("config", {}).get("variant", {}).get("whatif") or {}
    setting = r["variant"].partition("@")[2]
    row = {"model": lab["model"], "topology": r["topology"], "point": r["workload"],
           "phase": lab["phase"], "batch": lab["batch"], "context": lab["context"],
           "setting": setting or "default", "parameter": wi.get("parameter", ""),
           "factor": float(wi.get("factor", 1.0)), "fits": bool(m["fits"]),
           "bytes_needed": m["bytes_needed"], "bytes_available": m["bytes_available"],
           "weight_bytes": lab["weight_bytes"], "model_layers": lab["model_layers"],
           "sips": lab["sips"], "tp": m.get("tp", lab.get("tp")), "pes": m.get("pes"),
           "C": m.get("C"), "P": m.get("P"), "links": m.get("links"),
           "simulated_layers": m.get("simulated_layers"),
           "layer_spread": m.get("layer_spread"), "step_ns": m.get("step_ns"),
           "tpot_ms": m.get("tpot_ms"), "ttft_ms": m.get("ttft_ms"),
           "tokens_per_s_user": m.get("tokens_per_s_user"),
           "tokens_per_s_system": m.get("tokens_per_s_system"),
           "embedding_ns": m.get("embedding_ns"), "lm_head_ns": m.get("lm_head_ns"),
           "exposed_comm_ns": m.get("exposed_comm_ns"),
           "analytic_step_ns": (m.get("analytic") or {}).get("step_ns"),
           "analytic_error": m.get("analytic_error"),
           "config_hash": r["provenance"]["config_hash"]}
    for name in COMPONENTS:
        row[f"layer_{name}_ns"] = None
    for name, ns in (m.get("layer_ns") or {}).items():
        row[f"layer_{name}_ns"] = ns
    return row


def _derive(df: pd.DataFrame) -> pd.DataFrame:
    """Per-layer total, the all-reduces' share of it, and each setting's change."""
    parts = [c for c in df.columns if c.startswith("layer_") and c.endswith("_ns")]
    comm = [c for c in parts if c.startswith("layer_allreduce")]
    df["layer_ns"] = df[parts].sum(axis=1, min_count=1)
    df["comm_ns"] = df[comm].sum(axis=1, min_count=1)
    df["comm_share"] = df["comm_ns"] / df["layer_ns"]
    df["exposed_share"] = df["exposed_comm_ns"] / df["layer_ns"]
    base = df[df["setting"] == "default"].set_index(["topology", "point"])["step_ns"]
    keys = list(zip(df["topology"], df["point"], strict=True))
    df["base_step_ns"] = [base.get(k, math.nan) for k in keys]
    df["change"] = df["step_ns"] / df["base_step_ns"] - 1.0
    return df


def frame(records: list[dict], settings: dict | None = None) -> pd.DataFrame:
    rows = [_row(r) for r in records]
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    target = (settings or {}).get("tpot_target_ms")
    df["tpot_target_ms"] = float(target) if target is not None else math.nan
    df = _derive(df)
    df["_d"] = df["setting"] != "default"
    df = df.sort_values(["_d", "model", "topology", "phase", "batch", "context", "parameter",
                         "factor", "point"], kind="mergesort")
    return df.drop(columns=["_d"]).reset_index(drop=True)


def load(csv: str | Path) -> pd.DataFrame:
    df = pd.read_csv(csv)
    if "parameter" in df:
        df["parameter"] = df["parameter"].fillna("")
    return df


def defaults(df: pd.DataFrame) -> pd.DataFrame:
    """The sweep's own points (no what-if setting)."""
    return df[df["setting"] == "default"] if len(df) else df


def simulated(df: pd.DataFrame, phase: str | None = None) -> pd.DataFrame:
    """Default points that fit (and ran), of one phase or all."""
    d = defaults(df)
    d = d[d["fits"].astype(bool)] if len(d) else d
    return d[d["phase"] == phase] if phase and len(d) else d


def gib(nbytes) -> Value:
    return num(float(nbytes) / GIB, 1)


def label(r) -> str:
    """A point's short name: model, batch and context."""
    ctx = int(r["context"])
    return f"{r['model']} b{int(r['batch'])} {ctx // 1024}K" if ctx >= 1024 \
        else f"{r['model']} b{int(r['batch'])} {ctx}"


def whatif_rows(df: pd.DataFrame, phase: str) -> pd.DataFrame:
    """The what-if rows of one phase's points (each with its change)."""
    if not len(df):
        return df
    return df[(df["setting"] != "default") & (df["phase"] == phase) & df["fits"].astype(bool)]
