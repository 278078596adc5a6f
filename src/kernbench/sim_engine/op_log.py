"""The op log (ADR-0052) plus the activity statistics derived from it.

Every op a component performs is reported here once. ``records`` keeps the
full ADR-0052 records (sorted by ``t_start``) unless the engine runs with
``keep_records=False`` for long sweeps; op counts and per-stage busy
intervals (for engine occupancy and stage breakdowns) are always kept.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from kernbench.topology import naming as nm

OP_KINDS = ("memory", "gemm", "math", "control", "unknown")


@dataclass(slots=True)
class OpRecord:
    t_start: float  # ns, when the component began the op
    t_end: float  # ns, when it completed
    component_id: str  # node id, e.g. "sip0.cube0.pe0.pe_dma"
    op_kind: str  # one of OP_KINDS
    op_name: str  # e.g. "h2d_write", "dma_read", "gemm_f16", "TileToken/GEMM"
    params: dict[str, Any] = field(default_factory=dict)
    dependency_ids: list[int] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return self.t_end - self.t_start


def union_ns(starts: list[float], ends: list[float]) -> float:
    """Total time covered by possibly overlapping intervals."""
    total = 0.0
    cur_s = cur_e = None
    for s, e in sorted(zip(starts, ends, strict=True)):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None:
        total += cur_e - cur_s
    return total


class OpLogger:
    def __init__(self, keep_records: bool = True) -> None:
        self.keep_records = keep_records
        self._records: list[OpRecord] = []
        self._sorted = True
        self.counts: Counter[str] = Counter()
        self._stage: defaultdict[tuple[str, str], tuple[list[float], list[float]]] = \
            defaultdict(lambda: ([], []))
        self._owner: dict[str, str] = {}

    def record(self, t_start: float, t_end: float, component_id: str, op_kind: str,
               op_name: str, params: dict[str, Any] | None = None,
               stage: str | None = None) -> None:
        """Report one op; ``stage`` (e.g. "GEMM") feeds the busy-time statistics."""
        if op_kind not in OP_KINDS:
            raise ValueError(f"op_kind must be one of {OP_KINDS}, got {op_kind!r}")
        self.counts[op_name] += 1
        if stage is not None:
            owner = self._owner.get(component_id)
            if owner is None:
                pe = nm.pe_of(component_id)
                owner = self._owner[component_id] = nm.pe_prefix(*pe) if pe else component_id
            starts, ends = self._stage[(owner, stage)]
            starts.append(t_start)
            ends.append(t_end)
        if self.keep_records:
            rec = OpRecord(t_start, t_end, component_id, op_kind, op_name, params or {})
            if self._records and t_start < self._records[-1].t_start:
                self._sorted = False
            self._records.append(rec)

    @property
    def records(self) -> list[OpRecord]:
        if not self._sorted:
            self._records.sort(key=lambda r: r.t_start)
            self._sorted = True
        return self._records

    def __len__(self) -> int:
        return sum(self.counts.values())

    def stage_busy(self) -> dict[str, dict[str, float]]:
        """{owner: {stage: busy ns (union of that stage's intervals)}}, sorted."""
        out: dict[str, dict[str, float]] = {}
        for (owner, stage) in sorted(self._stage):
            starts, ends = self._stage[(owner, stage)]
            out.setdefault(owner, {})[stage] = union_ns(starts, ends)
        return out
