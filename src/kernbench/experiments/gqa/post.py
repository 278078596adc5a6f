"""Post-processing of the ``gqa`` experiment: table, figures, values, paper table.

One row per point (column ``kind``: decode, prefill or short; ``sweep`` tells
the headline, sweep and ring block-size points apart). A quantity the table
cannot give (the smoke run has few points) is a missing value.
Imported only by aggregation, figures and the report.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from kernbench.analysis.latex import HEADER, escape, tabular
from kernbench.analysis.plots import STYLE, plt, save
from kernbench.analysis.values import MISSING, Value, count, num, pct, ratio, text

VARIANTS = ("opt1", "opt3", "opt2")
TARGET = 0.85  # the long-decode efficiency the study is held to (of the KV-bandwidth bound)

SUMMARY = (
    "decode at {dec/context} tokens ({dec/C} CUBEs x {dec/P} PEs per KV head, {dec/variant}): "
    "{dec/lat} us, {dec/effpct} % of the KV-bandwidth bound {dec/bound} us",
    "prefill at {pre/context} tokens: {pre/lat} us, {pre/effpct} % of the compute bound "
    "{pre/bound} us",
    "best long-decode efficiency (>= {long/context} tokens): {long/besteffpct} % "
    "(C={long/bestC}, {long/bestvariant}); GEMM engine busy {long/bestgemmpct} %",
    "ring block-size sweep: predicted overlap at {ring/c} query rows; exposed rotation per "
    "hop {ring/exposedlo} ns at {ring/qlo} rows, hidden (under 1 % of a hop) from "
    "{ring/hiddenfrom} rows",
)


# -- aggregation ---------------------------------------------------------------------------
def frame(records: list[dict]) -> pd.DataFrame:
    rows = []
    for r in records:
        m, lab = r["metrics"], r["labels"]
        row = {"topology": r["topology"], "point": r["workload"], "kind": lab["kind"],
               "sweep": lab.get("sweep", "headline" if r["workload"].startswith("headline")
                                else "sweep"),
               "panel": lab.get("panel", ""), "context": m["context"], "users": m["users"],
               "pes": m["pes"], "C": lab.get("C"), "P": lab.get("P"),
               "variant": lab.get("variant"), "tile": lab.get("tile"),
               "q_rows": lab.get("q_rows"), "phase": lab.get("phase"),
               "mapping": lab.get("mapping"), "tier": lab.get("tier"),
               "latency_ns": m["latency_ns"], "bound_ns": m["bound_ns"], "bound": m["bound"],
               "gap": m["gap"], "efficiency": m["bound_ns"] / m["latency_ns"],
               "overlap_rows": m.get("overlap_rows"),
               "overlap_rows_peak": m.get("overlap_rows_peak"),
               "ring_wait_ns": m["phases_ns"].get("ring_wait_max_ns"),
               "hops_per_pe": m["phases_ns"].get("hops_per_pe"),
               "hop_ns": m["phases_ns"].get("hop_ns"),
               "step_compute_ns": m["phases_ns"].get("step_compute_ns"),
               "peak_scratch_bytes": m["phases_ns"].get("peak_scratch_bytes"),
               "array_bound_ns": m["phases_ns"].get("array_bound_ns"),
               "heads": lab.get("heads"), "G": lab.get("G"), "d": lab.get("d"),
               "sips": lab.get("sips"), "config_hash": r["provenance"]["config_hash"]}
        for k, v in r["op_counts"].items():
            row[k] = v
        for k, v in m["occupancy_pct"].items():
            row[f"occ_{k}"] = v
        for k, v in m.get("short", {}).items():
            row[f"short_{k}"] = v
        rows.append(row)
        if lab.get("sweep_point"):  # a headline point that is also a point of its sweep
            rows.append(dict(row, point=lab["sweep_point"], sweep="sweep", panel=""))
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    order = {"headline": 0, "sweep": 1, "ring": 2}
    df["_s"] = df["sweep"].map(order)
    df = df.sort_values(["_s", "kind", "topology", "C", "variant", "phase", "mapping", "tier",
                         "q_rows", "context", "point"], kind="mergesort", na_position="last")
    return df.drop(columns=["_s"]).reset_index(drop=True)


def load(csv: str | Path) -> pd.DataFrame:
    return pd.read_csv(csv)


def _sel(df: pd.DataFrame, **kw) -> pd.DataFrame:
    out = df
    for k, v in kw.items():
        out = out[out[k] == v] if k in out else out.iloc[0:0]
    return out


# -- figures -------------------------------------------------------------------------------
def _decode_figure(df: pd.DataFrame, out: Path) -> list[Path]:
    sub = _sel(df, kind="decode", sweep="sweep")
    Cs = sorted(sub["C"].dropna().unique()) if len(sub) else []
    with plt.rc_context(STYLE):
        n = max(1, len(Cs))
        axes = plt.subplots(1, n, squeeze=False, figsize=(2.2 * n + 0.4, 2.1), sharey=True)[1][0]
        for ax, C in zip(axes, Cs, strict=False):
            g = sub[sub["C"] == C]
            for v in VARIANTS:
                gv = g[g["variant"] == v].sort_values("context")
                if len(gv):
                    ax.plot(gv["context"] / 1024, gv["latency_ns"] / 1000, marker="o", ms=2,
                            label=v)
            gb = g.drop_duplicates("context").sort_values("context")
            ax.plot(gb["context"] / 1024, gb["bound_ns"] / 1000, "k:", label="KV bound")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"C = {int(C)}")
            ax.set_xlabel("context (K tokens)")
        axes[0].set_ylabel("decode latency (us)")
        axes[0].legend(frameon=False)
        return save(axes[0].figure, out)


def _occupancy_figure(df: pd.DataFrame, out: Path) -> list[Path]:
    sub = _sel(df, sweep="headline")
    with plt.rc_context(STYLE):
        n = max(1, len(sub))
        axes = plt.subplots(1, n, squeeze=False, figsize=(1.9 * n + 0.4, 2.2), sharey=True)[1][0]
        engines = [c[len("occ_"):] for c in df.columns if c.startswith("occ_")]  # as recorded
        for ax, (_, r) in zip(axes, sub.iterrows(), strict=False):
            vals = [r.get(f"occ_{k}", np.nan) for k in engines]
            ax.bar(range(len(engines)), vals, color="tab:blue")
            ax.set_xticks(range(len(engines)), [k.replace("pe_cpu_", "") for k in engines],
                          rotation=60)
            ax.set_title(r["panel"])
        axes[0].set_ylabel("busy (% of latency)")
        return save(axes[0].figure, out)


def _dispatch_figure(df: pd.DataFrame, out: Path) -> list[Path]:
    sub = _sel(df, kind="decode", sweep="sweep")
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 2, figsize=(5.0, 2.1))
        if len(sub):
            top = sub[sub["context"] == sub["context"].max()]
            Cs = sorted(top["C"].unique())
            width = 0.8 / len(VARIANTS)
            for i, v in enumerate(VARIANTS):
                g = top[top["variant"] == v].set_index("C").reindex(Cs)
                x = np.arange(len(Cs)) + i * width
                axes[0].bar(x, g["latency_ns"] / 1000, width, label=v)
                axes[1].bar(x, g["occ_pe_cpu_dispatch"], width, label=v)
            for ax in axes:
                ax.set_xticks(np.arange(len(Cs)) + width, [f"C={int(c)}" for c in Cs])
            axes[0].set_ylabel(f"latency at {int(top['context'].iloc[0]) // 1024}K (us)")
            axes[1].set_ylabel("PE_CPU dispatch busy (%)")
            axes[0].legend(frameon=False)
        return save(fig, out)


def _ring_figure(df: pd.DataFrame, out: Path) -> list[Path]:
    sub = _sel(df, sweep="ring").sort_values("q_rows")
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(3.4, 2.2))
        if len(sub):
            per_hop = sub["ring_wait_ns"] / sub["hops_per_pe"].clip(lower=1)
            ax.plot(sub["q_rows"], per_hop, marker="o", ms=3, label="measured (slowest PE)")
            pred = (sub["hop_ns"] - sub["step_compute_ns"]).clip(lower=0)
            ax.plot(sub["q_rows"], pred, "k--", lw=0.8, label="hop - step on the array (model)")
            c = float(sub["overlap_rows"].iloc[0])
            ax.axvline(c, color="k", ls=":", label=f"predicted overlap: {c:.0f} rows")
            peak = float(sub["overlap_rows_peak"].iloc[0])
            ax.axvline(peak, color="0.5", ls="-.", lw=0.8, label=f"F/B = {peak:.0f} rows")
            ax.set_xscale("log", base=2)
            ax.legend(frameon=False)
        ax.set_xlabel("query rows per block")
        ax.set_ylabel("exposed rotation per hop (ns)")
        return save(fig, out)


def _short_figure(df: pd.DataFrame, out: Path) -> list[Path]:
    sub = _sel(df, kind="short")
    phases = sorted(sub["phase"].dropna().unique()) if len(sub) else []
    with plt.rc_context(STYLE):
        n = max(1, len(phases))
        axes = plt.subplots(1, n, squeeze=False, figsize=(2.6 * n + 0.4, 2.1))[1][0]
        for ax, ph in zip(axes, phases, strict=False):
            g = sub[sub["phase"] == ph]
            top = g[g["context"] == g["context"].max()]
            maps = [m for m in ("A1", "A2", "A4", "B") if m in set(top["mapping"])]
            for i, tier in enumerate(sorted(top["tier"].unique())):
                t = top[top["tier"] == tier].set_index("mapping").reindex(maps)
                ax.bar(np.arange(len(maps)) + 0.27 * i, t["latency_ns"] / 1000, 0.27,
                       label=f"tier {int(tier)}")
            ax.set_xticks(np.arange(len(maps)) + 0.27, maps)
            ax.set_title(f"{ph}, {int(top['context'].iloc[0]) // 1024}K tokens")
            ax.set_ylabel("latency (us)")
        axes[0].legend(frameon=False)
        return save(axes[0].figure, out)


def figures(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    paths = _decode_figure(df, out / "gqa_decode_latency")
    paths += _occupancy_figure(df, out / "gqa_occupancy")
    paths += _dispatch_figure(df, out / "gqa_dispatch")
    paths += _ring_figure(df, out / "gqa_ring_overlap")
    paths += _short_figure(df, out / "gqa_short")
    return paths


# -- values --------------------------------------------------------------------------------
def _us(ns) -> Value:
    return num(float(ns) / 1000.0, 2)


def _point(v: dict, key: str, r) -> None:
    if r is None:
        for k in ("context", "lat", "bound", "effpct", "C", "P", "variant", "gemmpct", "users",
                  "dmapct", "cpupct", "mathpct", "arraybound", "arrayx", "ofarraypct"):
            v[f"{key}/{k}"] = MISSING
        return
    v[f"{key}/context"] = count(int(r["context"]))
    v[f"{key}/users"] = count(int(r["users"]))
    v[f"{key}/lat"] = _us(r["latency_ns"])
    v[f"{key}/bound"] = _us(r["bound_ns"])
    v[f"{key}/effpct"] = pct(100 * float(r["efficiency"]))
    v[f"{key}/C"] = count(int(r["C"])) if pd.notna(r["C"]) else MISSING
    v[f"{key}/P"] = count(int(r["P"])) if pd.notna(r["P"]) else MISSING
    v[f"{key}/variant"] = text(r["variant"]) if isinstance(r["variant"], str) else MISSING
    v[f"{key}/gemmpct"] = num(float(r["occ_gemm"]), 1)
    v[f"{key}/dmapct"] = num(float(r["occ_dma_read"]), 1)
    v[f"{key}/cpupct"] = num(float(r["occ_pe_cpu_dispatch"]), 1)
    v[f"{key}/mathpct"] = num(float(r["occ_math"]), 1)
    array = r.get("array_bound_ns")
    known = array is not None and pd.notna(array)
    v[f"{key}/arraybound"] = _us(array) if known else MISSING  # the array's least time
    v[f"{key}/arrayx"] = ratio(float(array) / float(r["bound_ns"])) if known else MISSING
    v[f"{key}/ofarraypct"] = pct(100 * float(array) / float(r["latency_ns"])) if known \
        else MISSING


def _first(df: pd.DataFrame):
    return df.iloc[0] if len(df) else None


def values(df: pd.DataFrame, ctx=None) -> dict[str, Value]:
    v: dict[str, Value] = {}
    for key in ("heads", "G", "d", "sips"):
        v[f"shape/{key}"] = count(int(df[key].max())) if key in df and len(df) else MISSING
    head = _sel(df, sweep="headline")
    _point(v, "dec", _first(head[(head["kind"] == "decode") & (head["users"] == 1)]))
    _point(v, "decmulti", _first(head[(head["kind"] == "decode") & (head["users"] > 1)]))
    _point(v, "pre", _first(head[(head["kind"] == "prefill") & (head["users"] == 1)]))
    _point(v, "premulti", _first(head[(head["kind"] == "prefill") & (head["users"] > 1)]))
    dec = _sel(df, kind="decode", sweep="sweep")
    v["decode/points"] = count(len(dec))
    v["decode/mincontext"] = count(int(dec["context"].min())) if len(dec) else MISSING
    v["decode/maxcontext"] = count(int(dec["context"].max())) if len(dec) else MISSING
    longd = dec[dec["context"] >= 32768] if len(dec) else dec
    v["long/context"] = count(32768)
    v["long/targetpct"] = pct(100 * TARGET)
    if len(longd):
        best = longd.loc[longd["efficiency"].idxmax()]
        v["long/besteffpct"] = pct(100 * float(best["efficiency"]))
        v["long/bestC"] = count(int(best["C"]))
        v["long/bestvariant"] = text(best["variant"])
        v["long/bestgemmpct"] = num(float(best["occ_gemm"]), 1)
        v["long/bestcontext"] = count(int(best["context"]))
        v["long/worsteffpct"] = pct(100 * float(longd["efficiency"].min()))
        v["long/points"] = count(len(longd))
        v["long/above85"] = count(int((longd["efficiency"] >= TARGET).sum()))
        top = dec[dec["context"] == dec["context"].max()]
        by = top.groupby("variant")["latency_ns"].mean()
        for var in VARIANTS:
            v[f"long/{var}lat"] = _us(by[var]) if var in by else MISSING
    else:
        for k in ("besteffpct", "bestC", "bestvariant", "bestgemmpct", "bestcontext",
                  "worsteffpct", "points", "above85", "opt1lat", "opt2lat", "opt3lat"):
            v[f"long/{k}"] = MISSING
    v.update(_ring_values(df))
    v.update(_prefill_values(df))
    v.update(_short_values(df))
    return v


def _ring_values(df: pd.DataFrame) -> dict[str, Value]:
    """The ring block-size sweep: overlap point and exposed rotation per hop."""
    v: dict[str, Value] = {}
    ring = _sel(df, sweep="ring").sort_values("q_rows")
    if len(ring):
        lo, hi = ring.iloc[0], ring.iloc[-1]
        v["ring/c"] = num(float(lo["overlap_rows"]), 0)
        v["ring/cpeak"] = num(float(lo["overlap_rows_peak"]), 1)
        v["ring/qlo"], v["ring/qhi"] = count(int(lo["q_rows"])), count(int(hi["q_rows"]))
        v["ring/exposedlo"] = num(lo["ring_wait_ns"] / max(1.0, lo["hops_per_pe"]), 0)
        v["ring/exposedhi"] = num(hi["ring_wait_ns"] / max(1.0, hi["hops_per_pe"]), 0)
        v["ring/hopns"] = num(float(lo["hop_ns"]), 0)
        v["ring/points"] = count(len(ring))
        per_hop = ring["ring_wait_ns"] / ring["hops_per_pe"].clip(lower=1)
        hidden = ring[per_hop < 0.01 * ring["hop_ns"]]  # under 1 % of a hop's link time
        v["ring/hiddenfrom"] = count(int(hidden["q_rows"].min())) if len(hidden) else MISSING
        below = ring[ring["q_rows"] < ring["overlap_rows"]]
        if len(below):
            b = below.iloc[-1]
            v["ring/qbelow"] = count(int(b["q_rows"]))
            v["ring/exposedbelow"] = num(b["ring_wait_ns"] / max(1.0, b["hops_per_pe"]), 0)
            v["ring/modelbelow"] = num(max(0.0, b["hop_ns"] - b["step_compute_ns"]), 0)
        else:
            for k in ("qbelow", "exposedbelow", "modelbelow"):
                v[f"ring/{k}"] = MISSING
    else:
        for k in ("c", "cpeak", "qlo", "qhi", "exposedlo", "exposedhi", "points", "hopns",
                  "hiddenfrom",
                  "qbelow", "exposedbelow", "modelbelow"):
            v[f"ring/{k}"] = MISSING
    return v


def _prefill_values(df: pd.DataFrame) -> dict[str, Value]:
    """Causal prefill over context: the longest and the shortest point."""
    v: dict[str, Value] = {}
    pre = _sel(df, kind="prefill", sweep="sweep")
    v["prefill/points"] = count(len(pre))
    if len(pre):
        longest = pre.sort_values("context").iloc[-1]
        v["prefill/maxcontext"] = count(int(longest["context"]))
        v["prefill/maxgemms"] = count(int(longest["gemm"]))
        v["prefill/maxeffpct"] = num(100 * float(longest["efficiency"]), 1)
        v["prefill/maxscratchmb"] = num(float(longest["peak_scratch_bytes"]) / 2**20, 2)
        first = pre.sort_values("context").iloc[0]
        v["prefill/mincontext"] = count(int(first["context"]))
        v["prefill/mineffpct"] = num(100 * float(first["efficiency"]), 1)
    else:
        for k in ("maxcontext", "maxgemms", "maxeffpct", "maxscratchmb", "mincontext",
                  "mineffpct"):
            v[f"prefill/{k}"] = MISSING
    return v


def _short_values(df: pd.DataFrame) -> dict[str, Value]:
    """Short-context decode: best and worst mapping x tier at the longest context."""
    v: dict[str, Value] = {}
    short = _sel(df, kind="short")
    v["short/points"] = count(len(short))
    dshort = short[short["phase"] == "decode"] if len(short) else short
    if len(dshort):
        top = dshort[dshort["context"] == dshort["context"].max()]
        best = top.loc[top["latency_ns"].idxmin()]
        worst = top.loc[top["latency_ns"].idxmax()]
        v["short/context"] = count(int(best["context"]))
        v["short/best"] = text(f"{best['mapping']} tier {int(best['tier'])}")
        v["short/bestlat"] = _us(best["latency_ns"])
        v["short/worst"] = text(f"{worst['mapping']} tier {int(worst['tier'])}")
        v["short/worstlat"] = _us(worst["latency_ns"])
    else:
        for k in ("context", "best", "bestlat", "worst", "worstlat"):
            v[f"short/{k}"] = MISSING
    return v


# -- paper table -----------------------------------------------------------------------------
def tables(df: pd.DataFrame) -> dict[str, str]:
    head = _sel(df, sweep="headline")
    rows = []
    for _, r in head.iterrows():
        rows.append([escape(r["panel"]), f"{int(r['context'])}", f"{int(r['pes'])}",
                     f"{r['latency_ns'] / 1000:.2f}", f"{r['bound_ns'] / 1000:.2f}",
                     f"{100 * r['efficiency']:.1f}", f"{int(r.get('gemm', 0))}",
                     f"{int(r.get('ipcq_copy', 0))}", f"{int(r.get('dma_read', 0))}",
                     f"{int(r.get('dma_write', 0))}"])
    header = ["Point", "Context", "PEs", "Latency (us)", "Bound (us)", "\\% of bound", "gemm",
              "ipcq\\_copy", "dma\\_read", "dma\\_write"]
    out = {"gqa_headline_table": HEADER + tabular("@{}lrrrrrrrrr@{}", header, rows)}
    short = _sel(df, kind="short")
    srows = []
    for phase in ("decode", "prefill"):
        g = short[short["phase"] == phase] if len(short) else short
        if not len(g):
            continue
        top = g[g["context"] == g["context"].max()]
        for _, r in top.sort_values(["mapping", "tier"]).iterrows():
            srows.append([escape(phase), f"{int(r['context'])}", escape(r["mapping"]),
                          f"{int(r['tier'])}", f"{r['short_wall_us']:.1f}",
                          f"{r['short_gemm_util']:.1f}", f"{int(r['short_math_count'])}",
                          f"{r['short_hbm_read_mb']:.1f}", f"{r['short_ipcq_kb']:.1f}",
                          f"{r['short_kv_cache_per_cube_mb']:.2f}"])
    sheader = ["Phase", "Context", "Mapping", "Tier", "Wall (us)", "GEMM util (\\%)",
               "MATH ops", "HBM read (MB)", "IPCQ (KB)", "KV/CUBE (MB)"]
    out["gqa_short_table"] = HEADER + tabular("@{}lrlrrrrrrr@{}", sheader, srows)
    return out
