"""The ``moe`` study's numbers for the paper, the summary and the site.

Every claim of the text is picked here from the table, for the study's main
model (the one with most layer points): expert against tensor parallelism at
the fewest and most tokens in flight (uniform routing), the layouts' growth
from uniform to the strongest skew, the all-to-alls' share of the expert-parallel
FFN, the dispersion, the capacity factor's trade-off, the whole steps, the
fine-grained model, and the all-to-all algorithms at the smallest and largest
size. A quantity the table cannot give (the smoke run has few points) is
missing and prints as a dash.
"""

from __future__ import annotations

import math

import pandas as pd

from kernbench.analysis.values import MISSING, count, errpct, g, num, pct, ratio, text, us
from kernbench.experiments.moe.post_table import layers, main_model, of_kind, steps, uncapped

LAYOUTS = ("tp", "ep")


def _pick(d: pd.DataFrame, **eq) -> pd.Series | None:
    for k, v in eq.items():
        if not len(d):
            return None
        d = d[d[k].isna()] if v is None else d[d[k] == v]
    return d.iloc[0] if len(d) else None


def _ns(r) -> float | None:
    return None if r is None else float(r["latency_ns"])


def _div(a, b):
    return None if a is None or b is None or not b else a / b


def _sweep_values(v: dict, d: pd.DataFrame) -> None:
    """Tokens in flight at uniform routing: each layout at the fewest and most tokens."""
    flat = uncapped(d[d["skew"] == 0]) if len(d) else d
    tokens = sorted(flat["tokens"].unique()) if len(flat) else []
    for key, t in (("lo", tokens[0] if tokens else None), ("hi", tokens[-1] if tokens else None)):
        rows = {p: _pick(flat, tokens=t, parallel=p) for p in LAYOUTS}
        v[f"{key}/tokens"] = count(t)
        for p in LAYOUTS:
            v[f"{key}/{p}"] = us(_ns(rows[p]))
        v[f"{key}/ratio"] = ratio(_div(_ns(rows["ep"]), _ns(rows["tp"])))
        ep = rows["ep"]
        moved = None if ep is None else float(ep["part_dispatch_ns"] + ep["part_combine_ns"])
        v[f"{key}/a2apct"] = pct(None if ep is None else 100 * moved / float(ep["ffn_ns"]))
        v[f"{key}/disppct"] = pct(None if ep is None else 100 * float(ep["dispersion"]))
        # ranks whose experts have tokens under EP (every rank works under TP): the ratio
        # of weight bytes per working rank, which bounds EP/TP when weights dominate
        active = None if ep is None else min(int(t) * int(ep["top_k"]), int(ep["experts"])) \
            * int(ep["expert_ranks"])
        v[f"{key}/activeranks"] = count(active)
        v[f"{key}/weightratio"] = ratio(None if ep is None else
                                        int(ep["pes"]) / active)
    pairs = [(t, _ns(_pick(flat, tokens=t, parallel="ep")),
              _ns(_pick(flat, tokens=t, parallel="tp"))) for t in tokens]
    pairs = [(t, ep, tp) for t, ep, tp in pairs if ep is not None and tp is not None]
    wins = [t for t, ep, tp in pairs if ep < tp]
    v["epwins"] = text(", ".join(str(int(t)) for t in wins) if wins else "none")
    # past the fewest tokens: how close the layouts come, and their mean ratio overall
    rest = [abs(ep / tp - 1) for _, ep, tp in pairs[1:]]
    v["closepct"] = pct(100 * max(rest) if rest else None)
    v["second/tokens"] = count(int(pairs[1][0]) if len(pairs) > 1 else None)
    mean = math.exp(sum(math.log(ep / tp) for _, ep, tp in pairs) / len(pairs)) if pairs \
        else None
    v["verdict/geomean"] = ratio(mean)
    v["verdict/coarse"] = MISSING if mean is None else text(
        "expert parallelism" if mean < 1 else "tensor parallelism")


