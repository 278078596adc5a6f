"""The all-reduce study's host driver: one all-reduce on a whole system, as
``kernbench allreduce`` and the study's jobs run it.

Every SIP gets one tensor sharded over all its CUBEs (and the process group's
PEs), each shard ``bytes_per_pe`` bytes in the chosen memory; the configured
algorithm all-reduces every shard with every other. Reported by the
nccl-tests definitions: ``size`` is one rank's buffer in bytes, ``algbw =
size / time`` and ``busbw = algbw * 2 (n - 1) / n`` for ``n`` ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernbench.errors import UsageError
from kernbench.isa.dtypes import dtype_bytes, np_dtype
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api.context import RuntimeContext
from kernbench.runtime_api.distributed import DTYPES, OPS
from kernbench.runtime_api.system import MEMORIES
from kernbench.sim_engine.engine import GraphEngine
from kernbench.workloads.collective_run import (
    CollectiveRun,
    Coord,
    nccl_header,
    op_counts_since,
    split_ranks,
)


@dataclass(kw_only=True)
class AllReduceRun(CollectiveRun):
    op: str
    ranks: int

    @property
    def busbw_gbs(self) -> float:
        n = self.ranks
        return self.algbw_gbs * (2 * (n - 1) / n if n > 1 else 0.0)

    def labels(self) -> str:
        return f" {self.op:>4s}"


NCCL_HEADER = nccl_header(f" {'op':>4s}")


def random_input(rng: np.random.Generator, n: int, dtype: str) -> np.ndarray:
    """Inputs whose sums stay representable: small integers for i32, N(0, 1) otherwise."""
    if dtype == "i32":
        return rng.integers(-1000, 1000, n).astype(np.int32)
    return rng.standard_normal(n).astype(np.float32).astype(np_dtype(dtype))


class AllReduceSession:
    """One engine with the process group installed, running all-reduces one after
    another (a size sweep). The system is drained and idle between runs, so each run
    times exactly as it would alone; routes, queues and the group are built once."""

    def __init__(self, graph, algorithm: str, *, dtype: str = "f16", buffer: str = "hbm",
                 op: str = "sum", data: bool = False, ipcq: dict | None = None, pes=None,
                 keep_records: bool = False, config: str | None = None) -> None:
        if dtype not in DTYPES:
            raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if op not in OPS:
            raise UsageError(f"--op must be one of {', '.join(OPS)}, got {op!r}")
        if buffer not in MEMORIES:
            raise UsageError(f"--buffer must be one of {', '.join(MEMORIES)}, got {buffer!r}")
        self.graph, self.dtype, self.buffer, self.op, self.data = graph, dtype, buffer, op, data
        self.engine = GraphEngine(graph, enable_data=data, keep_records=keep_records)
        self.ctx = RuntimeContext(self.engine)
        self.ctx.distributed.init_process_group("ahbm", algorithm=algorithm, config=config,
                                                ipcq=ipcq, pes=pes)
        self.backend = self.ctx.distributed.backend
        self.runs = 0

    def run(self, bytes_per_pe: int, seed: int = 0) -> AllReduceRun:
        dtype, g, ctx, engine = self.dtype, self.backend.group, self.ctx, self.engine
        bpe = dtype_bytes(dtype)
        if bytes_per_pe < bpe or bytes_per_pe % bpe:
            raise UsageError(f"--bytes-per-pe must be a positive multiple of the {dtype} "
                             f"element size {bpe}, got {bytes_per_pe}")
        n = bytes_per_pe // bpe
        per_sip = g.cubes * len(g.pes) * n
        dp = DPPolicy(cube="row_wise", num_cubes=g.cubes, pe="row_wise", num_pes=len(g.pes))
        rng = np.random.default_rng(seed)
        before = dict(engine.op_log.counts)
        tensors, inputs = {}, {}
        self.runs += 1
        for sip in range(g.sips):
            ctx.set_device(sip)
            name = f"buf{sip}.{self.runs}"
            if self.data:
                arr = random_input(rng, per_sip, dtype)
                tensors[sip] = ctx.from_numpy(arr, dp=dp, name=name, memory=self.buffer)
                inputs.update(split_ranks(arr, sip, g, n))
            else:
                tensors[sip] = ctx.empty((per_sip,), dtype, dp=dp, name=name,
                                         memory=self.buffer)
        result = self.backend.all_reduce_all(tensors, self.op)
        outputs = {}
        if self.data:
            for sip, t in tensors.items():
                outputs.update(split_ranks(ctx.to_numpy(t), sip, g, n))
        engine.run()  # let the last credits land: the next run starts on an idle system
        ctx.cleanup()
        return AllReduceRun(topology=self.graph.spec.name, algorithm=self.backend.name,
                            size=bytes_per_pe, count=n, dtype=dtype, op=self.op,
                            buffer=self.buffer, ranks=g.size, time_ns=result.latency_ns,
                            predicted_ns=result.predicted_ns, phases=result.phases,
                            op_counts=op_counts_since(engine, before), engine=engine,
                            inputs=inputs, outputs=outputs)


def run_allreduce(graph, algorithm: str, bytes_per_pe: int, *, dtype: str = "f16",
                  buffer: str = "hbm", op: str = "sum", data: bool = False, seed: int = 0,
                  ipcq: dict | None = None, pes=None, keep_records: bool = False,
                  config: str | None = None) -> AllReduceRun:
    """One all-reduce on a fresh engine (see :class:`AllReduceSession`)."""
    session = AllReduceSession(graph, algorithm, dtype=dtype, buffer=buffer, op=op, data=data,
                               ipcq=ipcq, pes=pes, keep_records=keep_records, config=config)
    return session.run(bytes_per_pe, seed)


def reference(inputs: dict[Coord, np.ndarray], op: str) -> np.ndarray:
    """The numpy reduction of every rank's input (in float64, or int64 for i32)."""
    arrays = [a.astype(np.int64 if a.dtype.kind in "iu" else np.float64)
              for _, a in sorted(inputs.items())]
    stack = np.stack(arrays)
    if op == "sum":
        return stack.sum(0)
    if op == "avg":
        return stack.mean(0)
    if op == "max":
        return stack.max(0)
    return stack.min(0)
