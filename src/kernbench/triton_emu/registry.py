"""Kernel registry (ADR-0046 D7): name -> kernel function.

``register_kernel`` refuses a second kernel under a taken name; a launch
re-registers its kernel under its name (last call wins), so re-running a
bench in one process is idempotent.
"""

from __future__ import annotations

from collections.abc import Callable

_kernels: dict[str, Callable] = {}


def register_kernel(name: str, fn: Callable) -> None:
    if name in _kernels and _kernels[name] is not fn:
        raise ValueError(f"a different kernel is already registered as {name!r}")
    _kernels[name] = fn


def set_kernel(name: str, fn: Callable) -> None:
    _kernels[name] = fn


def get_kernel(name: str) -> Callable:
    try:
        return _kernels[name]
    except KeyError:
        raise KeyError(f"no kernel registered as {name!r}") from None


def clear_registry() -> None:
    _kernels.clear()
