"""The op log plus the activity statistics derived from it (docs/adr/0022-op-log-and-placement.md).

Every op a component performs is reported here once. ``records`` keeps the
full records (sorted by ``t_start``) unless the engine runs with
``keep_records=False`` for long sweeps; op counts and per-stage busy
intervals (for engine occupancy and stage breakdowns) are always kept.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from kernbench.components.stage_report import StageReport
from kernbench.topology import naming as nm

OP_KINDS: Final = ("memory", "gemm", "math", "control", "unknown")
_KINDS: Final = frozenset(OP_KINDS)


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


Floats = Sequence[float] | np.ndarray  # times: a list, an array('d'), a numpy array


def merged_intervals(starts: Floats, ends: Floats) -> list[tuple[float, float]]:
    """Possibly overlapping intervals [start, end) as disjoint ones, sorted; intervals
    that touch join. The merge is vectorised (a long prefill logs millions of stage
    intervals); it takes each group's first start and its largest end, as a scan in
    start order would, so the values are the same floats."""
    if len(starts) == 0:
        return []
    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)  # the furthest end so far
    opens = np.empty(len(s), dtype=bool)
    opens[0] = True
    np.greater(s[1:], reach[:-1], out=opens[1:])  # starts after everything before it
    first = np.flatnonzero(opens)
    last = np.append(first[1:] - 1, len(s) - 1)
    return list(zip(s[first].tolist(), reach[last].tolist(), strict=True))


def union_ns(starts: Floats, ends: Floats) -> float:
    """Total time covered by possibly overlapping intervals."""
    total = 0.0
    for s, e in merged_intervals(starts, ends):
        total += e - s
    return total


_BATCH: Final = 4096  # closed intervals a stage log gathers before it extends its arrays


class _Shifted:
    """The starts at which one plan's relative runs were added to a stage log (the runs
    themselves copied into typed lists, which the compiled read loops unbox directly)."""

    __slots__ = ("key_starts", "key_ends", "starts", "ends", "t0s")

    def __init__(self, starts: Sequence[float], ends: Sequence[float]) -> None:
        self.key_starts = starts  # (kept: the log is keyed by its identity)
        self.key_ends = ends
        self.starts: list[float] = list(starts)
        self.ends: list[float] = list(ends)
        self.t0s: list[float] = []


class StageLog:
    """The busy intervals of one stage of one PE, as doubles (a long run logs millions).

    An interval that starts inside the last one added (touching its end included)
    joins it instead of being stored: every reader merges the intervals anyway
    (:func:`merged_intervals`), and the merged result -- each group's first start
    and largest end -- is the same floats either way. Back-to-back tiles on an
    engine therefore cost one stored interval, not one each. Closed intervals wait in
    two short lists and move to the arrays a few thousand at a time: compiled, a list
    append is a direct call, an array's a method looked up by name (callgrind: ~600
    instructions an interval, 3 % of a decode attention run).

    A planned composite adds the same relative runs each time its shape recurs
    (:meth:`add_shifted`): the log keeps, per runs object, the list of starts it was
    added at, one float per composite, and shifts them all at once when
    read (docs/adr/0069).
    """

    __slots__ = ("starts", "ends", "_s", "_e", "_open", "_new_s", "_new_e", "_shifted",
                 "_shifted_runs")

    def __init__(self) -> None:
        self.starts = array("d")
        self.ends = array("d")
        self._new_s: list[float] = []  # closed intervals not yet in the arrays
        self._new_e: list[float] = []
        self._s = 0.0  # the interval still growing, when _open
        self._e = 0.0
        self._open = False
        self._shifted: dict[int, _Shifted] = {}  # by id of the relative starts (kept alive)
        self._shifted_runs = 0

    def __len__(self) -> int:
        """Intervals stored (closed); the growing one is not counted."""
        return len(self.starts) + len(self._new_s) + self._shifted_runs

    def add(self, s: float, e: float) -> None:
        if self._open:
            if self._s <= s <= self._e:
                if e > self._e:
                    self._e = e
                return
            self._new_s.append(self._s)
            self._new_e.append(self._e)
            if len(self._new_s) >= _BATCH:
                self._flush()
        self._s = s
        self._e = e
        self._open = True

    def _flush(self) -> None:
        self.starts.extend(self._new_s)
        self.ends.extend(self._new_e)
        self._new_s.clear()
        self._new_e.clear()

    def add_shifted(self, t0: float, starts: Sequence[float], ends: Sequence[float]) -> None:
        """The runs [t0 + starts[i], t0 + ends[i]). ``starts`` and ``ends`` are kept, not
        copied: the caller must never change them (a cached plan's runs)."""
        group = self._shifted.get(id(starts))
        if group is None:
            if len(starts) != len(ends):
                raise ValueError(f"{len(starts)} starts but {len(ends)} ends")
            group = self._shifted[id(starts)] = _Shifted(starts, ends)
        elif group.key_ends is not ends:
            raise ValueError("the same relative starts came with other ends")
        group.t0s.append(t0)
        self._shifted_runs += len(starts)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of everything added, the growing interval included, in no
        particular order (readers merge them). A shifted run is the float ``t0 + s``,
        as adding it would have stored. (Shifted by typed loops into lists, which numpy
        converts in one call each: an ``array`` extended from a list costs some 500
        machine instructions an element, numpy's own arithmetic some 5,000 a call.)"""
        self._flush()
        more_s: list[float] = []
        more_e: list[float] = []
        for group in self._shifted.values():
            rel_s, rel_e = group.starts, group.ends
            for t0 in group.t0s:
                for x in rel_s:
                    more_s.append(t0 + x)
                for x in rel_e:
                    more_e.append(t0 + x)
        if self._open:
            more_s.append(self._s)
            more_e.append(self._e)
        starts = np.array(self.starts, dtype=np.float64)
        ends = np.array(self.ends, dtype=np.float64)
        if not more_s:
            return starts, ends
        return (np.concatenate((starts, np.array(more_s, dtype=np.float64))),
                np.concatenate((ends, np.array(more_e, dtype=np.float64))))


class StageSink(StageReport):
    """Where one component reports its ops of one kind and stage (:meth:`OpLogger.sink`):
    :meth:`OpLogger.record` with the lookups done once. The stage's log is made at the
    first op, as ``record`` makes it. Ops of the name reported last are counted here
    and added to the log's counts when another name comes or the counts are read
    (a sink's ops mostly share one name: two dictionary updates per op saved); a
    name's first op enters it in the log's counts at once, so names keep their order."""

    __slots__ = ("log", "component_id", "op_kind", "stage", "_intervals", "_name", "_pending")

    def __init__(self, log: OpLogger, component_id: str, op_kind: str, stage: str) -> None:
        self.log = log
        self.component_id = component_id
        self.op_kind = op_kind
        self.stage = stage
        self._intervals: StageLog | None = None
        self._name = ""  # the op name being counted here
        self._pending = 0  # its ops not yet in the log's counts

    def add(self, t_start: float, t_end: float, op_name: str,
            params: dict[str, Any] | None = None) -> None:
        log = self.log
        if op_name != self._name:
            self.settle_count()
            self._name = op_name
            log._counts.setdefault(op_name, 0)
        self._pending += 1
        intervals = self._intervals
        if intervals is None:
            intervals = self._first_op()
        intervals.add(t_start, t_end)
        if log.keep_records:
            log._keep(t_start, t_end, self.component_id, self.op_kind, op_name, params)

    def add_planned(self, counts: Sequence[tuple[str, int]], t0: float,
                    starts: Sequence[float], ends: Sequence[float]) -> None:
        """Report ``counts`` ((op name, ops) pairs) whose busy time is the union of the
        runs [t0 + starts, t0 + ends): the counts and stage statistics of that many
        :meth:`add` calls without a record per op (for planned composites, which run only
        when records are off). The runs are kept, not copied (``StageLog.add_shifted``)."""
        log = self.log
        if log.keep_records:
            raise RuntimeError("add_planned would lose per-op records; add each op instead")
        log_counts = log._counts
        for op_name, n in counts:
            log_counts[op_name] = log_counts.get(op_name, 0) + n
        intervals = self._intervals
        if intervals is None:
            intervals = self._first_op()
        intervals.add_shifted(t0, starts, ends)

    def settle_count(self) -> None:
        """Add the ops counted here to the log's counts."""
        if self._pending:
            self.log._counts[self._name] += self._pending
            self._pending = 0

    def _first_op(self) -> StageLog:
        """The stage's log, made (as ``OpLogger.record`` makes it) at the first op."""
        intervals = self._intervals = self.log._stage_log(self.component_id, self.stage)
        return intervals


class OpLogger:
    """The op log of one engine. Records are kept as tuples and become
    :class:`OpRecord`s (with their parameters evaluated) when first read, so a
    long run pays little per op; ``params`` may be a dict or a function
    returning one."""

    def __init__(self, keep_records: bool = True) -> None:
        self.keep_records = keep_records
        self._raw: list[tuple] = []
        self._records: list[OpRecord] = []
        self._sorted = True
        self._last_start = float("-inf")
        self._counts: dict[str, int] = {}  # ops per name (see ``_settled_counts``)
        self._sinks: list[StageSink] = []  # each may hold a count not yet in _counts
        # per (PE or component, stage): its busy intervals
        self._stage: dict[tuple[str, str], StageLog] = {}
        self._logs: dict[tuple[str, str], StageLog] = {}  # by (component, stage)

    def record(self, t_start: float, t_end: float, component_id: str, op_kind: str,
               op_name: str, params: dict[str, Any] | Callable[[], dict] | None = None,
               stage: str | None = None) -> None:
        """Report one op; ``stage`` (e.g. "GEMM") feeds the busy-time statistics."""
        if op_kind not in _KINDS:
            raise ValueError(f"op_kind must be one of {OP_KINDS}, got {op_kind!r}")
        counts = self._counts
        counts[op_name] = counts.get(op_name, 0) + 1
        if stage is not None:
            self._stage_log(component_id, stage).add(t_start, t_end)
        if self.keep_records:
            self._keep(t_start, t_end, component_id, op_kind, op_name, params)

    def _keep(self, t_start: float, t_end: float, component_id: str, op_kind: str,
              op_name: str, params: dict[str, Any] | Callable[[], dict] | None) -> None:
        if t_start < self._last_start:
            self._sorted = False
        self._last_start = t_start
        self._raw.append((t_start, t_end, component_id, op_kind, op_name, params))

    def sink(self, component_id: str, op_kind: str, stage: str) -> StageSink:
        """A :meth:`record` bound to one component, kind and stage, for a unit that
        reports many ops there (a PE's stage engines)."""
        if op_kind not in _KINDS:
            raise ValueError(f"op_kind must be one of {OP_KINDS}, got {op_kind!r}")
        sink = StageSink(self, component_id, op_kind, stage)
        self._sinks.append(sink)
        return sink

    def _settled_counts(self) -> dict[str, int]:
        """``_counts`` with what the sinks still hold added in."""
        for sink in self._sinks:
            sink.settle_count()
        return self._counts

    def _stage_log(self, component_id: str, stage: str) -> StageLog:
        """Busy intervals of ``stage`` of the PE (or component) owning ``component_id``,
        made at its first op."""
        log = self._logs.get((component_id, stage))
        if log is not None:
            return log
        pe = nm.pe_of(component_id)
        owner = nm.pe_prefix(*pe) if pe else component_id
        log = self._stage.get((owner, stage))
        if log is None:
            log = self._stage[(owner, stage)] = StageLog()
        self._logs[(component_id, stage)] = log
        return log

    @property
    def records(self) -> list[OpRecord]:
        if self._raw:
            for t0, t1, comp, kind, name, params in self._raw:
                if callable(params):
                    params = params()
                self._records.append(OpRecord(t0, t1, comp, kind, name, params or {}))
            self._raw.clear()
        if not self._sorted:
            self._records.sort(key=lambda r: r.t_start)
            self._sorted = True
        return self._records

    @property
    def counts(self) -> Counter[str]:
        """Ops reported so far, per op name (a copy; 0 for a name never reported)."""
        return Counter(self._settled_counts())

    def __len__(self) -> int:
        return sum(self._settled_counts().values())

    def stage_intervals(self, owner: str, stage: str) -> list[tuple[float, float]]:
        """The busy intervals of one stage of one PE (e.g. "sip0.cube0.pe0", "GEMM"),
        merged and sorted."""
        return self.busy_intervals(owner, (stage,))

    def busy_intervals(self, owner: str, stages: Sequence[str]) -> list[tuple[float, float]]:
        """When any of ``stages`` of one PE was busy: their intervals merged and sorted."""
        starts, ends = [], []
        for stage in stages:
            log = self._stage.get((owner, stage))
            if log is not None:
                more_starts, more_ends = log.arrays()
                starts.append(more_starts)
                ends.append(more_ends)
        if not starts:
            return []
        return merged_intervals(np.concatenate(starts), np.concatenate(ends))

    def stage_busy(self) -> dict[str, dict[str, float]]:
        """{owner: {stage: busy ns (union of that stage's intervals)}}, sorted."""
        out: dict[str, dict[str, float]] = {}
        for (owner, stage) in sorted(self._stage):
            starts, ends = self._stage[(owner, stage)].arrays()
            out.setdefault(owner, {})[stage] = union_ns(starts, ends)
        return out
