"""BusyTimeline: gap-aware booking of a serial resource."""

import pytest
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


def test_book_inside_a_busy_last_interval_holds_what_reserve_holds():
    """A link still busy when the next transfer arrives is ``book``'s common case: the
    booking starts where the last interval ends and extends it. Start, intervals and
    busy time equal ``reserve``'s (the reference, pruned to the same ``now``), with
    uneven float durations and starts both inside the last interval and before it."""
    import random

    rng = random.Random(11)
    fast, ref = BusyTimeline(), BusyTimeline()
    now, inside = 0.0, 0
    for _ in range(3000):
        now += rng.choice([0.0, 0.0, 0.3, 2.0])
        if fast.ends and rng.random() < 0.7:  # somewhere in the last interval or gap
            t = max(now, fast.starts[-1] + rng.uniform(-1.0, 1.0) * (fast.ends[-1]
                                                                     - fast.starts[-1]))
        else:
            t = now + rng.choice([0.0, 0.7, 4.0, 15.0])
        inside += bool(fast.ends) and fast.starts[-1] <= t < fast.ends[-1]
        d = rng.uniform(0.1, 6.0)
        assert fast.book(t, d, now) == ref.reserve(t, d)
        ref.prune(now)
        fast.prune(now)
        assert (fast.starts, fast.ends) == (ref.starts, ref.ends)
    assert fast.busy_ns == ref.busy_ns
    assert inside > 1000  # the path under test ran


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

    t = BusyTimeline()
    t.reserve(0.0, 10.0)
    with pytest.raises(ValueError, match="overlaps"):
        t.extend([5.0], [6.0], 1.0)


def test_a_booking_older_than_now_is_refused():
    """``now`` promises that nothing will be booked before it, which is what lets the
    timeline forget finished intervals; breaking the promise is a bug, not a gap to fill
    (a PE's engines pass ``PeOps.floor``, the CPU's clock when the kernel runs behind)."""
    t = BusyTimeline()
    t.book(10.0, 5.0, 0.0)
    with pytest.raises(RuntimeError, match="older than"):
        t.book(11.0, 1.0, 20.0)


# -- the one booking fast path against a plain reference --------------------------------------
class PlainTimeline:
    """The obvious implementation: keep every interval, take the earliest start at or
    after t that overlaps none of them."""

    def __init__(self) -> None:
        self.intervals: list[tuple[float, float]] = []

    def book(self, t: float, d: float) -> float:
        s = t
        moved = True
        while moved:
            moved = False
            for a, b in self.intervals:
                if s < b and a < s + d:
                    s, moved = b, True
        self.intervals.append((s, s + d))
        return s


_history = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 8), st.integers(1, 6)),
                    min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(_history)
def test_book_equals_the_plain_reference_on_random_histories(steps):
    """``BusyTimeline.book`` (the fast path the fabric and IPCQ use, once) drops what is
    over and appends in O(1); on any history it starts every booking where the plain
    implementation does. Bookings never start before the current time, as in the engine."""
    fast, plain = BusyTimeline(), PlainTimeline()
    now = 0.0
    for advance, ahead, d in steps:
        now += advance
        t = now + ahead
        assert fast.book(float(t), float(d), now) == plain.book(float(t), float(d))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.integers(1, 6)),
                min_size=1, max_size=25))
def test_fabric_booking_equals_a_plain_hop_by_hop_reference(default_graph, transfers):
    """``Fabric.book`` over a real route equals walking the route with plain timelines:
    the head pays each node, waits for each link, the tail follows by the bottleneck."""
    from kernbench.components.fabric import Fabric
    from kernbench.sim_engine import GraphEngine

    flows = GraphEngine(default_graph).flows
    fabric = Fabric(default_graph)
    # three PE-to-PE routes that share links: two into one PE, one across the mesh
    plans = [fabric.plan(flows.pe_message(a, b, 1).legs[0].nodes)
             for a, b in (((0, 0, 0), (0, 1, 0)), ((0, 0, 1), (0, 1, 0)),
                          ((0, 0, 2), (0, 5, 3)))]
    plain = {}
    now = 0.0
    for advance, which, kib in transfers:
        now += advance * 10.0
        plan = plans[which % 3]
        nbytes = kib * 1024
        t = now
        ref = t + plan.overheads[0]
        for (ovh, _, bw, wire), a, b in zip(plan.steps, plan.nodes, plan.nodes[1:],
                                            strict=False):
            ref += ovh
            ref = plain.setdefault((a, b), PlainTimeline()).book(ref, nbytes / bw) + wire
        ref += plan.overheads[-1] + nbytes / plan.bottleneck_gbs
        assert fabric.book(plan, nbytes, t, now)[0] == ref
