"""All-to-all over PE_IPCQ: the block rule against numpy on every topology, algorithm,
dtype and buffer kind; the alpha-beta model where links do not contend; the torch API;
the CLI's dump and its refusals."""

from __future__ import annotations

import itertools
import json
from functools import cache

import numpy as np
import pytest

from kernbench.ccl import config as ccl_config
from kernbench.ccl.algorithms.a2a_hierarchical import A2aHierarchical
from kernbench.ccl.group import Group
from kernbench.cli.main import main
from kernbench.errors import KernelStateError, UsageError
from kernbench.geometry.ipcq import opposite
from kernbench.isa.dtypes import dtype_bytes
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine import GraphEngine
from kernbench.topology import load_topology
from kernbench.workloads.alltoall_run import run_alltoall

from .conftest import TOPOLOGIES

ALGORITHMS = tuple(ccl_config.configured_algorithms(collective="all_to_all"))
NAMES = sorted(p.stem for p in TOPOLOGIES.glob("*.yaml") if ".cube_mesh" not in p.name)
DTYPES = ("f16", "bf16", "f32", "i32")
BUFFERS = ("hbm", "sram", "tcm")


@cache
def graph(name: str):
    return load_topology(TOPOLOGIES / f"{name}.yaml")


def ranks_of(name: str, pes=(0,)) -> int:
    return Group.from_spec(graph(name).spec, pes).size


def assert_block_rule(run) -> None:
    """Block j of rank r's output is, bit for bit, block r of rank j's input."""
    n = len(run.ranks)
    for i, r in enumerate(run.ranks):
        got = np.split(run.outputs[r].view(np.uint8), n)
        for j, src in enumerate(run.ranks):
            want = np.split(run.inputs[src].view(np.uint8), n)[i]
            assert np.array_equal(got[j], want), (r, src)


# every topology and algorithm, the dtypes and buffer kinds taken in turn; of the
# six-SIP systems' 96-rank direct exchanges (15-20 s each) one runs here, the rest with
# the slow cross product below
SIX_SIP_DIRECT = {("sips6_mesh", "a2a_direct"), ("sips6_ring", "a2a_direct")}
CASES = [(t, a, DTYPES[k % 4], BUFFERS[k % 3])
         for k, (t, a) in enumerate(itertools.product(NAMES, ALGORITHMS))
         if (t, a) not in SIX_SIP_DIRECT]


@pytest.mark.parametrize(("topology", "algorithm", "dtype", "buffer"), CASES)
def test_every_output_block_is_its_senders_input_block(topology, algorithm, dtype, buffer):
    nbytes = 2 * ranks_of(topology) * dtype_bytes(dtype)  # two elements per block
    run = run_alltoall(graph(topology), algorithm, nbytes, dtype=dtype, buffer=buffer,
                       data=True, seed=3)
    assert_block_rule(run)


@pytest.mark.parametrize(("algorithm", "dtype", "buffer"),
                         list(itertools.product(ALGORITHMS, DTYPES, BUFFERS)))
def test_every_dtype_and_buffer_kind(algorithm, dtype, buffer):
    run = run_alltoall(graph("small_2x2"), algorithm, 4 * 3 * dtype_bytes(dtype), dtype=dtype,
                       buffer=buffer, data=True, seed=5)
    assert_block_rule(run)


@pytest.mark.slow
@pytest.mark.parametrize(("topology", "algorithm", "dtype", "buffer"),
                         list(itertools.product(NAMES, ALGORITHMS, DTYPES, BUFFERS)))
def test_block_rule_on_the_whole_cross_product(topology, algorithm, dtype, buffer):
    run = run_alltoall(graph(topology), algorithm, ranks_of(topology) * dtype_bytes(dtype),
                       dtype=dtype, buffer=buffer, data=True, seed=7)
    assert_block_rule(run)


