"""The ``torch.distributed``-style AHBM backend (docs/host-api.md, docs/adr/0025-collectives.md).

``torch.distributed.init_process_group(backend="ahbm")`` reads
``kernbench/ccl/ccl.yaml``, builds the configured algorithm for the whole system
(every SIP's CUBEs), installs its PE_IPCQ neighbour tables once, and fixes
``world_size`` (the algorithm entry's, else ``defaults``', else the SIP
count: rank = SIP). ``all_reduce(tensor)`` from every rank launches the
algorithm's program on every participating PE of every SIP at once; each
participating PE's shard is one buffer and every buffer ends up holding the
reduction over all of them.

Ranks are greenlets started by ``torch.multiprocessing.spawn``; a collective
starts when every rank has called it (a real barrier), and ``get_rank`` is
the calling greenlet's rank.
"""

from __future__ import annotations

from greenlet import getcurrent, greenlet

from kernbench.ccl import config as ccl_config
from kernbench.ccl.group import Group
from kernbench.ccl.model import Costs, evaluate
from kernbench.ccl.program import collective_kernel, compile_program
from kernbench.components.builtin.pe_ipcq import install_queues, queue_sets, use_queue_sets
from kernbench.errors import KernelStateError, UsageError
from kernbench.isa.dtypes import dtype_bytes
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api.all_to_all import AllToAllBackend
from kernbench.runtime_api.group_buffers import (
    DTYPES,
    CollectiveResult,
    check_pes,
    phase_times,
    rank_buffers,
)
from kernbench.runtime_api.per_sip import PerSip

__all__ = ["DTYPES", "OPS", "AhbmBackend", "CollectiveResult", "DistributedContext", "Spawner"]

OPS = ("sum", "max", "min", "avg")


class ReduceOp:
    SUM = "sum"
    MAX = "max"
    MIN = "min"
    AVG = "avg"


