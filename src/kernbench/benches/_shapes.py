"""Helper (not a bench): environment-variable parameters shared by the benches."""

from __future__ import annotations

import os

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
