"""Exception types shared across layers.

User-facing errors derive from :class:`KernbenchError`; the CLI prints them as
one line (``str(err)``) and exits non-zero, never with a traceback.
"""

from __future__ import annotations


class KernbenchError(Exception):
    """Base class for errors caused by user input or misuse."""


class ConfigError(KernbenchError, ValueError):
    """A configuration or topology file is invalid.

    The message always names the file, the key path and what is allowed.
    """

    def __init__(self, source: str, key_path: str, message: str) -> None:
        self.source = source
        self.key_path = key_path
        self.detail = message
        where = f"{source}: {key_path}: " if key_path else f"{source}: "
        super().__init__(where + message)


class UsageError(KernbenchError, ValueError):
    """A command-line argument, bench parameter or name is not one that exists."""


class KernelMisuse(KernbenchError, ValueError):
    """A kernel used the ``tl`` API in a way it does not allow (shapes, spaces, scopes)."""


class KernelTypeError(KernbenchError, TypeError):
    """A kernel passed a value of the wrong kind to a ``tl`` call."""


class KernelStateError(KernbenchError, RuntimeError):
    """A kernel-side call made where it cannot work (outside a kernel, on a busy PE)."""


class RoutingError(KernbenchError):
    """A node is absent from the topology or no path joins two nodes."""


class AllocationError(KernbenchError):
    """An allocator cannot satisfy a request (says required vs largest free)."""


class VaAllocationError(AllocationError):
    """The virtual-address allocator cannot satisfy a request."""


class MmuFault(KernbenchError):
    """A virtual address has no mapping, or a mapping would overlap another.

    ``va`` is the faulting virtual address when the fault is an access.
    """

    def __init__(self, message: str, va: int | None = None) -> None:
        super().__init__(message)
        self.va = va


class SimulationError(KernbenchError):
    """The simulation reached an impossible state (e.g. a deadlock)."""
