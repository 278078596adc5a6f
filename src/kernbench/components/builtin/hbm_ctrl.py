"""HBM controller of one PE slice: pseudo-channels served in parallel.

Under the n_to_one mapping a slice owns ``channels`` pseudo-channels. Bytes are
interleaved over them in ``interleave_bytes`` granules, and each channel is a
serial resource with its own busy timeline, so a transfer's HBM time is set by
its most loaded channel and concurrent transfers queue per channel.
"""

from __future__ import annotations

from kernbench.components.busy_timeline import BusyTimeline


class HbmController:
    __slots__ = ("node_id", "channels", "channel_bw_gbs", "interleave", "timelines", "bytes_served")

    def __init__(self, node_id: str, channels: int, channel_bw_gbs: float, interleave: int) -> None:
        self.node_id = node_id
        self.channels = channels
        self.channel_bw_gbs = channel_bw_gbs
        self.interleave = interleave
        self.timelines = [BusyTimeline() for _ in range(channels)]
        self.bytes_served = 0

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

    def reserve(self, t: float, offset: int, nbytes: int, now: float) -> tuple[float, float]:
        """Book the channels from ``t``; return (wait before all can start, service time)."""
        latest_start = t
        longest = 0.0
        bw = self.channel_bw_gbs
        for tl, nb in zip(self.timelines, self.channel_bytes(offset, nbytes), strict=True):
            if nb <= 0:
                continue
            if tl.ends and tl.ends[0] <= now:
                tl.prune(now)
            d = nb / bw
            s = tl.reserve(t, d)
            if s > latest_start:
                latest_start = s
            if d > longest:
                longest = d
        self.bytes_served += nbytes
        return latest_start - t, longest
