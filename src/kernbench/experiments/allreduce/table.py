"""The ``allreduce`` table: collective, PE-to-PE and reference rows in one frame.

The algorithms are those of ``kernbench/ccl/ccl.yaml``, in its order, each with the
phases its own class declares; a table row of an algorithm the config does not
have is an error, never skipped.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

import pandas as pd

from kernbench.ccl import config as ccl_config
from kernbench.errors import ConfigError

KIND_ORDER = {"ring_1d": 0, "torus_2d": 1, "mesh_2d_no_wrap": 2}
BUFFER_ORDER = {"hbm": 0, "sram": 1, "tcm": 2}


@lru_cache(maxsize=4)
def _phases_in(path: str) -> MappingProxyType:
    classes = ccl_config.configured_algorithms(path)
    return MappingProxyType({name: tuple(cls.phases) for name, cls in classes.items()})


def algorithm_phases() -> MappingProxyType:
    """name -> phases of every configured algorithm, in ``kernbench/ccl/ccl.yaml`` order."""
    return _phases_in(str(ccl_config.DEFAULT_PATH))


def phases_of(algorithm: str) -> tuple[str, ...]:
    """The phases of a configured algorithm; any other name is an error."""
    known = algorithm_phases()
    if algorithm not in known:
        raise ConfigError(str(ccl_config.DEFAULT_PATH), "algorithms",
                          f"the all-reduce results name algorithm {algorithm!r}, which is not "
                          f"configured (configured: {', '.join(known)})")
    return known[algorithm]


def algorithm_order(names) -> dict[str, int]:
    """Sort rank of each algorithm in ``names`` (config order), checking every one."""
    order = list(algorithm_phases())
    for name in names:
        phases_of(name)  # an algorithm the config does not have stops here
    return {name: order.index(name) for name in names}


def value_tag(algorithm: str) -> str:
    """The algorithm's name in value keys and figure ticks (``lrab`` for ``lrab_hierarchical``)."""
    return algorithm.replace("_hierarchical", "")


def _pair_rank(pair) -> int:
    """PE0-PE1, PE0-PE4, CUBE0-CUBE1, CUBE0-CUBE<w>, SIP0-SIP1: the table's order."""
    if not isinstance(pair, str):
        return 9
    fixed = {"PE0-PE1": 0, "PE0-PE4": 1, "CUBE0-CUBE1": 2, "SIP0-SIP1": 4}
    return fixed.get(pair, 3 if pair.startswith("CUBE0-") else 5)


def _collective_rows(base: dict, m: dict, lab: dict) -> list[dict]:
    """One row per size of a collective sweep, with each phase's simulated and
    predicted time."""
    rows = []
    for p in m["points"]:
        row = dict(base, algorithm=lab["algorithm"], buffer=lab["buffer"],
                   dtype=lab["dtype"], op=lab["op"], ranks=lab["ranks"],
                   size=p["size"], count=p["count"], time_ns=p["time_ns"],
                   predicted_ns=p["predicted_ns"], rel_error=p["rel_error"],
                   algbw_gbs=p["algbw_gbs"], busbw_gbs=p["busbw_gbs"],
                   predicted_busbw_gbs=p["predicted_busbw_gbs"],
                   link_bound_gbs=m["link_bound_gbs"], max_alpha_ns=m["max_alpha_ns"],
                   ipcq_copy=p["ipcq_copy"], ipcq_send=p["ipcq_send"],
                   dma_read=p["dma_read"], dma_write=p["dma_write"])
        for name, t in p["phases"].items():
            row[f"phase_{name}_ns"] = t["simulated_ns"]
            row[f"phase_{name}_pred_ns"] = t["predicted_ns"]
        rows.append(row)
    return rows


