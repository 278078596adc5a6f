"""What one collective on a whole system reports, for ``kernbench allreduce`` and
``kernbench alltoall`` alike: the nccl-tests figures, the model's error, the line
and the dump. Each collective keeps its own bus-bandwidth factor (nccl-tests
defines one per collective) and its own driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kernbench.sim_engine.engine import GraphEngine

Coord = tuple[int, int, int]


def nccl_header(labels: str = "") -> str:
    """The column header of :meth:`CollectiveRun.nccl_line` (``labels``: the columns a
    collective adds after the type, e.g. the all-reduce's op)."""
    return (f"{'size(B)':>12s} {'count':>10s} {'type':>5s}{labels} {'time(us)':>10s} "
            f"{'algbw':>8s} {'busbw':>8s} {'pred(us)':>10s} {'err':>8s}")


@dataclass(kw_only=True)
class CollectiveRun:
    topology: str
    algorithm: str
    size: int  # bytes of one rank's buffer
    count: int  # elements of one rank's buffer
    dtype: str
    buffer: str
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
        raise NotImplementedError  # each collective's own factor

    @property
    def rel_error(self) -> float:
        """(simulated - predicted) / predicted."""
        return (self.time_ns - self.predicted_ns) / self.predicted_ns

    def labels(self) -> str:
        """The line's columns after the type (none by default)."""
        return ""

    def nccl_line(self) -> str:
        return (f"{self.size:>12d} {self.count:>10d} {self.dtype:>5s}{self.labels()} "
                f"{self.time_ns / 1000:>10.3f} {self.algbw_gbs:>8.2f} {self.busbw_gbs:>8.2f} "
                f"{self.predicted_ns / 1000:>10.3f} {100 * self.rel_error:>+7.2f}%")

    def dump_arrays(self) -> dict[str, np.ndarray]:
        """``in_<sip>_<cube>_<pe>`` and ``out_<sip>_<cube>_<pe>`` for every rank."""
        out: dict[str, np.ndarray] = {}
        for (s, c, p), a in sorted(self.inputs.items()):
            out[f"in_{s}_{c}_{p}"] = a
        for (s, c, p), a in sorted(self.outputs.items()):
            out[f"out_{s}_{c}_{p}"] = a
        return out


def split_ranks(arr: np.ndarray, sip: int, g, n: int) -> dict[Coord, np.ndarray]:
    """A SIP's buffer (its ranks' ``n``-element shards, CUBE-major) cut per rank."""
    out = {}
    for cube in range(g.cubes):
        for k, pe in enumerate(g.pes):
            i = cube * len(g.pes) + k
            out[(sip, cube, pe)] = arr[i * n:(i + 1) * n].copy()
    return out


def op_counts_since(engine, before: dict) -> dict:
    """The op log's counts added since ``before`` (a copy of them), sorted."""
    return {k: v - before.get(k, 0) for k, v in sorted(engine.op_log.counts.items())
            if v - before.get(k, 0)}
