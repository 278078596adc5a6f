"""How many PEs and systems a model needs: weights (A), KV capacity (B), latency (C).

The model is a :class:`kernbench.models.ModelConfig` (a preset or a user's
``config.json``); the chip comes from a topology file (HBM per PE, its
bandwidth, PEs per system). Axes A and B are arithmetic on those two alone, so
they answer on a clean clone; axis C takes the decode attention efficiency (the KV-bandwidth bound
over the simulated latency) from the attention study's table, interpolated
linearly in context between measured points; a context outside them is an
error, never an extrapolation. The formulas themselves live in
:mod:`kernbench.capacity.formulas`, shared with the results site.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

from kernbench.capacity.formulas import FORMULAS, evaluate_all
from kernbench.errors import UsageError
from kernbench.models import ModelConfig
from kernbench.topology import load_topology

# Project data, not package data: the topology files a sweep names and the tables it
# writes live in the working directory (a checkout), where every kernbench command
# looks for them (docs/adr/0037-study-packages-and-shared-geometry.md).
TOPOLOGY_DIR = Path("config") / "topologies"
TABLE = Path("results/tables/gqa.csv")  # the attention study's table, as the workflow writes it
AXES = {"A": ("weights", ("N", "W", "pes")),
        "B": ("KV capacity", ("kv_bpt", "free", "users_kv")),
        "C": ("latency", ("bw", "t_w", "t_kv", "batch_tpot", "batch", "t_step", "replicas",
                          "systems"))}


@dataclass(frozen=True)
class Chip:
    name: str
    system_pes: int
    hbm_pe: int  # bytes of HBM per PE
    bw_pe: float  # bytes/s of HBM bandwidth per PE

    @classmethod
    def from_topology(cls, path: str | Path) -> Chip:
        """The chip of a topology file, or of a name in the sweep's topology folder
        (the CLI resolves ``--topology`` itself and passes the file)."""
        path = Path(path)
        spec = load_topology(path if path.suffix else TOPOLOGY_DIR / f"{path}.yaml").spec
        pes = spec.sips.count * spec.cubes_per_sip * spec.pes_per_cube
        return cls(spec.name, pes, spec.hbm_slice_bytes, spec.slice_bw_gbs * 1e9)


@dataclass(frozen=True)
class Efficiency:
    """Measured decode efficiency against context (the best mapping at each context)."""

    points: tuple[tuple[int, float, str], ...]  # (context, efficiency, where measured)

    @classmethod
    def from_table(cls, path: Path) -> Efficiency:
        if not path.is_file():
            raise UsageError(f"{path}: the attention study's table is missing; build it with "
                             f"`snakemake --cores 2 {TABLE}`")
        best: dict[int, tuple[float, str]] = {}
        with path.open() as f:
            for row in csv.DictReader(f):
                if row["kind"] != "decode" or row["sweep"] != "sweep" or row["users"] != "1":
                    continue
                ctx, eff = int(row["context"]), float(row["efficiency"])
                where = f"C={row['C']} {row['variant']} on {row['topology']}"
                if ctx not in best or eff > best[ctx][0]:
                    best[ctx] = (eff, where)
        if not best:
            raise UsageError(f"{path}: no single-user decode sweep points (experiments.gqa.decode)")
        return cls(tuple((c, e, w) for c, (e, w) in sorted(best.items())))

    def at(self, context: int) -> tuple[float, str]:
        """(efficiency, how it was obtained) at ``context``."""
        pts = self.points
        lo, hi = pts[0][0], pts[-1][0]
        if not lo <= context <= hi:
            raise UsageError(f"--context {context}: outside the measured decode range "
                             f"{lo}..{hi} tokens (results/tables/gqa.csv); the planner does "
                             f"not extrapolate")
        for (c0, e0, w0), (c1, e1, w1) in zip(pts, pts[1:], strict=False):
            if context == c0:
                return e0, f"measured at {c0} tokens ({w0})"
            if c0 < context < c1:
                e = e0 + (e1 - e0) * (context - c0) / (c1 - c0)
                return e, f"interpolated between {c0} and {c1} tokens ({w0}; {w1})"
        return pts[-1][1], f"measured at {pts[-1][0]} tokens ({pts[-1][2]})"


def check_inputs(context: int, users: int, tpot_ms: float) -> None:
    for flag, value in (("--context", context), ("--users", users), ("--tpot-ms", tpot_ms)):
        if isinstance(value, bool) or value <= 0:
            raise UsageError(f"{flag} {value}: must be positive")


def quantities(model: ModelConfig) -> dict[str, int]:
    """The planner's symbols (shared with the results site) from the config.json keys."""
    return {"layers": model.num_hidden_layers, "hidden": model.hidden_size,
            "heads": model.num_attention_heads, "kv_heads": model.num_key_value_heads,
            "d_head": model.head_dim, "ffn": model.intermediate_size, "b": model.dtype_bytes}


