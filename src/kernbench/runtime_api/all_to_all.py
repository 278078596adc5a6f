"""All-to-all on the AHBM backend (``torch.distributed.all_to_all_single``).

The configured all-to-all algorithm (``kernbench/ccl/ccl.yaml``, entries with
``collective: all_to_all``) plans, for a block size, every rank's sends and
receives over a TCM work buffer (``ccl.algorithms.exchange``); its PE_IPCQ queues
are installed once beside the all-reduce's and switched in for each call. Every
participating PE's input shard is cut into one block per rank, in rank order
(sip, cube, pe); block ``j`` of rank ``r``'s output is block ``r`` of rank ``j``'s
input. The alpha-beta model of the same plan comes with the result.
"""

from __future__ import annotations

from kernbench.ccl import config as ccl_config
from kernbench.ccl.group import Group
from kernbench.ccl.model import Costs, evaluate
from kernbench.ccl.program import all_to_all_kernel, compile_program
from kernbench.components.builtin.pe_ipcq import install_queues, queue_sets, use_queue_sets
from kernbench.errors import UsageError
from kernbench.isa.dtypes import dtype_bytes
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api.group_buffers import (
    DTYPES,
    CollectiveResult,
    check_pes,
    phase_times,
    rank_buffers,
)
from kernbench.runtime_api.per_sip import PerSip


class AllToAllBackend:
    """One installed all-to-all algorithm: its group, neighbour tables and queues."""

    def __init__(self, ctx, algorithm: str | None = None, config_path=None,
                 ipcq: dict | None = None, pes=None) -> None:
        doc = ccl_config.load(config_path)
        self.cfg = ccl_config.resolve(doc, algorithm, "all_to_all", ipcq=ipcq, pes=pes)
        cls = ccl_config.algorithm_class(self.cfg)
        spec = ctx.spec
        check_pes(self.cfg, spec)
        self.ctx = ctx
        self.group = Group.from_spec(spec, self.cfg.pes)
        self.algorithm = cls(self.group)
        tables = self.algorithm.directions()
        system = ctx.system
        self.queues = install_queues(ctx.engine, tables, self.cfg.ipcq,
                                     lambda pe, tier, nbytes: system.alloc(tier, *pe, nbytes))
        self.queue_state = queue_sets(ctx.engine)
        self.peers = {pe: dict(t) for pe, t in tables.items()}
        self._costs: Costs | None = None

    @property
    def name(self) -> str:
        return self.cfg.name

    def all_to_all_all(self, inputs: dict[int, object], outputs: dict[int, object],
                       sizes: dict | None = None) -> CollectiveResult:
        """Exchange the blocks of ``inputs`` ({sip: tensor}) into ``outputs``: equal
        blocks, one per rank (``sizes`` None), or ``sizes[(src, dst)]`` elements from
        rank ``src`` to rank ``dst`` (coordinates; absent: none), each rank's input
        holding its blocks back to back by destination, its output by source."""
        g, ctx = self.group, self.ctx
        for what, tensors in (("input", inputs), ("output", outputs)):
            if sorted(tensors) != list(range(g.sips)):
                raise UsageError(f"all_to_all needs one {what} tensor per SIP "
                                 f"(0..{g.sips - 1}), got SIPs {sorted(tensors)}")
        dtype = inputs[0].dtype
        if dtype not in DTYPES:
            raise UsageError(f"all_to_all: dtype {dtype!r} is not supported "
                             f"(allowed: {', '.join(DTYPES)})")
        n, buffers = rank_buffers("all_to_all", inputs, g, dtype)
        n_out, _ = rank_buffers("all_to_all", outputs, g, dtype)
        plan = self._plan(n, n_out, sizes)
        piece = max(1, self.cfg.ipcq.slot_bytes // dtype_bytes(dtype))
        programs = {r: compile_program(steps, piece) for r, steps in plan.programs.items()}
        plans = {r: (programs[r], plan.work[r], plan.stores[r], plan.loads[r])
                 for r in programs}
        use_queue_sets(ctx.engine, self.queue_state)
        dp = DPPolicy(cube="row_wise", num_cubes=g.cubes, pe="row_wise", num_pes=len(g.pes))
        launch = ctx.launch(f"all_to_all.{self.name}", all_to_all_kernel, PerSip(inputs),
                            PerSip(outputs), dtype, plans, dp=dp, sips="all")
        ctx.wait(launch)
        if self._costs is None:
            self._costs = Costs(ctx.engine, self.cfg.ipcq.tier)
        stores = {r: [length for _, _, length in plan.stores[r]] for r in programs}
        model = evaluate(programs, self.peers, n, dtype, self._costs, buffers, False, stores,
                         None if sizes is None else plan.loads)
        start = min(s for s, _ in launch.kernel_spans)
        phases = phase_times(ctx.engine, launch, model, start)
        return CollectiveResult(launch, n, dtype, "none", g.size, model["latency_ns"], phases)

    def _plan(self, n: int, n_out: int, sizes: dict | None):
        g = self.group
        if sizes is None:
            if n_out != n:
                raise UsageError(f"all_to_all: output shards hold {n_out} elements, inputs {n}")
            if n % g.size:
                raise UsageError(f"all_to_all: {n} elements per rank do not split into "
                                 f"{g.size} equal blocks (one per rank)")
            return self.algorithm.plan(n // g.size)
        ranks = g.ranks()
        unknown = sorted(set(k for pair in sizes for k in pair) - set(ranks))
        if unknown or any(not isinstance(v, int) or v < 0 for v in sizes.values()):
            raise UsageError(f"all_to_all sizes: keys must be (src, dst) ranks of the group "
                             f"and values element counts >= 0 (unknown ranks: {unknown})")
        for r in ranks:
            sent = sum(sizes.get((r, d), 0) for d in ranks)
            got = sum(sizes.get((s, r), 0) for s in ranks)
            if sent > n or got > n_out:
                raise UsageError(f"all_to_all sizes: rank {r} sends {sent} and receives {got} "
                                 f"elements, its shards hold {n} and {n_out}")
        return self.algorithm.plan_sizes(lambda i, j: sizes.get((ranks[i], ranks[j]), 0))
