"""Post-processing of ``fabric_accuracy``: table, figure, values, paper table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kernbench.analysis.latex import HEADER, escape, tabular
from kernbench.analysis.plots import STYLE, plt, save
from kernbench.analysis.values import MISSING, Value, count, errpct, latex, num, ratio, text
from kernbench.probes.fabric_accuracy import SCENARIOS

TARGET_MAKESPAN = 0.05  # relative makespan error the contended scenarios are held to

SUMMARY = (
    "{alone/points} lone-flow points ({alone/flows} probe flows x {alone/sizes}): largest "
    "deviation from the packet-level reference {alone/maxerrpct} %",
    "{contended/count} contended scenarios, {contended/within} with the makespan within "
    "{contended/targetpct} %; worst {contended/worst/name} at {contended/worst/makespanerrpct} %",
    "mean completion under sharing: up to {contended/maxmeanerrpct} % off (whole transfers are "
    "booked in turn, packets interleave)",
)


def frame(records: list[dict]) -> pd.DataFrame:
    rows = []
    for r in records:
        m, lab = r["metrics"], r["labels"]
        base = {"topology": r["topology"], "kind": lab["kind"], "name": lab["name"],
                "variant": r["variant"], "packet_bytes": r["config"]["variant"]["packet_bytes"],
                "reference_packets": r["op_counts"]["reference_packets"],
                "config_hash": r["provenance"]["config_hash"]}
        if lab["kind"] == "alone":
            for c in m["cases"]:
                rows.append({**base, "size_bytes": c["nbytes"], "size": c["size"], "flows": 1,
                             "shared_links": 0, "analytic_ns": c["analytic_ns"],
                             "reference_ns": c["reference_ns"], "rel_error": c["rel_error"],
                             "analytic_mean_ns": c["analytic_ns"],
                             "reference_mean_ns": c["reference_ns"],
                             "mean_rel_error": c["rel_error"]})
        else:
            rows.append({**base, "size_bytes": m["nbytes"], "size": _size(m["nbytes"]),
                         "flows": m["flows"], "shared_links": m["shared_links"],
                         "analytic_ns": m["latency_ns"], "reference_ns": m["reference_ns"],
                         "rel_error": m["makespan_rel_error"], "analytic_mean_ns": m["mean_ns"],
                         "reference_mean_ns": m["reference_mean_ns"],
                         "mean_rel_error": m["mean_rel_error"]})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["_k"] = df["kind"].map({"alone": 0, "contended": 1})
    df["_s"] = df["name"].map({n: i for i, n in enumerate(SCENARIOS)}).fillna(-1)
    df = df.sort_values(["topology", "_k", "_s", "name", "size_bytes", "variant"],
                        kind="mergesort").drop(columns=["_k", "_s"])
    return df.reset_index(drop=True)


def _size(nbytes: int) -> str:
    from kernbench.units import format_size

    return format_size(int(nbytes))


def _first_topology(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["topology"] == df["topology"].iloc[0]) & (df["variant"] == df["variant"].iloc[0])]


def figures(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Left: every lone flow, analytic against reference latency. Right: each contended
    scenario's makespan and mean-completion error, with the makespan target."""
    sub = _first_topology(df)
    alone = sub[sub["kind"] == "alone"]
    cont = sub[sub["kind"] == "contended"]
    with plt.rc_context(STYLE):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7.0, 2.6),
                                       gridspec_kw={"width_ratios": [1, 1.3], "wspace": 0.35})
        if len(alone):
            lo = min(alone["reference_ns"].min(), alone["analytic_ns"].min()) / 1.3
            hi = max(alone["reference_ns"].max(), alone["analytic_ns"].max()) * 1.3
            ax1.plot([lo, hi], [lo, hi], color="k", linewidth=0.6, label="analytic = reference")
            for i, (_, grp) in enumerate(alone.groupby("size_bytes", sort=True)):
                ax1.scatter(grp["reference_ns"], grp["analytic_ns"], s=8, color=f"C{i % 10}",
                            label=grp["size"].iloc[0], zorder=3)
            ax1.set_xscale("log")
            ax1.set_yscale("log")
            ax1.legend(frameon=False, fontsize=5, loc="upper left")
        ax1.set_xlabel("packet-level reference (ns)")
        ax1.set_ylabel("analytic engine (ns)")
        ax1.set_title("lone flows (every probe flow)")
        names = list(cont["name"])
        x = range(len(names))
        ax2.bar([i - 0.2 for i in x], 100 * cont["rel_error"], width=0.4, color="C0",
                label="makespan")
        ax2.bar([i + 0.2 for i in x], 100 * cont["mean_rel_error"], width=0.4, color="C1",
                label="mean completion")
        ax2.axhline(100 * TARGET_MAKESPAN, color="k", linewidth=0.6, linestyle="--",
                    label=f"{100 * TARGET_MAKESPAN:g} % makespan target")
        ax2.set_xticks(list(x))
        ax2.set_xticklabels(names, rotation=20, ha="right", fontsize=6)
        ax2.set_ylabel("error vs reference (%)")
        ax2.set_title("contended scenarios")
        ax2.legend(frameon=False, fontsize=5)
        ax2.grid(True, axis="y", linewidth=0.3, alpha=0.5)
        return save(fig, Path(out_dir) / "fabric_accuracy")