def _record_rows(r: dict) -> list[dict]:
    """The rows of one record, by its kind (collective, pe2pe or reference)."""
    m, lab = r["metrics"], r["labels"]
    base = {"topology": r["topology"], "kind": lab["kind"], "sip_kind": lab["sip_kind"],
            "sip_w": lab["sip_w"], "sip_h": lab["sip_h"], "sips": lab["sips"],
            "cube_w": lab["cube_w"], "cube_h": lab["cube_h"],
            "config_hash": r["provenance"]["config_hash"]}
    if lab["kind"] == "collective":
        return _collective_rows(base, m, lab)
    if lab["kind"] == "pe2pe":
        return [dict(base, pair=p["pair"], size=p["size"], hops=p["hops"],
                     ipcq_ns=p["ipcq_ns"], arrival_ns=p["arrival_ns"], dma_ns=p["dma_ns"],
                     message_ns=p["message_ns"], predicted_ns=p["predicted_ns"])
                for p in m["pairs"]]
    return [dict(base, flows=m["flows"], size=m["chunk_bytes"], time_ns=m["latency_ns"],
                 reference_ns=m["reference_ns"], rel_error=m["makespan_rel_error"],
                 mean_rel_error=m["mean_rel_error"])]


def frame(records: list[dict]) -> pd.DataFrame:
    """Every record's rows, in a fixed order: kind, SIP layout, topology, algorithm
    (config order), buffer, pair, size."""
    df = pd.DataFrame([row for r in records for row in _record_rows(r)])
    if df.empty:
        return df
    algorithms = df.get("algorithm", pd.Series(index=df.index, dtype=object))
    df["_k"] = df["sip_kind"].map(KIND_ORDER)
    df["_a"] = algorithms.map(algorithm_order(algorithms.dropna().unique()))
    df["_b"] = df.get("buffer", pd.Series(index=df.index, dtype=object)).map(BUFFER_ORDER)
    pair = df.get("pair", pd.Series(index=df.index, dtype=object))
    df["_p"] = pair.map(_pair_rank)
    order = ["kind", "_k", "topology", "_a", "_b", "_p", "size"]
    df = df.sort_values(order, kind="mergesort", na_position="last")
    return df.drop(columns=["_k", "_a", "_b", "_p"]).reset_index(drop=True)


def load(csv: str | Path) -> pd.DataFrame:
    return pd.read_csv(csv)


def collective(df: pd.DataFrame) -> pd.DataFrame:
    """The collective rows (none when the table has no ``kind`` column)."""
    return df[df["kind"] == "collective"] if "kind" in df else df.iloc[0:0]


def rows_of_kind(df: pd.DataFrame, kind: str) -> pd.DataFrame:
    """The ``pe2pe`` or ``reference`` rows."""
    return df[df["kind"] == kind] if "kind" in df else df.iloc[0:0]


def sorted_topologies(df: pd.DataFrame) -> list[str]:
    """Topologies with collective rows: ring, torus, mesh layouts, then by name."""
    sub = collective(df)
    return sorted(sub["topology"].unique(), key=lambda t: (
        KIND_ORDER.get(sub[sub["topology"] == t]["sip_kind"].iloc[0], 9), t))


def sorted_algorithms(df: pd.DataFrame) -> list[str]:
    """The table's algorithms in config order (an unknown one is an error)."""
    names = collective(df)["algorithm"].unique()
    order = algorithm_order(names)
    return sorted(names, key=order.__getitem__)


def hbm(df: pd.DataFrame) -> pd.DataFrame:
    """The collective rows with buffers in HBM, the ones every topology has."""
    sub = collective(df)
    return sub[sub["buffer"] == "hbm"]


def sweep_ends(df: pd.DataFrame):
    """(topology, algorithm, its rows by size, smallest, largest) of every HBM sweep, in
    table order: what the paper table and the values both report."""
    col = hbm(df)
    for t in sorted_topologies(df):
        for algo in sorted_algorithms(df):
            g = col[(col["topology"] == t) & (col["algorithm"] == algo)].sort_values("size")
            if not g.empty:
                yield t, algo, g, g.iloc[0], g.iloc[-1]
