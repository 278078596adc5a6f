"""The ``llm`` study's numbers for the paper, the summary and the site.

Every claim the text makes is picked here from the table: the headline decode
point (the largest model, the context nearest 32K tokens, the smallest batch),
the most tokens per second per system within the TPOT target, the all-reduces'
share of a layer across context, and per phase the what-if parameter that moves
the step most. A quantity the table cannot give (the smoke run has few points)
is missing and prints as a dash.
"""

from __future__ import annotations

import math

import pandas as pd

from kernbench.analysis.values import MISSING, Value, count, g, num, pct, sig, text, us
from kernbench.experiments.llm.post_table import (
    COMPONENTS,
    defaults,
    gib,
    label,
    simulated,
    whatif_rows,
)

HEADLINE_CONTEXT = 32768  # the question the study answers: tokens/s at 32K context
DISPLAY = {"norms": "the RMSNorms", "qkv": "the QKV projection", "rope": "RoPE",
           "attention": "attention",
           "o_proj": "the O projection", "allreduce_attn": "the all-reduce after attention",
           "ffn": "the FFN", "allreduce_ffn": "the all-reduce after the FFN"}
PHASE_TIME = {"decode": "tpot_ms", "prefill": "ttft_ms"}


def _missing(v: dict, prefix: str, keys) -> None:
    for k in keys:
        v[f"{prefix}/{k}"] = MISSING


def _largest(d: pd.DataFrame) -> pd.DataFrame:
    return d[d["weight_bytes"] == d["weight_bytes"].max()] if len(d) else d


def headline(df: pd.DataFrame):
    """The largest model's decode point nearest 32K tokens, at its smallest batch."""
    big = _largest(simulated(df, "decode"))
    if not len(big):
        return None
    gap = (big["context"] - HEADLINE_CONTEXT).abs()
    near = big[gap == gap.min()]
    near = near[near["context"] == near["context"].min()]
    return near.sort_values("batch", kind="mergesort").iloc[0]


HEAD_KEYS = ("model", "topology", "batch", "context", "tpotms", "tpsuser", "tpssystem",
             "analyticms", "errpct", "layerus", "top", "toppct", "attnpct", "normspct",
             "commpct", "exposedpct", "tp", "pes")


def _headline_values(v: dict, r) -> None:
    if r is None:
        _missing(v, "dec", HEAD_KEYS)
        return
    v["dec/model"], v["dec/topology"] = text(r["model"]), text(r["topology"])
    v["dec/batch"], v["dec/context"] = count(int(r["batch"])), count(int(r["context"]))
    v["dec/tp"], v["dec/pes"] = count(int(r["tp"])), count(int(r["pes"]))
    v["dec/tpotms"] = sig(float(r["tpot_ms"]), 3)
    v["dec/tpsuser"] = num(float(r["tokens_per_s_user"]), 1)
    v["dec/tpssystem"] = num(float(r["tokens_per_s_system"]), 1)
    v["dec/analyticms"] = sig(float(r["analytic_step_ns"]) / 1e6, 3)
    v["dec/errpct"] = num(100 * float(r["analytic_error"]), 1)
    v["dec/layerus"] = us(float(r["layer_ns"]))
    shares = {c: float(r[f"layer_{c}_ns"]) / float(r["layer_ns"]) for c in COMPONENTS
              if f"layer_{c}_ns" in r and pd.notna(r[f"layer_{c}_ns"])}
    top = max(shares, key=lambda c: (shares[c], c))
    v["dec/top"], v["dec/toppct"] = text(DISPLAY.get(top, top)), pct(100 * shares[top])
    v["dec/attnpct"] = pct(100 * shares.get("attention", math.nan))
    v["dec/normspct"] = pct(100 * shares.get("norms", math.nan))
    v["dec/commpct"] = pct(100 * float(r["comm_share"]))
    v["dec/exposedpct"] = pct(100 * float(r["exposed_share"]))


