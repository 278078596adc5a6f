"""Helpers (not a bench): environment-variable parameters and input tensors shared by
the benches."""

from __future__ import annotations

import os
import zlib

import numpy as np

from kernbench.errors import UsageError


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"environment variable {name} must be an integer, got {raw!r}") from None
    if value <= 0:
        raise UsageError(f"environment variable {name} must be positive, got {value}")
    return value


def bench_input(torch, shape, dtype: str, name: str, dp=None):
    """An input tensor: allocated only in timing mode; in data mode (``--data``) filled
    with values seeded by ``name`` (standard normal), so kernels read real numbers and
    the run is repeatable."""
    if torch.engine.data is None:
        return torch.empty(shape, dtype, dp=dp, name=name)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return torch.from_numpy(rng.standard_normal(tuple(shape)).astype(np.float32), dtype,
                            dp=dp, name=name)
