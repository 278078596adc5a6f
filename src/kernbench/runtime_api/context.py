"""``RuntimeContext``: the ``torch``-like host API a bench receives (docs/host-api.md).

Host calls are synchronous in simulated time: deploying a tensor allocates a
system-wide virtual range and per-shard physical memory on the current
device (SIP), maps every PE of the placement domain, and writes the data over
PCIe before returning. ``launch`` sends a launch command through each SIP's
IO CPU and each CUBE's M_CPU to every PE of the grid and returns a handle;
``wait``/``wait_all`` run the simulation until the kernels' completion
messages reach the host.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from kernbench.errors import KernelStateError, UsageError
from kernbench.isa.dtypes import dtype_bytes, dtype_name, np_dtype
from kernbench.isa.handles import numel
from kernbench.policy.address.mmu import RegionBatch
from kernbench.policy.placement import DPPolicy, resolve_dp_policy
from kernbench.runtime_api.per_sip import PerSip
from kernbench.runtime_api.system import SystemRuntime
from kernbench.runtime_api.tensors import Placement, Tensor
from kernbench.sim_engine.engine import GraphEngine
from kernbench.topology import naming as nm
from kernbench.triton_emu.launch import ProgramIds, start_kernel


class _Ahbm:
    """``torch.ahbm``: the device API of this backend (``torch.cuda`` analogue)."""

    def __init__(self, ctx) -> None:
        self._ctx = ctx

    def set_device(self, sip: int) -> None:
        self._ctx.set_device(sip)

    def current_device(self) -> int:
        return self._ctx.current_device()

    def device_count(self) -> int:
        return self._ctx.device_count()


@dataclass
class LaunchHandle:
    name: str
    issue_ns: float
    event: object
    pes: list[tuple[int, int, int]]  # (sip, cube, pe) of every kernel instance
    procs: list = field(default_factory=list)
    done_ns: float | None = None
    scratch: list = field(default_factory=list)
    scratch_bytes: int = 0  # size of each PE's scratch arena

    @property
    def kernel_spans(self) -> list[tuple[float, float]]:
        return [p.value for p in self.procs]

    @property
    def kernel_ns(self) -> float:
        """First kernel start to last kernel end."""
        spans = self.kernel_spans
        return max(e for _, e in spans) - min(s for s, _ in spans)

    @property
    def host_ns(self) -> float:
        """Launch issue at the host to the last completion message at the host."""
        return self.done_ns - self.issue_ns

    @property
    def sips(self) -> list[int]:
        return sorted({s for s, _, _ in self.pes})


class RuntimeContext:
    """The host side of one process on one simulated system.

    What it owns: the current device (``set_device``), the tensors it created
    and the launches it issued. The address space and physical allocators are
    the system's (:class:`SystemRuntime`), shared by every context on the same
    engine, so VAs are unique across SIPs.
    """

    def __init__(self, engine: GraphEngine, device: int = 0) -> None:
        self.engine = engine
        self.system = SystemRuntime.of(engine)
        self.device = self.system.check_sip(device)
        self._tensors: list[Tensor] = []
        self._handles: list = []
        self._launches: list[LaunchHandle] = []
        self._count = 0
        from kernbench.runtime_api.distributed import DistributedContext, Spawner

        self.distributed = DistributedContext(self)  # torch.distributed
        self.multiprocessing = Spawner(self)  # torch.multiprocessing
        self.ahbm = _Ahbm(self)  # torch.ahbm

    @property
    def spec(self):
        return self.engine.graph.spec

    def handles(self) -> list:
        return list(self._handles)

    # -- devices (rank = SIP) -------------------------------------------------------------
    def set_device(self, sip: int) -> None:
        """Tensors and launches that follow go to SIP ``sip`` (``torch.cuda.set_device``)."""
        self.device = self.system.check_sip(sip)

    def current_device(self) -> int:
        return self.device

    def device_count(self) -> int:
        return self.system.sips

    def install_ipcq(self, tables: dict, *, slots: int = 4, slot_bytes: int = 4096,
                     tier: str = "tcm") -> int:
        """Install PE_IPCQ neighbour tables ``{(sip, cube, pe): {direction: peer}}`` for
        hand-written kernels (``init_process_group`` installs its algorithm's own);
        returns the number of queues."""
        from kernbench.components.builtin.pe_ipcq import install_queues
        from kernbench.geometry.ipcq import IpcqConfig

        cfg = IpcqConfig(slots, slot_bytes, tier)
        return install_queues(self.engine, tables, cfg,
                              lambda pe, t, nbytes: self.system.alloc(t, *pe, nbytes))

    # -- memory ------------------------------------------------------------------------
    def _create(self, shape, dtype: str, dp: DPPolicy | None, name: str | None,
                data: np.ndarray | None, memory: str = "hbm", shared: bool = False) -> Tensor:
        shape = tuple(int(s) for s in shape)
        bpe = dtype_bytes(dtype)
        dp = dp or DPPolicy()
        spec, sip = self.spec, self.device
        shards = resolve_dp_policy(dp, shape, sip, spec.cubes_per_sip, spec.pes_per_cube)
        page = spec.pe.page_size
        offsets: dict[tuple[int, int], int] = {}
        sizes: dict[tuple[int, int], int] = {}
        total = 0
        for s in shards:
            if s.key not in offsets:
                offsets[s.key] = total
                sizes[s.key] = numel(s.shape) * bpe
                total += -(-sizes[s.key] // page) * page
        self._count += 1
        name = name or f"t{self._count}"
        va = self.system.reserve(total, sip, name)
        t = Tensor(name, shape, dtype, dp, va, total, sip)
        for s in shards:
            pa = self.system.alloc(memory, sip, s.cube, s.pe, sizes[s.key], align=page)
            t.placements.append(Placement(s, pa, va + offsets[s.key], sizes[s.key]))
        copies: dict[tuple[int, int], list[Placement]] = {}
        for p in t.placements:
            copies.setdefault(p.shard.key, []).append(p)
        t.mapped_by = self._mappers(shards, shared)
        regions = [(va + off, sizes[key], *self._replicas(copies[key]))
                   for key, off in offsets.items()]
        self._map(sip, t.mapped_by, regions, page, all(len(c) == 1 for c in copies.values()))
        self._tensors.append(t)
        if data is not None:
            self._write(t, data)
        self._handles.append(t)
        return t

    def _map(self, sip: int, mappers, regions: list, page: int, single: bool) -> None:
        """Each mapper PE maps every shard of a new tensor: its own replica, else the
        first in its CUBE, else the first of all (``regions`` from :meth:`_replicas`).
        With one copy of each shard every PE maps the same table, checked once."""
        pes = self.engine.pe
        if single:
            batch = RegionBatch([(v, first, n) for v, n, _, _, first in regions], page)
            for cube, pe in mappers:
                pes(sip, cube, pe).mmu.map_batch(batch)
            return
        owners = {k for _, _, own, _, _ in regions for k in own}
        per_cube: dict[int, list] = {}  # what a PE holding no replica maps, per CUBE
        for cube, pe in mappers:
            if (cube, pe) in owners:
                table = [(v, own.get((cube, pe), by_cube.get(cube, first)), n)
                         for v, n, own, by_cube, first in regions]
            elif (table := per_cube.get(cube)) is None:
                table = per_cube[cube] = [(v, by_cube.get(cube, first), n)
                                          for v, n, _, by_cube, first in regions]
            pes(sip, cube, pe).mmu.map_many(table)

    def _mappers(self, shards, shared: bool) -> list[tuple[int, int]]:
        """The PEs that map a new tensor: its shards' PEs, or every PE of its SIP."""
        if shared:
            return [(c, p) for c in range(self.spec.cubes_per_sip)
                    for p in range(self.spec.pes_per_cube)]
        return sorted({(s.cube, s.pe) for s in shards})

    @staticmethod
    def _replicas(copies: list[Placement]) -> tuple[dict, dict, int]:
        """Where each PE maps a shard, as encoded PAs: its own replica ({(cube, pe): pa}),
        else the first in its CUBE ({cube: pa}), else the first of all."""
        own: dict[tuple[int, int], int] = {}
        by_cube: dict[int, int] = {}
        for p in copies:
            pa = p.pa.encode()
            own.setdefault((p.shard.cube, p.shard.pe), pa)
            by_cube.setdefault(p.shard.cube, pa)
        return own, by_cube, copies[0].pa.encode()

    def _write(self, t: Tensor, data: np.ndarray) -> None:
        eng = self.engine
        data = np.asarray(data)
        if data.shape != t.shape:
            raise UsageError(f"data of shape {data.shape} does not fit tensor {t.name!r} "
                             f"of shape {t.shape}")
        events = []
        for p in t.placements:
            r, c = p.shard.rows, p.shard.cols
            block = data[r[0]:r[1]] if data.ndim == 1 else data[r[0]:r[1], ..., c[0]:c[1]]
            block = np.ascontiguousarray(block.astype(np_dtype(t.dtype)))
            events.append(eng.h2d_write(p.pa, p.nbytes, data=block if eng.store is not None else None,
                                        from_host=True))
        eng.run(eng.env.all_of(events))

    def empty(self, shape, dtype: str = "f16", dp: DPPolicy | None = None,
              name: str | None = None, memory: str = "hbm", shared: bool = False) -> Tensor:
        """Allocate and map; no data is written (reading it in data mode is an error).
        ``memory``: where each shard lives, "hbm" (its PE's slice), "sram" (its
        CUBE's SRAM) or "tcm" (its PE's TCM). ``shared``: every PE of the SIP maps
        the tensor (others reach its shards over the NoC), not only the shards' PEs."""
        return self._create(shape, dtype, dp, name, None, memory, shared)

    def zeros(self, shape, dtype: str = "f16", dp: DPPolicy | None = None,
              name: str | None = None, memory: str = "hbm") -> Tensor:
        return self._create(shape, dtype, dp, name, np.zeros(tuple(shape), np_dtype(dtype)),
                            memory)

    def from_numpy(self, array: np.ndarray, dtype: str | None = None, dp: DPPolicy | None = None,
                   name: str | None = None, memory: str = "hbm", shared: bool = False) -> Tensor:
        """Deploy ``array``; the device dtype follows the array (``ml_dtypes.bfloat16``
        arrays become bf16) unless ``dtype`` converts it."""
        arr = np.asarray(array)
        return self._create(arr.shape, dtype or dtype_name(arr.dtype), dp, name, arr, memory,
                            shared)

    def to_numpy(self, t: Tensor) -> np.ndarray:
        """Read a tensor back over PCIe (data mode) and reassemble its shards."""
        eng = self.engine
        if eng.store is None:
            raise UsageError("to_numpy needs a data-mode engine (enable_data=True)")
        dt = np_dtype(t.dtype)
        out = np.zeros(t.shape, dt)
        seen = set()
        reads = []
        for p in t.placements:
            if p.shard.key in seen:
                continue
            seen.add(p.shard.key)
            reads.append((p, eng.d2h_read(p.pa, p.nbytes, to_host=True)))
        eng.run(eng.env.all_of([ev for _, ev in reads]))
        for p, ev in reads:
            block = ev.value.data.view(dt).reshape(p.shard.shape)
            r, c = p.shard.rows, p.shard.cols
            if len(t.shape) == 1:
                out[r[0]:r[1]] = block
            else:
                out[r[0]:r[1], ..., c[0]:c[1]] = block
        return out

    # -- kernels ----------------------------------------------------------------------------
    def launch(self, name: str, fn, *args, dp: DPPolicy | None = None,
               sips: int | Iterable[int] | str | None = None, scratch_bytes: int | None = None,
               **kwargs) -> LaunchHandle:
        """Start ``fn`` on every (CUBE, PE) of ``dp``'s grid on each SIP of ``sips``.

        ``scratch_bytes``: TCM the kernel's scratch arena takes on each PE (default
        the topology's ``pe.tcm.kernel_scratch_kb``); a kernel with big tiles may take
        more of the TCM that queues and host tensors leave free.

        ``sips``: None = the current device, ``"all"`` = every SIP, or SIP ids.
        A :class:`Tensor` argument (positional or keyword) becomes the VA of the
        shard local to each PE; a :class:`PerSip` argument passes a different
        value to each SIP.
        """
        dp = dp or DPPolicy()
        spec = self.spec
        targets = self._sips(sips)
        self.system.register_kernel(name, fn, replace=True)
        eng = self.engine
        now = eng.env.now
        arena = spec.pe.kernel_scratch_bytes if scratch_bytes is None else int(scratch_bytes)
        if arena < 0 or arena % 64:
            raise UsageError(f"launch {name!r}: scratch_bytes must be a non-negative multiple "
                             f"of 64, got {scratch_bytes!r}")
        handle = LaunchHandle(name, now, eng.env.event(), [], scratch_bytes=arena)
        grids = {sip: resolve_dp_policy(dp, (dp.num_cubes * dp.num_pes,), sip,
                                        spec.cubes_per_sip, spec.pes_per_cube) for sip in targets}
        for sip, shards in grids.items():  # refuse before anything is allocated or sent
            for s in shards:
                running = eng.pe(sip, s.cube, s.pe).cpu.runner
                if running is not None and not running.finished:
                    raise KernelStateError(
                        f"cannot launch {name!r} on {nm.pe_prefix(sip, s.cube, s.pe)}: it is "
                        f"still running {running.name!r} (wait for that launch first)")
        for sip, shards in grids.items():
            io_cpu = eng.resolver.find_io_cpu(sip)
            for s in shards:
                cube, pe = s.cube, s.pe
                m_cpu = eng.resolver.find_m_cpu(sip, cube)
                pe_cpu = nm.pe_unit(sip, cube, pe, "pe_cpu")
                arrive = eng.transport.latency(eng.flows.command(nm.HOST, io_cpu, m_cpu, pe_cpu), now)
                kargs = tuple(self._arg(a, sip, cube, pe, name) for a in args)
                kkw = {k: self._arg(v, sip, cube, pe, name) for k, v in kwargs.items()}
                scratch = self.system.allocator(sip, cube, pe).alloc_tcm(arena)
                handle.scratch.append((sip, cube, pe, scratch))
                ids = ProgramIds(pe, dp.num_pes, cube, dp.num_cubes, sip, spec.sips.count)
                proc = start_kernel(eng, sip, cube, pe, name, fn, kargs, kkw, arrive, ids,
                                    (scratch.encode(), arena),
                                    describe_va=lambda va, sip=sip: self.system.describe_va(va, sip))
                handle.pes.append((sip, cube, pe))
                handle.procs.append(proc)
        eng.env.process(self._notify(handle))
        self._handles.append(handle)
        self._launches.append(handle)
        return handle

    def _sips(self, sips) -> list[int]:
        if sips is None:
            return [self.device]
        if sips == "all":
            return list(range(self.system.sips))
        if isinstance(sips, int):
            return [self.system.check_sip(sips)]
        out = [self.system.check_sip(s) for s in sips]
        if not out or len(set(out)) != len(out):
            raise UsageError(f"launch sips must be distinct SIP ids, got {out}")
        return out

    def _arg(self, a, sip: int, cube: int, pe: int, name: str):
        if isinstance(a, PerSip):
            if sip not in a:
                raise UsageError(f"kernel {name!r}: per-SIP argument has no entry for SIP {sip}")
            a = a[sip]
        if isinstance(a, Tensor):
            if a.freed:
                raise UsageError(f"kernel {name!r} got freed tensor {a.name!r}")
            try:
                return a.ptr(cube, pe, sip)
            except KeyError:
                return a.va  # not placed here: the kernel may still reach it through its VA
        return a

    def _notify(self, handle: LaunchHandle):
        eng = self.engine
        yield eng.env.all_of(handle.procs)
        last = eng.env.now
        for (sip, cube, pe), proc in zip(handle.pes, handle.procs, strict=True):
            m_cpu = eng.resolver.find_m_cpu(sip, cube)
            pe_cpu = nm.pe_unit(sip, cube, pe, "pe_cpu")
            back = eng.flows.command(pe_cpu, m_cpu, eng.resolver.find_io_cpu(sip), nm.HOST)
            last = max(last, eng.transport.latency(back, max(proc.value[1], eng.env.now)))
        if last > eng.env.now:
            yield eng.env.timeout(last - eng.env.now)
        handle.done_ns = last
        for sip, cube, pe, scratch in handle.scratch:
            self.system.allocator(sip, cube, pe).free_tcm(scratch, handle.scratch_bytes)
        handle.scratch.clear()
        handle.event.succeed(last)

    def wait(self, handle: LaunchHandle) -> LaunchHandle:
        if handle.done_ns is None:
            self.engine.run(handle.event)
        return handle

    def wait_all(self) -> None:
        for h in self._launches:
            self.wait(h)

    def cleanup(self) -> None:
        """Free every tensor (unmap, release VA and PA)."""
        self.wait_all()
        for t in self._tensors:
            if t.freed:
                continue
            for cube, pe in t.mapped_by:
                mmu = self.engine.pe(t.sip, cube, pe).mmu
                seen = set()
                for p in t.placements:
                    if p.shard.key not in seen:
                        seen.add(p.shard.key)
                        mmu.unmap(p.va, p.nbytes)
            for p in t.placements:
                self.system.free(p.pa, t.sip, p.shard.cube, p.shard.pe, p.nbytes)
            self.system.release(t.va, t.va_bytes)
            t.freed = True


