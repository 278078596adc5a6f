"""Which PE unit executes which command: a table filled next to each unit.

A unit module registers the command types it owns with ``@executes(...)``;
PE_CPU looks the executor up by the command's type (its class or nearest
registered base). Adding a command and the unit that runs it is therefore one
file, and no dispatcher needs an ``isinstance`` chain (docs/adr/0013-open-command-dispatch.md).

An executor is ``fn(pe, cmd, t_issue, deps) -> Completion``: ``t_issue`` is
when PE_CPU hands the command over, ``deps`` the completions it must follow
(hazards). A unit that cannot know the end time yet returns a pending
completion and signals it later (``Completion.complete``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from kernbench.isa.commands import PeCommand
from kernbench.isa.handles import Completion

Executor = Callable[..., Completion]

_EXECUTORS: Final[dict[type, Executor]] = {}
_RESOLVED: Final[dict[type, Executor]] = {}  # command type -> executor, after the MRO walk


def executes(*command_types: type[PeCommand]) -> Callable[[Executor], Executor]:
    """Register the decorated function as the executor of ``command_types``."""

    def register(fn: Executor) -> Executor:
        for ct in command_types:
            owner = _EXECUTORS.get(ct)
            if owner is not None and owner is not fn:
                raise RuntimeError(f"{ct.__name__} is already executed by "
                                   f"{owner.__module__}.{owner.__qualname__}")
            _EXECUTORS[ct] = fn
        _RESOLVED.clear()
        return fn

    return register


def executor_for(command_type: type) -> Executor:
    """The registered executor of a command type (or of its nearest registered base)."""
    hit = _RESOLVED.get(command_type)
    if hit is not None:
        return hit
    for klass in command_type.__mro__:
        fn = _EXECUTORS.get(klass)
        if fn is not None:
            _RESOLVED[command_type] = fn
            return fn
    raise TypeError(f"no PE unit executes {command_type.__name__} (register one with "
                    f"kernbench.components.builtin.dispatch.executes)")


def registered() -> dict[str, str]:
    """{command type: executor} for documentation and tests."""
    return {ct.__name__: f"{fn.__module__}.{fn.__qualname__}"
            for ct, fn in sorted(_EXECUTORS.items(), key=lambda kv: kv[0].__name__)}