def _best_values(v: dict, df: pd.DataFrame) -> None:
    """The most tokens/s per system of the largest model within the TPOT target."""
    big = _largest(simulated(df, "decode"))
    target = float(df["tpot_target_ms"].iloc[0]) if len(df) else math.nan
    v["target"] = g(target) if not math.isnan(target) else MISSING
    ok = big[big["tpot_ms"] <= target] if len(big) and not math.isnan(target) else big.iloc[0:0]
    keys = ("model", "batch", "context", "tpssystem", "tpsuser", "tpotms", "within", "of")
    if not len(ok):
        _missing(v, "best", keys)
        return
    r = ok.sort_values(["tokens_per_s_system", "context"], ascending=[False, True],
                       kind="mergesort").iloc[0]
    v["best/model"], v["best/batch"] = text(r["model"]), count(int(r["batch"]))
    v["best/context"] = count(int(r["context"]))
    v["best/tpssystem"] = num(float(r["tokens_per_s_system"]), 1)
    v["best/tpsuser"] = num(float(r["tokens_per_s_user"]), 1)
    v["best/tpotms"] = sig(float(r["tpot_ms"]), 3)
    v["best/within"], v["best/of"] = count(len(ok)), count(len(big))


def _comm_values(v: dict, df: pd.DataFrame, head) -> None:
    """The all-reduces' share of a layer from the shortest to the longest context, for
    the headline's model and batch."""
    keys = ("lo", "hi", "locontext", "hicontext", "exposedlo", "exposedhi", "points", "trend")
    if head is None:
        _missing(v, "comm", keys)
        return
    d = simulated(df, "decode")
    d = d[(d["model"] == head["model"]) & (d["batch"] == head["batch"])
          & (d["topology"] == head["topology"])].sort_values("context", kind="mergesort")
    lo, hi = d.iloc[0], d.iloc[-1]
    v["comm/lo"], v["comm/hi"] = pct(100 * lo["comm_share"]), pct(100 * hi["comm_share"])
    v["comm/locontext"], v["comm/hicontext"] = count(int(lo["context"])), \
        count(int(hi["context"]))
    v["comm/exposedlo"] = pct(100 * lo["exposed_share"])
    v["comm/exposedhi"] = pct(100 * hi["exposed_share"])
    v["comm/points"] = count(len(d))
    step = float(hi["comm_share"]) - float(lo["comm_share"])
    v["comm/trend"] = text("barely moves, going" if abs(step) < 0.005 or len(d) < 2
                           else "rises" if step > 0 else "falls")


def _prefill_values(v: dict, df: pd.DataFrame) -> None:
    keys = ("model", "context", "ttftms", "tpssystem", "mincontext", "minttftms", "points")
    big = _largest(simulated(df, "prefill")).sort_values(["context", "batch"],
                                                         kind="mergesort")
    if not len(big):
        _missing(v, "pre", keys)
        return
    lo, hi = big.iloc[0], big.iloc[-1]
    v["pre/model"], v["pre/context"] = text(hi["model"]), count(int(hi["context"]))
    v["pre/ttftms"] = sig(float(hi["ttft_ms"]), 3)
    v["pre/tpssystem"] = num(float(hi["tokens_per_s_system"]), 1)
    v["pre/mincontext"], v["pre/minttftms"] = count(int(lo["context"])), \
        sig(float(lo["ttft_ms"]), 3)
    v["pre/points"] = count(len(big))


def _describe(ctx, parameter: str) -> Value:
    params = ((getattr(ctx, "config", None) or {}).get("whatif") or {}).get("parameters", {})
    return text(params.get(parameter, {}).get("description", parameter))


WI_KEYS = ("point", "basems", "params", "settings")
RANKED = {"top": ("param", "desc", "factor", "pct"), "up": ("param", "desc", "factor", "pct"),
          "down": ("param", "desc", "factor", "pct"), "least": ("param", "desc", "pct")}


def _ranked(v: dict, key: str, r, ctx, pct_value: float) -> None:
    v[f"{key}/param"], v[f"{key}/desc"] = text(r["parameter"]), _describe(ctx, r["parameter"])
    if "factor" in RANKED[key.rsplit("/", 1)[1]]:
        v[f"{key}/factor"] = num(float(r["factor"]), 1 if float(r["factor"]) % 1 else 0)
    v[f"{key}/pct"] = num(pct_value, 1)


