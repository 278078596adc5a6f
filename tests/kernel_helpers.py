"""Launching one kernel on one PE, shared by the `tl` and PE-pipeline tests."""

from __future__ import annotations

import numpy as np

from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine import GraphEngine


def launch_one(graph, kernel, inputs, outputs=(), *, scalars=(), kwargs=None, data=False):
    """Deploy ``inputs`` (arrays, or (shape, dtype) for uninitialised tensors) and
    ``outputs`` ((shape, dtype)), launch ``kernel`` and wait for it.

    Returns (engine, launch handle, input tensors, output arrays or None)."""
    eng = GraphEngine(graph, enable_data=data)
    ctx = RuntimeContext(eng)
    ins = [ctx.from_numpy(a) if isinstance(a, np.ndarray) else ctx.empty(*a) for a in inputs]
    outs = [ctx.empty(shape, dtype) for shape, dtype in outputs]
    handle = ctx.wait(ctx.launch(kernel.__name__, kernel, *ins, *outs, *scalars, **(kwargs or {})))
    values = [ctx.to_numpy(t) for t in outs] if data else None
    return eng, handle, ins, values
