"""HBM controller: interleaving over pseudo-channels and per-channel queueing."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.components.builtin.hbm_ctrl import HbmController


def brute_force(offset, nbytes, channels, granule):
    out = [0] * channels
    for b in range(offset, offset + nbytes):
        out[(b // granule) % channels] += 1
    return out


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 5_000), st.sampled_from([1, 2, 4, 8]),
       st.sampled_from([32, 64, 256]))
def test_channel_bytes_matches_byte_by_byte_assignment(offset, nbytes, channels, granule):
    ctrl = HbmController("x", channels, 32.0, granule)
    assert ctrl.channel_bytes(offset, nbytes) == brute_force(offset, nbytes, channels, granule)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5_000), st.integers(1, 3_000)), min_size=1,
                max_size=40), st.sampled_from([2, 4, 8]), st.sampled_from([32, 64]))
def test_cached_shares_are_each_transfers_own(transfers, channels, granule):
    """``shares`` caches by offset within the interleave period and size; on one
    controller, every answer still equals the byte-by-byte assignment of that transfer."""
    ctrl = HbmController("x", channels, 32.0, granule)
    for offset, nbytes in transfers:
        per = brute_force(offset, nbytes, channels, granule)
        touched = tuple((i, nb / 32.0) for i, nb in enumerate(per) if nb)
        even = touched[0][1] if len(set(per)) == 1 else None
        assert ctrl.shares(offset, nbytes) == (even, touched)


def test_large_aligned_transfer_spreads_evenly():
    ctrl = HbmController("x", 8, 32.0, 256)
    assert ctrl.channel_bytes(0, 1 << 20) == [(1 << 20) // 8] * 8
    assert ctrl.service_ns(0, 1 << 20) == (1 << 20) / 256.0  # 8 x 32 GB/s


def test_small_transfer_is_limited_by_one_channel():
    ctrl = HbmController("x", 8, 32.0, 256)
    assert ctrl.service_ns(0, 128) == 128 / 32.0


def test_concurrent_requests_queue_per_channel():
    ctrl = HbmController("x", 8, 32.0, 256)
    wait1, svc1 = ctrl.reserve(0.0, 0, 2048, now=0.0)  # one granule per channel
    wait2, svc2 = ctrl.reserve(0.0, 2048, 2048, now=0.0)
    assert (wait1, svc1) == (0.0, 8.0)
    assert (wait2, svc2) == (8.0, 8.0)
    # a request on a disjoint channel subset does not wait
    ctrl2 = HbmController("y", 8, 32.0, 256)
    ctrl2.reserve(0.0, 0, 256, now=0.0)  # channel 0 only
    assert ctrl2.reserve(0.0, 256, 256, now=0.0) == (0.0, 8.0)  # channel 1


class _PerChannel:
    """The plain model: one timeline per channel, every transfer books each share."""

    def __init__(self, channels, bw, granule):
        from kernbench.components.busy_timeline import BusyTimeline

        self.ctrl = HbmController("ref", channels, bw, granule)
        self.tls = [BusyTimeline() for _ in range(channels)]
        self.bw = bw

    def reserve(self, t, offset, nbytes):
        starts = [t]
        longest = 0.0
        for tl, nb in zip(self.tls, self.ctrl.channel_bytes(offset, nbytes), strict=True):
            if nb:
                starts.append(tl.reserve(t, nb / self.bw))
                longest = max(longest, nb / self.bw)
        return max(starts) - t, longest


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0, 256, 512, 1024, 4096, 8192]),
                          st.sampled_from([64, 256, 300, 2048, 4096, 16384])),
                min_size=1, max_size=60))
def test_lockstep_booking_gives_the_per_channel_times(ops):
    """Even transfers share one timeline while the channels stay identical; uneven
    ones split it. Every wait and service time must equal the per-channel model's."""
    fast = HbmController("x", 8, 32.0, 256)
    ref = _PerChannel(8, 32.0, 256)
    now = 0.0
    for step, offset, nbytes in ops:
        now += 40.0 * step
        for t in (now, now + 5.0):
            assert fast.reserve(t, offset, nbytes, now) == ref.reserve(t, offset, nbytes)
    busy = fast.channel_busy_ns()
    assert busy == [tl.busy_ns for tl in ref.tls]
