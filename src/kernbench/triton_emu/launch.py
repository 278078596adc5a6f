"""Start a kernel on one PE: build its ``tl`` context and greenlet, attach them.

This is where the kernel side meets the hardware side: PE_CPU receives the
program driver and the ``tl`` context receives PE_CPU as its executor, so
neither layer imports the other's internals.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from kernbench.triton_emu.kernel_runner import KernelRunner
from kernbench.triton_emu.tl_context import TLContext


@dataclass(frozen=True, slots=True)
class ProgramIds:
    """What ``tl.program_id`` / ``tl.num_programs`` answer on one PE (axes 0, 1, 2)."""

    pe: int
    pes: int
    cube: int
    cubes: int
    sip: int
    sips: int


def start_kernel(engine, sip: int, cube: int, pe: int, name: str, fn, args: tuple,
                 kwargs: dict, start_at: float, ids: ProgramIds, scratch: tuple[int, int],
                 describe_va=None):
    """Run ``fn(*args, tl=..., **kwargs)`` on PE (sip, cube, pe) from ``start_at``.

    ``scratch`` is the (encoded TCM base address, size) of the kernel's scratch;
    ``describe_va(va)`` says which SIP owns an address (for MMU-fault messages).
    Returns the SimPy process, which succeeds with (start, end) of the kernel.
    """
    unit = engine.pe(sip, cube, pe)
    cpu = unit.cpu
    spec = unit.spec.pe
    tl = TLContext(pe_id=ids.pe, num_programs=ids.pes, cube_id=ids.cube, num_cubes=ids.cubes,
                   sip_id=ids.sip, num_sips=ids.sips, executor=cpu, scratch_base=scratch[0],
                   scratch_size=scratch[1], cost_model=unit.cost_model,
                   tile_shape=(spec.tile_m, spec.tile_k, spec.tile_n))

    def body():
        start = cpu.begin()
        fn(*args, tl=tl, **kwargs)
        return start, cpu.finish()

    try:
        kernel_file = inspect.getsourcefile(fn)
    except TypeError:
        kernel_file = None
    runner = KernelRunner(engine.env, name, unit.prefix, body, kernel_file,
                          on_resume=lambda: TLContext._set_active(tl),
                          on_leave=lambda: TLContext._set_active(None), describe_va=describe_va)
    runner.context = tl
    cpu.attach(runner)
    engine.register_program(runner)
    return engine.env.process(runner.process(start_at))
