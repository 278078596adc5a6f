"""The ``gemm`` headline values (``\\kbv{gemm/...}`` in the paper); a quantity the
table cannot give is a missing value."""

from __future__ import annotations

import pandas as pd

from kernbench.analysis.values import MISSING, Value, count, num, pct, ratio, text, us
from kernbench.components.builtin.pe_cost_model import PeCostModel
from kernbench.experiments.gemm.selections import (
    gemm_headline,
    kernel_row,
    reference_topology,
    value_range,
)
from kernbench.experiments.gemm.table import (
    BOUNDS,
    OTHER_KERNELS,
    REFERENCE_KERNEL,
    held_b,
    short_name,
)


def _opt(fmt, value) -> Value:
    return MISSING if value is None else fmt(value)


def _ref_values(df: pd.DataFrame, tag: str, ref: pd.Series | None, h: dict) -> dict[str, Value]:
    """Values of one reference shape under ``<tag>/...``."""
    keys = ("shape", "group", "m", "k", "n", "roof", "lat", "errpct", "util", "roofutil",
            "computeus", "memoryus", "excess", "gemmshare", "dmashare", "cpushare",
            "primlat", "preflat", "primx", "prefx", "primcycles", "primcommands",
            "primcpushare", "primdmashare", "primgemmshare", "prefdmashare", "prefcpushare",
            "cubelat", "cubex", "cubeerrpct", "cubeutil", "cuberoof", "cuben", "overroof",
            "steps", "compstepns", "primstepns", "prefstepns", "primdispstepns",
            "primdmastepns", "primcyclespercmd")
    v = {f"{tag}/{k}": MISSING for k in keys}
    if ref is None:
        return v
    p = f"{tag}/"
    lat = ref["latency_ns"]
    v.update({
        p + "shape": text(ref["shape"]), p + "group": text(ref["group"] or None),
        p + "m": count(int(ref["m"])), p + "k": count(int(ref["k"])),
        p + "n": count(int(ref["n"])),
        p + "roof": us(ref["predicted_ns"]), p + "lat": us(lat),
        p + "errpct": pct(100.0 * ref["rel_error"]), p + "util": pct(ref["mac_util_pct"]),
        p + "roofutil": pct(ref["roofline_util_pct"]),
        p + "computeus": us(ref["compute_ns"]), p + "memoryus": us(ref["memory_ns"]),
        p + "excess": us(lat - ref["predicted_ns"]),
        p + "gemmshare": pct(100.0 * ref["busy_gemm_ns"] / lat),
        p + "dmashare": pct(100.0 * ref["busy_dma_read_ns"] / lat),
        p + "cpushare": pct(100.0 * ref["busy_pe_cpu_ns"] / lat),
        p + "overroof": ratio(lat / ref["predicted_ns"]),
    })
    steps = int(ref["supertiles_per_pe"])  # the kernels step through the scheduler's supertiles
    v[p + "steps"] = count(steps)
    v[p + "compstepns"] = num(lat / steps, 1)
    for kern, short in ((k, short_name(k)) for k in OTHER_KERNELS):
        r = kernel_row(df, ref["shape"], kern, 1)
        if r is None:
            continue
        rl = r["latency_ns"]
        v[p + f"{short}lat"] = us(rl)
        v[p + f"{short}x"] = ratio(rl / lat)
        v[p + f"{short}cpushare"] = pct(100.0 * r["busy_pe_cpu_ns"] / rl)
        v[p + f"{short}dmashare"] = pct(100.0 * r["busy_dma_read_ns"] / rl)
        v[p + f"{short}stepns"] = num(rl / steps, 0)
        if kern == "primitive":
            v[p + "primdispstepns"] = num(r["busy_pe_cpu_ns"] / steps, 0)
            v[p + "primdmastepns"] = num(r["busy_dma_read_ns"] / steps, 0)
            v[p + "primcyclespercmd"] = num(r["dispatch_cycles_per_pe"] / r["commands_per_pe"], 1)
            v[p + "primcycles"] = num(r["dispatch_cycles_per_pe"], 0)
            v[p + "primcommands"] = num(r["commands_per_pe"], 0)
            v[p + "primgemmshare"] = pct(100.0 * r["busy_gemm_ns"] / rl)
    cube = h["cube"]
    c = cube[cube["shape"] == ref["shape"]]
    if len(c):
        c = c.iloc[0]
        v.update({p + "cubelat": us(c["latency_ns_cube"]), p + "cubex": ratio(c["speedup"]),
                  p + "cubeerrpct": pct(100.0 * c["rel_error"]),
                  p + "cubeutil": pct(c["mac_util_pct"]), p + "cuberoof": us(c["predicted_ns"]),
                  p + "cuben": num(int(ref["n"]) // int(c["pes"]), 0)})
    return v


def _range_values(key: str, rng: tuple[float | None, float | None], fmt) -> dict[str, Value]:
    lo, hi = rng
    return {f"{key}min": _opt(fmt, lo), f"{key}max": _opt(fmt, hi)}


def values(df: pd.DataFrame, ctx=None) -> dict[str, Value]:
    """The headline quantities (``\\kbv{gemm/...}`` in the paper).

    ``ctx.topology(id)`` gives the topology of the table's reference rows, whose
    dispatch cost model turns the composite's measured dispatch cycles into its
    descriptor size in bytes.
    """
    mapping = _mapping_values(df)
    df = held_b(df)
    h = gemm_headline(df)
    cost_model = None
    if ctx is not None and len(df):
        cost_model = PeCostModel.from_spec(ctx.topology(reference_topology(df)).spec)
    v = {
        "records": count(h["records"]),
        "shapes": count(h["shapes"]),
        "variants": count(h["variants"]),
        "topology": text(h["topology"]),
        "groups": text(", ".join(h["groups"]) or None),
        "cubepes": _opt(count, h["cube_pes"]),
    }
    for b in BOUNDS:
        v[f"comp/{b}/count"] = count(h[f"{b}_count"])
        v.update(_range_values(f"comp/{b}/errpct", h[f"{b}_err"], pct))
        v.update(_range_values(f"comp/{b}/util", h[f"{b}_util"], pct))
        v.update(_range_values(f"comp/{b}/excess", h[f"{b}_excess"], us))
    v.update(_range_values("comp/excess", h["comp_excess"], us))
    v.update(_range_values("comp/compute/tail", h["compute_tail"], us))
    v.update(_range_values("comp/compute/arrayoverpct", h["compute_arrayover"], pct))
    v.update(_range_values("comp/dispatchns", h["comp_dispatch_ns"], lambda x: num(x, 0)))
    best = h["comp_util_best"]
    v["comp/bestutil"] = _opt(lambda r: pct(r["mac_util_pct"]), best)
    v["comp/bestutilshape"] = _opt(lambda r: text(r["shape"]), best)
    small = h["comp_smallest"]
    v["comp/smallest/shape"] = _opt(lambda r: text(r["shape"]), small)
    v["comp/smallest/lat"] = _opt(lambda r: us(r["latency_ns"]), small)
    v["comp/smallest/roof"] = _opt(lambda r: us(r["predicted_ns"]), small)
    v["comp/smallest/errpct"] = _opt(lambda r: pct(100.0 * r["rel_error"]), small)
    v.update(_range_values("comp/cycles", h["comp_cycles"], lambda x: num(x, 1)))
    v.update(_range_values("comp/commands", h["comp_commands"], lambda x: num(x, 0)))
    lo = h["comp_cycles"][0]
    if cost_model is not None and lo is not None:
        v["comp/descbytes"] = num(
            round((lo - cost_model.fixed_per_cmd_cycles) / cost_model.byte_cycles_recip), 0)
    else:
        v["comp/descbytes"] = MISSING
    v.update(_kernel_values(h))
    v.update(_cube_values(h))
    refs = h["refs"]
    v.update(_ref_values(df, "ref/compute", refs["compute"], h))
    v.update(_ref_values(df, "ref/memory", refs["memory"], h))
    v.update(mapping)
    return v


def _kernel_values(h: dict) -> dict[str, Value]:
    """The primitive and prefetch kernels against the composite."""
    v: dict[str, Value] = {}
    for kern, short in ((k, short_name(k)) for k in OTHER_KERNELS):
        v.update(_range_values(f"{short}/slowdown", h[f"{kern}_slowdown"], ratio))
        for b in BOUNDS:
            v.update(_range_values(f"{short}/{b}/slowdown", h[f"{kern}_slowdown_{b}"],
                                   ratio))
        v.update(_range_values(f"{short}/cycles", h[f"{kern}_cycles"],
                               lambda x: num(x, 0)))
        v.update(_range_values(f"{short}/commands", h[f"{kern}_commands"],
                               lambda x: num(x, 0)))
        v.update(_range_values(f"{short}/cpushare", h[f"{kern}_cpu_share"], pct))
        b = h[f"{kern}_util_best"]
        v[f"{short}/bestutil"] = _opt(lambda r: pct(r["mac_util_pct"]), b)
    return v


def _cube_values(h: dict) -> dict[str, Value]:
    """The composite split over a CUBE: speed-ups and its best and worst shapes."""
    v: dict[str, Value] = {}
    v.update(_range_values("cube/speedup", h["cube_speedup"], ratio))
    v.update(_range_values("cube/decode/speedup", h["cube_decode_speedup"], ratio))
    v.update(_range_values("cube/errpct", h["cube_err"], pct))
    for tag in ("best", "worst", "decode/best", "decode/worst"):
        r = h[f"cube_{tag.replace('/', '_')}"]
        p = f"cube/{tag}/"
        v[p + "shape"] = _opt(lambda r: text(r["shape"]), r)
        v[p + "speedup"] = _opt(lambda r: ratio(r["speedup"]), r)
        v[p + "onelat"] = _opt(lambda r: us(r["latency_ns"]), r)
        v[p + "lat"] = _opt(lambda r: us(r["latency_ns_cube"]), r)
        v[p + "roof"] = _opt(lambda r: us(r["predicted_ns"]), r)
        v[p + "overroof"] = _opt(lambda r: ratio(r["latency_ns_cube"] / r["predicted_ns"]), r)
        v[p + "errpct"] = _opt(lambda r: pct(100.0 * r["rel_error"]), r)
        v[p + "bound"] = _opt(lambda r: text(r["bound_cube"]), r)
        v[p + "roofutil"] = _opt(lambda r: pct(r["roofline_util_pct"]), r)
        v[p + "util"] = _opt(lambda r: pct(r["mac_util_pct"]), r)
        v[p + "n"] = _opt(lambda r: num(int(r["n"]) // int(r["pes"]), 0), r)
    return v


def _mapping_values(df: pd.DataFrame) -> dict[str, Value]:
    """Composite holding A against holding B, one PE, per shape family: the latency
    ratio (below 1: holding A is faster)."""
    v: dict[str, Value] = {}
    held_a = df[(df["stationary"] == "a") & (df["kernel"] == REFERENCE_KERNEL)
                & (df["pes"] == 1)]
    ratios = held_a.assign(r=held_a["vs_composite"]) if len(held_a) else held_a
    for b in BOUNDS:
        sub = ratios[ratios["intensity"] == b] if len(ratios) else ratios
        v[f"mapping/{b}/count"] = count(len(sub))
        v.update(_range_values(f"mapping/{b}/ratio",
                               value_range(sub["r"]) if len(sub) else (None, None), ratio))
    return v

