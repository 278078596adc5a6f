"""MemoryStore: byte-addressable, copying, and loud about uninitialised reads."""

import numpy as np
import pytest

from kernbench.errors import SimulationError
from kernbench.sim_engine.memory_store import MemoryStore


def test_round_trip_and_sub_range_reads():
    ms = MemoryStore()
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    ms.write("hbm", 1000, a)
    np.testing.assert_array_equal(ms.read("hbm", 1000, (8, 8), np.float32), a)
    row3 = ms.read("hbm", 1000 + 3 * 32, (8,), np.float32)
    np.testing.assert_array_equal(row3, a[3])


def test_writes_copy_and_reads_copy():
    ms = MemoryStore()
    a = np.ones(4, dtype=np.int32)
    ms.write("tcm", 0, a)
    a[:] = 7
    out = ms.read("tcm", 0, (4,), np.int32)
    assert out.tolist() == [1, 1, 1, 1]
    out[:] = 9
    assert ms.read("tcm", 0, (4,), np.int32).tolist() == [1, 1, 1, 1]


def test_overlapping_and_touching_writes_merge():
    ms = MemoryStore()
    ms.write("hbm", 0, np.full(8, 1, np.uint8))
    ms.write("hbm", 16, np.full(8, 3, np.uint8))
    ms.write("hbm", 6, np.full(12, 2, np.uint8))  # overlaps both
    assert ms.segments("hbm") == [(0, 24)]
    assert ms.read_bytes("hbm", 0, 24).tolist() == [1] * 6 + [2] * 12 + [3] * 6
    ms.write("hbm", 24, np.full(4, 5, np.uint8))  # touching -> merged
    assert ms.segments("hbm") == [(0, 28)]


def test_reading_unwritten_bytes_is_an_error():
    ms = MemoryStore()
    ms.write("hbm", 0, np.zeros(8, np.uint8))
    with pytest.raises(SimulationError, match="never written"):
        ms.read_bytes("hbm", 4, 8)
    with pytest.raises(SimulationError):
        ms.read_bytes("sram", 0, 1)
    assert not ms.has("hbm", 4, 8) and ms.has("hbm", 0, 8)


def test_snapshot_is_independent():
    ms = MemoryStore()
    ms.write("hbm", 0, np.zeros(4, np.uint8))
    snap = ms.snapshot()
    ms.write("hbm", 0, np.ones(4, np.uint8))
    assert snap.read_bytes("hbm", 0, 4).tolist() == [0, 0, 0, 0]