def _whatif_values(v: dict, df: pd.DataFrame, phase: str, ctx) -> None:
    """The what-if parameters of one phase's first what-if point, ranked by how much
    they move its step: most either way (``top``), the best speed-up from scaling up
    (``up``), the worst slow-down from scaling down (``down``), the least (``least``)."""
    pre = f"wi/{phase}"
    w = whatif_rows(df, phase)
    if len(w):
        w = w[w["point"] == sorted(w["point"])[0]]
    _missing(v, pre, WI_KEYS)
    for rank, keys in RANKED.items():
        _missing(v, f"{pre}/{rank}", keys)
    if not len(w):
        return
    first = w.iloc[0]
    v[f"{pre}/point"], v[f"{pre}/basems"] = text(label(first)), \
        sig(float(first["base_step_ns"]) / 1e6, 3)
    v[f"{pre}/params"], v[f"{pre}/settings"] = count(w["parameter"].nunique()), count(len(w))
    w = w.assign(size=w["change"].abs()).sort_values(["parameter", "factor"], kind="mergesort")
    top = w.loc[w["size"].idxmax()]
    _ranked(v, f"{pre}/top", top, ctx, 100 * float(top["change"]))
    up, down = w[w["factor"] > 1], w[w["factor"] < 1]
    if len(up):
        r = up.loc[up["change"].idxmin()]
        _ranked(v, f"{pre}/up", r, ctx, -100 * float(r["change"]))
    if len(down):
        r = down.loc[down["change"].idxmax()]
        _ranked(v, f"{pre}/down", r, ctx, 100 * float(r["change"]))
    weight = w.groupby("parameter", sort=True)["size"].max()
    least = w[w["parameter"] == weight.idxmin()].iloc[0]
    _ranked(v, f"{pre}/least", least, ctx, 100 * float(weight.min()))


def _overview(v: dict, df: pd.DataFrame) -> None:
    d = defaults(df)
    fits = d[d["fits"].astype(bool)] if len(d) else d
    v["points"], v["simulated"] = count(len(d)), count(len(fits))
    v["notfit"] = count(len(d) - len(fits))
    v["models"] = text(", ".join(dict.fromkeys(d["model"]))) if len(d) else MISSING
    v["whatifs"] = count(int((df["setting"] != "default").sum())) if len(df) else count(0)
    v["layers"] = count(int(fits["simulated_layers"].max())) if len(fits) else MISSING
    spread = fits["layer_spread"].dropna() if len(fits) else fits
    v["spreadmaxpct"] = num(100 * float(spread.max()), 3) if len(spread) else MISSING
    v["errmin"] = num(100 * float(fits["analytic_error"].min()), 1) if len(fits) else MISSING
    v["errmax"] = num(100 * float(fits["analytic_error"].max()), 1) if len(fits) else MISSING
    nf = d[~d["fits"].astype(bool)] if len(d) else d
    if len(nf):
        r = nf.loc[nf["bytes_needed"].astype(float).idxmax()]
        v["nf/model"], v["nf/batch"] = text(r["model"]), count(int(r["batch"]))
        v["nf/context"], v["nf/topology"] = count(int(r["context"])), text(r["topology"])
        v["nf/needgib"], v["nf/havegib"] = gib(r["bytes_needed"]), gib(r["bytes_available"])
    else:
        _missing(v, "nf", ("model", "batch", "context", "topology", "needgib", "havegib"))


def values(df: pd.DataFrame, ctx=None) -> dict[str, Value]:
    v: dict[str, Value] = {}
    if not len(df):
        df = pd.DataFrame(columns=["setting", "phase", "fits", "model", "tpot_target_ms"])
    _overview(v, df)
    head = headline(df) if len(df) else None
    _headline_values(v, head)
    _best_values(v, df)
    _comm_values(v, df, head)
    _prefill_values(v, df)
    for phase in PHASE_TIME:
        _whatif_values(v, df, phase, ctx)
    return v
