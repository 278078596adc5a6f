"""DPPolicy / ShardSpec placement (with cube_start) and program ids."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.errors import KernbenchError
from kernbench.policy.placement import DPPolicy, resolve_dp_policy
from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine import GraphEngine


def test_row_and_column_splits_cover_the_tensor_once():
    shards = resolve_dp_policy(DPPolicy(cube="row_wise", pe="column_wise", num_cubes=2, num_pes=4),
                               (8, 16), sip=0, cubes_per_sip=4, pes_per_cube=8)
    assert len(shards) == 8
    cells = set()
    for s in shards:
        assert s.shape == (4, 4)
        cells |= {(r, c) for r in range(*s.rows) for c in range(*s.cols)}
    assert cells == {(r, c) for r in range(8) for c in range(16)}


def test_cube_start_shifts_the_cubes_and_is_checked():
    shards = resolve_dp_policy(DPPolicy(num_cubes=2, cube_start=2), (4,), 0, 4, 8)
    assert [s.cube for s in shards] == [2, 3]
    with pytest.raises(KernbenchError, match="do not fit"):
        resolve_dp_policy(DPPolicy(num_cubes=2, cube_start=3), (4,), 0, 4, 8)
    with pytest.raises(KernbenchError, match="evenly"):
        resolve_dp_policy(DPPolicy(pe="row_wise", num_pes=3), (8, 2), 0, 4, 8)


def test_kernels_see_physical_cube_ids_and_their_local_shards(small_graph):
    eng = GraphEngine(small_graph, enable_data=True)
    ctx = RuntimeContext(eng)
    data = np.arange(2 * 2 * 4, dtype=np.float32).reshape(4, 4)
    dp = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=2, num_pes=2, cube_start=2)
    src = ctx.from_numpy(data, dp=dp)
    out = ctx.empty((4, 4), "f32", dp=dp)

    def kernel(src, out, *, tl):
        x = tl.load(src, (1, 4), "f32")
        ids = tl.full((1, 4), 10.0 * tl.program_id(1) + tl.program_id(0), "f32")
        tl.store(out, x + ids)

    ctx.wait(ctx.launch("ids", kernel, src, out, dp=dp))
    got = ctx.to_numpy(out)
    expect = data + np.array([[20], [21], [30], [31]], np.float32)  # (cube, pe) per row block
    np.testing.assert_array_equal(got, expect)


def test_replicated_tensor_reads_the_local_copy(small_graph):
    eng = GraphEngine(small_graph)
    ctx = RuntimeContext(eng)
    t = ctx.zeros((1024,), "f16", dp=DPPolicy(num_pes=8))
    assert len({p.pa.hbm_offset // small_graph.spec.hbm_slice_bytes for p in t.placements}) == 8
    for p in t.placements:  # every PE's MMU maps the common VA to its own slice
        mmu = eng.pe(0, p.shard.cube, p.shard.pe).mmu
        assert mmu.translate(t.va) == p.pa.encode()
