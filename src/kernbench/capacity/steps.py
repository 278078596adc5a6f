"""Axis C from simulated model steps: the decode step time of the ``llm`` study.

The study simulates whole decode steps (every layer, the collectives, the
embedding and the LM head) on a grid of batch x context. Between grid points
the step time is interpolated bilinearly; outside the grid the planner refuses
to answer, as it never extrapolates. Each answer names the simulated points it
came from.
"""

from __future__ import annotations

import bisect
import csv
import math
from dataclasses import dataclass
from pathlib import Path

TABLE = Path("results/tables/llm.csv")  # the llm study's table, as the workflow writes it


class Outside(ValueError):
    """The asked point is outside the simulated grid."""


@dataclass(frozen=True)
class StepTimes:
    """Simulated decode step times (s) of one model on one topology."""

    table: str
    grid: dict  # (batch, context) -> step seconds

    @classmethod
    def from_table(cls, path: Path, model: str, topology: str) -> StepTimes | None:
        """The base (no what-if) decode points of ``model`` on ``topology``; None if the
        table has none."""
        grid = {(b, c): t for m, topo, b, c, t in base_decode_points(path)
                if (m, topo) == (model, topology)}
        return cls(str(path), grid) if grid else None


    def _bracket(self, values: list[int], x: int, what: str) -> tuple[int, int]:
        if not values[0] <= x <= values[-1]:
            raise Outside(f"{what} {x} is outside the simulated {values[0]}..{values[-1]}")
        i = bisect.bisect_left(values, x)
        if values[i] == x:
            return x, x
        return values[i - 1], values[i]

    def at(self, batch: int, context: int) -> tuple[float, list[tuple[int, int]]]:
        """(step seconds, the simulated (batch, context) points used)."""
        b0, b1 = self._bracket(sorted({b for b, _ in self.grid}), batch, "batch")
        c0, c1 = self._bracket(sorted({c for _, c in self.grid}), context, "context")
        corners = sorted({(b, c) for b in (b0, b1) for c in (c0, c1)})
        missing = [p for p in corners if p not in self.grid]
        if missing:
            raise Outside(f"the simulated grid lacks batch {missing[0][0]} at context "
                          f"{missing[0][1]}")
        fb = 0.0 if b1 == b0 else (batch - b0) / (b1 - b0)
        fc = 0.0 if c1 == c0 else (context - c0) / (c1 - c0)
        g = self.grid
        low = g[(b0, c0)] + (g[(b1, c0)] - g[(b0, c0)]) * fb
        high = g[(b0, c1)] + (g[(b1, c1)] - g[(b0, c1)]) * fb
        return low + (high - low) * fc, corners


def base_decode_points(path: Path):
    """(model, topology, batch, context, step seconds) of every simulated decode point of
    the table that ran on its topology as it is (no what-if setting)."""
    with path.open() as f:
        for row in csv.DictReader(f):
            if row.get("phase") != "decode" or row.get("fits", "True") not in (
                    "True", "true", "1") or row.get("setting", "default") not in ("", "default"):
                continue
            yield (row.get("model"), row.get("topology"), int(row["batch"]),
                   int(row["context"]), float(row["step_ns"]) / 1e9)


def site_grids(path: Path) -> dict:
    """Every model's and topology's points, as the results site embeds them:
    ``{"table": path, "grids": {model: {topology: [[batch, context, seconds], ...]}}}``."""
    grids: dict = {}
    for m, topo, b, c, t in base_decode_points(path):
        grids.setdefault(m, {}).setdefault(topo, []).append([b, c, t])
    return {"table": str(path), "grids": {m: {k: sorted(v) for k, v in g.items()}
                                          for m, g in grids.items()}}


def _step(name: str, formula: str, substituted: str, value: float, unit: str,
          meaning: str) -> dict:
    return {"name": name, "formula": formula, "substituted": substituted, "value": value,
            "unit": unit, "meaning": meaning}


def axis_c(steps: StepTimes, v: dict, context: int, users: int, tpot_s: float) -> dict:
    """Batch, step time and systems from the simulated steps. A simulated step runs the
    model over a whole system, so here a replica is one system and the batch is capped by
    the users whose KV cache fits the system's HBM beside the weights."""
    batches = sorted({b for b, _ in steps.grid})
    fit = int((v["system_pes"] * v["hbm_pe"] - v["W"]) // (v["kv_bpt"] * context))
    best, used = 0, []
    for b in range(batches[0], min(batches[-1], fit) + 1):
        try:
            t, pts = steps.at(b, context)
        except Outside:
            continue
        if t <= tpot_s:
            best, used = b, pts
    if best == 0:
        return {"steps": [], "unavailable": (
            f"no simulated batch in {batches[0]}..{batches[-1]} meets {tpot_s * 1e3:g} ms at "
            f"{context} tokens ({steps.table})")}
    t_step, pts = steps.at(best, context)
    cite = ", ".join(f"(batch {b}, context {c})" for b, c in pts)
    systems = math.ceil(users / best)
    return {"steps": [
        _step("batch", "largest batch <= min(simulated, KV fit) with t_step(batch) <= tpot",
              f"t_step({best}) <= {tpot_s * 1e3:g} ms < t_step({best + 1}) or the limit {fit}",
              best, "users", "batch one system serves, from the simulated decode steps"),
        _step("t_step", "bilinear in batch and context between simulated steps",
              f"from {cite} of {steps.table}", t_step, "s",
              "simulated decode step time at that batch"),
        _step("systems", "ceil(users / batch)", f"ceil({users} / {best})", systems,
              "systems", "systems of this topology, each serving one batch"),
    ], "points": [list(p) for p in used]}
