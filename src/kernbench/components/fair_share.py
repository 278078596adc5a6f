"""Max-min fair sharing of links and HBM slices among concurrent transfers.

With ``fabric.sharing: fair`` a transfer's bytes drain through every resource
on its route at once (a fluid model): the links it crosses and, for HBM, its
slice. Concurrent transfers share each resource max-min fairly, which is what
a router that interleaves their packets round-robin gives them: a transfer
gets an equal share of its tightest resource unless it cannot use it (its own
cap, or a tighter resource elsewhere on its route), and what it leaves goes to
the others (progressive filling). IPCQ messages have strict priority: their
shares are filled first and bulk transfers share what is left
(docs/adr/0033-fair-shared-links.md).

Work is done only when a transfer starts or finishes, never per packet:

* a transfer that finds every resource of its route idle runs at its cap and
  needs no event until it completes ("alone"); one that fits in the spare
  capacity of busy resources changes no one else's share;
* otherwise the shares of the connected set of transfers (those linked to it
  through shared resources) are filled again and each changed transfer's
  drain end is rescheduled.

Events live in one heap driven by a single SimPy timer, so a rescheduled
drain end costs a heap entry, not a SimPy event.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

IPCQ, BULK = 0, 1  # service classes, filled in this order
CLASSES = {"ipcq": IPCQ, "bulk": BULK}
_EPS = 1e-9  # relative slack for "saturated" and "at its cap"
_ACTIVATE, _DRAINED, _DONE = 0, 1, 2


class Resource:
    """A shared server: one direction of a link, or an HBM slice."""

    __slots__ = ("name", "capacity", "flows", "load")

    def __init__(self, name, capacity: float) -> None:
        self.name = name
        self.capacity = capacity  # bytes/ns
        self.flows: dict[int, Stream] = {}  # active transfers by id (insertion order)
        self.load = 0.0  # sum of their rates

    def saturated(self) -> bool:
        return self.load >= self.capacity * (1.0 - _EPS)


class Stream:
    """One transfer's drain: its bytes, route resources, rate and predicted end."""

    __slots__ = ("id", "resources", "cls", "cap", "nbytes", "remaining", "rate", "t_last",
                 "start", "end", "tail", "done", "version", "alone", "registered")

    def __init__(self, sid: int, resources: tuple, nbytes: float, cap: float, cls: int,
                 start: float, tail: float, done: Callable[[Stream, float], None]) -> None:
        self.id = sid
        self.resources = resources
        self.cls = cls
        self.cap = cap  # bytes/ns it can use alone (its slowest resource)
        self.nbytes = nbytes
        self.remaining = float(nbytes)
        self.rate = 0.0
        self.t_last = start
        self.start = start
        self.end = start
        self.tail = tail  # latency from the last byte leaving to its arrival
        self.done = done  # called with (stream, arrival time)
        self.version = 0
        self.alone = False  # no drain event: nothing shared a resource with it
        self.registered = False


