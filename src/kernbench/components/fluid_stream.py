"""The transfers on one route as one fluid stream (a "train"), and the resources they share.

Transfers that take the same route on the same virtual channel share it as a
source sharing its first link: one packet of each in turn, so while several
are sending each gets an equal part of what the stream is given. Downstream
the stream is one FIFO: a transfer is delivered once the stream has delivered
every byte sent before its last one. Grouping them keeps the fabric's work
per transfer O(1) when a PE keeps several DMAs in flight on one route: a
transfer joining or leaving changes only its stream's bookkeeping, not the
rates of the transfers it shares resources with
(docs/adr/0033-fair-shared-links.md).

State: per resource of the route the bytes queued there (``backlog``), the
arrival and departure rates (``arr``, ``out``: the last is the delivery rate);
per transfer its sending target on the stream's equal-share level ``level``
(``sending``), then, once sent, the stream's sent-bytes count it waits for
(``sent``).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Final

# (Final: the compiled twin keeps these in C statics, not looked up by name per call; ADR 0065)
heappop: Final = heapq.heappop
heappush: Final = heapq.heappush

TINY: Final = 1e-6  # bytes: what is left of a sent transfer or an emptied queue


class Resource:
    """A shared server: one direction of a link, or an HBM slice."""

    __slots__ = ("name", "capacity", "inputs")

    def __init__(self, name, capacity: float) -> None:
        self.name = name
        self.capacity = capacity  # bytes/ns
        # stream id -> (it, hop here), in the order they came: a class is served in it
        self.inputs: dict[int, tuple[Stream, int]] = {}


class Member:
    """One transfer in a stream."""

    __slots__ = ("nbytes", "start", "target", "seq", "mark", "done")

    def __init__(self, nbytes: int, start: float, done: Callable) -> None:
        self.nbytes = nbytes
        self.start = start  # when it joined (its bytes began to drain)
        self.target = 0.0  # the stream's level at which it has sent everything
        self.seq = 0  # its place among its stream's transfers: ties of target break by it
        self.mark = 0.0  # the stream's sent count its last byte is behind
        self.done = done  # called with (member, arrival time)

    def __lt__(self, other: Member) -> bool:
        """Heap order of a stream's sending transfers: target, then joining order. (A
        compiled compare of two floats; a tuple's tested each item for equality first.)"""
        return self.target < other.target or (self.target == other.target
                                              and self.seq < other.seq)


