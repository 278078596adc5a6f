"""``FabricNetwork``: the PE-to-PE interface (send, receive, schedule, now) on the fabric.

Messages travel from the sender's TCM through its PE_IPCQ and PE_DMA, across
the routed fabric with the same link bookings and contention as any DMA, into
the receiver's PE_IPCQ and TCM. Delivery happens at the analytic arrival time
through one SimPy event; a receive posted before the message arrives returns
a pending completion that the delivery signals. This is the only way PE
units talk to each other (docs/adr/0013-open-command-dispatch.md).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any

from kernbench.components.services import PeCoord
from kernbench.isa.handles import Completion
from kernbench.topology import naming as nm


class FabricNetwork:
    def __init__(self, engine) -> None:
        self._engine = engine
        self._env = engine.env
        self._arrived: defaultdict[tuple, deque[tuple[float, Any]]] = defaultdict(deque)
        self._posted: defaultdict[tuple, deque[Completion]] = defaultdict(deque)
        self.messages = 0

    def now(self) -> float:
        return self._env.now

    def schedule(self, t: float, fn: Callable[[], None]) -> None:
        delay = t - self._env.now
        if delay < 0:
            raise ValueError(f"cannot schedule in the past ({t} < now {self._env.now})")
        self._env.timeout(delay).callbacks.append(lambda _ev: fn())

    def send(self, src: PeCoord, dst: PeCoord, nbytes: int, *, tag: Any = 0,
             at: float | None = None, payload: Any = None) -> Completion:
        eng = self._engine
        start = self._env.now if at is None else at
        flow = eng.flows.pe_message(src, dst, nbytes)
        done = eng.book_flow(flow, start)
        eng.op_log.record(start, done, nm.pe_unit(*src, "pe_ipcq"), "memory", "pe_message",
                          {"src": nm.pe_prefix(*src), "dst": nm.pe_prefix(*dst),
                           "nbytes": nbytes, "tag": tag})
        self.messages += 1
        key = (src, dst, tag)
        self.schedule(done, lambda: self._deliver(key, done, payload))
        return Completion(done, label=f"send to {nm.pe_prefix(*dst)}")

    def receive(self, dst: PeCoord, src: PeCoord, *, tag: Any = 0) -> Completion:
        key = (src, dst, tag)
        arrived = self._arrived[key]
        if arrived:
            t, payload = arrived.popleft()
            return Completion(t, label="receive", value=payload)
        comp = Completion(event=self._env.event(),
                          label=f"a message from {nm.pe_prefix(*src)} (tag {tag!r})")
        self._posted[key].append(comp)
        return comp

    def _deliver(self, key: tuple, t: float, payload: Any) -> None:
        posted = self._posted[key]
        if posted:
            posted.popleft().complete(t, payload)
        else:
            self._arrived[key].append((t, payload))