def plan(model: ModelConfig, chip: Chip, eff: Efficiency | None, context: int, users: int,
         tpot_ms: float, no_latency: str = "") -> dict:
    """The three axes for ``users`` users at ``context`` tokens under a TPOT target.

    Without ``eff`` (no attention table) only axes A and B are computed; axis C is
    marked unavailable with the reason ``no_latency``.
    """
    check_inputs(context, users, tpot_ms)
    e, how = eff.at(context) if eff is not None else (None, None)
    inputs = {**quantities(model), "hbm_pe": chip.hbm_pe, "bw_pe": chip.bw_pe,
              "system_pes": chip.system_pes, "context": context, "users": users,
              "tpot": tpot_ms / 1e3, **({"eff": e} if eff is not None else {})}
    v = evaluate_all(inputs, None if eff is not None else AXES["A"][1] + AXES["B"][1])
    _check_fits(model.name, chip, context, tpot_ms, v)
    axes = {}
    for key, (title, members) in AXES.items():
        if all(n in v for n in members):
            axes[key] = {"title": title, "steps": [_step(n, v) for n in members]}
        else:
            axes[key] = {"title": title, "steps": [], "unavailable": no_latency}
    return {"model": model.name, "topology": chip.name, "context": context, "users": users,
            "tpot_ms": tpot_ms,
            "efficiency": {"value": e, "source": how} if eff is not None else None,
            "inputs": inputs, "axes": axes,
            "values": {n: v[n] for n in FORMULAS if n in v}}


def _check_fits(name: str, chip: Chip, context: int, tpot_ms: float, v: dict) -> None:
    """Refuse a plan with no replica, no user or (when computed) no batch."""
    if v["pes"] > chip.system_pes:
        raise UsageError(f"{name} needs {v['pes']} PEs for its weights "
                         f"({v['W'] / 1e9:.2f} GB); topology {chip.name!r} has "
                         f"{chip.system_pes}: it fits no replica")
    if v["users_kv"] < 1:
        raise UsageError(f"--context {context}: one user's KV cache "
                         f"({v['kv_bpt'] * context / 2**30:.2f} GiB) does not fit the "
                         f"{v['free'] / 2**30:.2f} GiB a {v['pes']}-PE replica has left")
    if v.get("batch_tpot", 1) < 1:
        raise UsageError(f"--tpot-ms {tpot_ms}: even one user takes "
                         f"{(v['t_w'] + v['t_kv']) * 1e3:.3f} ms per token on a "
                         f"{v['pes']}-PE replica")


def _step(name: str, v: dict) -> dict:
    expr, unit, meaning = FORMULAS[name]
    substituted = re.sub(r"\b[A-Za-z_][A-Za-z_0-9]*\b",
                         lambda m: fmt(v[m.group(0)]) if m.group(0) in v else m.group(0), expr)
    return {"name": name, "formula": f"{name} = {expr}", "substituted": substituted,
            "value": v[name], "unit": unit, "meaning": meaning}


def fmt(x: float) -> str:
    """A quantity as the planner prints it: integers whole, others to 4 significant
    digits (fixed point from 1e-3 to 1e6, else d.ddde+N). The results site formats
    the same way (``fmt`` in its script), so both show identical text."""
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    a = abs(x)
    if 1e-3 <= a < 1e6:
        return f"{x:.{max(0, 3 - math.floor(math.log10(a)))}f}"
    mantissa, exp = f"{x:.3e}".split("e")
    return f"{mantissa}e{int(exp):+d}"