def test_several_pes_per_cube_exchange_inside_the_cube_first():
    run = run_alltoall(graph("small_2x3"), "a2a_hierarchical", 6 * 3 * 64, dtype="f32",
                       data=True, seed=2, pes=(0, 1, 2))
    assert len(run.ranks) == 18
    assert_block_rule(run)
    assert list(run.phases) == ["intra_cube", "inter_cube"]


def test_blocks_larger_than_a_slot_travel_in_pieces():
    # 8 KiB blocks against 4 KiB (hierarchical) and 2 KiB (direct) slots
    for algorithm in ALGORITHMS:
        run = run_alltoall(graph("small_2x2"), algorithm, 4 * 8192, dtype="f32", data=True)
        assert_block_rule(run)
        assert run.op_counts["ipcq_send"] > 4 * 3


def test_hierarchical_sends_fewer_messages_across_sips_than_direct():
    """Direct: every rank sends n - n/S blocks across SIPs; hierarchical: S - 1 messages."""
    counts = {}
    for algorithm in ALGORITHMS:
        run = run_alltoall(graph("sips3_ring"), algorithm, 48 * 4, dtype="f32")
        counts[algorithm] = run.op_counts["ipcq_send"]
    n, sips, cubes = 48, 3, 16
    assert counts["a2a_direct"] == n * (n - 1)
    # inside a SIP a rank sends its block for each SIP to each other CUBE (one message
    # each: they are not adjacent in its input); across SIPs, to each other SIP, the 15
    # blocks that arrived for it and its own (kept where it was: a second message)
    assert counts["a2a_hierarchical"] == n * ((cubes - 1) * sips + 2 * (sips - 1))


