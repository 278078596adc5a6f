"""The ``moe`` study's table: one row per point, and the selections figures and values
share.

``kind`` is ``layer`` (the FFN half of one MoE layer), ``step`` (a whole step,
``phase`` decode or prefill) or ``alltoall``. Layer and step rows carry the routing: ``drop_share`` is
the share of token-to-expert assignments the capacity factor dropped,
``dispersion`` the share of dispatched rows (one per rank of an expert's group)
that go to another SIP than their token's owner (expert parallelism only),
``imbalance`` the busiest
expert's tokens over the mean. Step rows carry ``C``, the CUBEs of a KV head's
attention group.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

PARTS = ("router", "pack", "dispatch", "experts", "combine", "unpack")
KINDS = ("layer", "step", "alltoall")


def _moe(m: dict) -> dict:
    moe = m.get("mixture") or {}
    counts = moe.get("expert_tokens") or []
    mean = sum(counts) / len(counts) if counts else 0
    row = {"experts": moe.get("experts"), "top_k": moe.get("top_k"),
           "capacity": moe.get("capacity_factor"), "assignments": moe.get("assignments"),
           "dropped": moe.get("dropped"),
           "drop_share": moe["dropped"] / moe["assignments"] if moe.get("assignments")
           else None,
           "dispersion": moe.get("dispersion"), "expert_ranks": moe.get("expert_ranks"),
           "all_to_all": moe.get("all_to_all", ""),
           "imbalance": max(counts) / mean if mean else None}
    for p in PARTS:
        row[f"part_{p}_ns"] = (moe.get("parts_ns") or {}).get(p)
    return row


def _row(r: dict) -> dict:
    m, lab = r["metrics"], r["labels"]
    pred = r["prediction"]
    row = {"kind": lab["kind"], "topology": r["topology"], "point": r["workload"],
           "model": lab.get("model", ""), "phase": lab.get("phase", ""),
           "parallel": lab.get("parallel", ""),
           "placement": lab.get("placement", "blocks" if lab["kind"] != "alltoall" else ""),
           "tokens": lab.get("tokens"), "skew": lab.get("skew"),
           "capacity_factor": lab.get("capacity_factor"), "batch": lab.get("batch"),
           "context": lab.get("context"), "algorithm": lab.get("algorithm", ""),
           "bytes": lab.get("bytes"), "size": m.get("size", ""), "ranks": m.get("ranks"),
           "pes": m.get("pes"), "links": m.get("links"),
           "latency_ns": m.get("latency_ns"), "predicted_ns": pred["latency_ns"],
           "rel_error": pred["rel_error"], "busbw_gbs": m.get("busbw_gbs"),
           "norms_ns": (m.get("block_ns") or {}).get("norms"),
           "ffn_ns": (m.get("block_ns") or m.get("layer_ns") or {}).get("ffn"),
           "allreduce_ns": (m.get("block_ns") or m.get("layer_ns") or {}).get("allreduce_ffn"),
           "tpot_ms": m.get("tpot_ms"), "ttft_ms": m.get("ttft_ms"), "C": m.get("C"),
           "fits": m.get("fits", True),
           "config_hash": r["provenance"]["config_hash"]}
    layer = m.get("layer_ns") or {}
    row["layer_total_ns"] = sum(layer.values()) if layer else None
    return {**row, **_moe(m)}


def frame(records: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame([_row(r) for r in records])
    if df.empty:
        return df
    df["_k"] = df["kind"].map({k: i for i, k in enumerate(KINDS)})
    df = df.sort_values(["_k", "topology", "model", "tokens", "skew", "capacity_factor",
                         "parallel", "algorithm", "bytes", "point"], kind="mergesort",
                        na_position="first")
    return df.drop(columns=["_k"]).reset_index(drop=True)


def load(csv: str | Path) -> pd.DataFrame:
    df = pd.read_csv(csv)
    for col in ("model", "phase", "parallel", "placement", "algorithm", "size", "all_to_all"):
        if col in df:
            df[col] = df[col].fillna("")
    return df


def of_kind(df: pd.DataFrame, kind: str) -> pd.DataFrame:
    return df[df["kind"] == kind] if len(df) else df


def steps(df: pd.DataFrame, phase: str) -> pd.DataFrame:
    """Whole steps of one phase that fit the machine."""
    d = of_kind(df, "step")
    return d[(d["phase"] == phase) & d["fits"].astype(bool)] if len(d) else d


def layers(df: pd.DataFrame, model: str | None = None, placement: str = "blocks"
           ) -> pd.DataFrame:
    """Layer points (of one model) with experts placed in ``placement`` (the default
    blocks; tensor-parallel points count as blocks)."""
    d = of_kind(df, "layer")
    if len(d):
        d = d[d["placement"] == placement]
    return d[d["model"] == model] if model is not None and len(d) else d


def uncapped(d: pd.DataFrame) -> pd.DataFrame:
    return d[d["capacity_factor"].isna()] if len(d) else d


def main_model(df: pd.DataFrame) -> str | None:
    """The model with the most layer points (the study's subject; ties by name)."""
    d = of_kind(df, "layer")
    if not len(d):
        return None
    counts = d.groupby("model").size()
    return sorted(counts.index, key=lambda m: (-counts[m], m))[0]
