"""The op log (ADR-0052): one record per operation a component performed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OP_KINDS = ("memory", "gemm", "math", "control", "unknown")


@dataclass(slots=True)
class OpRecord:
    t_start: float  # ns, when the component began the op
    t_end: float  # ns, when it completed
    component_id: str  # node id, e.g. "sip0.cube0.pe0.pe_dma"
    op_kind: str  # one of OP_KINDS
    op_name: str  # e.g. "h2d_write", "dma_read", "gemm_f16"
    params: dict[str, Any] = field(default_factory=dict)
    dependency_ids: list[int] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return self.t_end - self.t_start


class OpLogger:
    """Accumulates records; ``records`` is always sorted by ``t_start`` (stable)."""

    def __init__(self) -> None:
        self._records: list[OpRecord] = []
        self._sorted = True
        self._pending: dict[int, OpRecord] = {}

    def add(self, record: OpRecord) -> OpRecord:
        if self._records and record.t_start < self._records[-1].t_start:
            self._sorted = False
        self._records.append(record)
        return record

    def record(self, t_start: float, t_end: float, component_id: str, op_kind: str,
               op_name: str, params: dict[str, Any] | None = None) -> OpRecord:
        if op_kind not in OP_KINDS:
            raise ValueError(f"op_kind must be one of {OP_KINDS}, got {op_kind!r}")
        return self.add(OpRecord(t_start, t_end, component_id, op_kind, op_name, params or {}))

    def record_start(self, key: int, t_start: float, component_id: str, op_kind: str,
                     op_name: str, params: dict[str, Any] | None = None) -> None:
        """Open a record that :meth:`record_end` closes (for ops timed by a process)."""
        self._pending[key] = OpRecord(t_start, t_start, component_id, op_kind, op_name,
                                      dict(params or {}))

    def record_end(self, key: int, t_end: float, **extra: Any) -> OpRecord:
        rec = self._pending.pop(key)
        rec.t_end = t_end
        rec.params.update(extra)
        return self.add(rec)

    @property
    def records(self) -> list[OpRecord]:
        if not self._sorted:
            self._records.sort(key=lambda r: r.t_start)
            self._sorted = True
        return self._records

    @property
    def open_records(self) -> int:
        return len(self._pending)

    def __len__(self) -> int:
        return len(self._records)
