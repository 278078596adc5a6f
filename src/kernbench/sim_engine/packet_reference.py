"""A packet-level reference model of the fabric, for checking the analytic engine.

The analytic fabric (``components/fabric.py``) never looks at anything
smaller than a whole transfer: transfers share links as a fluid
(``fabric.sharing``, docs/latency-model.md). This module simulates the same
FlowSpecs the slow, obvious way, so the analytic shortcut can be measured
against it. It is a yardstick only; studies never use it.

What is modelled:

* Each data leg is cut into packets of ``packet_bytes`` (the last one may be
  smaller). A flow injects its packets one at a time, so packets of flows that
  share a link interleave instead of one transfer going first as a whole.
* Every packet is a SimPy process that crosses its route hop by hop. Each
  directed edge is a FIFO ``simpy.Resource(capacity=1)``; a packet holds it for
  ``size / bw`` (GB/s == byte/ns), or longer if its tail is still arriving from
  the previous hop (virtual cut-through: the head moves on at once, the tail
  cannot leave before it has come in). Node buffers are unbounded, as in the
  analytic model (no back-pressure).
* ``switching="store_and_forward"`` instead lets a packet ask for the next
  link only once its tail has arrived (end of serialisation, wire, overhead),
  as ns-3's point-to-point devices do, so the model can be checked against
  ns-3 (``references/ns3.py``). ``header_bytes`` adds a per-packet header to
  every link's serialisation (not to HBM, which stores payload only); a
  flow's payload stays ``FlowSpec.nbytes``.
* The head of every packet pays each node's ``overhead_ns`` (a pipeline
  latency, not a serial resource) and each edge's ``wire_ns``; a leg that
  ``continues`` the previous one does not pay its first node again.
* Zero-byte legs are head-only tokens: latency, no occupancy.
* Legs of a flow run back to back: the next leg starts when the last packet
  of the previous one has been delivered.
* HBM (see ``HBM_MODELS``): by default an HBM slice is one FIFO server at
  ``channels x pseudo_channel_bw``, which a write's packets pass after the
  slice controller's overhead and a read's packets pass before the first
  link. The alternative ``"channels"`` serves each packet on the pseudo-channel
  its address interleaves to, at one channel's bandwidth.

With no competing traffic and the defaults (slice HBM, cut-through, no
header), a leg takes exactly ``Ovhd + Wire + nbytes / BN`` (BN = slowest link
or the slice), which is what the analytic engine gives, up to float rounding.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import simpy
from simpy.resources.resource import Request

from kernbench.components.flows import FlowSpec, LegSpec
from kernbench.topology.graph import TopologyGraph

HBM_MODELS = ("slice", "channels")
SWITCHING = ("cut_through", "store_and_forward")


def packet_sizes(nbytes: int, packet_bytes: int) -> list[int]:
    """Sizes of the packets ``nbytes`` is cut into: full packets, then the remainder."""
    if packet_bytes <= 0:
        raise ValueError(f"packet_bytes must be positive, got {packet_bytes}")
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    full, rest = divmod(nbytes, packet_bytes)
    return [packet_bytes] * full + ([rest] if rest else [])


@dataclass(frozen=True, slots=True)
class Stage:
    """One serial resource a packet passes, then the head latency to the next one.

    A link stage is a directed edge followed by its wire and the overhead of the
    node it enters; an HBM stage is a slice or pseudo-channel server with no
    latency after it (the controller's overhead is paid as a node overhead).
    """

    server: simpy.Resource
    bw_gbs: float  # byte/ns
    after_ns: float  # head latency from the end of this stage to the next one
    header_bytes: int = 0  # carried on top of the payload (links only)


class PacketReference:
    """Packet-level simulation of FlowSpecs over a topology graph (reference only)."""

    def __init__(self, graph: TopologyGraph, packet_bytes: int = 256,
                 env: simpy.Environment | None = None, hbm: str = "slice",
                 switching: str = "cut_through", header_bytes: int = 0) -> None:
        if packet_bytes <= 0:
            raise ValueError(f"packet_bytes must be positive, got {packet_bytes}")
        if hbm not in HBM_MODELS:
            raise ValueError(f"hbm must be one of {HBM_MODELS}, got {hbm!r}")
        if switching not in SWITCHING:
            raise ValueError(f"switching must be one of {SWITCHING}, got {switching!r}")
        if isinstance(header_bytes, bool) or not isinstance(header_bytes, int) or header_bytes < 0:
            raise ValueError(f"header_bytes must be an int >= 0, got {header_bytes!r}")
        self.graph = graph
        self.packet_bytes = packet_bytes
        self.env = env or simpy.Environment()
        self.hbm_model = hbm
        self.store_and_forward = switching == "store_and_forward"
        self.header_bytes = header_bytes
        spec = graph.spec
        self._channels = spec.channels_per_slice
        self._channel_bw = spec.hbm.pseudo_channel_bw_gbs
        self._interleave = spec.hbm.interleave_bytes
        self._links: dict[tuple[str, str], simpy.Resource] = {}
        self._hbm: dict[str, list[simpy.Resource]] = {}
        self._routes: dict[tuple[str, ...], tuple[Stage, ...]] = {}
        self.packets = 0  # data packets injected so far
        self.packet_bytes_sent = 0  # bytes carried by those packets

    # -- public API --------------------------------------------------------------
    def submit(self, flow: FlowSpec, at: float = 0.0) -> simpy.Event:
        """Start ``flow`` at absolute time ``at`` (ns, >= now); the event's value is its completion time."""
        if at < self.env.now:
            raise ValueError(f"cannot start a flow in the past ({at} < now {self.env.now})")
        return self.env.process(self._flow(flow, at))

    def run(self, until: float | simpy.Event | None = None) -> None:
        """Advance the simulation until no event is left (or ``until``)."""
        self.env.run(until=until)

    # -- resources ---------------------------------------------------------------
    def _link(self, src: str, dst: str) -> simpy.Resource:
        """The FIFO resource of one direction of one link (created on first use)."""
        res = self._links.get((src, dst))
        if res is None:
            res = self._links[(src, dst)] = simpy.Resource(self.env, capacity=1)
        return res

    def _hbm_servers(self, node: str) -> list[simpy.Resource]:
        """The slice server, or one server per pseudo-channel, of an HBM slice."""
        servers = self._hbm.get(node)
        if servers is None:
            count = 1 if self.hbm_model == "slice" else self._channels
            servers = self._hbm[node] = [simpy.Resource(self.env, capacity=1)
                                         for _ in range(count)]
        return servers

    def _hbm_stage(self, leg: LegSpec, packet_offset: int) -> Stage:
        """The HBM server a packet starting ``packet_offset`` bytes into the leg uses.

        Under ``"channels"`` a packet is charged to the pseudo-channel of its first
        byte, which is exact when packets are granule-aligned and no larger than
        the interleave granule.
        """
        servers = self._hbm_servers(leg.hbm_node)
        if self.hbm_model == "slice":
            return Stage(servers[0], self._channels * self._channel_bw, 0.0)
        granule = (leg.hbm_offset + packet_offset) // self._interleave
        return Stage(servers[granule % self._channels], self._channel_bw, 0.0)

    def _route(self, nodes: tuple[str, ...]) -> tuple[Stage, ...]:
        """Link stages of a node sequence: edge, then its wire plus the next node's overhead."""
        stages = self._routes.get(nodes)
        if stages is None:
            g = self.graph
            stages = tuple(
                Stage(self._link(a, b), g.edge(a, b).bw_gbs,
                      g.edge(a, b).wire_ns + g.nodes[b].overhead_ns, self.header_bytes)
                for a, b in zip(nodes, nodes[1:], strict=False))
            self._routes[nodes] = stages
        return stages

    # -- processes ---------------------------------------------------------------
    def _flow(self, flow: FlowSpec, at: float) -> Generator[simpy.Event, object, float]:
        """Run the legs back to back; return the completion time."""
        if at > self.env.now:
            yield self.env.timeout(at - self.env.now)
        for leg in flow.legs:
            if leg.nbytes:
                yield from self._data_leg(leg)
            else:
                yield from self._command_leg(leg)
        return self.env.now

    def _command_leg(self, leg: LegSpec) -> Generator[simpy.Event, object, None]:
        """A head-only token: node overheads and wires, nothing occupied."""
        g = self.graph
        first = g.nodes[leg.nodes[0]].overhead_ns
        if first and not leg.continues:
            yield self.env.timeout(first)
        for stage in self._route(leg.nodes):
            if stage.after_ns:
                yield self.env.timeout(stage.after_ns)

    def _data_leg(self, leg: LegSpec) -> Generator[simpy.Event, object, None]:
        """Inject the leg's packets one at a time; finish when all have been delivered."""
        first = self.graph.nodes[leg.nodes[0]].overhead_ns
        if first and not leg.continues:
            yield self.env.timeout(first)
        links = self._route(leg.nodes)
        if not links and leg.hbm_node is None:
            return  # a route of one node moves nothing (the analytic drain is 0 too)
        delivered = []
        offset = 0
        for size in packet_sizes(leg.nbytes, self.packet_bytes):
            stages = self._stages(leg, links, offset)
            grant = stages[0].server.request()
            yield grant  # the source sends one packet at a time
            delivered.append(self.env.process(self._packet(stages, size, grant)))
            self.packets += 1
            self.packet_bytes_sent += size
            offset += size
        yield self.env.all_of(delivered)

    def _stages(self, leg: LegSpec, links: tuple[Stage, ...], offset: int) -> tuple[Stage, ...]:
        """A packet's servers in order: HBM first for a read, last for a write."""
        if leg.hbm_node is None:
            return links
        hbm = self._hbm_stage(leg, offset)
        return (hbm, *links) if leg.hbm_at_start else (*links, hbm)

    def _packet(self, stages: tuple[Stage, ...], size: int,
                grant: Request) -> Generator[simpy.Event, object, None]:
        """Cross every stage; end when the tail is delivered.

        ``tail`` is when the packet's last byte is available at the current
        stage's input; the packet holds a stage until ``max(start + wire size /
        bw, tail)``. With cut-through its head reaches the next stage
        ``after_ns`` after starting; with store-and-forward it waits there for
        its tail, so ``tail`` never exceeds the start of a stage.
        """
        env = self.env
        tail = env.now  # the whole packet sits in the source's buffer
        request = grant
        for stage in stages:
            if request is None:
                request = stage.server.request()
                yield request
            end = max(env.now + (size + stage.header_bytes) / stage.bw_gbs, tail)
            self._release_at(stage.server, request, end)
            request = None
            tail = end + stage.after_ns
            wait = tail - env.now if self.store_and_forward else stage.after_ns
            if wait:
                yield env.timeout(wait)
        if tail > env.now:
            yield env.timeout(tail - env.now)

    def _release_at(self, server: simpy.Resource, request: Request, when: float) -> None:
        """Free ``server`` at ``when`` without holding up the packet's head."""
        timer = self.env.timeout(when - self.env.now)
        timer.callbacks.append(lambda _event: server.release(request))
