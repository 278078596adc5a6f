"""Run one bench on a fresh engine and summarise what happened."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernbench.runtime_api.context import LaunchHandle, RuntimeContext
from kernbench.sim_engine.engine import GraphEngine
from kernbench.topology.graph import TopologyGraph


@dataclass
class BenchResult:
    ok: bool
    error_code: str | None
    sim_ns: float
    launches: list[dict] = field(default_factory=list)
    op_counts: dict[str, int] = field(default_factory=dict)
    occupancy: dict[str, dict[str, float]] = field(default_factory=dict)
    engine: GraphEngine | None = field(default=None, repr=False)


def run_bench(graph: TopologyGraph, spec, device: int = 0, enable_data: bool = False,
              keep_records: bool = True) -> BenchResult:
    engine = GraphEngine(graph, enable_data=enable_data, keep_records=keep_records)
    ctx = RuntimeContext(engine, device)
    spec.run(ctx)
    ctx.wait_all()
    engine.run()
    if not ctx.handles():
        return BenchResult(False, "NO_REQUESTS", engine.env.now, engine=engine)
    launches = [{"name": h.name, "pes": len(h.pes), "kernel_ns": h.kernel_ns,
                 "host_ns": h.host_ns} for h in ctx.handles() if isinstance(h, LaunchHandle)]
    span = engine.env.now or 1.0
    occupancy = {unit.prefix: {k: 100.0 * v / span for k, v in unit.engine_busy_ns().items()}
                 for unit in engine.pes.values() if unit.cpu.commands}
    return BenchResult(True, None, engine.env.now, launches, dict(sorted(engine.op_log.counts.items())),
                       occupancy, engine)
