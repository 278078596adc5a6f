"""The narrow interfaces between PE units and the engine that hosts them.

PE units never import the engine: they receive an object with exactly these
members (``GraphEngine`` provides them). All their traffic goes through one
transport (``components/transport.py``): PE_DMA's bulk transfers, PE_IPCQ's
messages and slot reads, with the virtual channel as an argument. Keeping the
boundary this small is what lets collectives and a future network backend
meet in one place (docs/adr/0034-one-transport.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kernbench.isa.handles import Completion

PeCoord = tuple[int, int, int]  # (sip, cube, pe)


class PeNetwork(Protocol):
    """Bytes over the modelled fabric, in the spirit of a system/network boundary.

    ``send`` moves a flow (``FlowBuilder`` builds them) from a start time on a
    virtual channel ("bulk" or "ipcq") and returns its completion: known at once
    or pending, depending on the topology's link sharing. With a ``mailbox`` the
    payload is delivered there in send order and ``receive(mailbox)`` completes
    with it.
    """

    def now(self) -> float: ...

    def schedule(self, t: float, fn: Callable[[], None]) -> None:
        """Run ``fn()`` at simulated time ``t`` (>= now)."""

    def send(self, flow: Any, at: float, vc: str = "bulk", *, mailbox: Any = None,
             payload: Any = None, on_arrival: Callable[[], None] | None = None,
             timing: list | None = None) -> Completion:
        """Move ``flow`` from ``at``; complete when its last byte has arrived."""

    def receive(self, mailbox: Any, label: str = "") -> Completion:
        """Complete (value = the payload) when the next message of ``mailbox`` is in."""

    def latency(self, flow: Any, at: float) -> float:
        """Arrival time of a flow that moves no bytes (a command, a credit)."""


class PeServices(Protocol):
    """What a PE unit may use of its engine."""

    env: Any  # the SimPy environment
    op_log: Any  # OpLogger: record(t0, t1, component, kind, name, params, stage)
    data: Any  # DataPlane in data mode, else None
    flows: Any  # FlowBuilder: routes of DMA flows and IPCQ messages
    plans: dict  # composite plans by shape, shared by PEs of one ``pe`` section
    planned_composites: bool  # time private composites from their plans (else tile by tile)
    network: PeNetwork  # the transport
