"""All-reduce through the AHBM backend: numpy-exact results, the alpha-beta model, errors."""

from __future__ import annotations

import json
from functools import cache

import numpy as np
import pytest

from kernbench.ccl import config as ccl_config
from kernbench.ccl.algorithms.lrab_hierarchical import LrabHierarchical
from kernbench.ccl.group import Group, grid_cycle
from kernbench.ccl.model import Costs
from kernbench.cli.main import main
from kernbench.errors import ConfigError, KernelStateError, UsageError
from kernbench.experiments.allreduce.run import reference, run_allreduce
from kernbench.policy.address.phys_addr import PhysAddr
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine import GraphEngine
from kernbench.topology import load_topology

from .conftest import TOPOLOGIES

ALGORITHMS = tuple(ccl_config.configured_algorithms())  # every configured all-reduce, new ones too
EPS = {"f16": 2.0 ** -11, "bf16": 2.0 ** -8, "f32": 2.0 ** -24}  # unit roundoff
TINY = {"f16": 2.0 ** -24, "bf16": 2.0 ** -133, "f32": 2.0 ** -149}  # smallest subnormal


@cache
def graph(name: str):
    return load_topology(TOPOLOGIES / f"{name}.yaml")


def check(run) -> None:
    """Every rank holds the numpy reduction: exactly for integers and max/min; for float
    sums within the rounding bound of *any* summation order, element by element, and with
    a typical error far below one rank's input (so a rank left out cannot hide).

    Each combine adds in f32 and rounds to the buffer's dtype: a relative error of at
    most ``u = eps(dtype) + eps(f32)``, or an absolute ``TINY`` in the subnormal range.
    Whatever the order (ring chain, line, tree), an element's result is n - 1 combines of
    partial sums each bounded by ``sum_i |a_i[e]|``, so (Higham, *Accuracy and Stability
    of Numerical Algorithms*, 4.2) ``|got - ref| <= gamma_{n-1} sum_i |a_i[e]| +
    (n - 1) TINY`` with ``gamma_k = k u / (1 - k u)``. That worst case grows with n (at 96
    ranks it exceeds a single input), so the median error must also stay below a tenth of
    the median single input: random rounding errors add up to about sqrt(n) u |sum|
    (about 0.01 for f16 at 96 ranks against a median |a| of 0.67), while a missing rank's
    input makes the median error that rank's median |a| itself."""
    ref = reference(run.inputs, run.op)
    ranks = len(run.inputs)
    assert len(run.outputs) == ranks == run.ranks
    stack = np.stack([a.astype(np.float64) for _, a in sorted(run.inputs.items())])
    magnitude = np.abs(stack).sum(axis=0)
    if run.dtype == "i32" or run.op in ("max", "min"):
        for coord, out in run.outputs.items():
            assert np.array_equal(out.astype(ref.dtype), ref), coord
        return
    u = EPS[run.dtype] + (EPS["f32"] if run.dtype != "f32" else 0.0)
    k = ranks - 1
    bound = k * u / (1 - k * u) * magnitude + k * TINY[run.dtype]
    if run.op == "avg":  # the sum's error / n, then one f32 multiply and one rounding
        bound = (bound / ranks) * (1 + 2 * u) + 2 * u * np.abs(ref) + TINY[run.dtype]
    single = np.median(np.abs(stack))
    for coord, out in run.outputs.items():
        got = out.astype(np.float64)
        assert got.shape == ref.shape, coord
        err = np.abs(got - ref)
        worst = np.argmax(err - bound)
        assert np.all(err <= bound), (coord, worst, got[worst], ref[worst], bound[worst])
        typical = np.median(err) * (ranks if run.op == "avg" else 1)
        if ranks > 1:
            assert typical <= 0.1 * single, (coord, typical, single)


# -- data mode: every algorithm x SIP topology x buffer kind --------------------------------
BUFFERS = ("hbm", "sram", "tcm")
LAYOUTS = ("sips6_ring", "sips6_torus", "sips6_mesh")
CASES = (("f16", "sum"), ("i32", "sum"), ("f16", "max"))  # rounded, exact, exact


