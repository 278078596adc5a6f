"""``RuntimeContext``: the ``torch``-like host API a bench receives (ADR-0045 D8).

Host calls are synchronous in simulated time: deploying a tensor allocates a
virtual range and per-shard physical memory, maps every PE of the placement
domain, and writes the data over PCIe before returning. ``launch`` sends a
launch command through the IO CPU and each cube's M_CPU to every PE of the
grid and returns a handle; ``wait``/``wait_all`` run the simulation until the
kernels' completion messages reach the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kernbench.errors import KernbenchError
from kernbench.policy.address import AddressConfig, PEMemAllocator, VirtualAllocator
from kernbench.policy.placement import DPPolicy, resolve_dp_policy
from kernbench.runtime_api.tensors import Placement, Tensor
from kernbench.sim_engine.engine import GraphEngine
from kernbench.topology import naming as nm
from kernbench.triton_emu.pe_commands import DTYPES, dtype_bytes, numel
from kernbench.triton_emu.registry import set_kernel


@dataclass
class LaunchHandle:
    name: str
    issue_ns: float
    event: object
    pes: list[tuple[int, int, int]]
    procs: list = field(default_factory=list)
    done_ns: float | None = None
    scratch: list = field(default_factory=list)

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


class RuntimeContext:
    def __init__(self, engine: GraphEngine, device: int = 0) -> None:
        spec = engine.graph.spec
        if not 0 <= device < spec.sips.count:
            raise KernbenchError(f"device {device} does not exist (SIPs 0..{spec.sips.count - 1})")
        self.engine = engine
        self.device = device
        self._cfg = AddressConfig.from_spec(spec)
        self._allocators: dict[tuple[int, int, int], PEMemAllocator] = {}
        self._va = VirtualAllocator(page_size=spec.pe.page_size)
        self._tensors: list[Tensor] = []
        self._handles: list = []
        self._launches: list[LaunchHandle] = []
        self._count = 0

    @property
    def spec(self):
        return self.engine.graph.spec

    def handles(self) -> list:
        return list(self._handles)

    # -- memory ------------------------------------------------------------------------
    def _allocator(self, cube: int, pe: int) -> PEMemAllocator:
        key = (self.device, cube, pe)
        if key not in self._allocators:
            self._allocators[key] = PEMemAllocator(*key, self._cfg)
        return self._allocators[key]

    def _create(self, shape, dtype: str, dp: DPPolicy | None, name: str | None,
                data: np.ndarray | None) -> Tensor:
        shape = tuple(int(s) for s in shape)
        dtype_bytes(dtype)
        dp = dp or DPPolicy()
        spec = self.spec
        shards = resolve_dp_policy(dp, shape, self.device, spec.cubes_per_sip, spec.pes_per_cube)
        page = spec.pe.page_size
        bpe = dtype_bytes(dtype)
        offsets: dict[tuple[int, int], int] = {}
        total = 0
        for s in shards:
            if s.key not in offsets:
                offsets[s.key] = total
                total += -(-numel(s.shape) * bpe // page) * page
        self._count += 1
        va = self._va.alloc(total)
        t = Tensor(name or f"t{self._count}", shape, dtype, dp, va, total)
        for s in shards:
            nbytes = numel(s.shape) * bpe
            pa = self._allocator(s.cube, s.pe).alloc_hbm(nbytes, align=page)
            t.placements.append(Placement(s, pa, va + offsets[s.key], nbytes))
        for cube, pe in {(s.cube, s.pe) for s in shards}:
            mmu = self.engine.pe(self.device, cube, pe).mmu
            for key, off in offsets.items():
                mmu.map(va + off, self._nearest(t, key, cube, pe).pa.encode(),
                        numel(next(p.shard.shape for p in t.placements if p.shard.key == key)) * bpe)
        self._tensors.append(t)
        if data is not None:
            self._write(t, data)
        self._handles.append(t)
        return t

    @staticmethod
    def _nearest(t: Tensor, key, cube: int, pe: int) -> Placement:
        copies = [p for p in t.placements if p.shard.key == key]
        for p in copies:
            if (p.shard.cube, p.shard.pe) == (cube, pe):
                return p
        for p in copies:
            if p.shard.cube == cube:
                return p
        return copies[0]

    def _write(self, t: Tensor, data: np.ndarray) -> None:
        eng = self.engine
        events = []
        for p in t.placements:
            r, c = p.shard.rows, p.shard.cols
            block = data[r[0]:r[1]] if data.ndim == 1 else data[r[0]:r[1], ..., c[0]:c[1]]
            block = np.ascontiguousarray(block.astype(DTYPES[t.dtype]))
            events.append(eng.h2d_write(p.pa, p.nbytes, data=block if eng.store is not None else None,
                                        from_host=True))
        eng.run(eng.env.all_of(events))

    def empty(self, shape, dtype: str = "f16", dp: DPPolicy | None = None,
              name: str | None = None) -> Tensor:
        """Allocate and map; no data is written (reading it in data mode is an error)."""
        return self._create(shape, dtype, dp, name, None)

    def zeros(self, shape, dtype: str = "f16", dp: DPPolicy | None = None,
              name: str | None = None) -> Tensor:
        return self._create(shape, dtype, dp, name, np.zeros(tuple(shape), DTYPES[dtype]))

    def from_numpy(self, array: np.ndarray, dtype: str | None = None, dp: DPPolicy | None = None,
                   name: str | None = None) -> Tensor:
        arr = np.asarray(array)
        if dtype is None:
            dtype = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
                     np.dtype(np.int32): "i32"}.get(arr.dtype)
            if dtype is None:
                raise KernbenchError(f"cannot infer a device dtype for numpy {arr.dtype}; pass dtype=")
        return self._create(arr.shape, dtype, dp, name, arr)

    def to_numpy(self, t: Tensor) -> np.ndarray:
        """Read a tensor back over PCIe (data mode) and reassemble its shards."""
        eng = self.engine
        if eng.store is None:
            raise KernbenchError("to_numpy needs a data-mode engine (enable_data=True)")
        out = np.zeros(t.shape, DTYPES[t.dtype])
        seen = set()
        reads = []
        for p in t.placements:
            if p.shard.key in seen:
                continue
            seen.add(p.shard.key)
            reads.append((p, eng.d2h_read(p.pa, p.nbytes, to_host=True)))
        eng.run(eng.env.all_of([ev for _, ev in reads]))
        for p, ev in reads:
            block = ev.value.data.view(DTYPES[t.dtype]).reshape(p.shard.shape)
            r, c = p.shard.rows, p.shard.cols
            if t.shape and len(t.shape) == 1:
                out[r[0]:r[1]] = block
            else:
                out[r[0]:r[1], ..., c[0]:c[1]] = block
        return out

    # -- kernels ----------------------------------------------------------------------------
    def launch(self, name: str, fn, *args, dp: DPPolicy | None = None, **kwargs) -> LaunchHandle:
        dp = dp or DPPolicy()
        spec = self.spec
        shards = resolve_dp_policy(dp, (dp.num_cubes * dp.num_pes,), self.device,
                                   spec.cubes_per_sip, spec.pes_per_cube)
        set_kernel(name, fn)
        eng = self.engine
        now = eng.env.now
        io_cpu = eng.resolver.find_io_cpu(self.device)
        handle = LaunchHandle(name, now, eng.env.event(), [])
        for s in shards:
            cube, pe = s.cube, s.pe
            m_cpu = eng.resolver.find_m_cpu(self.device, cube)
            pe_cpu = nm.pe_unit(self.device, cube, pe, "pe_cpu")
            arrive = eng.book_flow(eng.flows.command(nm.HOST, io_cpu, m_cpu, pe_cpu), now)
            kargs = tuple(self._arg(a, cube, pe, name) for a in args)
            scratch = self._allocator(cube, pe).alloc_tcm(spec.pe.kernel_scratch_bytes)
            handle.scratch.append((cube, pe, scratch))
            proc = eng.launch_kernel(self.device, cube, pe, name, fn, kargs, kwargs, arrive,
                                     (pe, dp.num_pes, cube, dp.num_cubes),
                                     (scratch.encode(), spec.pe.kernel_scratch_bytes))
            handle.pes.append((self.device, cube, pe))
            handle.procs.append(proc)
        eng.env.process(self._notify(handle, io_cpu))
        self._handles.append(handle)
        self._launches.append(handle)
        return handle

    def _arg(self, a, cube: int, pe: int, name: str):
        if isinstance(a, Tensor):
            if a.freed:
                raise KernbenchError(f"kernel {name!r} got freed tensor {a.name!r}")
            try:
                return a.ptr(cube, pe)
            except KeyError:
                return a.va  # not placed here: the kernel may still reach it through its VA
        return a

    def _notify(self, handle: LaunchHandle, io_cpu: str):
        eng = self.engine
        yield eng.env.all_of(handle.procs)
        last = eng.env.now
        for (sip, cube, pe), proc in zip(handle.pes, handle.procs, strict=True):
            m_cpu = eng.resolver.find_m_cpu(sip, cube)
            pe_cpu = nm.pe_unit(sip, cube, pe, "pe_cpu")
            back = eng.flows.command(pe_cpu, m_cpu, io_cpu, nm.HOST)
            last = max(last, eng.book_flow(back, max(proc.value[1], eng.env.now)))
        if last > eng.env.now:
            yield eng.env.timeout(last - eng.env.now)
        handle.done_ns = last
        for cube, pe, scratch in handle.scratch:
            self._allocator(cube, pe).free_tcm(scratch, self.spec.pe.kernel_scratch_bytes)
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
            for cube, pe in {(p.shard.cube, p.shard.pe) for p in t.placements}:
                mmu = self.engine.pe(self.device, cube, pe).mmu
                seen = set()
                for p in t.placements:
                    if p.shard.key not in seen:
                        seen.add(p.shard.key)
                        mmu.unmap(p.va, p.nbytes)
            for p in t.placements:
                self._allocator(p.shard.cube, p.shard.pe).free_hbm(p.pa, p.nbytes)
            self._va.free(t.va, t.va_bytes)
            t.freed = True