def values(df: pd.DataFrame, ctx=None) -> dict[str, Value]:
    sub = _first_topology(df)
    alone = sub[sub["kind"] == "alone"]
    cont = sub[sub["kind"] == "contended"]
    v: dict[str, Value] = {
        "topology": text(sub["topology"].iloc[0]),
        "packetbytes": count(int(sub["packet_bytes"].iloc[0])),
        "alone/points": count(len(alone)),
        "alone/flows": count(alone["name"].nunique()),
        "alone/sizes": text(", ".join(alone.sort_values("size_bytes")["size"].unique()))
        if len(alone) else MISSING,
        "alone/maxerrpct": errpct(float(alone["rel_error"].max())) if len(alone) else MISSING,
        "alone/packets": count(int(alone.drop_duplicates("name")["reference_packets"].sum()))
        if len(alone) else MISSING,
        "contended/count": count(len(cont)),
        "contended/targetpct": num(100 * TARGET_MAKESPAN, 0),
        "contended/within": count(int((cont["rel_error"] <= TARGET_MAKESPAN).sum())),
        "contended/maxmeanerrpct": errpct(float(cont["mean_rel_error"].max()))
        if len(cont) else MISSING,
        "contended/bytes": text(cont["size"].iloc[0]) if len(cont) else MISSING,
    }
    worst = cont.sort_values(["rel_error", "name"], kind="mergesort").iloc[-1] if len(cont) \
        else None
    v["contended/worst/name"] = text(worst["name"]) if worst is not None else MISSING
    v["contended/worst/makespanerrpct"] = (errpct(float(worst["rel_error"]))
                                           if worst is not None else MISSING)
    for name in SCENARIOS:
        row = cont[cont["name"] == name]
        p = f"scenario/{name}/"
        if row.empty:
            for key in ("flows", "sharedlinks", "makespanerrpct", "meanerrpct", "analyticns",
                        "referencens", "analyticmeanns", "referencemeanns", "over"):
                v[p + key] = MISSING
            continue
        r = row.iloc[0]
        v.update({
            p + "flows": count(int(r["flows"])),
            p + "sharedlinks": count(int(r["shared_links"])),
            p + "makespanerrpct": errpct(float(r["rel_error"])),
            p + "meanerrpct": errpct(float(r["mean_rel_error"])),
            p + "analyticns": num(float(r["analytic_ns"]), 1),
            p + "referencens": num(float(r["reference_ns"]), 1),
            p + "analyticmeanns": num(float(r["analytic_mean_ns"]), 1),
            p + "referencemeanns": num(float(r["reference_mean_ns"]), 1),
            p + "over": ratio(float(r["analytic_ns"] / r["reference_ns"])),
        })
    return v


def tables(df: pd.DataFrame) -> dict[str, str]:
    cont = _first_topology(df)
    cont = cont[cont["kind"] == "contended"]
    rows = [[escape(r["name"]), latex(count(int(r["flows"]))), latex(count(int(r["shared_links"]))),
             latex(num(float(r["analytic_ns"]), 1)), latex(num(float(r["reference_ns"]), 1)),
             latex(errpct(float(r["rel_error"]))), latex(errpct(float(r["mean_rel_error"])))]
            for _, r in cont.iterrows()]
    header = ["Scenario", "Flows", "Shared links", "Analytic (ns)", "Reference (ns)",
              r"Makespan err.\,\%", r"Mean err.\,\%"]
    return {"fabric_accuracy_table": HEADER + tabular("@{}lrrrrrr@{}", header, rows)}
