"""The all-reduce study's host driver: one all-reduce on a whole system, as
``kernbench allreduce`` and the study's jobs run it.

Every SIP gets one tensor sharded over all its CUBEs (and the process group's
PEs), each shard ``bytes_per_pe`` bytes in the chosen memory; the configured
algorithm all-reduces every shard with every other. Reported by the
nccl-tests definitions: ``size`` is one rank's buffer in bytes, ``algbw =
size / time`` and ``busbw = algbw * 2 (n - 1) / n`` for ``n`` ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kernbench.errors import UsageError
from kernbench.isa.dtypes import dtype_bytes, np_dtype
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api.context import RuntimeContext
from kernbench.runtime_api.distributed import DTYPES, OPS
from kernbench.runtime_api.system import MEMORIES
from kernbench.sim_engine.engine import GraphEngine

Coord = tuple[int, int, int]


@dataclass
class AllReduceRun:
    topology: str
    algorithm: str
    size: int  # bytes per rank buffer
    count: int  # elements per rank buffer
    dtype: str
    op: str
    buffer: str
    ranks: int
    time_ns: float
    predicted_ns: float
    phases: dict
    op_counts: dict
    engine: GraphEngine
    inputs: dict[Coord, np.ndarray] = field(default_factory=dict)
    outputs: dict[Coord, np.ndarray] = field(default_factory=dict)

    @property
    def algbw_gbs(self) -> float:
        return self.size / self.time_ns  # bytes per ns = GB/s

    @property
    def busbw_gbs(self) -> float:
        n = self.ranks
        return self.algbw_gbs * (2 * (n - 1) / n if n > 1 else 0.0)

    @property
    def rel_error(self) -> float:
        """(simulated - predicted) / predicted."""
        return (self.time_ns - self.predicted_ns) / self.predicted_ns

    def nccl_line(self) -> str:
        return (f"{self.size:>12d} {self.count:>10d} {self.dtype:>5s} {self.op:>4s} "
                f"{self.time_ns / 1000:>10.3f} {self.algbw_gbs:>8.2f} {self.busbw_gbs:>8.2f} "
                f"{self.predicted_ns / 1000:>10.3f} {100 * self.rel_error:>+7.2f}%")


NCCL_HEADER = (f"{'size(B)':>12s} {'count':>10s} {'type':>5s} {'op':>4s} {'time(us)':>10s} "
               f"{'algbw':>8s} {'busbw':>8s} {'pred(us)':>10s} {'err':>8s}")


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
                inputs.update(_split(arr, sip, g, n))
            else:
                tensors[sip] = ctx.empty((per_sip,), dtype, dp=dp, name=name,
                                         memory=self.buffer)
        result = self.backend.all_reduce_all(tensors, self.op)
        outputs = {}
        if self.data:
            for sip, t in tensors.items():
                outputs.update(_split(ctx.to_numpy(t), sip, g, n))
        engine.run()  # let the last credits land: the next run starts on an idle system
        ctx.cleanup()
        counts = {k: v - before.get(k, 0) for k, v in sorted(engine.op_log.counts.items())
                  if v - before.get(k, 0)}
        return AllReduceRun(self.graph.spec.name, self.backend.name, bytes_per_pe, n, dtype,
                            self.op, self.buffer, g.size, result.latency_ns,
                            result.predicted_ns, result.phases, counts, engine, inputs, outputs)


def _split(arr: np.ndarray, sip: int, g, n: int) -> dict[Coord, np.ndarray]:
    out = {}
    for cube in range(g.cubes):
        for k, pe in enumerate(g.pes):
            i = cube * len(g.pes) + k
            out[(sip, cube, pe)] = arr[i * n:(i + 1) * n].copy()
    return out


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


def dump_arrays(run: AllReduceRun) -> dict[str, np.ndarray]:
    """``in_<sip>_<cube>_<pe>`` and ``out_<sip>_<cube>_<pe>`` for every rank."""
    out = {}
    for (s, c, p), a in sorted(run.inputs.items()):
        out[f"in_{s}_{c}_{p}"] = a
    for (s, c, p), a in sorted(run.outputs.items()):
        out[f"out_{s}_{c}_{p}"] = a
    return out