@pytest.mark.parametrize("buffer", BUFFERS)
@pytest.mark.parametrize("topology", LAYOUTS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_rank_holds_the_numpy_reduction(algorithm, topology, buffer):
    """A Latin square of buffer x layout -> case: every (algorithm, layout) runs the f16
    sum, the exact i32 sum and the exact max once each (so the exact cases run on the
    torus and the mesh too), and every buffer kind meets every case, at no more runs."""
    dtype, op = CASES[(BUFFERS.index(buffer) + LAYOUTS.index(topology)) % len(CASES)]
    run = run_allreduce(graph(topology), algorithm, 200, dtype=dtype, op=op, buffer=buffer,
                        data=True, seed=1)
    assert run.ranks == 96 and (run.dtype, run.op) == (dtype, op)
    check(run)


@pytest.mark.parametrize("topology, ranks", [("sips3_ring", 48), ("sips5_ring", 80),
                                             ("small_2x3", 6), ("single_cube", 1),
                                             ("default", 32)])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_odd_systems_and_sizes(algorithm, topology, ranks):
    # 1003 i32 elements: not divisible by any rank count here, and pieces of 1024
    run = run_allreduce(graph(topology), algorithm, 4 * 1003, dtype="i32", data=True, seed=2)
    assert run.ranks == ranks
    check(run)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "i32"])
@pytest.mark.parametrize("op", ["sum", "max", "min", "avg"])
def test_dtypes_and_ops(dtype, op):
    if op == "avg" and dtype == "i32":
        with pytest.raises(UsageError, match="op 'avg' needs a floating dtype"):
            run_allreduce(graph("small_2x2"), "lrab_hierarchical", 64, dtype=dtype, op=op,
                          data=True)
        return
    for algorithm in ALGORITHMS:
        run = run_allreduce(graph("small_2x2"), algorithm, 6000, dtype=dtype, op=op,
                            data=True, seed=3)
        check(run)


def test_several_pes_per_cube_reduce_inside_the_cube_first():
    run = run_allreduce(graph("small_2x2"), "lrab_hierarchical", 4 * 300, dtype="i32",
                        data=True, pes=[0, 1, 2, 3])
    assert run.ranks == 16 and "intra_cube" in run.phases
    check(run)


def test_slots_in_sram_give_the_same_result():
    run = run_allreduce(graph("default"), "ring", 2 * 999, dtype="f16", data=True,
                        ipcq={"tier": "sram", "slots": 2, "slot_bytes": 512})
    check(run)


def test_identical_inputs_give_identical_outputs():
    a = run_allreduce(graph("default"), "torus2d", 2000, data=True, seed=5)
    b = run_allreduce(graph("default"), "torus2d", 2000, data=True, seed=5)
    assert a.time_ns == b.time_ns and a.phases == b.phases
    assert all(np.array_equal(a.outputs[k], b.outputs[k]) for k in a.outputs)


