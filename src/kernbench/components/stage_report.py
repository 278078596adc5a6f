"""Where a unit reports each booking of one stage: ``add(start, end, name, params)``.

The op log's sinks (``sim_engine.op_log.StageSink``) and a composite plan's counters
(``pe_stages.NameCounts``) both take a stage's bookings. Declaring them one type lets
the compiled stage rules call ``add`` directly, with unboxed times, instead of looking
the method up by name on an object of unknown type (callgrind, decode attention at 128K:
2 % fewer instructions for the whole run).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class StageReport:
    """Takes the bookings of one stage of one unit."""

    __slots__ = ()

    def add(self, t_start: float, t_end: float, op_name: str,
            params: dict[str, Any] | None = None) -> None:
        raise NotImplementedError

    def add_planned(self, counts: Sequence[tuple[str, int]], t0: float,
                    starts: Sequence[float], ends: Sequence[float]) -> None:
        """Many ops at once: ``counts`` ((op name, ops) pairs) busy over the runs
        [t0 + starts[i], t0 + ends[i]) (a planned composite's bookings on one engine)."""
        raise NotImplementedError
