"""Bench registry (docs/adr/0020-bench-modules.md).

``@bench(name=..., description=...)`` registers a ``run(torch)`` function; the
package imports every non-helper module eagerly and rejects a module that
registers nothing. Indices are 1-based in alphabetical order of names and are
NOT a stable API: scripts should use names.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kernbench.errors import KernbenchError, UsageError


class BenchError(UsageError):
    """A bench name, index or declaration is not valid."""


class BenchRegistryError(KernbenchError, RuntimeError):
    """The bench modules do not form a valid registry (duplicates, missing @bench)."""


_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class BenchSpec:
    name: str
    description: str
    run: Callable
    module: str
    index: int


_PENDING: list[tuple[str, str, Callable]] = []
_REGISTERED_MODULES: set[str] = set()
_REGISTRY: dict[str, BenchSpec] = {}


def bench(name: str, description: str):
    if not isinstance(name, str) or not _NAME.match(name):
        raise BenchError(f"bench name {name!r} must be kebab-case: lowercase letters, digits and "
                         f"dashes, starting with a letter")
    if not isinstance(description, str) or not description.strip():
        raise BenchError(f"bench {name!r} needs a non-empty description")

    def register(fn: Callable) -> Callable:
        _PENDING.append((name, description.strip(), fn))
        _REGISTERED_MODULES.add(fn.__module__)
        _REGISTRY.clear()  # re-finalise on next lookup
        return fn

    return register


def _finalize() -> None:
    if _REGISTRY:
        return
    seen: set[str] = set()
    for name, _, _ in _PENDING:
        if name in seen:
            raise BenchRegistryError(f"duplicate bench name: {name}")
        seen.add(name)
    for i, (name, desc, fn) in enumerate(sorted(_PENDING, key=lambda p: p[0]), start=1):
        _REGISTRY[name] = BenchSpec(name, desc, fn, fn.__module__, i)


def list_all() -> list[BenchSpec]:
    _finalize()
    return sorted(_REGISTRY.values(), key=lambda s: s.index)


def resolve(identifier: str) -> BenchSpec:
    if not isinstance(identifier, str) or not identifier.strip():
        raise BenchError("bench identifier must be a non-empty string.")
    _finalize()
    ident = identifier.strip()
    if ident.isdigit():
        for spec in _REGISTRY.values():
            if spec.index == int(ident):
                return spec
        raise BenchError(f"No bench with index {ident} (1..{len(_REGISTRY)}; see `kernbench list`)")
    if ident in _REGISTRY:
        return _REGISTRY[ident]
    raise BenchError(f"Unknown bench {ident!r} (see `kernbench list`)")


def audit_modules(imported: list[str], registered: set[str]) -> None:
    missing = sorted(m for m in imported if m not in registered)
    if missing:
        raise BenchRegistryError(f"Bench module(s) missing @bench decorator: {', '.join(missing)}")
