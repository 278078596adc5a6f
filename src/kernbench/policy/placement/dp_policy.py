"""``DPPolicy`` and ``ShardSpec``: data-parallel placement inside one SIP.

A tensor is split first over ``num_cubes`` cubes starting at ``cube_start``
(mode ``cube``), then over ``num_pes`` PEs of each cube (mode ``pe``). Modes:
``replicate`` (a full copy each), ``row_wise`` (contiguous blocks of the
first axis), ``column_wise`` (blocks of the last axis, each stored as its own
contiguous array). Every (cube, pe) of the domain gets exactly one local shard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kernbench.errors import UsageError

Mode = Literal["replicate", "row_wise", "column_wise"]
MODES = ("replicate", "row_wise", "column_wise")


@dataclass(frozen=True)
class DPPolicy:
    cube: Mode = "replicate"
    pe: Mode = "replicate"
    num_cubes: int = 1
    num_pes: int = 1
    cube_start: int = 0


@dataclass(frozen=True)
class ShardSpec:
    """The block of a tensor that (sip, cube, pe) holds."""

    sip: int
    cube: int
    pe: int
    block: tuple[int, int]  # (cube block index, pe block index) in the split order
    rows: tuple[int, int]  # [start, stop) along axis 0 of the full tensor
    cols: tuple[int, int]  # [start, stop) along the last axis
    shape: tuple[int, ...]  # the local shard's shape

    @property
    def key(self) -> tuple[int, int]:
        """Shards with the same key hold the same data (replicas)."""
        return self.block


def _split(lo: int, hi: int, parts: int, index: int, what: str) -> tuple[int, int]:
    size = hi - lo
    if size % parts:
        raise UsageError(f"cannot split {what} of {size} evenly into {parts} parts")
    step = size // parts
    return lo + index * step, lo + (index + 1) * step


def resolve_dp_policy(policy: DPPolicy, shape: tuple[int, ...], sip: int, cubes_per_sip: int,
                      pes_per_cube: int) -> list[ShardSpec]:
    for name, mode in (("cube", policy.cube), ("pe", policy.pe)):
        if mode not in MODES:
            raise UsageError(f"DPPolicy.{name} must be one of {', '.join(MODES)}, got {mode!r}")
    if not 1 <= policy.num_pes <= pes_per_cube:
        raise UsageError(f"DPPolicy.num_pes must be in 1..{pes_per_cube}, got {policy.num_pes}")
    if policy.num_cubes < 1 or not 0 <= policy.cube_start < cubes_per_sip or \
            policy.cube_start + policy.num_cubes > cubes_per_sip:
        raise UsageError(
            f"DPPolicy cubes [{policy.cube_start}, {policy.cube_start + policy.num_cubes}) do not "
            f"fit the {cubes_per_sip} cubes of a SIP")
    if not shape:
        raise UsageError("tensors need at least one dimension")
    rows_all = (0, shape[0])
    cols_all = (0, shape[-1])
    shards = []
    for ci in range(policy.num_cubes):
        rows, cols, cb = rows_all, cols_all, 0
        if policy.cube == "row_wise":
            rows, cb = _split(*rows, policy.num_cubes, ci, "axis 0 over cubes"), ci
        elif policy.cube == "column_wise":
            cols, cb = _split(*cols, policy.num_cubes, ci, "the last axis over cubes"), ci
        for pi in range(policy.num_pes):
            r, c, pb = rows, cols, 0
            if policy.pe == "row_wise":
                r, pb = _split(*rows, policy.num_pes, pi, "axis 0 over PEs"), pi
            elif policy.pe == "column_wise":
                c, pb = _split(*cols, policy.num_pes, pi, "the last axis over PEs"), pi
            local = (r[1] - r[0], *shape[1:-1], c[1] - c[0]) if len(shape) > 1 else (r[1] - r[0],)
            if len(shape) == 1:
                if policy.cube == "column_wise" or policy.pe == "column_wise":
                    local = (c[1] - c[0],)
                    r = c
            shards.append(ShardSpec(sip, policy.cube_start + ci, pi, (cb, pb), r, c, local))
    return shards
