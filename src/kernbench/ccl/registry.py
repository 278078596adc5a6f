"""The algorithm registry: ``@register`` next to each algorithm class.

Algorithms are loaded one way only: ``kernbench/ccl/ccl.yaml`` names each one's module,
and ``ccl.config.algorithm_class`` imports it, which registers the class here.
"""

from __future__ import annotations

_ALGORITHMS: dict[str, type] = {}


def register(cls: type) -> type:
    """Register an algorithm class under its ``name``."""
    name = cls.name
    owner = _ALGORITHMS.get(name)
    if owner is not None and owner is not cls:
        raise RuntimeError(f"collective algorithm {name!r} is already registered by "
                           f"{owner.__module__}.{owner.__qualname__}")
    _ALGORITHMS[name] = cls
    return cls


def get(name: str) -> type:
    """The class registered under ``name`` (its module must have been imported)."""
    try:
        return _ALGORITHMS[name]
    except KeyError:
        raise KeyError(name) from None
