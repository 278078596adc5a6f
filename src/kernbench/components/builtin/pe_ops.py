"""Stage helpers shared by PE_SCHEDULER's single-op path and its composite feeder.

They book the PE's engines, report each stage to the op log, and schedule the
data-mode reads and commits at the stage times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from kernbench.components.builtin.pe_stages import Stages
from kernbench.components.clock import sim_now
from kernbench.isa import dtypes
from kernbench.isa.handles import TensorHandle, ready_at

# (Final: the compiled twin keeps these in C statics, not looked up by name per call; ADR 0065)
dtype_bytes: Final = dtypes.dtype_bytes

if TYPE_CHECKING:
    from kernbench.components.builtin.pe_cpu import PeCpu


def operand_ready(h: TensorHandle, cmd) -> float:
    """When a composite's GEMM operand is ready: one the composite's own prologue writes
    (a recipe's read-write output) is ready when the prologue ends, where the loop starts."""
    if any(op.out is h for op in cmd.ops if op.kind != "gemm"):
        return 0.0
    return ready_at(h)


def view_va(h: TensorHandle, r0: int, c0: int) -> int:
    """Virtual address of element (r0, c0) of a 2-D HBM view (transposed views swap)."""
    if len(h.shape) != 2:
        return h.addr
    bpe = dtype_bytes(h.dtype)
    if h.transposed:
        stride = h.row_stride or h.shape[0]
        return h.addr + (c0 * stride + r0) * bpe
    stride = h.row_stride or h.shape[1]
    return h.addr + (r0 * stride + c0) * bpe


class PeOps:
    def __init__(self, pe) -> None:
        self.pe = pe
        self.env = pe.env
        self.stages = Stages.of(pe)
        self._cpu: PeCpu | None = None  # the PE's CPU (made after its scheduler), found on first use

    @property
    def floor(self) -> float:
        """The earliest time a later booking on this PE's engines can start, which is
        what their timelines may forget up to: simulated time, or the CPU's clock when
        the kernel runs behind it (it waited for an arrival whose time was not known,
        and its later, independent ops still start at their own dispatch times)."""
        cpu = self._cpu
        if cpu is None:
            cpu = self._cpu = self.pe.cpu
        now: float = sim_now(self.env)
        t: float = cpu.t
        return now if now <= t else t

    def log(self, t0, t1, unit, kind, name, stage, params=None):
        self.pe.op_log.record(t0, t1, self.pe.ids[unit], kind, name, params, stage)

    def data_at(self, t, fn):
        if self.pe.data is not None:
            self.pe.data.at(t, fn)

    def read(self, h):
        return self.pe.data.read(h, self.pe.mmu)

    def write(self, h, value):
        self.pe.data.write(h, value, self.pe.mmu)

    def math_run(self, ready: float, elements: int) -> tuple[float, float, float]:
        return self.stages.math_run(ready, elements, self.floor)

    def compute_chain(self, t_ready: float, in_bytes: int, out_bytes: int, engine_run,
                      name: str, kind: str, params: dict | None) -> tuple[float, float]:
        """FETCH inputs -> engine -> STORE result on the PE's engines (``Stages.chain``);
        returns (start, end). ``engine_run(ready)`` books the engine."""
        return self.stages.chain(t_ready, in_bytes, out_bytes,
                                 lambda r, _now: engine_run(r), self.floor, name, kind, params)
