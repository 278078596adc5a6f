"""The narrow interfaces between PE units and the engine that hosts them.

PE units never import the engine: they receive an object with exactly these
members (``GraphEngine`` provides them). Keeping the boundary this small is
what lets IPCQ, collectives and a future network backend meet in one place
(docs/adr/0013-open-command-dispatch.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kernbench.isa.handles import Completion

PeCoord = tuple[int, int, int]  # (sip, cube, pe)


class PeNetwork(Protocol):
    """PE-to-PE traffic, in the spirit of a system/network boundary.

    ``send`` moves ``nbytes`` from one PE's TCM to another's over the modelled
    fabric; ``receive`` returns a completion that the network signals when a
    matching message has arrived (possibly long after the call). Messages
    between the same (src, dst, tag) arrive in send order.
    """

    def now(self) -> float: ...

    def schedule(self, t: float, fn: Callable[[], None]) -> None:
        """Run ``fn()`` at simulated time ``t`` (>= now)."""

    def send(self, src: PeCoord, dst: PeCoord, nbytes: int, *, tag: Any = 0,
             at: float | None = None, payload: Any = None) -> Completion:
        """Inject a message at ``at`` (default now); completes when it has been delivered."""

    def receive(self, dst: PeCoord, src: PeCoord, *, tag: Any = 0) -> Completion:
        """Completes (value = the payload) when the next message src -> dst with ``tag``
        has arrived; its label names what it waits for (deadlock reports)."""


class PeServices(Protocol):
    """What a PE unit may use of its engine."""

    env: Any  # the SimPy environment
    op_log: Any  # OpLogger: record(t0, t1, component, kind, name, params, stage)
    data: Any  # DataPlane in data mode, else None
    flows: Any  # FlowBuilder: routes of DMA flows
    plans: dict  # composite plans by shape, shared by PEs of one ``pe`` section
    network: PeNetwork

    def book_flow(self, flow, start: float) -> float:
        """Book a flow's fabric resources from ``start``; return its completion time."""

    def ipcq_route(self, nodes: tuple[str, ...]) -> Any:
        """The IPCQ virtual-channel booking plan of a route (a queue keeps its own)."""

    def book_ipcq(self, route: Any, nbytes: int, start: float) -> float:
        """Book an IPCQ message on ``route`` on the IPCQ virtual channel; return arrival."""