# -- the alpha-beta model -------------------------------------------------------------------
def test_ring_model_is_the_ring_recurrence():
    """The generic model played over the ring's program equals the ring recurrence written
    out by hand: at step s rank r sends after its previous step, and finishes once its
    predecessor's chunk has arrived, been read from the slot and (reduce-scatter) added."""
    g = graph("small_2x2")
    p, n = 4, 4 * 128  # f32 elements: chunks of 128, one piece each
    run = run_allreduce(g, "ring", 4 * n, dtype="f32")
    costs = Costs(run.engine, "tcm")
    order = [(0, 0, 0), (0, 2, 0), (0, 3, 0), (0, 1, 0)]  # the grid tour of a 2 x 2 mesh
    assert [g.spec.cube_w * y + x for x, y in grid_cycle(2, 2)] == [c for _, c, _ in order]
    pa = PhysAddr.pe_hbm_addr(0, 0, 0, 0, g.spec.hbm_slice_bytes)
    load = costs.d_dma + costs.sched + costs.dma(order[0], pa, 4 * n, False)
    clock = [load] * p
    chunk = 4 * n // p
    for step in range(2 * (p - 1)):
        sent = [clock[r] + costs.d_send for r in range(p)]
        arrive = [sent[r] + costs.sched + costs.message(order[r], order[(r + 1) % p], chunk)
                  for r in range(p)]
        for r in range(p):
            t = max(sent[r] + costs.d_recv + costs.sched, arrive[r - 1])
            t += costs.slot_read(order[r], chunk)
            if step < p - 1:
                t += costs.d_math + costs.sched + costs.reduce(order[r], n // p, chunk)
            clock[r] = t
    store = costs.d_store + costs.sched + costs.dma(order[0], pa, 4 * n, True)
    assert run.predicted_ns == pytest.approx(max(clock) + store, rel=1e-12)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_model_tracks_the_simulation(algorithm):
    run = run_allreduce(graph("default"), algorithm, 8192)
    assert abs(run.rel_error) < 0.10


def test_a_long_ring_with_eight_pes_per_cube_completes():
    """Regression: 32 ranks (8 PEs per CUBE) and 544 KiB each keep the ring's IPCQ streams
    busy for thousands of rate changes; the fluid model dropped the bytes its queues held
    below its tolerance without counting them delivered, until a drained stream stopped
    short of its last message and the run deadlocked (as llama70b_4sip did at 512 KiB).
    It completes, and the alpha-beta model, written independently, still tracks it."""
    run = run_allreduce(graph("small_2x2"), "ring", 557056, dtype="f32", pes=tuple(range(8)))
    assert run.ranks == 32
    assert abs(run.rel_error) < 0.10


@pytest.mark.slow
def test_ring_at_the_largest_size_is_within_ten_percent_of_its_prediction():
    big = run_allreduce(graph("sips6_torus"), "ring", 96 * 1024)
    pred_busbw = big.size / big.predicted_ns * 2 * 95 / 96
    assert abs(big.busbw_gbs - pred_busbw) / pred_busbw < 0.10
    small = run_allreduce(graph("sips6_torus"), "ring", 16)
    assert abs(small.rel_error) < 0.25


# -- the backend ------------------------------------------------------------------------------
def ctx_on(name: str = "default", data: bool = True) -> RuntimeContext:
    return RuntimeContext(GraphEngine(graph(name), enable_data=data))


def test_unknown_backend_is_a_value_error():
    dist = ctx_on().distributed
    with pytest.raises(ValueError, match="unsupported backend 'nccl' \\(allowed: ahbm\\)"):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()


@pytest.mark.parametrize("call", ["get_rank", "get_world_size", "get_backend", "barrier"])
def test_uninitialised_group_is_refused(call):
    with pytest.raises(KernelStateError, match="has not been initialized"):
        getattr(ctx_on().distributed, call)()


def test_all_reduce_before_init_and_bad_ops_are_refused():
    ctx = ctx_on("single_cube")
    t = ctx.zeros((8,), "f32")
    with pytest.raises(KernelStateError, match="has not been initialized"):
        ctx.distributed.all_reduce(t)
    ctx.distributed.init_process_group("ahbm", algorithm="ring")
    with pytest.raises(UsageError, match="op 'prod' is not supported"):
        ctx.distributed.all_reduce(t, op="prod")
    u = ctx.zeros((8,), "u8")
    with pytest.raises(UsageError, match="dtype 'u8' is not supported"):
        ctx.distributed.all_reduce(u)


def test_world_size_is_the_sip_count_and_get_backend_is_ahbm():
    dist = ctx_on("sips3_ring", data=False).distributed
    dist.init_process_group("ahbm", world_size=99, rank=7)  # accepted, ignored
    assert dist.get_world_size() == 3 and dist.get_backend() == "ahbm"
    assert dist.get_rank() == 0


def test_spawned_ranks_all_reduce_their_own_tensors():
    ctx = ctx_on("sips3_ring")
    torch = ctx
    torch.distributed.init_process_group(backend="ahbm", algorithm="lrab_hierarchical")
    g = torch.distributed.backend.group
    n = 50
    dp = DPPolicy(cube="row_wise", num_cubes=g.cubes)
    seen, tensors = {}, {}

    def worker(rank, scale):
        torch.ahbm.set_device(rank)
        assert torch.distributed.get_rank() == rank
        data = np.full(g.cubes * n, scale * (rank + 1), np.int32)
        t = tensors[rank] = torch.from_numpy(data, dp=dp)
        torch.distributed.barrier()
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
        seen[rank] = torch.current_device()

    torch.multiprocessing.spawn(worker, args=(2,), nprocs=3)
    assert seen == {0: 0, 1: 1, 2: 2}
    expect = 2 * (1 + 2 + 3) * g.cubes
    for t in tensors.values():
        assert np.all(ctx.to_numpy(t) == expect)


def test_a_rank_that_skips_the_collective_is_reported():
    ctx = ctx_on("sips3_ring", data=False)
    ctx.distributed.init_process_group("ahbm")
    g = ctx.distributed.backend.group

    def worker(rank):
        if rank != 1:
            ctx.set_device(rank)
            ctx.distributed.all_reduce(ctx.empty((g.cubes * 8,), "f32",
                                                 dp=DPPolicy(cube="row_wise",
                                                             num_cubes=g.cubes)))

    with pytest.raises(KernelStateError, match=r"ranks \[0, 2\] wait in all_reduce but ranks "
                                               r"\[1\] returned without calling it"):
        ctx.multiprocessing.spawn(worker)


def test_several_ranks_without_spawn_are_refused():
    ctx = ctx_on("sips3_ring", data=False)
    ctx.distributed.init_process_group("ahbm")
    with pytest.raises(KernelStateError, match="must be called by every rank"):
        ctx.distributed.all_reduce(ctx.empty((16 * 8,), "f32"))


def test_unknown_algorithm_names_the_config_file_and_key():
    with pytest.raises(ConfigError, match=r"ccl.yaml: algorithms: unknown algorithm 'tree'"):
        ctx_on().distributed.init_process_group("ahbm", algorithm="tree")


def test_lrab_refuses_an_unsupported_sip_topology_kind():
    with pytest.raises(ValueError, match="SIP topology kind 'hypercube' is not supported"):
        LrabHierarchical(Group("hypercube", 2, 2, 4, 4))


# -- the command line ---------------------------------------------------------------------
def test_cli_prints_json_and_dumps_every_rank(tmp_path, capsys):
    out = tmp_path / "ar.npz"
    rc = main(["allreduce", "--topology", "small_2x2", "--algorithm", "torus2d",
               "--bytes-per-pe", "1000", "--dtype", "i32", "--data", "--seed", "4",
               "--dump", str(out), "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ranks"] == 4 and doc["size"] == 1000 and doc["count"] == 250
    assert doc["busbw_gbs"] == pytest.approx(doc["algbw_gbs"] * 2 * 3 / 4)
    arrays = np.load(out)
    ins = [arrays[f"in_0_{c}_0"] for c in range(4)]
    for c in range(4):
        assert np.array_equal(arrays[f"out_0_{c}_0"], np.sum(ins, axis=0))


def test_cli_nccl_line(capsys):
    assert main(["allreduce", "--topology", "small_2x2", "--algorithm", "ring",
                 "--bytes-per-pe", "4096"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[1:] == ["size(B)", "count", "type", "op", "time(us)", "algbw",
                                    "busbw", "pred(us)", "err"]
    fields = lines[2].split()
    assert fields[:4] == ["4096", "2048", "f16", "sum"]


@pytest.mark.parametrize("args, fragment", [
    (["--bytes-per-pe", "7"], "--bytes-per-pe must be a positive multiple"),
    (["--bytes-per-pe", "64", "--dtype", "f64"], "--dtype must be one of"),
    (["--bytes-per-pe", "64", "--buffer", "dram"], "--buffer must be one of"),
    (["--bytes-per-pe", "64", "--dump", "x.npz"], "--dump needs --data"),
])
def test_cli_errors_are_one_line(args, fragment, capsys):
    assert main(["allreduce", "--topology", "small_2x2", "--algorithm", "ring", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and fragment in err