def _skew_values(v: dict, d: pd.DataFrame) -> None:
    """The skew sweep: each layout's time at the strongest skew over uniform."""
    d = uncapped(d)
    skews = sorted(d["skew"].unique()) if len(d) else []
    at = sorted(d[d["skew"] == skews[-1]]["tokens"].unique()) if len(skews) > 1 else []
    t, s = (at[0], skews[-1]) if at else (None, None)
    v["skew/tokens"], v["skew/max"] = count(t), g(s)
    for p in LAYOUTS:
        lo, hi = _pick(d, tokens=t, parallel=p, skew=0.0), _pick(d, tokens=t, parallel=p, skew=s)
        v[f"skew/{p}grow"] = ratio(_div(_ns(hi), _ns(lo)))
        v[f"skew/{p}"] = us(_ns(hi))
    hi = _pick(d, tokens=t, parallel="ep", skew=s)
    v["skew/imbalance"] = ratio(None if hi is None else float(hi["imbalance"]))
    v["skew/ratio"] = ratio(_div(_ns(hi), _ns(_pick(d, tokens=t, parallel="tp", skew=s))))


def _capacity_values(v: dict, d: pd.DataFrame) -> None:
    """The smallest capacity factor against the same point uncapped, per layout."""
    capped = d[d["capacity_factor"].notna()] if len(d) else d
    r = capped.sort_values("capacity_factor", kind="mergesort").iloc[0] if len(capped) else None
    v["cap/factor"] = g(None if r is None else float(r["capacity_factor"]))
    v["cap/skew"] = g(None if r is None else float(r["skew"]))
    v["cap/tokens"] = count(None if r is None else int(r["tokens"]))
    v["cap/droppct"] = pct(None if r is None else 100 * float(r["drop_share"]))
    for p in LAYOUTS:
        if r is None:
            v[f"cap/{p}savepct"] = MISSING
            continue
        c = _pick(capped, tokens=r["tokens"], skew=r["skew"], parallel=p,
                  capacity_factor=r["capacity_factor"])
        free = _pick(uncapped(d), tokens=r["tokens"], skew=r["skew"], parallel=p)
        saved = _div(_ns(free), _ns(c))
        v[f"cap/{p}savepct"] = pct(None if saved is None else 100 * (1 - 1 / saved))


def _step_values(v: dict, df: pd.DataFrame) -> None:
    """The first decode step's TPOT and the first prefill's TTFT, in each layout, with
    the FFN half's share of a layer."""
    for phase, key, metric, name in (("decode", "step", "tpot_ms", "tpot"),
                                     ("prefill", "pre", "ttft_ms", "ttft")):
        d = steps(df, phase)
        first = d.iloc[0] if len(d) else None
        v[f"{key}/model"] = text(None if first is None else first["model"])
        v[f"{key}/batch"] = count(None if first is None else int(first["batch"]))
        v[f"{key}/context"] = count(None if first is None else int(first["context"]))
        v[f"{key}/C"] = count(None if first is None else int(first["C"]))
        for p in LAYOUTS:
            r = _pick(d, parallel=p, context=None if first is None else first["context"])
            v[f"{key}/{p}{name}"] = num(None if r is None else float(r[metric]), 3)
            v[f"{key}/{p}ffnpct"] = pct(None if r is None else
                                        100 * float(r["ffn_ns"]) / float(r["layer_total_ns"]))


def _fine_values(v: dict, df: pd.DataFrame, main: str | None) -> None:
    """Another model's points (the fine-grained one), at its first tokens and skew 0."""
    d = uncapped(layers(df))
    other = sorted(set(d["model"]) - {main}) if len(d) else []
    d = d[d["model"] == other[0]] if other else d.iloc[0:0]
    t = sorted(d["tokens"].unique())[0] if len(d) else None
    rows = {p: _pick(d, tokens=t, parallel=p, skew=0.0) for p in LAYOUTS}
    v["fine/model"] = text(other[0] if other else None)
    v["fine/tokens"] = count(t)
    v["fine/experts"] = count(None if rows["ep"] is None else int(rows["ep"]["experts"]))
    for p in LAYOUTS:
        v[f"fine/{p}"] = us(_ns(rows[p]))
    v["fine/ratio"] = ratio(_div(_ns(rows["tp"]), _ns(rows["ep"])))
    tp, ep = _ns(rows["tp"]), _ns(rows["ep"])
    v["verdict/fine"] = MISSING if tp is None or ep is None else text(
        "expert parallelism" if ep < tp else "tensor parallelism")