@pytest.mark.parametrize("topology", ["small_2x2", "default", "sips3_ring", "sips6_torus"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_model_within_ten_percent_where_links_do_not_contend(topology, algorithm):
    """One element per block: messages too small to queue behind each other on a link."""
    run = run_alltoall(graph(topology), algorithm, ranks_of(topology) * 2)
    assert abs(run.rel_error) < 0.10, run.nccl_line()


def test_plan_moves_each_block_once_per_level():
    """Each level passes on the blocks bound for the other members of the rank's team:
    (P-1)/P, (C-1)/C and (S-1)/S of the n blocks a rank holds at every level."""
    g = Group("torus_2d", 3, 2, 2, 2, (0, 1))  # 6 SIPs x 4 CUBEs x 2 PEs
    plan = A2aHierarchical(g).plan(1)
    n = g.size
    for r, steps in plan.programs.items():
        sent = {}
        for label, acts in steps:
            sent[label] = sent.get(label, 0) + sum(ln for kind, _, _, ln in acts
                                                   if kind == "send")
        assert sent == {"intra_cube": n // 2, "inter_cube": 3 * n // 4,
                        "inter_sip": 5 * n // 6}
        assert plan.work[r] == n + n // 2 + 3 * n // 4 + 5 * n // 6
        assert sum(ln for _, _, ln in plan.stores[r]) == n


def test_numbered_directions_mirror_each_other():
    assert opposite("a2a_cube+3") == "a2a_cube-3"
    assert opposite("a2a-12") == "a2a+12"
    assert opposite("E") == "W"
    assert opposite("a2a_cube+0") is None and opposite("tree+1") is None


def ctx_on(name: str, data: bool = True) -> RuntimeContext:
    return RuntimeContext(GraphEngine(graph(name), enable_data=data))


def test_torch_all_to_all_single_from_spawned_ranks():
    ctx = ctx_on("sips3_ring")
    ctx.distributed.init_process_group(backend="ahbm")
    g = ctx.distributed.backend.group
    n = g.size  # one element per block
    dp = DPPolicy(cube="row_wise", num_cubes=g.cubes)
    ins, outs = {}, {}

    def worker(rank):
        ctx.ahbm.set_device(rank)
        # rank r's CUBE c sends value 1000 * (its rank index) + destination index
        me = [rank * g.cubes + c for c in range(g.cubes)]
        data = np.array([[1000 * i + j for j in range(n)] for i in me], np.int32).reshape(-1)
        ins[rank] = ctx.from_numpy(data, dp=dp)
        outs[rank] = ctx.empty((g.cubes * n,), "i32", dp=dp)
        ctx.distributed.all_to_all_single(outs[rank], ins[rank])

    ctx.multiprocessing.spawn(worker)
    for rank, t in outs.items():
        got = ctx.to_numpy(t).reshape(g.cubes, n)
        for c in range(g.cubes):
            i = rank * g.cubes + c
            assert np.array_equal(got[c], 1000 * np.arange(n) + i)


def test_several_ranks_without_spawn_and_uneven_splits_are_refused():
    ctx = ctx_on("sips3_ring", data=False)
    ctx.distributed.init_process_group("ahbm")
    t = ctx.empty((16 * 48,), "f32", dp=DPPolicy(cube="row_wise", num_cubes=16))
    with pytest.raises(KernelStateError, match="must be called by every rank"):
        ctx.distributed.all_to_all_single(t, t)
    with pytest.raises(UsageError, match="uneven splits"):
        ctx.distributed.all_to_all_single(t, t, [1], [1])


def test_cli_dump_follows_the_block_rule(tmp_path, capsys):
    out = tmp_path / "a.npz"
    assert main(["alltoall", "--topology", "default", "--algorithm", "a2a_direct",
                 "--bytes-per-pe", str(32 * 4), "--dtype", "bf16", "--data", "--dump",
                 str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["check"] == {"ranks_differing": 0} and doc["ranks"] == 32
    with np.load(out) as z:
        ranks = [tuple(r) for r in z["ranks"]]
        assert len(ranks) == 32 and z["in_0_0_0"].dtype == np.float32
        for i, r in enumerate(ranks):
            got = np.split(z["out_{}_{}_{}".format(*r)], 32)
            for j, src in enumerate(ranks):
                assert np.array_equal(got[j], np.split(z["in_{}_{}_{}".format(*src)], 32)[i])


def test_cli_report_has_an_nccl_line(capsys):
    assert main(["alltoall", "--topology", "small_2x2", "--bytes-per-pe", "4096"]) == 0
    text = capsys.readouterr().out
    assert "a2a_hierarchical" in text and "busbw" in text


@pytest.mark.parametrize(("argv", "message"), [
    (["--bytes-per-pe", "1000"], "--bytes-per-pe 1000: must be a positive multiple of 32"),
    (["--bytes-per-pe", "0"], "--bytes-per-pe 0: must be a positive multiple"),
    (["--bytes-per-pe", "64", "--algorithm", "ring"], "unknown algorithm 'ring'"),
    (["--bytes-per-pe", "64", "--dtype", "f64"], "--dtype must be one of"),
    (["--bytes-per-pe", "64", "--buffer", "l2"], "--buffer must be one of"),
    (["--bytes-per-pe", "64", "--dump", "x.npz"], "--dump needs --data"),
])
def test_cli_bad_input_is_one_line(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["alltoall", "--topology", str(TOPOLOGIES / "default.yaml"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not list(tmp_path.iterdir())


def _uneven(topology: str, algorithm: str, seed: int, pes=(0,)):
    """An uneven all-to-all: random sizes, most pairs empty, some blocks longer than a
    slot; every rank's output checked against the inputs' segments."""
    rng = np.random.default_rng(seed)
    ctx = ctx_on(topology)
    ctx.distributed.init_process_group("ahbm", pes=pes)
    backend = ctx.distributed.all_to_all_backend(algorithm)
    g = backend.group
    ranks = g.ranks()
    sizes = {(a, b): int(rng.choice([0, 0, 0, 1, 7, 1500]))
             for a in ranks for b in ranks}
    n = max(max(sum(sizes[(a, b)] for b in ranks) for a in ranks),
            max(sum(sizes[(a, b)] for a in ranks) for b in ranks), 1)
    dp = DPPolicy(cube="row_wise", num_cubes=g.cubes, pe="row_wise", num_pes=len(g.pes))
    ins, outs, data = {}, {}, {}
    for sip in range(g.sips):
        ctx.set_device(sip)
        arr = rng.integers(-2 ** 31, 2 ** 31 - 1, g.cubes * len(g.pes) * n,
                           dtype=np.int64).astype(np.int32)
        ins[sip] = ctx.from_numpy(arr, dp=dp)
        outs[sip] = ctx.from_numpy(np.zeros_like(arr), dp=dp)
        for i, r in enumerate(ranks[sip * g.cubes * len(g.pes):(sip + 1) * g.cubes * len(g.pes)]):
            data[r] = arr[i * n:(i + 1) * n]
    result = backend.all_to_all_all(ins, outs, sizes)
    got = {}
    for sip in range(g.sips):
        arr = ctx.to_numpy(outs[sip])
        for i, r in enumerate(ranks[sip * g.cubes * len(g.pes):(sip + 1) * g.cubes * len(g.pes)]):
            got[r] = arr[i * n:(i + 1) * n]
    for dst in ranks:
        want = []
        for src in ranks:
            start = sum(sizes[(src, b)] for b in ranks[:ranks.index(dst)])
            want.append(data[src][start:start + sizes[(src, dst)]])
        want = np.concatenate(want)
        assert np.array_equal(got[dst][:len(want)], want), dst
        assert not got[dst][len(want):].any()  # nothing written past the last block
    return result


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("topology", ["small_2x2", "sips3_ring"])
def test_uneven_blocks_land_in_source_order(topology, algorithm):
    _uneven(topology, algorithm, 8)


def test_uneven_blocks_with_several_pes_per_cube():
    _uneven("small_2x3", "a2a_hierarchical", 9, pes=(0, 1))


def test_uneven_sizes_that_do_not_fit_are_refused():
    ctx = ctx_on("small_2x2", data=False)
    ctx.distributed.init_process_group("ahbm")
    backend = ctx.distributed.all_to_all_backend()
    dp = DPPolicy(cube="row_wise", num_cubes=4)
    t = {0: ctx.empty((4 * 8,), "f32", dp=dp)}
    with pytest.raises(UsageError, match=r"rank \(0, 0, 0\) sends 9 and receives 0"):
        backend.all_to_all_all(t, t, {((0, 0, 0), (0, 1, 0)): 9})
    with pytest.raises(UsageError, match="unknown ranks"):
        backend.all_to_all_all(t, t, {((0, 0, 0), (0, 9, 0)): 1})


def test_model_of_a_combine_with_many_idle_ranks_finishes():
    """Two ranks of the second SIP send to rank 0, the other ranks idle: the play of the
    model must not take the idle ranks for a stalled (deadlocked) program."""
    ctx = ctx_on("sips6_ring", data=False)
    ctx.distributed.init_process_group("ahbm")
    backend = ctx.distributed.all_to_all_backend("a2a_hierarchical")
    g = backend.group
    ranks = g.ranks()
    per_sip = len(ranks) // g.sips
    senders = ranks[per_sip:per_sip + 2]
    sizes = {(s, ranks[0]): 512 for s in senders}
    dp = DPPolicy(cube="row_wise", num_cubes=g.cubes, pe="row_wise", num_pes=len(g.pes))
    ins, outs = {}, {}
    for sip in range(g.sips):
        ctx.set_device(sip)
        ins[sip] = ctx.empty((per_sip * 1024,), "f16", dp=dp)
        outs[sip] = ctx.empty((per_sip * 1024,), "f16", dp=dp)
    result = backend.all_to_all_all(ins, outs, sizes)
    # the far sender's block crosses a CUBE hop, then the SIP hop, with its neighbour's
    # nothing contends: the model is within 10 % of the simulation, as for equal blocks
    assert result.predicted_ns == pytest.approx(result.latency_ns, rel=0.10)
