"""The indexed hazard table orders commands exactly like comparing with every access."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.components.builtin.hazards import AccessTracker
from kernbench.isa.handles import Completion


class Everything:
    """The obvious table: every access ever recorded, compared one by one."""

    def __init__(self):
        self.live = []

    def deps(self, rr, wr):
        def hit(a, b):
            return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]

        raw = [c for rng, w, c in self.live if w and any(hit(rng, r) for r in rr)]
        other = [c for rng, _, c in self.live if any(hit(rng, w) for w in wr)]
        return raw, other

    def record(self, rr, wr, comp):
        self.live += [(r, False, comp) for r in rr] + [(w, True, comp) for w in wr]


ranges = st.lists(st.tuples(st.sampled_from(["tcm", "hbm"]), st.integers(0, 60),
                            st.integers(1, 24)).map(lambda t: (t[0], t[1], t[1] + t[2])),
                  max_size=3)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(ranges, ranges, st.integers(0, 20)), min_size=1, max_size=40))
def test_ready_times_equal_those_of_the_exhaustive_table(ops):
    """Each op starts after its dependencies end (that is how units use them); the
    latest producer and the latest write-blocker must be the same in both tables."""
    fast, slow = AccessTracker(), Everything()
    for i, (rr, wr, work) in enumerate(ops):
        raw_f, other_f = fast.deps(rr, wr)
        raw_s, other_s = slow.deps(rr, wr)

        def latest(comps):
            return max((c.done_at for c in comps), default=0.0)

        assert latest(raw_f) == latest(raw_s), i
        assert latest(raw_f + other_f) == latest(raw_s + other_s), i
        assert len(raw_f) <= len({id(c) for c in raw_s})
        comp = Completion(max(latest(raw_s + other_s), float(i)) + work, label=f"op{i}")
        fast.record(rr, wr, comp)
        slow.record(rr, wr, comp)


def test_the_table_keeps_only_what_can_still_matter():
    """A buffer rewritten a thousand times, and a thousand readers of one weight: the
    table stays small, and a new writer of the weight still waits for every reader."""
    t = AccessTracker()
    for i in range(1000):
        t.prune(float(i))  # as PE_CPU does before each command: what ended is over
        t.record([("tcm", 0, 64)], [("tcm", 64, 128)], Completion(float(i) + 0.5))
    assert len(t) <= 2 * 64  # bounded by what can still be in flight, not by the history
    readers = [Completion(None, label=f"r{i}") for i in range(1000)]
    for c in readers:
        t.record([("hbm", 0, 4096)], [], c)
    raw, other = t.deps([], [("hbm", 1000, 1001)])
    assert raw == [] and {id(c) for c in other} == {id(c) for c in readers}


class _Cmd:
    def __init__(self, reads, writes, waits_for_inputs):
        self._r, self._w, self.waits_for_inputs = reads, writes, waits_for_inputs

    def accesses(self):
        return self._r, self._w


def _h(addr, nbytes):
    from kernbench.isa.handles import TensorHandle
    return TensorHandle(f"h{addr}", addr, (nbytes // 4,), "f32", "tcm", True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 15), st.integers(1, 4), st.booleans()),
                min_size=1, max_size=10),
       st.lists(st.tuples(st.integers(0, 15), st.integers(1, 4)), max_size=6),
       st.booleans())
def test_access_ranges_keep_every_dependency(history, cmd_ops, waits):
    """The reduced ranges of a command (writes merged, repeated reads and, for a
    non-blocking command, reads its writes cover dropped) find the same latest
    dependencies in a table holding any history, and record the same table."""
    from kernbench.components.builtin.hazards import access_ranges

    rw = [(_h(64 * a, 64 * n), w) for a, n, w in history]
    cut = len(cmd_ops) // 2
    reads = [_h(64 * a, 64 * n) for a, n in cmd_ops[:cut]]
    writes = [_h(64 * a, 64 * n) for a, n in cmd_ops[cut:]]
    reads += writes[:1]  # a read-modify-write
    full = ([h.byte_range() for h in reads], [h.byte_range() for h in writes])
    reduced = access_ranges(_Cmd(reads, writes, waits))
    tables = []
    for rr, wr in (full, reduced):
        t = AccessTracker()
        for i, (h, is_write) in enumerate(rw):
            c = Completion(float(10 + i), label=f"op{i}")
            t.record([] if is_write else [h.byte_range()], [h.byte_range()] if is_write else [], c)
        raw, other = t.deps(rr, wr)
        tables.append((max((c.done_at for c in raw), default=0.0),
                       max((c.done_at for c in raw + other), default=0.0)))
    assert tables[1][1] == tables[0][1]  # what the op as a whole waits for
    if waits:  # a blocking op waits on the CPU for its producers: those stay producers
        assert tables[1][0] == tables[0][0]