class FairShare:
    """The fluid state of every transfer in flight on one engine."""

    def __init__(self, env) -> None:
        self.env = env
        self._heap: list[tuple] = []
        self._seq = itertools.count()
        self._ids = itertools.count()
        self._wakes: list[float] = []  # times of the SimPy timers still pending
        self.refills = 0  # how often shares were filled again (a cost counter)

    # -- public --------------------------------------------------------------------------
    def start(self, resources: tuple, nbytes: int, cap: float, cls: int, at: float,
              tail: float, done: Callable[[Stream, float], None]) -> Stream:
        """Drain ``nbytes`` through ``resources`` from ``at`` (>= now); ``done(stream, t)``
        is called at simulated time t = drain end + ``tail``."""
        s = Stream(next(self._ids), resources, nbytes, cap, cls, at, tail, done)
        if at <= self.env.now:
            self._activate(s)
        else:
            self._push(at, _ACTIVATE, s)
        return s

    # -- the event heap ------------------------------------------------------------------
    def _push(self, t: float, kind: int, s: Stream) -> None:
        heapq.heappush(self._heap, (t, next(self._seq), kind, s, s.version))
        if not self._wakes or t < self._wakes[0]:
            heapq.heappush(self._wakes, t)
            self.env.timeout(t - self.env.now).callbacks.append(self._wake)

    def _wake(self, _event) -> None:
        now = self.env.now
        heapq.heappop(self._wakes)
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, _, kind, s, version = heapq.heappop(heap)
            if version != s.version:
                continue  # rescheduled since
            if kind == _ACTIVATE:
                self._activate(s)
            elif kind == _DRAINED:
                self._drained(s)
            else:
                self._finish(s)
        if heap and (not self._wakes or heap[0][0] < self._wakes[0]):
            t = heap[0][0]
            heapq.heappush(self._wakes, t)
            self.env.timeout(t - now).callbacks.append(self._wake)

    # -- arrivals and departures -----------------------------------------------------------
    def _activate(self, s: Stream) -> None:
        now = self.env.now
        s.t_last = now
        alone = True
        fits = True
        for r in s.resources:
            if r.flows:
                self._retire_finished(r, now)
            if r.flows:
                alone = False
                if r.capacity - r.load < s.cap * (1.0 + _EPS):
                    fits = False
        self._register(s)
        if alone or fits:  # nobody's share changes
            s.rate = s.cap
            s.end = now + s.remaining / s.cap
            if alone:
                s.alone = True
                self._push(s.end + s.tail, _DONE, s)
                return
            self._share_with(s)
            self._push(s.end, _DRAINED, s)
            return
        self._refill(s.resources)

    def _share_with(self, s: Stream) -> None:
        """Transfers that ran alone on ``s``'s resources now share them: their departure
        matters to others, so they get drain events (their rates are unchanged)."""
        for r in s.resources:
            for f in r.flows.values():
                if f.alone:
                    f.alone = False
                    f.version += 1
                    self._push(f.end, _DRAINED, f)

    def _drained(self, s: Stream) -> None:
        """``s`` has sent its last byte: free its share, then deliver after its tail."""
        was_tight = [r for r in s.resources if r.saturated()]
        self._unregister(s)
        s.remaining = 0.0
        tight = [r for r in was_tight if r.flows]
        if tight:
            self._refill(tight)
        self._push(self.env.now + s.tail, _DONE, s)

    def _finish(self, s: Stream) -> None:
        if s.registered:  # ran alone: retired only now
            self._unregister(s)
        s.done(s, self.env.now)

    def _retire_finished(self, r: Resource, now: float) -> None:
        """Drop transfers that ran alone and have drained by ``now`` (retired lazily)."""
        for f in [f for f in r.flows.values() if f.alone and f.end <= now]:
            self._unregister(f)

    def _register(self, s: Stream) -> None:
        s.registered = True
        for r in s.resources:
            r.flows[s.id] = s

    def _unregister(self, s: Stream) -> None:
        s.registered = False
        for r in s.resources:
            del r.flows[s.id]
            r.load -= s.rate
            if not r.flows:
                r.load = 0.0  # no drift left behind by float sums

    # -- filling the shares ------------------------------------------------------------------
    def _refill(self, seeds) -> None:
        """Fill the shares of every transfer connected to ``seeds`` again."""
        self.refills += 1
        now = self.env.now
        flows: dict[int, Stream] = {}
        resources: dict[int, Resource] = {}
        todo = list(seeds)
        while todo:
            r = todo.pop()
            if id(r) in resources:
                continue
            resources[id(r)] = r
            for f in r.flows.values():
                if f.id not in flows:
                    flows[f.id] = f
                    todo.extend(x for x in f.resources if id(x) not in resources)
        for f in flows.values():  # bytes sent at the old rates
            f.remaining = max(0.0, f.remaining - f.rate * (now - f.t_last))
            f.t_last = now
        order = sorted(flows.values(), key=lambda f: f.id)
        rates = max_min_rates(order, list(resources.values()))
        for r in resources.values():
            r.load = 0.0
        for f in order:
            rate = rates[f.id]
            for r in f.resources:
                r.load += rate
            end = now + f.remaining / rate if rate > 0.0 else float("inf")
            if rate == f.rate and end == f.end and not f.alone:
                continue
            f.rate, f.end, f.alone = rate, end, False
            f.version += 1
            if rate > 0.0:
                self._push(end, _DRAINED, f)


def max_min_rates(flows: list[Stream], resources: list[Resource]) -> dict[int, float]:
    """Progressive filling, IPCQ class first: every unfrozen transfer's rate rises
    together until a resource it uses is full or it reaches its cap; bulk transfers
    then fill what the IPCQ class left."""
    residual = {id(r): r.capacity for r in resources}
    rates: dict[int, float] = {}
    for cls in (IPCQ, BULK):
        unfrozen = [f for f in flows if f.cls == cls]
        users: dict[int, int] = {}
        for f in unfrozen:
            for r in f.resources:
                users[id(r)] = users.get(id(r), 0) + 1
        caps = {id(r): r.capacity for r in resources}
        level = 0.0
        while unfrozen:
            step = min(residual[k] / n for k, n in users.items() if n)
            step = max(0.0, min(step, min(f.cap for f in unfrozen) - level))
            level += step
            for k, n in users.items():
                if n:
                    residual[k] -= step * n
            still = []
            for f in unfrozen:
                if f.cap - level <= _EPS * f.cap or any(
                        residual[id(r)] <= _EPS * caps[id(r)] for r in f.resources):
                    rates[f.id] = level
                    for r in f.resources:
                        users[id(r)] -= 1
                else:
                    still.append(f)
            unfrozen = still
    return rates
