"""Occupancy of one serial resource (a link direction, an HBM pseudo-channel).

A timeline holds disjoint busy intervals. ``reserve(t, d)`` books the earliest
interval of length ``d`` that starts at or after ``t`` and fits in a gap, so a
transfer issued later but arriving earlier is not queued behind a booking that
only starts in the future. Intervals that end before ``prune(now)`` are dropped;
in steady state the list holds a handful of entries, keeping reserve O(1).
"""

from __future__ import annotations

from bisect import bisect_right


class BusyTimeline:
    __slots__ = ("starts", "ends", "busy_ns", "bookings")

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.busy_ns = 0.0  # total booked time, for utilisation reports
        self.bookings = 0

    def reserve(self, t: float, duration: float) -> float:
        """Book ``duration`` ns at the earliest free start >= ``t``; return that start."""
        if duration <= 0.0:
            return t
        self.busy_ns += duration
        self.bookings += 1
        starts, ends = self.starts, self.ends
        n = len(ends)
        if n == 0 or t >= ends[-1]:
            if n and t == ends[-1]:
                ends[-1] = t + duration
            else:
                starts.append(t)
                ends.append(t + duration)
            return t
        i = bisect_right(ends, t)
        s = t
        while i < n and s + duration > starts[i]:
            if ends[i] > s:
                s = ends[i]
            i += 1
        e = s + duration
        touch_prev = i > 0 and ends[i - 1] == s
        touch_next = i < n and starts[i] == e
        if touch_prev and touch_next:
            ends[i - 1] = ends[i]
            del starts[i], ends[i]
        elif touch_prev:
            ends[i - 1] = e
        elif touch_next:
            starts[i] = s
        else:
            starts.insert(i, s)
            ends.insert(i, e)
        return s

    def prune(self, now: float) -> None:
        """Forget intervals that ended at or before ``now`` (they can no longer matter)."""
        ends = self.ends
        if ends and ends[0] <= now:
            k = bisect_right(ends, now)
            del self.starts[:k], ends[:k]

    def free_at(self, t: float) -> bool:
        i = bisect_right(self.ends, t)
        return i >= len(self.starts) or self.starts[i] > t
