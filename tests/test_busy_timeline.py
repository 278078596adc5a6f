"""BusyTimeline: gap-aware booking of a serial resource."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.components.busy_timeline import BusyTimeline


def test_back_to_back_bookings_queue_in_order():
    tl = BusyTimeline()
    assert tl.reserve(0.0, 10.0) == 0.0
    assert tl.reserve(0.0, 10.0) == 10.0  # busy until 10
    assert tl.reserve(5.0, 1.0) == 20.0
    assert tl.busy_ns == 21.0


def test_later_issue_fits_into_an_earlier_gap():
    tl = BusyTimeline()
    assert tl.reserve(100.0, 10.0) == 100.0  # a booking in the future
    assert tl.reserve(0.0, 50.0) == 0.0  # fits entirely before it
    assert tl.reserve(0.0, 60.0) == 110.0  # does not fit in the 50..100 gap


def test_zero_duration_never_books():
    tl = BusyTimeline()
    tl.reserve(0.0, 10.0)
    assert tl.reserve(3.0, 0.0) == 3.0
    assert tl.busy_ns == 10.0 and tl.ends == [10.0]


def test_prune_forgets_the_past_only():
    tl = BusyTimeline()
    tl.reserve(0.0, 10.0)
    tl.reserve(20.0, 10.0)
    tl.prune(15.0)
    assert list(zip(tl.starts, tl.ends, strict=True)) == [(20.0, 30.0)]
    assert tl.reserve(15.0, 5.0) == 15.0  # gap before the remaining booking


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(1, 30)), min_size=1, max_size=40))
def test_bookings_never_overlap_and_start_no_earlier_than_asked(requests):
    tl = BusyTimeline()
    booked = []
    for t, d in requests:
        s = tl.reserve(float(t), float(d))
        assert s >= t
        booked.append((s, s + d))
    booked.sort()
    for (_s1, e1), (s2, _) in zip(booked, booked[1:], strict=False):
        assert e1 <= s2
    # merged intervals cover exactly the booked time
    assert abs(sum(e - s for s, e in zip(tl.starts, tl.ends, strict=True))
               - sum(d for _, d in requests)) < 1e-9


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(1, 20)), min_size=1, max_size=30))
def test_each_booking_takes_the_earliest_feasible_start(requests):
    """Brute force: the chosen start is the smallest integer start that fits."""
    tl = BusyTimeline()
    busy = []
    for t, d in requests:
        s = tl.reserve(float(t), float(d))
        expect = t
        while any(not (expect + d <= a or expect >= b) for a, b in busy):
            expect += 1
        assert s == expect
        busy.append((s, s + d))


def test_a_booking_that_fills_a_gap_exactly_fits_despite_rounding():
    """Start times are sums of float delays: a gap filled exactly may come out a few
    ulps short, and the booking must still take it rather than move past the next one."""
    tl = BusyTimeline()
    a = 0.1 + 0.2  # 0.30000000000000004
    tl.reserve(0.0, a)
    tl.reserve(a + 1024.0, 10.0)
    start = 0.1 + 0.2 + 0.0  # the same instant, reached by another sum
    got = tl.reserve(start, 1024.0 * (1 + 1e-15))  # a hair longer than the gap
    assert got == start
    assert tl.ends[-1] == a + 1024.0 + 10.0  # merged into one busy block, no overlap left
    assert len(tl.starts) == 1
    # a booking clearly longer than the gap still has to wait
    tl2 = BusyTimeline()
    tl2.reserve(0.0, 1.0)
    tl2.reserve(11.0, 1.0)
    assert tl2.reserve(1.0, 10.5) == 12.0


def test_book_drops_what_ended_before_now_and_agrees_with_reserve():
    import random

    rng = random.Random(7)
    fast, ref = BusyTimeline(), BusyTimeline()
    now = 0.0
    for _ in range(2000):
        now += rng.choice([0.0, 0.5, 3.0])
        t = now + rng.choice([0.0, 1.0, 5.0, 20.0])
        d = rng.choice([1.0, 2.5, 8.0])
        assert fast.book(t, d, now) == ref.reserve(t, d)
    assert fast.busy_ns == ref.busy_ns
    assert len(fast.ends) <= len(ref.ends)
    assert fast.ends[-1] == ref.ends[-1]


def test_extend_equals_reserving_each_run():
    runs = [(5.0, 7.0), (8.0, 9.0), (12.0, 20.0)]  # as another timeline holds them
    a, b = BusyTimeline(), BusyTimeline()
    for t in (a, b):
        t.reserve(0.0, 5.0)  # the last booking touches the first run: they merge
    for s, e in runs:
        a.reserve(s, e - s)
    b.extend([s for s, _ in runs], [e for _, e in runs], sum(e - s for s, e in runs))
    assert (a.starts, a.ends, a.busy_ns) == (b.starts, b.ends, b.busy_ns)


def test_extend_refuses_runs_before_the_last_booking():
    import pytest

    t = BusyTimeline()
    t.reserve(0.0, 10.0)
    with pytest.raises(ValueError, match="overlaps"):
        t.extend([5.0], [6.0], 1.0)
