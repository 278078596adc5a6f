"""Concurrent transfers sharing links and HBM slices as a fluid (``fabric.sharing``).

A transfer's bytes drain through every resource of its route (the links it
crosses and, for HBM, its slice); its occupancy is placed where its head
reaches the route's bottleneck, the rest of its latency follows. Transfers on
one route and virtual channel form one stream (``fluid_stream``); how streams
that meet on a resource divide it is a policy (``share_policies``). Work is
done when a stream starts, stops sending, empties a queue or ends, never per
packet (docs/adr/0033-fair-shared-links.md):

* a stream that finds every resource of its route idle runs at its cap
  ("alone") and changes nobody's rate;
* otherwise a change is propagated resource by resource, downstream only
  (queues are unbounded, so a resource never slows what is upstream of it),
  and stops where rates do not change; each stream whose rates changed gets
  its next event.

Events live in one heap driven by a single SimPy timer, so a rescheduled
event costs a heap entry, not a SimPy event.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Final

from kernbench.components.clock import sim_now
from kernbench.components.fluid_stream import Member, Resource, Stream
from kernbench.components.share_policies import (
    BULK,
    IPCQ,
    arrivals_fit,
    max_min_rates,
    shared_rates,
)

# (Final: the compiled twin keeps these in C statics, not looked up by name per call; ADR 0065)
heappop: Final = heapq.heappop
heappush: Final = heapq.heappush

CLASSES: Final = {"ipcq": IPCQ, "bulk": BULK}
POLICIES = ("interleaved", "max_min")
_PROPAGATION_BUDGET: Final = 1_000_000  # resources served for one change, at most
_RATE_TOLERANCE: Final = 1e-12  # relative: smaller changes of a rate are float noise


Input = tuple[Stream, int]  # a stream at one of its hops: a resource's input
# what a transfer's stream is made of: (key, resources, hop caps, cap, class, tail)
Route = tuple[object, tuple[Resource, ...], tuple[float, ...], float, int, float]


class _Entry:
    """An event of the heap, due at ``t``; events due together run in the order pushed.
    A step names its stream and the stream's version when pushed (stale once the stream
    is rescheduled); an arrival carries its route and transfer. (Compiled, heapq's
    comparison of two entries is two float compares, where a tuple's went through the
    generic compare of each item: the heap's largest cost. Typed fields, not one ``Any``,
    let the compiled twin read a step's stream and version without a generic lookup.)"""

    __slots__ = ("t", "seq", "stream", "version", "arrival")

    def __init__(self, t: float, seq: int, stream: Stream | None, version: int,
                 arrival: tuple | None) -> None:
        self.t, self.seq, self.stream, self.version = t, seq, stream, version
        self.arrival = arrival

    def __lt__(self, other: _Entry) -> bool:
        return self.t < other.t or (self.t == other.t and self.seq < other.seq)


class FairShare:
    """The fluid state of every transfer in flight on one engine."""

    def __init__(self, env, policy: str = "interleaved") -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        self.env = env
        self.max_min = policy == "max_min"
        self._streams: dict = {}  # route key -> its stream while it carries transfers
        self._heap: list[_Entry] = []
        self._pushed = 0  # entries pushed: orders the entries due at one time
        self._ids = itertools.count()
        self._wakes: list[float] = []  # times of the SimPy timers still pending
        self._waking = False  # serving the heap's due entries now
        self.updates = 0  # resources served again (a cost counter)

    def start(self, key: object, resources: tuple[Resource, ...], hop_caps: tuple[float, ...],
              nbytes: int, cap: float, cls: int,
              at: float, tail: float, done: Callable) -> Member:
        """Drain ``nbytes`` through ``resources`` (route order, identified by ``key``)
        from ``at`` (>= now); ``done(member, t)`` is called when its last byte is
        delivered, with t = that time + ``tail`` (its arrival, fixed from then on)."""
        m = Member(nbytes, at, done)
        route = (key, resources, hop_caps, cap, cls, tail)
        if at <= sim_now(self.env):
            self._arrive(route, m)
        else:
            self._push(at, None, 0, (route, m))
        return m

    # -- the event heap ------------------------------------------------------------------
    def _push(self, t: float, stream: Stream | None, version: int, arrival: tuple | None) -> None:
        """Add a step of ``stream`` (at its ``version``) or an ``arrival``, due at ``t``."""
        self._pushed += 1
        heappush(self._heap, _Entry(t, self._pushed, stream, version, arrival))
        if not self._waking:  # (a wake re-arms the timer once, when it is done)
            self._arm()

    def _arm(self) -> None:
        """Keep a SimPy timer pending at the earliest live entry of the heap."""
        heap, wakes = self._heap, self._wakes
        while heap:
            s = heap[0].stream
            if s is None or heap[0].version == s.version:
                break
            heappop(heap)  # rescheduled since: drop it before it costs a timer
        if heap and (not wakes or heap[0].t < wakes[0]):
            t = heap[0].t
            heappush(wakes, t)
            self.env.timeout(t - sim_now(self.env)).callbacks.append(self._wake)

    def _wake(self, _event) -> None:
        now = sim_now(self.env)
        heappop(self._wakes)
        heap = self._heap
        self._waking = True
        try:
            while heap and heap[0].t <= now:
                e = heappop(heap)
                s = e.stream
                if s is not None:
                    if e.version == s.version:  # else rescheduled since
                        self._step(s)
                else:
                    assert e.arrival is not None  # (an entry is a step or an arrival)
                    self._arrive(*e.arrival)
        finally:
            self._waking = False
        self._arm()

    # -- arrivals, steps, departures -------------------------------------------------------
    def _arrive(self, route: Route, m: Member) -> None:
        """A transfer starts draining: it joins its route's stream, or starts one."""
        now = sim_now(self.env)
        key, resources, hop_caps, cap, cls, tail = route
        s = self._streams.get(key)
        if s is not None:
            s.settle(now)
            if s.add(m) and not s.alone:  # its source had stopped: it sends again
                self._changed(now, [s.resources[0]], {s.id: s})
            else:
                self._reschedule(now, {s.id: s})
            return
        s = self._streams[key] = Stream(next(self._ids), key, resources, hop_caps, cap, cls,
                                        tail, now)
        s.alone = all(not r.inputs for r in resources)
        s.add(m)
        self._register(s)
        if s.alone:
            s.arr = [cap] * len(resources)
            s.out = list(s.arr)
            self._reschedule(now, {s.id: s})
            return
        joined = {s.id: s}
        for r in resources:
            for f, _ in list(r.inputs.values()):
                if f.alone:
                    self._join(f, now)
                    joined[f.id] = f
        # serving each newcomer's first resource reaches the rest of its route
        self._changed(now, [f.resources[0] for f in joined.values()], joined)

    @staticmethod
    def _join(f: Stream, now: float) -> None:
        """A stream that ran alone gets company: it keeps its transfers, not its rates."""
        f.settle(now)
        f.alone = False
        n = len(f.resources)
        f.arr = [f.resources[0].capacity if f.sending else 0.0] + [0.0] * (n - 1)
        f.out = [0.0] * n
        f.version += 1

    def _step(self, s: Stream) -> None:
        """Something of ``s`` ran out: a transfer sent or delivered, its source, a queue."""
        now = sim_now(self.env)
        s.settle(now)
        for m in s.delivered_members():  # its arrival time is fixed now: tell at once
            m.done(m, now + s.tail)
        if s.empty:
            self._unregister(s)
            del self._streams[s.key]
            s.version += 1
            if not s.alone:
                self._changed(now, s.resources, {})
            return
        if s.pending:
            s.pending = False
            self._changed(now, s.resources, {s.id: s})
        else:
            self._reschedule(now, {s.id: s})

    def _register(self, s: Stream) -> None:
        s.registered = True
        for k, r in enumerate(s.resources):
            r.inputs[s.id] = (s, k)

    def _unregister(self, s: Stream) -> None:
        s.registered = False
        for r in s.resources:
            del r.inputs[s.id]

    # -- propagating a change -------------------------------------------------------------
    def _changed(self, now: float, dirty: Sequence[Resource],
                 touched: dict[int, Stream]) -> None:
        """Serve the ``dirty`` resources again and what their changes reach downstream;
        reschedule every stream whose rates changed (and those in ``touched``)."""
        if self.max_min:
            self._max_min(now, dirty, touched)
            return
        # FIFO: a list read from ``head`` on (compiled, its item reads and appends are
        # direct; a deque's popleft and append were calls by name)
        queue: list[Resource] = []
        marked: set[Resource] = set()  # (resources hash by identity)
        for r in dirty:
            if r.inputs and r not in marked:  # a resource left without inputs has none to serve
                marked.add(r)
                queue.append(r)
        head = 0
        while head < len(queue):
            if head == _PROPAGATION_BUDGET - 1:  # a cycle of routes must not loop for ever
                raise RuntimeError("link sharing did not settle: the rates of routes that "
                                   "form a cycle keep changing")
            r = queue[head]
            head += 1
            marked.discard(r)
            for f, k in self._serve(r, now, touched):
                touched[f.id] = f
                nxt = _walk(f, k)
                if nxt is not None and nxt not in marked:
                    marked.add(nxt)
                    queue.append(nxt)
        self._reschedule(now, touched)

    def _serve(self, r: Resource, now: float, touched: dict[int, Stream]) -> list[Input]:
        """Set the out rates of ``r``'s inputs; return the inputs whose rate changed
        (inputs that ran out of something while settling join ``touched``). The hot
        path of link sharing: the inputs settled in one pass, then each class served
        from the resource's own table of it."""
        self.updates += 1
        inputs = r.inputs
        if len(inputs) == 1:  # its own resource: it passes, or queues beyond capacity
            (f, k), = inputs.values()
            if f.t_last != now:
                f.settle(now)
            if f.pending:
                touched[f.id] = f
            cap = r.capacity  # serve_alone, inlined (the commonest serve)
            if (hop := f.hop_caps[k]) < cap:
                cap = hop
            rate = cap if f.backlog[k] > 0.0 or cap < (a := f.arr[k]) else a
            old = f.out[k]
            if rate == old or abs(rate - old) <= _RATE_TOLERANCE * max(abs(rate), abs(old)):
                return []
            f.out[k] = rate
            return [(f, k)]
        ipcq: list[Input] = []
        bulk: list[Input] = []
        for item in inputs.values():
            f = item[0]
            if f.t_last != now:
                f.settle(now)
            if f.pending:
                touched[f.id] = f
            (ipcq if f.cls == IPCQ else bulk).append(item)
        changed: list[Input] = []
        left = r.capacity
        if ipcq:  # IPCQ first, then bulk in what it leaves
            left = _serve_class(ipcq, left, changed)
        if bulk:
            _serve_class(bulk, left, changed)
        return changed

    def _reschedule(self, now: float, touched: dict[int, Stream]) -> None:
        for f in touched.values():
            if not f.registered:
                continue
            f.version += 1
            f.refresh()
            dt = f.next_event()
            if dt == float("inf"):
                continue
            t = now + dt
            if dt > 0.0 and t <= now:  # too small to move the clock: the next float
                t = math.nextafter(now, math.inf)
            self._push(t, f, f.version, None)

    def _max_min(self, now: float, seeds: Sequence[Resource],
                 touched: dict[int, Stream]) -> None:
        """Max-min policy: set the rates of the whole connected set again."""
        flows, resources = _connected(seeds)
        self.updates += len(resources)
        for f in flows:
            f.settle(now)
            f.pending = False
        rates = max_min_rates([f for f in flows if f.sending or f.sent], resources)
        for f in flows:
            rate = rates.get(f.id, 0.0)
            f.arr = [rate] * len(f.resources)
            f.out = list(f.arr)
            touched[f.id] = f
        self._reschedule(now, touched)


def _serve_class(group: list[Input], left: float, changed: list[Input]) -> float:
    """Set the out rates of one class's inputs at a resource with ``left`` bytes/ns for
    them (the ``interleaved`` policy of ``share_policies``), appending those that
    changed to ``changed``; return what the class leaves. Passing inputs (most serves)
    take their rates here, without a list of them."""
    rates = None if arrivals_fit(group, left) else shared_rates(group, left)
    tol = _RATE_TOLERANCE
    for i, (f, k) in enumerate(group):
        if rates is None:
            a, hop = f.arr[k], f.hop_caps[k]
            rate = hop if hop < a else a
        else:
            rate = rates[i]
        left -= rate
        old = f.out[k]
        if rate > old >= 0.0:  # the tolerance test, as in _walk
            if rate - old <= tol * rate:
                continue
        elif old > rate >= 0.0:
            if old - rate <= tol * old:
                continue
        elif rate == old or abs(rate - old) <= tol * max(abs(rate), abs(old)):
            continue
        f.out[k] = rate
        changed.append((f, k))
    return left


def _walk(f: Stream, k: int) -> Resource | None:
    """Carry ``f``'s new rate out of hop ``k`` down its route: through resources it has
    to itself directly, up to the first one it shares (returned, to be served)."""
    resources, arr, out, weight = f.resources, f.arr, f.out, f.weight
    rate = out[k]
    tol = _RATE_TOLERANCE
    for j in range(k + 1, len(resources)):
        a = arr[j]  # the tolerance test and serve_alone inlined: the propagation's core
        if a > rate >= 0.0:  # (rates are >= 0 but for float noise: then abs() is needless)
            if a - rate <= tol * a:
                return None
        elif rate > a >= 0.0:
            if rate - a <= tol * rate:
                return None
        elif a == rate or abs(a - rate) <= tol * max(abs(a), abs(rate)):
            return None
        arr[j] = rate
        if rate > 0.0:
            weight[j] = rate
        r = resources[j]
        if len(r.inputs) > 1:
            return r
        cap = r.capacity
        if (hop := f.hop_caps[j]) < cap:
            cap = hop
        if f.backlog[j] > 0.0 or cap < rate:
            rate = cap
        old = out[j]
        if rate > old >= 0.0:
            if rate - old <= tol * rate:
                return None
        elif old > rate >= 0.0:
            if old - rate <= tol * old:
                return None
        elif rate == old or abs(rate - old) <= tol * max(abs(rate), abs(old)):
            return None
        out[j] = rate
    return None


def _connected(seeds: Sequence[Resource]) -> tuple[list[Stream], list[Resource]]:
    """The streams linked to ``seeds`` through shared resources (by id) and their
    resources, in a deterministic order."""
    flows: dict[int, Stream] = {}
    resources: dict[int, Resource] = {}
    todo = list(seeds)
    while todo:
        r = todo.pop()
        if id(r) in resources:
            continue
        resources[id(r)] = r
        for f, _ in r.inputs.values():
            if f.id not in flows:
                flows[f.id] = f
                todo.extend(x for x in f.resources if id(x) not in resources)
    return sorted(flows.values(), key=lambda f: f.id), list(resources.values())
