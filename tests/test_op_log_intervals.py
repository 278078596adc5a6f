"""The op log's busy intervals: merged exactly, and stored compactly without changing them."""

from __future__ import annotations

import random

import pytest

from kernbench.sim_engine.op_log import OpLogger, StageLog, merged_intervals, union_ns


def scan_merge(intervals):
    """Reference: sort by start, then join every interval that starts at or before the
    end reached so far."""
    out = []
    for s, e in sorted(intervals, key=lambda iv: iv[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [tuple(iv) for iv in out]


def random_intervals(rng: random.Random, n: int):
    """Intervals on a coarse grid (so ties, touching ends and zero lengths are common)
    and a few with fractional ends."""
    out = []
    for _ in range(n):
        s = rng.randrange(0, 60) * 0.5
        d = rng.choice([0.0, 0.5, 1.0, 2.5, rng.random() * 3])
        out.append((s, s + d))
    return out


def test_merged_intervals_equal_a_sorted_scan():
    rng = random.Random(7)
    for _ in range(500):
        ivs = random_intervals(rng, rng.randrange(1, 40))
        starts, ends = zip(*ivs, strict=True)
        assert merged_intervals(list(starts), list(ends)) == scan_merge(ivs)
    assert merged_intervals([], []) == []


def test_a_stage_log_keeps_the_same_union_in_fewer_intervals():
    rng = random.Random(11)
    for trial in range(500):
        ivs = random_intervals(rng, rng.randrange(1, 40))
        if trial % 2:  # in time order, as most engines book
            ivs.sort()
        log = StageLog()
        for s, e in ivs:
            log.add(s, e)
        starts, ends = log.arrays()
        assert len(starts) <= len(ivs)
        assert merged_intervals(starts, ends) == scan_merge(ivs)


def test_shifted_runs_read_as_the_floats_of_adding_each_shifted_run():
    """``add_shifted`` keeps a start and relative runs; read, they must be the very floats
    ``t0 + s`` that adding each run would store, merged with whatever came before and
    after, and the relative runs must be left as they were (a cached plan shares them)."""
    rng = random.Random(5)
    for _ in range(300):
        before = random_intervals(rng, rng.randrange(0, 6))
        one, lazy = StageLog(), StageLog()
        for s, e in before:
            one.add(s, e)
            lazy.add(s, e)
        everything = list(before)
        for _ in range(rng.randrange(1, 4)):
            rel = tuple(sorted(random_intervals(rng, rng.randrange(0, 12))))
            rel_s, rel_e = tuple(s for s, _ in rel), tuple(e for _, e in rel)
            t0 = rng.random() * 50 + 0.1
            for s, e in rel:
                one.add(t0 + s, t0 + e)
                everything.append((t0 + s, t0 + e))
            lazy.add_shifted(t0, rel_s, rel_e)
            assert (rel_s, rel_e) == (tuple(s for s, _ in rel), tuple(e for _, e in rel))
        after = random_intervals(rng, rng.randrange(0, 3))
        for s, e in after:
            one.add(s, e)
            lazy.add(s, e)
        merged = scan_merge(everything + after)
        assert merged_intervals(*lazy.arrays()) == merged_intervals(*one.arrays()) == merged
        assert merged_intervals(*lazy.arrays()) == merged  # (read twice: moved once)


def test_shifted_runs_are_counted_and_must_pair():
    log = StageLog()
    log.add_shifted(2.0, (0.0, 3.0), (1.0, 4.0))
    assert len(log) == 2
    assert [list(x) for x in log.arrays()] == [[2.0, 5.0], [3.0, 6.0]]
    with pytest.raises(ValueError, match="2 starts but 1 ends"):
        log.add_shifted(0.0, (0.0, 1.0), (1.0,))
    rel = (0.0, 1.0)
    log.add_shifted(0.0, rel, (0.5, 1.5))
    with pytest.raises(ValueError, match="other ends"):
        log.add_shifted(1.0, rel, (0.5, 2.5))


def test_back_to_back_bookings_are_stored_as_one_interval():
    log = StageLog()
    t = 0.0
    for d in [1.5, 2.0, 0.25] * 400:
        log.add(t, t + d)
        t += d
    log.add(t + 1.0, t + 2.0)  # after a gap: a second interval
    assert len(log) == 1  # the first run is stored, the second grows
    starts, ends = log.arrays()
    assert list(zip(starts, ends, strict=True)) == [(0.0, t), (t + 1.0, t + 2.0)]


def test_the_op_log_reports_the_union_of_a_stage_and_counts_per_name():
    rng = random.Random(3)
    ivs = random_intervals(rng, 200)
    log = OpLogger(keep_records=False)
    sink = log.sink("sip0.cube0.pe0.pe_gemm", "gemm", "GEMM")
    for i, (s, e) in enumerate(ivs):
        if i % 2:
            log.record(s, e, "sip0.cube0.pe0.pe_gemm", "gemm", "a", None, "GEMM")
        else:
            sink.add(s, e, "b")
    expected = scan_merge(ivs)
    assert log.stage_intervals("sip0.cube0.pe0", "GEMM") == expected
    assert log.stage_busy()["sip0.cube0.pe0"]["GEMM"] == union_ns(*zip(*ivs, strict=True))
    assert log.counts["a"] + log.counts["b"] == len(ivs) == len(log)
    assert log.counts["never"] == 0


def test_sink_counts_are_the_counts_of_every_op_in_first_seen_order():
    """Sinks count the name they saw last and hand the count over later: reading the
    counts at any moment must give what counting each op at once gives, names in the
    order they first occurred (outputs list them in that order)."""
    import random

    from kernbench.sim_engine.op_log import OpLogger

    log = OpLogger(keep_records=False)
    sinks = [log.sink("sip0.cube0.pe0.pe_gemm", "gemm", "GEMM"),
             log.sink("sip0.cube0.pe1.pe_math", "math", "MATH")]
    expected: dict[str, int] = {}
    rng = random.Random(7)
    for i in range(600):
        name = rng.choice(["TileToken/GEMM", "TileToken/MATH", "dma_read", "fetch"])
        how = rng.randrange(4)
        n = 1
        if how < 2:
            sinks[how].add(float(i), i + 0.5, name)
        elif how == 2:
            log.record(float(i), i + 0.5, "sip0.cube0.pe2.pe_dma", "memory", name, stage="DMA")
        else:
            n = rng.randrange(1, 5)
            sinks[i % 2].add_planned(((name, n),), float(i), (0.0,), (0.5,))
        expected[name] = expected.get(name, 0) + n
        if i % 37 == 0:
            assert list(log.counts.items()) == list(expected.items())
    assert list(log.counts.items()) == list(expected.items())
    assert len(log) == sum(expected.values())