class Stream:
    """Transfers on one route and virtual channel, as one fluid."""

    __slots__ = ("id", "key", "resources", "hop_caps", "cls", "cap", "tail", "backlog",
                 "weight", "arr", "out", "level", "sent_bytes", "delivered", "targets",
                 "sending", "sent", "t_last", "version", "alone", "registered", "pending",
                 "queues", "_seq")

    def __init__(self, sid: int, key: object, resources: tuple[Resource, ...],
                 hop_caps: tuple[float, ...], cap: float, cls: int, tail: float,
                 now: float) -> None:
        self.id, self.key = sid, key
        self.resources = resources  # in route order
        self.hop_caps = hop_caps  # per resource: what one transfer can take of it
        self.cls = cls
        self.cap = cap  # bytes/ns it gets alone (its slowest resource)
        self.tail = tail  # latency from delivery to arrival
        n = len(resources)
        self.backlog = [0.0] * n  # bytes queued at each resource
        self.weight = [0.0] * n  # its last arrival rate there (its FIFO share)
        self.arr = [0.0] * n  # arrival rate at each resource
        self.out = [0.0] * n  # rate out of each resource (the last: delivery)
        self.level = 0.0  # bytes each sending transfer has sent (they send in turn)
        self.sent_bytes = 0.0
        self.delivered = 0.0  # sent_bytes less the bytes queued on the route
        self.targets = 0.0  # sum of the sending transfers' targets
        self.sending: list[Member] = []  # heap by (target, seq)
        self.sent: deque[Member] = deque()  # sent, in order, waiting for delivery
        self.t_last = now
        self.version = 0
        self.alone = False  # nothing shares a resource with it: bufferless, at its cap
        self.registered = False
        self.pending = False  # its source or a queue ran out: its resources need serving
        self.queues: list[int] = []  # hops whose queue holds bytes or grows (see refresh)
        self._seq = 0

    @property
    def src(self) -> float:
        """Bytes not yet sent."""
        return max(0.0, self.targets - len(self.sending) * self.level)

    def add(self, m: Member) -> bool:
        """Join a transfer (the stream settled to now); True if the stream's source had
        stopped and sends again."""
        restarted = not self.sending
        m.target = self.level + m.nbytes
        self._seq += 1
        m.seq = self._seq
        heappush(self.sending, m)
        self.targets += m.target
        if restarted and not self.alone:
            self.arr[0] = self.resources[0].capacity  # a source sends back to back
        return restarted

    def settle(self, now: float) -> None:
        """Move its bytes along at the current rates up to ``now``."""
        dt = now - self.t_last
        if dt <= 0.0:
            return
        self.t_last = now
        out = self.out
        queued = 0.0
        if self.queues:
            backlog = self.backlog
            for k in self.queues:
                b = backlog[k] + (out[k - 1] - out[k]) * dt
                if b <= TINY and backlog[k] > 0.0:
                    self.pending = True  # a queue ran out: served at its arrival rate
                backlog[k] = b = b if b > TINY else 0.0
                queued += b
        if self.sending:
            self.sent_bytes += out[0] * dt
            self.level += out[0] * dt / len(self.sending)
        # delivered = sent less queued, not a separate integral of the delivery rate:
        # the bytes a queue drops below TINY (rates equal but for float noise) then pass
        # on instead of going missing, which over a long-lived stream left a drained
        # stream short of its last transfer's mark, never delivering it
        self.delivered = self.sent_bytes - queued
        if self.sending:
            self._sent_out()

    def refresh(self) -> None:
        """Note the hops whose queue changes at the current rates (after rates change)."""
        out, backlog = self.out, self.backlog
        self.queues = [k for k in range(1, len(out))
                       if backlog[k] > 0.0 or out[k - 1] != out[k]] if not self.alone else []

    def _sent_out(self) -> None:
        """Move transfers that have sent everything to the delivery queue."""
        sending = self.sending
        while sending and sending[0].target <= self.level + TINY:
            m = heappop(sending)
            target = m.target
            self.targets -= target
            m.mark = self.sent_bytes - max(0.0, self.level - target)
            self.sent.append(m)
        if not sending:
            self.targets = 0.0
            if not self.alone:
                self.pending = True
                self._stop_arrivals()

    def _stop_arrivals(self) -> None:
        """Its source stopped: zero its rates up to the first resource holding a queue."""
        arr, out, backlog = self.arr, self.out, self.backlog
        arr[0] = out[0] = 0.0
        for k in range(1, len(arr)):
            arr[k] = 0.0
            if backlog[k] > 0.0:
                break
            out[k] = 0.0
        self.refresh()

    def delivered_members(self) -> list[Member]:
        """Pop the transfers whose last byte has been delivered."""
        out = []
        sent = self.sent
        while sent and sent[0].mark <= self.delivered + TINY:
            out.append(sent.popleft())
        return out

    @property
    def empty(self) -> bool:
        return not self.sending and not self.sent

    def next_event(self) -> float:
        """Time from now to its next change: a transfer sent or delivered, its source or a
        queue run out (inf while it is starved)."""
        if self.pending or (self.sent and self.sent[0].mark <= self.delivered + TINY):
            return 0.0  # settled past a change while another stream was served
        out, arr, backlog = self.out, self.arr, self.backlog
        dt = float("inf")
        if self.sending and out[0] > 0.0:
            dt = (self.sending[0].target - self.level) * len(self.sending) / out[0]
        if self.sent and out[-1] > 0.0:
            dt = min(dt, (self.sent[0].mark - self.delivered) / out[-1])
        for k in self.queues:
            if backlog[k] > 0.0 and out[k] > arr[k]:
                dt = min(dt, backlog[k] / (out[k] - arr[k]))
        return max(0.0, dt)
