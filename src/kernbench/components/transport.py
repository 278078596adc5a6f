"""The one way bytes cross the fabric: ``send``, ``receive``, ``schedule``, ``now``.

Bulk DMA (PE_DMA, the host, M_CPU), PE_IPCQ messages and their slot reads all
reach the fabric here, with the virtual channel as an argument (``vc="bulk"``
or ``"ipcq"``). How concurrent transfers share a link is the topology's
``fabric.sharing``:

* ``fifo``: a transfer books each link's busy timeline when it is sent
  (``Fabric.book``; IPCQ on its own virtual channel, ``Fabric.book_ipcq``),
  so its completion time is known at once;
* ``interleaved`` or ``max_min``: its bytes drain through its route's
  resources as a fluid, sharing them with concurrent transfers under that
  policy (``fair_share``, ``share_policies``); the completion is pending until
  the last byte arrives, because a transfer that starts later slows it down.

A send returns a :class:`Completion` either way; code that consumes it uses
``Completion.then`` and runs at once when the time is known. A send may name
a mailbox: messages to one mailbox are delivered in send order, and
``receive(mailbox)`` completes with the next one's payload.
(docs/adr/0033-fair-shared-links.md, docs/adr/0034-one-transport.md)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from kernbench.components.clock import sim_now
from kernbench.components.fabric import Fabric
from kernbench.components.fair_share import CLASSES, FairShare
from kernbench.components.flows import FlowSpec
from kernbench.components.fluid_stream import Member, Resource
from kernbench.components.share_policies import BULK, IPCQ
from kernbench.isa.handles import Completion

SHARING = ("interleaved", "max_min", "fifo")
_LEG_PLANS: Final = 1 << 16  # leg plans cached per transport, at most


class LegPlan(NamedTuple):
    """What a fair data leg needs beyond its bytes (``Transport.leg_plan``)."""

    plan: Any  # the route's RoutePlan
    resources: tuple[Resource, ...]  # the links and HBM slice its bytes cross, in order
    hop_caps: tuple[float, ...]  # per resource, what one transfer may take of it
    cap: float  # bytes/ns alone: its slowest link or its pseudo-channels
    lead: float  # latency from its start to where its bytes drain
    tail: float  # latency from there to its arrival
    hbm: Any  # the HBM slice's controller, or None
    # per service class (IPCQ, bulk): the fair share's key of the stream its transfers
    # join, one small int per (route, hop caps, class, tail) -- not that tuple rehashed
    streams: tuple[int, int] = (0, 0)


class _Mailbox:
    """Messages toward one receiver: delivered in send order, matched to receives."""

    __slots__ = ("sent", "next", "early", "arrived", "posted")

    def __init__(self) -> None:
        self.sent = 0  # sequence number of the next send
        self.next = 0  # sequence number of the next delivery
        self.early: dict[int, Any] = {}  # arrived before an earlier message
        self.arrived: deque[tuple[float, Any]] = deque()  # delivered, not yet received
        self.posted: deque[Completion] = deque()  # receives waiting for a message


class _Landing:
    """What a send does when its last byte arrives: its callback, then its delivery to
    the mailbox in send order. (An object, not a closure: compiled, a closure that
    another closure calls stays in a reference cycle with its frame.)"""

    __slots__ = ("transport", "on_arrival", "mailbox", "seq", "payload")

    def __init__(self, transport: Transport, on_arrival: Callable[[], None] | None,
                 mailbox: Any, seq: int | None, payload: Any) -> None:
        self.transport, self.on_arrival = transport, on_arrival
        self.mailbox, self.seq, self.payload = mailbox, seq, payload

    def __call__(self, t: float) -> None:
        if self.on_arrival is not None:
            self.on_arrival()
        if self.seq is not None:
            tr = self.transport
            tr._deliver(tr._mail[self.mailbox], self.seq, self.payload)


class Transport:
    """Sends flows over one engine's fabric under the topology's sharing policy."""

    def __init__(self, env, fabric: Fabric, sharing: str) -> None:
        if sharing not in SHARING:
            raise ValueError(f"sharing must be one of {SHARING}, got {sharing!r}")
        self.env = env
        self.fabric = fabric
        self.sharing = sharing
        self.fair = FairShare(env, sharing) if sharing != "fifo" else None
        self._resources: dict[tuple, tuple[Resource, ...]] = {}
        self._slices: dict[str, Resource] = {}
        self._links: dict[tuple[str, str], Resource] = {}
        self._legs: dict[tuple, tuple[tuple[str, ...], LegPlan]] = {}  # leg_plan's cache
        self._stream_keys: dict[tuple, int] = {}  # LegPlan.streams, never forgotten
        self._mail: dict[Any, _Mailbox] = {}
        self.messages = 0  # sends that named a mailbox

    # -- the interface ---------------------------------------------------------------------
    def now(self) -> float:
        return sim_now(self.env)

    def schedule(self, t: float, fn: Callable[[], None]) -> None:
        """Run ``fn()`` at simulated time ``t`` (>= now)."""
        delay = t - sim_now(self.env)
        if delay < 0:
            raise ValueError(f"cannot schedule in the past ({t} < now {sim_now(self.env)})")
        self.env.timeout(delay).callbacks.append(lambda _ev: fn())

    def send(self, flow: FlowSpec, at: float, vc: str = "bulk", *, mailbox: Any = None,
             payload: Any = None, on_arrival: Callable[[], None] | None = None,
             timing: list | None = None) -> Completion:
        """Move ``flow`` (legs back to back) from ``at`` (>= now). The completion fires
        when its last byte has arrived; then ``on_arrival()`` runs and, with a mailbox,
        ``payload`` is delivered there in send order. ``timing`` collects per-leg
        (plan, start, end, wait, drain, bottleneck, waited hops)."""
        if vc not in CLASSES:
            raise ValueError(f"vc must be one of {', '.join(CLASSES)}, got {vc!r}")
        seq = None
        if mailbox is not None:
            box = self._box(mailbox)
            seq, box.sent = box.sent, box.sent + 1
            self.messages += 1

        # nothing lands anywhere: no delivery to schedule
        landing = None if on_arrival is None and seq is None else _Landing(
            self, on_arrival, mailbox, seq, payload)

        if at < sim_now(self.env) * (1.0 - 1e-12):  # (float sums of delays may round below it)
            raise ValueError(f"cannot send into the past ({at} < now {sim_now(self.env)})")
        if self.fair is None:
            done = self._book(flow, at, vc, timing)
            if landing is not None:
                self.schedule(max(done, sim_now(self.env)), lambda: landing(done))
            return Completion(done, label=flow.kind)
        comp = Completion(label=flow.kind)
        _FairSend(self, flow, vc, comp, landing, timing).advance(0, at)
        return comp

    def receive(self, mailbox: Any, label: str = "") -> Completion:
        """The next message of ``mailbox``: known when it has arrived already, else
        pending until it does (``value`` is its payload, ``done_at`` the delivery)."""
        box = self._box(mailbox)
        if box.arrived:
            t, payload = box.arrived.popleft()
            return Completion(t, label="receive", value=payload)
        comp = Completion(label=label or "a message")
        box.posted.append(comp)
        return comp

    def latency(self, flow: FlowSpec, at: float) -> float:
        """Arrival time of a flow that moves no bytes (commands, credits): latency only."""
        fabric = self.fabric
        t = at
        for leg in flow.legs:
            if leg.nbytes:
                raise ValueError(f"{flow.kind} carries {leg.nbytes} B: send it instead")
            t = fabric.book(fabric.plan(leg.nodes), 0, t, sim_now(self.env),
                            continues=leg.continues)[0]
        return t

    # -- mailboxes -------------------------------------------------------------------------
    def _box(self, mailbox: Any) -> _Mailbox:
        box = self._mail.get(mailbox)
        if box is None:
            box = self._mail[mailbox] = _Mailbox()
        return box

    def _deliver(self, box: _Mailbox, seq: int, payload: Any) -> None:
        box.early[seq] = payload
        now = sim_now(self.env)
        while box.next in box.early:
            item = box.early.pop(box.next)
            box.next += 1
            if box.posted:
                box.posted.popleft().complete(now, item)
            else:
                box.arrived.append((now, item))

    # -- fifo: bookings ----------------------------------------------------------------------
    def _book(self, flow: FlowSpec, at: float, vc: str, timing: list | None) -> float:
        fabric = self.fabric
        now = sim_now(self.env)
        hbm = fabric.hbm
        t = at
        for _, nodes, nbytes, hbm_node, off, at_start, continues in flow.legs:
            booked: tuple
            if vc == "ipcq" and nbytes:
                route = fabric.ipcq_route(nodes)
                plan = route.plan
                end = fabric.book_ipcq(route, nbytes, t, now)
                booked = (end, 0.0, nbytes / plan.bottleneck_gbs, plan.bottleneck_gbs, ())
            else:
                plan = fabric.plan(nodes)
                booked = fabric.book(plan, nbytes, t, now, hbm[hbm_node] if hbm_node else None,
                                     off, at_start, continues)
            if timing is not None:
                timing.append((plan, t, *booked))
            t = booked[0]
        return t

    # -- fair: resources of a leg ----------------------------------------------------------
    def resources(self, nodes: tuple[str, ...], hbm_node: str | None,
                  hbm_first: bool = False) -> tuple[Resource, ...]:
        """The shared resources a leg's bytes cross, in route order: its links, and its
        HBM slice first (a read) or last (a write)."""
        key = (nodes, hbm_node, hbm_first)
        hit = self._resources.get(key)
        if hit is None:
            links = []
            for a, b in zip(nodes, nodes[1:], strict=False):
                r = self._links.get((a, b))
                if r is None:
                    r = self._links[(a, b)] = Resource((a, b), self.fabric.graph.edge(a, b).bw_gbs)
                links.append(r)
            if hbm_node:
                r = self._slices.get(hbm_node)
                if r is None:
                    r = self._slices[hbm_node] = Resource(hbm_node,
                                                          self.fabric.hbm[hbm_node].bw_gbs)
                links.insert(0 if hbm_first else len(links), r)
            hit = self._resources[key] = tuple(links)
        return hit

    def leg_plan(self, nodes: tuple[str, ...], nbytes: int, hbm_node: str | None, off: int,
                 hbm_first: bool, continues: bool) -> LegPlan:
        """A fair data leg's plan: the same for every transfer of its route, size and HBM
        interleave phase, so cached (a PE's weight stream sends thousands)."""
        hbm = self.fabric.hbm[hbm_node] if hbm_node else None
        phase = off % hbm.period if hbm is not None else 0
        key = (id(nodes), hbm_node, hbm_first, continues, nbytes, phase)
        hit = self._legs.get(key)
        if hit is not None and hit[0] is nodes:
            return hit[1]
        plan = self.fabric.plan(nodes)
        resources = self.resources(nodes, hbm_node, hbm_first)
        cap, hop_caps = plan.bottleneck_gbs, (float("inf"),) * len(resources)
        if hbm is not None:  # a transfer covering few pseudo-channels gets only theirs
            channel_cap = nbytes / max(d for _, d in hbm.shares(off, nbytes)[1])
            cap = min(cap, channel_cap)
            at = 0 if hbm_first else len(resources) - 1
            hop_caps = hop_caps[:at] + (channel_cap,) + hop_caps[at + 1:]
        paid = plan.overhead_ns - (plan.overheads[0] if continues else 0.0)
        if not resources:  # one node, no memory: the overheads, nothing to drain
            leg = LegPlan(plan, resources, hop_caps, cap, 0.0, paid, hbm)
        else:
            # the route's latency first, then the bytes (as flow-level models time a
            # message): two transfers meet on a link only if their bytes do
            lead = _lead_ns(plan, continues, hbm_node, hbm_first, cap)
            tail = paid + plan.wire_ns - lead
            keys = self._stream_keys
            streams = (keys.setdefault((id(resources), hop_caps, IPCQ, tail), len(keys)),
                       keys.setdefault((id(resources), hop_caps, BULK, tail), len(keys)))
            leg = LegPlan(plan, resources, hop_caps, cap, lead, tail, hbm, streams)
        if len(self._legs) >= _LEG_PLANS:  # many routes and sizes: keep the cache bounded
            self._legs.clear()
        self._legs[key] = (nodes, leg)
        return leg

    def link_busy_ns(self) -> dict[tuple[str, str], float]:
        """Time each link spent carrying bytes (fair mode: bytes / bandwidth)."""
        return self.fabric.link_busy_ns()


class _FairSend:
    """One flow in fair mode: its legs started one after another as each arrives. The
    leg in flight is noted on the send itself, which the fair share calls when that leg
    has arrived (no closure per leg: callgrind counted their allocation and release
    among the costliest work of a weight-streaming GEMM's tiles)."""

    __slots__ = ("transport", "flow", "cls", "comp", "arrive", "timing", "_leg", "_leg_t0",
                 "_leg_plan", "_leg_cap", "_leg_tail")

    def __init__(self, transport: Transport, flow: FlowSpec, vc: str, comp: Completion,
                 arrive, timing: list | None) -> None:
        self.transport = transport
        self.flow = flow
        self.cls = CLASSES[vc]
        self.comp = comp
        self.arrive = arrive
        self.timing = timing
        self._leg = 0  # the data leg in flight: its index, start, plan, cap and tail
        self._leg_t0 = 0.0
        self._leg_plan: Any = None
        self._leg_cap = 0.0
        self._leg_tail = 0.0

    def advance(self, i: int, t: float) -> None:
        """Run legs ``i..`` from ``t``: commands add latency, a data leg drains."""
        tr = self.transport
        fabric = tr.fabric
        fair: FairShare = tr.fair  # type: ignore[assignment]  # set: a fair send
        legs = self.flow.legs
        while i < len(legs):
            _, nodes, nbytes, hbm_node, off, _, continues = legs[i]
            if not nbytes:
                plan = fabric.plan(nodes)
                end = fabric.book(plan, 0, t, sim_now(tr.env), continues=continues)[0]
                if self.timing is not None:
                    self.timing.append((plan, t, end, 0.0, 0.0, plan.bottleneck_gbs, ()))
                t, i = end, i + 1
                continue
            plan, resources, hop_caps, cap, lead, tail, hbm, streams = tr.leg_plan(
                nodes, nbytes, hbm_node, off, legs[i].hbm_at_start, continues)
            if hbm is not None:
                hbm.bytes_served += nbytes
            fabric.carry(plan, nbytes)
            if not resources:  # one node, no memory: nothing to drain
                t, i = t + tail, i + 1  # (its tail is then the route's overheads)
                continue
            self._leg, self._leg_t0, self._leg_plan = i, t, plan
            self._leg_cap, self._leg_tail = cap, tail
            fair.start(streams[self.cls], resources, hop_caps, nbytes, cap, self.cls, t + lead,
                       tail, self)
            return
        self._finish(t)

    def __call__(self, m: Member, end: float) -> None:
        """The data leg in flight has arrived (``m``, at ``end``): record it (the time lost
        to sharing is its wait) and start the next leg."""
        if self.timing is not None:
            cap = self._leg_cap
            drain = m.nbytes / cap
            lost = end - self._leg_tail - m.start - drain
            lost = lost if lost > 1e-9 * end else 0.0  # alone: nothing lost but rounding
            self.timing.append((self._leg_plan, self._leg_t0, end, lost, drain, cap, ()))
        self.advance(self._leg + 1, end)

    def _finish(self, t: float) -> None:
        """The last leg's arrival is fixed (it may lie ahead): the completion says so at
        once; deliveries (bytes landing, mailboxes) happen at that time."""
        tr, arrive = self.transport, self.arrive
        if arrive is not None:
            if t > sim_now(tr.env):
                tr.schedule(t, lambda: arrive(t))
            else:
                arrive(t)
        self.comp.complete(t)


def _lead_ns(plan, continues: bool, hbm_node, hbm_first: bool, cap: float) -> float:
    """Latency from a leg's start to its bottleneck: where its bytes drain at the
    rate it gets, so where its occupancy window is placed (the slowest link, or the
    HBM slice when the channels it covers are slower)."""
    first = 0.0 if continues else plan.overheads[0]
    if hbm_node and cap < plan.bottleneck_gbs:
        return first if hbm_first else plan.overhead_ns - (0.0 if not continues else
                                                           plan.overheads[0]) + plan.wire_ns
    i = plan.bws.index(plan.bottleneck_gbs)
    return first + sum(plan.wires[:i], 0.0) + sum(plan.overheads[1:i + 1], 0.0)
