"""Occupancy of one serial resource (a link direction, an HBM pseudo-channel, an engine).

A timeline holds disjoint busy intervals, sorted. ``reserve(t, d)`` books the
earliest interval of length ``d`` that starts at or after ``t`` and fits in a
gap, so a transfer issued later but arriving earlier is not queued behind a
booking that only starts in the future. :meth:`book` takes ``now``, a time no
later booking can start before (simulated time for the fabric; for a PE's
engines the CPU's clock when it runs behind, ``PeOps.floor``), so intervals that
ended by then can never matter again (a booking older than it is a bug). The
fast path (the fabric, IPCQ and the engines all book through it) drops them
whenever it books after everything held, and ``prune(now)`` drops them
explicitly. A timeline therefore holds only what is still in flight, and a
booking is O(1) unless it has to search a gap.

A gap "fits" when the booking ends no more than :data:`FIT_TOLERANCE` (a
relative 1e-12) past the next interval: start times are sums of many float
delays, and a booking that fills a gap exactly must not be refused because the
last bit of its end rounded up.
"""

from __future__ import annotations

import bisect
from typing import Final

# (Final: the compiled twin keeps these in C statics, not looked up by name per call; ADR 0065)
bisect_right: Final = bisect.bisect_right

FIT_TOLERANCE: Final = 1e-12


class BusyTimeline:
    __slots__ = ("starts", "ends", "busy_ns")

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.busy_ns = 0.0  # total booked time, for utilisation reports

    def book(self, t: float, duration: float, now: float) -> float:
        """:meth:`reserve` with ``now`` known; the same result, cheaper when ``t``
        is after every booking (then finished intervals are dropped on the way)."""
        ends = self.ends
        if duration > 0.0:  # (a zero-length booking holds nothing)
            if t < now:
                raise RuntimeError(f"a booking at {t} ns is older than the time {now} ns "
                                   f"this timeline may already have forgotten up to")
            if ends and t >= (last := ends[-1]):
                self.busy_ns += duration
                if last <= now:  # all of it is over: keep only the new interval
                    if len(ends) > 1:
                        del self.starts[:-1], ends[:-1]
                    self.starts[0] = t
                    ends[0] = t + duration
                elif t == last:
                    ends[-1] = t + duration
                else:
                    self.starts.append(t)
                    ends.append(t + duration)
                return t
            if (ends and t >= (first := self.starts[-1])
                    and t + duration > first + FIT_TOLERANCE * abs(first)):
                # ``t`` falls inside the last interval (a link still busy): no gap before
                # its end can hold the booking, which extends it, as ``reserve`` would
                if ends[0] <= now:
                    self.prune(now)
                self.busy_ns += duration
                last = ends[-1]
                ends[-1] = last + duration
                return last
        if ends and ends[0] <= now:
            self.prune(now)
        return self.reserve(t, duration)

    def reserve(self, t: float, duration: float) -> float:
        """Book ``duration`` ns at the earliest free start >= ``t``; return that start."""
        if duration <= 0.0:
            return t
        self.busy_ns += duration
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
        while i < n and s + duration > starts[i] + FIT_TOLERANCE * abs(starts[i]):
            if ends[i] > s:
                s = ends[i]
            i += 1
        e = s + duration
        touch_prev = i > 0 and ends[i - 1] == s
        touch_next = i < n and e >= starts[i] - FIT_TOLERANCE * abs(starts[i])
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

    def extend(self, starts, ends, busy_ns: float) -> None:
        """Append runs as a timeline holds them (sorted, not touching) that begin at or
        after every booking held: a planned composite's, on an engine idle from its
        start. ``busy_ns`` is their total length. The same as reserving each in turn."""
        own_s, own_e = self.starts, self.ends
        i = 0
        if own_e and starts and starts[0] <= own_e[-1]:
            if starts[0] < own_e[-1]:
                raise ValueError(f"run at {starts[0]} overlaps a booking ending {own_e[-1]}")
            own_e[-1] = ends[0]  # touching the last booking: one interval, as reserve does
            i = 1
        own_s.extend(starts[i:])
        own_e.extend(ends[i:])
        self.busy_ns += busy_ns

    def prune(self, now: float) -> None:
        """Forget intervals that ended at or before ``now`` (they can no longer matter)."""
        ends = self.ends
        if ends and ends[0] <= now:
            k = bisect_right(ends, now)
            del self.starts[:k], ends[:k]

    def free_at(self, t: float) -> bool:
        i = bisect_right(self.ends, t)
        return i >= len(self.starts) or self.starts[i] > t
