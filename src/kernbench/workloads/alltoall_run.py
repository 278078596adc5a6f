"""One all-to-all on a whole system, as ``kernbench alltoall`` runs it.

Every SIP gets an input and an output tensor sharded over all its CUBEs (and the
algorithm's PEs), each shard ``bytes_per_pe`` bytes in the chosen memory: what
the rank sends in total, ``bytes_per_pe / n`` to each of the ``n`` ranks.
Reported by the nccl-tests definitions for all-to-all: ``size`` is one rank's
buffer, ``algbw = size / time`` and ``busbw = algbw * (n - 1) / n``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernbench.errors import UsageError
from kernbench.isa.dtypes import dtype_bytes, np_dtype
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api.context import RuntimeContext
from kernbench.runtime_api.group_buffers import DTYPES
from kernbench.runtime_api.system import MEMORIES
from kernbench.sim_engine.engine import GraphEngine
from kernbench.workloads.collective_run import (
    CollectiveRun,
    Coord,
    nccl_header,
    op_counts_since,
    split_ranks,
)

NCCL_HEADER = nccl_header()


@dataclass(kw_only=True)
class AllToAllRun(CollectiveRun):
    ranks: list[Coord]  # rank order: block j of a buffer belongs to ranks[j]

    @property
    def busbw_gbs(self) -> float:
        n = len(self.ranks)
        return self.algbw_gbs * (n - 1) / n

    def dump_arrays(self) -> dict[str, np.ndarray]:
        """The ranks' inputs and outputs, and ``ranks`` ([n, 3], rank order)."""
        return {**super().dump_arrays(),
                "ranks": np.array(self.ranks, dtype=np.int64).reshape(-1, 3)}


def check_arguments(spec, algorithm: str | None, bytes_per_pe: int, dtype: str, buffer: str,
                    pes=None):
    """The all-to-all's group, after refusing what cannot run (one line each)."""
    from kernbench.ccl import config as ccl_config
    from kernbench.ccl.group import Group

    if dtype not in DTYPES:
        raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if buffer not in MEMORIES:
        raise UsageError(f"--buffer must be one of {', '.join(MEMORIES)}, got {buffer!r}")
    cfg = ccl_config.resolve(ccl_config.load(), algorithm, "all_to_all", pes=pes)
    group = Group.from_spec(spec, cfg.pes)
    unit = group.size * dtype_bytes(dtype)
    if bytes_per_pe < unit or bytes_per_pe % unit:
        raise UsageError(f"--bytes-per-pe {bytes_per_pe}: must be a positive multiple of "
                         f"{group.size} ranks x {dtype_bytes(dtype)} B ({dtype}) = {unit} B")
    return group


def random_input(rng: np.random.Generator, n: int, dtype: str) -> np.ndarray:
    if dtype == "i32":
        return rng.integers(-(2 ** 31), 2 ** 31 - 1, n, dtype=np.int64).astype(np.int32)
    return rng.standard_normal(n).astype(np.float32).astype(np_dtype(dtype))


def run_alltoall(graph, algorithm: str | None, bytes_per_pe: int, *, dtype: str = "f16",
                 buffer: str = "hbm", data: bool = False, seed: int = 0, pes=None,
                 keep_records: bool = False) -> AllToAllRun:
    """One all-to-all on a fresh engine."""
    g = check_arguments(graph.spec, algorithm, bytes_per_pe, dtype, buffer, pes)
    engine = GraphEngine(graph, enable_data=data, keep_records=keep_records)
    ctx = RuntimeContext(engine)
    ctx.distributed.init_process_group("ahbm", pes=pes)
    backend = ctx.distributed.all_to_all_backend(algorithm)
    n = bytes_per_pe // dtype_bytes(dtype)
    per_sip = g.cubes * len(g.pes) * n
    dp = DPPolicy(cube="row_wise", num_cubes=g.cubes, pe="row_wise", num_pes=len(g.pes))
    rng = np.random.default_rng(seed)
    ins, outs, inputs = {}, {}, {}
    for sip in range(g.sips):
        ctx.set_device(sip)
        if data:
            arr = random_input(rng, per_sip, dtype)
            ins[sip] = ctx.from_numpy(arr, dp=dp, name=f"in{sip}", memory=buffer)
            inputs.update(split_ranks(arr, sip, g, n))
        else:
            ins[sip] = ctx.empty((per_sip,), dtype, dp=dp, name=f"in{sip}", memory=buffer)
        outs[sip] = ctx.empty((per_sip,), dtype, dp=dp, name=f"out{sip}", memory=buffer)
    before = dict(engine.op_log.counts)
    result = backend.all_to_all_all(ins, outs)
    outputs = {}
    if data:
        for sip, t in outs.items():
            outputs.update(split_ranks(ctx.to_numpy(t), sip, g, n))
    return AllToAllRun(topology=graph.spec.name, algorithm=backend.name, size=bytes_per_pe,
                       count=n, dtype=dtype, buffer=buffer, ranks=g.ranks(),
                       time_ns=result.latency_ns, predicted_ns=result.predicted_ns,
                       phases=result.phases, op_counts=op_counts_since(engine, before),
                       engine=engine, inputs=inputs, outputs=outputs)


def reference(inputs: dict[Coord, np.ndarray], ranks: list[Coord]) -> dict[Coord, np.ndarray]:
    """numpy's all-to-all: block j of rank r's output is block r of rank j's input."""
    n = len(ranks)
    blocks = {r: np.split(inputs[r], n) for r in ranks}
    return {r: np.concatenate([blocks[src][i] for src in ranks]) for i, r in enumerate(ranks)}
