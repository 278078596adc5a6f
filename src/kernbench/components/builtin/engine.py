"""A single-server PE engine: one op at a time, booked analytically.

Engines are private to their PE, so an op's start and end are computed when
it is issued: it starts when its inputs are ready and the engine is free, and
occupies the engine for its service time plus the node overhead. Bookings use
a gap-aware timeline, so ops issued by a run-ahead kernel and by a composite's
tile feeder interleave in time order rather than in issue order.
"""

from __future__ import annotations

from kernbench.components.busy_timeline import BusyTimeline


class Engine:
    __slots__ = ("node_id", "overhead_ns", "timeline", "ops")

    def __init__(self, node_id: str, overhead_ns: float) -> None:
        self.node_id = node_id
        self.overhead_ns = overhead_ns
        self.timeline = BusyTimeline()
        self.ops = 0

    def book(self, ready: float, service_ns: float, now: float) -> tuple[float, float]:
        """(start, end) of an op that can start at ``ready`` and needs ``service_ns``."""
        occupancy = service_ns + self.overhead_ns
        start = self.timeline.book(ready, occupancy, now)
        self.ops += 1
        return start, start + occupancy

    def idle_twin(self) -> Engine:
        """A new engine with the same service rules, idle (a composite plan books on it)."""
        return Engine(self.node_id, self.overhead_ns)

    @property
    def busy_ns(self) -> float:
        return self.timeline.busy_ns