class AhbmBackend:
    """The installed process group: algorithm, neighbour tables and queue config."""

    def __init__(self, ctx, algorithm: str | None = None, config_path=None,
                 ipcq: dict | None = None, pes=None) -> None:
        doc = ccl_config.load(config_path)
        self.cfg = ccl_config.resolve(doc, algorithm, ipcq=ipcq, pes=pes)
        cls = ccl_config.algorithm_class(self.cfg)
        spec = ctx.spec
        check_pes(self.cfg, spec)
        self.ctx = ctx
        self.group = Group.from_spec(spec, self.cfg.pes)
        self.algorithm = cls(self.group)
        self.world_size = self.cfg.world_size or spec.sips.count
        self.tables = self.algorithm.directions()
        system = ctx.system
        self.queues = install_queues(
            ctx.engine, self.tables, self.cfg.ipcq,
            lambda pe, tier, nbytes: system.alloc(tier, *pe, nbytes))
        self.peers = {pe: dict(t) for pe, t in self.tables.items()}
        self.queue_state = queue_sets(ctx.engine)  # put back before each all-reduce
        self._costs: Costs | None = None  # the model's cost cache, built on first use

    @property
    def name(self) -> str:
        return self.cfg.name

    # -- one collective over every SIP's buffers ------------------------------------------
    def all_reduce_all(self, tensors: dict[int, object], op: str = "sum") -> CollectiveResult:
        """All-reduce the buffers of ``tensors`` ({sip: tensor}, one per SIP)."""
        op = check_op(op)
        g = self.group
        if sorted(tensors) != list(range(g.sips)):
            raise UsageError(f"all_reduce needs one tensor per SIP (0..{g.sips - 1}), got SIPs "
                             f"{sorted(tensors)}")
        first = tensors[0]
        dtype = first.dtype
        if dtype not in DTYPES:
            raise UsageError(f"all_reduce: dtype {dtype!r} is not supported "
                             f"(allowed: {', '.join(DTYPES)})")
        if op == "avg" and dtype == "i32":
            raise UsageError("all_reduce: op 'avg' needs a floating dtype (f16, bf16, f32), "
                             "got i32")
        n, buffers = rank_buffers("all_reduce", tensors, g, dtype)
        piece = max(1, self.cfg.ipcq.slot_bytes // dtype_bytes(first.dtype))
        programs = {r: compile_program(steps, piece)
                    for r, steps in self.algorithm.program(n).items()}
        scale = 1.0 / g.size if op == "avg" else None
        ctx = self.ctx
        dp = DPPolicy(cube="row_wise", num_cubes=g.cubes, pe="row_wise", num_pes=len(g.pes))
        use_queue_sets(ctx.engine, self.queue_state)  # an all-to-all may have installed its own
        launch = ctx.launch(f"all_reduce.{self.name}", collective_kernel,
                            PerSip(tensors), n, dtype, op, scale, programs,
                            dp=dp, sips="all")
        ctx.wait(launch)
        if self._costs is None:
            self._costs = Costs(ctx.engine, self.cfg.ipcq.tier)
        model = evaluate(programs, self.peers, n, dtype, self._costs, buffers, scale is not None)
        start = min(s for s, _ in launch.kernel_spans)
        phases = phase_times(ctx.engine, launch, model, start)
        return CollectiveResult(launch, n, dtype, op, g.size, model["latency_ns"], phases)


def check_op(op) -> str:
    name = str(op).lower()
    if name not in OPS:
        raise UsageError(f"all_reduce: op {op!r} is not supported (allowed: {', '.join(OPS)})")
    return name


class DistributedContext:
    """``torch.distributed`` of one host context."""

    ReduceOp = ReduceOp

    def __init__(self, ctx) -> None:
        self._ctx = ctx
        self._backend: AhbmBackend | None = None
        self._all_to_all: AllToAllBackend | None = None
        self._init_args: tuple = ()
        self._rank_by_greenlet: dict = {}
        self._launcher = None
        self.last: CollectiveResult | None = None

    def init_process_group(self, backend: str = "ahbm", *, algorithm: str | None = None,
                           config: str | None = None, ipcq: dict | None = None,
                           pes=None, world_size=None, rank=None, **_ignored) -> None:
        """Install the AHBM process group (``world_size``/``rank`` are accepted and
        ignored, like the environment variables of real PyTorch)."""
        if backend != "ahbm":
            raise UsageError(f"unsupported backend {backend!r} (allowed: ahbm)")
        self._backend = AhbmBackend(self._ctx, algorithm, config, ipcq, pes)
        self._all_to_all = None  # installed on first use, with the group's config
        self._init_args = (config, pes)

    def is_initialized(self) -> bool:
        return self._backend is not None

    def _ensure(self) -> AhbmBackend:
        if self._backend is None:
            raise KernelStateError("default process group has not been initialized: call "
                                   "torch.distributed.init_process_group(backend='ahbm') first")
        return self._backend

    @property
    def backend(self) -> AhbmBackend:
        return self._ensure()

    def get_backend(self) -> str:
        self._ensure()
        return "ahbm"

    def get_world_size(self) -> int:
        return self._ensure().world_size

    def get_rank(self) -> int:
        self._ensure()
        return self._rank_by_greenlet.get(getcurrent(), 0)

    def destroy_process_group(self) -> None:
        self._backend = None
        self._all_to_all = None

    def all_to_all_backend(self, algorithm: str | None = None) -> AllToAllBackend:
        """The all-to-all of the process group (``ccl.yaml``'s default, or ``algorithm``),
        installed on first use."""
        self._ensure()
        a2a = self._all_to_all
        if a2a is None or (algorithm is not None and a2a.name != algorithm):
            config, pes = self._init_args
            a2a = self._all_to_all = AllToAllBackend(self._ctx, algorithm, config, pes=pes)
        return a2a

    def all_to_all_single(self, output, input, output_split_sizes=None,
                          input_split_sizes=None, group=None, async_op: bool = False) -> None:
        """Block ``j`` of this rank's ``output`` becomes block ``r`` of rank ``j``'s
        ``input`` (equal blocks, one per participating PE; ``torch.distributed``'s
        signature, uneven splits refused)."""
        if output_split_sizes is not None or input_split_sizes is not None:
            raise UsageError("all_to_all_single: uneven splits are not supported (equal "
                             "blocks, one per participating PE)")
        backend = self.all_to_all_backend()
        launcher = self._launcher
        if launcher is None:
            if self._ensure().world_size != 1 or backend.group.sips != 1:
                raise KernelStateError(
                    f"all_to_all_single with {self._ensure().world_size} ranks must be called "
                    f"by every rank: start them with torch.multiprocessing.spawn")
            self.last = backend.all_to_all_all({0: input}, {0: output})
            return
        self.last = launcher.collective(("all_to_all",), (input, output))

    def all_reduce(self, tensor, op: str = ReduceOp.SUM) -> None:
        """All-reduce ``tensor`` (this rank's, on its SIP) with every other rank's."""
        backend = self._ensure()
        check_op(op)
        launcher = self._launcher
        if launcher is None:
            if backend.world_size != 1 or backend.group.sips != 1:
                raise KernelStateError(
                    f"all_reduce with {backend.world_size} ranks must be called by every rank: "
                    f"start them with torch.multiprocessing.spawn")
            self.last = backend.all_reduce_all({0: tensor}, op)
            return
        self.last = launcher.collective(("all_reduce", str(op).lower()), tensor)

    def barrier(self) -> None:
        """Wait until every rank has reached the barrier."""
        self._ensure()
        if self._launcher is not None:
            self._launcher.collective(("barrier",), None)


_START = object()  # a worker's first switch passes no value (its rank is bound already)


class Spawner:
    """``torch.multiprocessing``: rank workers as greenlets on one host process."""

    def __init__(self, ctx) -> None:
        self._ctx = ctx

    def spawn(self, fn, args: tuple = (), nprocs: int | None = None, join: bool = True):
        dist = self._ctx.distributed
        backend = dist._ensure()
        n = nprocs or backend.world_size
        if n != backend.world_size:
            raise UsageError(f"spawn nprocs={n} does not match the process group's world size "
                             f"{backend.world_size}")
        launcher = _Launcher(self._ctx, dist, fn, args, n)
        dist._launcher = launcher
        try:
            launcher.run()
        finally:
            dist._launcher = None


class _Launcher:
    """Runs rank greenlets until each blocks in a collective or returns; a collective
    runs when every live rank waits in the same one."""

    def __init__(self, ctx, dist, fn, args, n) -> None:
        self.ctx, self.dist, self.n = ctx, dist, n
        self.parent = getcurrent()
        self.workers = []
        self.devices = {}
        self.waiting: dict[int, tuple] = {}
        for rank in range(n):
            g = greenlet(lambda r=rank: fn(r, *args), parent=self.parent)
            dist._rank_by_greenlet[g] = rank
            self.workers.append(g)
            self.devices[rank] = rank  # rank = SIP
        self.result = None

    def collective(self, what: tuple, tensor):
        rank = self.dist._rank_by_greenlet[getcurrent()]
        self.devices[rank] = self.ctx.device
        return self.parent.switch(("wait", what, tensor))

    def run(self) -> None:
        live = set(range(self.n))
        resume: dict[int, object] = {r: _START for r in live}
        while live:
            for rank in sorted(resume):
                g = self.workers[rank]
                self.ctx.device = self.devices[rank]
                value = resume[rank]
                request = g.switch() if value is _START else g.switch(value)
                if g.dead:
                    live.discard(rank)
                    self.waiting.pop(rank, None)
                else:
                    _, what, tensor = request
                    self.waiting[rank] = (what, tensor)
            resume = {}
            if not live:
                break
            if set(self.waiting) != set(range(self.n)):  # some rank returned instead
                missing = sorted(set(range(self.n)) - set(self.waiting))
                kinds = {w[0][0] for w in self.waiting.values()}
                raise KernelStateError(
                    f"ranks {sorted(self.waiting)} wait in {'/'.join(sorted(kinds))} but ranks "
                    f"{missing} returned without calling it")
            kinds = {w[0] for w in self.waiting.values()}
            if len(kinds) != 1:
                raise KernelStateError(f"ranks called different collectives at once: "
                                       f"{sorted(kinds)}")
            (what,) = kinds
            result = None
            if what[0] == "all_reduce":
                tensors = {t.sip: t for _, t in self.waiting.values()}
                result = self.dist.backend.all_reduce_all(tensors, what[1])
            elif what[0] == "all_to_all":
                pairs = [t for _, t in self.waiting.values()]
                result = self.dist.all_to_all_backend().all_to_all_all(
                    {i.sip: i for i, _ in pairs}, {o.sip: o for _, o in pairs})
            resume = {r: result for r in self.waiting}
            self.waiting = {}