def _placement_values(v: dict, df: pd.DataFrame, main: str | None) -> None:
    """Strided against block placement, expert-parallel, at the strided points' first
    tokens and skew."""
    strided = uncapped(layers(df, main, "strided"))
    r = strided.iloc[0] if len(strided) else None
    blocks = None if r is None else _pick(uncapped(layers(df, main)), tokens=r["tokens"],
                                          parallel="ep", skew=r["skew"])
    v["place/tokens"] = count(None if r is None else int(r["tokens"]))
    v["place/skew"] = g(None if r is None else float(r["skew"]))
    v["place/strided"] = us(_ns(r))
    v["place/blocks"] = us(_ns(blocks))
    v["place/ratio"] = ratio(_div(_ns(r), _ns(blocks)))
    for name, row in (("strided", r), ("blocks", blocks)):
        v[f"place/{name}disppct"] = pct(None if row is None else 100 * float(row["dispersion"]))
        moved = None if row is None else float(row["part_dispatch_ns"]
                                               + row["part_combine_ns"])
        v[f"place/{name}a2a"] = us(moved)


def _alltoall_values(v: dict, df: pd.DataFrame) -> None:
    """Per size end: which algorithm is faster on how many topologies, and by how much
    on the one where the gap is largest."""
    d = of_kind(df, "alltoall")
    sizes = sorted(d["bytes"].unique()) if len(d) else []
    v["a2a/topologies"] = count(d["topology"].nunique() if len(d) else None)
    v["a2a/maxerrpct"] = errpct(float(d["rel_error"].abs().max()) if len(d) else None)
    for key, size in (("lo", sizes[0] if sizes else None), ("hi", sizes[-1] if sizes else None)):
        at = d[d["bytes"] == size] if size is not None else d.iloc[0:0]
        v[f"a2a/{key}/size"] = text(at["size"].iloc[0] if len(at) else None)
        best = {}
        for topo, grp in at.groupby("topology"):
            grp = grp.sort_values(["latency_ns", "algorithm"], kind="mergesort")
            best[topo] = (grp.iloc[0]["algorithm"], float(grp.iloc[-1]["latency_ns"])
                          / float(grp.iloc[0]["latency_ns"]))
        names = sorted({a for a, _ in best.values()})
        v[f"a2a/{key}/best"] = text(" and ".join(names) if names else None)
        v[f"a2a/{key}/maxgap"] = ratio(max((r for _, r in best.values()), default=None))


def values(df: pd.DataFrame, ctx=None) -> dict:
    """Every key the section, abstract and conclusion cite (prefix ``moe/``)."""
    main = main_model(df)
    d = layers(df, main)
    any_layer = d.iloc[0] if len(d) else None
    ep = d[d["parallel"] == "ep"] if len(d) else d
    v = {"points": count(len(df)), "model": text(main),
         "experts": count(None if any_layer is None else int(any_layer["experts"])),
         "topk": count(None if any_layer is None else int(any_layer["top_k"])),
         "topology": text(None if any_layer is None else any_layer["topology"]),
         "ranks": count(None if any_layer is None else int(any_layer["pes"])),
         "groupranks": count(int(ep.iloc[0]["expert_ranks"]) if len(ep) else None),
         "maxerrpct": errpct(float(d["rel_error"].abs().max()) if len(d) else None)}
    _sweep_values(v, d)
    _skew_values(v, d)
    _capacity_values(v, d)
    _step_values(v, df)
    _fine_values(v, df, main)
    _placement_values(v, df, main)
    _alltoall_values(v, df)
    return v
