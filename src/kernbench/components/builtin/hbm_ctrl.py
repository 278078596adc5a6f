"""HBM controller of one PE slice: pseudo-channels served in parallel.

Under the n_to_one mapping a slice owns ``channels`` pseudo-channels. Bytes are
interleaved over them in ``interleave_bytes`` granules, and each channel is a
serial resource with its own busy timeline, so a transfer's HBM time is set by
its most loaded channel and concurrent transfers queue per channel.

Most transfers cover every channel of the slice with the same share, which
keeps the channels' timelines identical. While that holds, the controller
books one shared timeline for all of them (lockstep) instead of ``channels``
identical ones, and splits it into per-channel copies at the first uneven
transfer; it returns to lockstep once everything booked so far is over. The
times are the same either way; the lockstep only saves work.
"""

from __future__ import annotations

from kernbench.components.busy_timeline import BusyTimeline


class HbmController:
    __slots__ = ("node_id", "channels", "channel_bw_gbs", "interleave", "period", "timelines",
                 "bytes_served", "_shares", "_lockstep")

    def __init__(self, node_id: str, channels: int, channel_bw_gbs: float, interleave: int) -> None:
        self.node_id = node_id
        self.channels = channels
        self.channel_bw_gbs = channel_bw_gbs
        self.interleave = interleave
        self.period = channels * interleave  # bytes after which the channels repeat
        self.timelines = [BusyTimeline() for _ in range(channels)]
        self.bytes_served = 0
        self._shares: dict[int, tuple[float | None, tuple]] = {}
        self._lockstep: BusyTimeline | None = BusyTimeline()  # None: channels book apart

    @property
    def bw_gbs(self) -> float:
        return self.channels * self.channel_bw_gbs

    def channel_bytes(self, offset: int, nbytes: int) -> list[int]:
        """Bytes each pseudo-channel serves for ``[offset, offset + nbytes)`` of the slice."""
        k, g = self.channels, self.interleave
        out = [0] * k
        if nbytes <= 0:
            return out
        first, last = offset // g, (offset + nbytes - 1) // g
        total = last - first + 1
        base, rem = divmod(total, k)
        for i in range(k):
            out[(first + i) % k] = (base + (1 if i < rem else 0)) * g
        out[first % k] -= offset - first * g
        out[last % k] -= (last + 1) * g - (offset + nbytes)
        return out

    def service_ns(self, offset: int, nbytes: int) -> float:
        """Time the most loaded channel needs, with no contention."""
        return max(self.channel_bytes(offset, nbytes)) / self.channel_bw_gbs

    def shares(self, offset: int, nbytes: int) -> tuple[float | None, tuple[tuple[int, float], ...]]:
        """(service ns if every channel gets the same share else None, ((channel, ns), ...)
        for the channels a transfer touches). Depends only on the offset within one
        interleave period, so it is cached."""
        period = self.period
        phase = offset % period
        key = nbytes * period + phase  # (an int: no tuple to build and hash per transfer)
        hit = self._shares.get(key)
        if hit is None:
            if len(self._shares) > 4096:  # many distinct sizes: keep the cache bounded
                self._shares.clear()
            bw = self.channel_bw_gbs
            per = self.channel_bytes(phase, nbytes)
            touched = tuple((i, nb / bw) for i, nb in enumerate(per) if nb > 0)
            even = touched[0][1] if len(set(per)) == 1 and per[0] > 0 else None
            hit = self._shares[key] = (even, touched)
        return hit

    def reserve(self, t: float, offset: int, nbytes: int, now: float) -> tuple[float, float]:
        """Book the channels from ``t``; return (wait before all can start, service time)."""
        self.bytes_served += nbytes
        even, touched = self.shares(offset, nbytes)
        lock = self._lockstep
        if lock is None and even is not None and self._all_over(now):
            lock = self._lockstep = BusyTimeline()
        if lock is not None:
            if even is not None:
                return lock.book(t, even, now) - t, even
            self._split(lock)
        latest_start = t
        longest = 0.0
        timelines = self.timelines
        for i, d in touched:
            s = timelines[i].book(t, d, now)
            if s > latest_start:
                latest_start = s
            if d > longest:
                longest = d
        return latest_start - t, longest

    def _split(self, lock: BusyTimeline) -> None:
        """Leave lockstep: every channel takes a copy of the shared bookings."""
        for tl in self.timelines:
            tl.starts = list(lock.starts)
            tl.ends = list(lock.ends)
            tl.busy_ns += lock.busy_ns
        self._lockstep = None

    def _all_over(self, now: float) -> bool:
        for tl in self.timelines:
            if tl.ends and tl.ends[-1] > now:
                return False
        for tl in self.timelines:
            tl.starts.clear()
            tl.ends.clear()
        return True

    def channel_busy_ns(self) -> list[float]:
        """Booked time per channel (lockstep bookings count on every channel)."""
        shared = self._lockstep.busy_ns if self._lockstep is not None else 0.0
        return [tl.busy_ns + shared for tl in self.timelines]
