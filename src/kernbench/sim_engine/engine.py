"""``GraphEngine``: one simulation of one topology.

Every flow goes through the transport (``components/transport.py``), which
times it under the topology's link sharing with O(1) events per transfer
whatever the route length. In data mode a flow reads its source bytes when it
is issued and commits them at its destination when it completes. PEs are
created on first use; the programs they run are attached from above (the
kernel side registers them with :meth:`GraphEngine.register_program`).
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np
import simpy

from kernbench.collector import quiet_collector
from kernbench.components.builtin.pe_cost_model import PeCostModel
from kernbench.components.builtin.pe_unit import PeUnit
from kernbench.components.fabric import Fabric, LegTiming
from kernbench.components.flows import FlowBuilder, FlowSpec
from kernbench.components.transport import Transport
from kernbench.errors import SimulationError
from kernbench.policy.address.phys_addr import PhysAddr, UnitType
from kernbench.policy.routing import AddressResolver, PathRouter
from kernbench.sim_engine.data_plane import DataPlane
from kernbench.sim_engine.memory_store import MemoryStore
from kernbench.sim_engine.op_log import OpLogger
from kernbench.topology.graph import TopologyGraph

_SPACE = {UnitType.PE: "tcm", UnitType.SRAM: "sram", UnitType.MCPU: "mcpu"}


class _GraphState(NamedTuple):
    """What depends on the graph alone, shared by every engine built on it: routes and
    flow shapes are pure functions of the graph, and a composite's plan of its shapes
    and the PE parameters (one ``pe`` section per topology), so the points of a batch
    or a test module search each route tree and plan each shape once."""

    resolver: AddressResolver
    router: PathRouter
    flows: FlowBuilder
    plans: dict
    shapes: dict  # route shapes by node sequence (components/fabric.route_shape)


_BY_GRAPH: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _graph_state(graph: TopologyGraph) -> _GraphState:
    state = _BY_GRAPH.get(graph)
    if state is None:
        resolver, router = AddressResolver(graph), PathRouter(graph)
        state = _BY_GRAPH[graph] = _GraphState(
            resolver, router, FlowBuilder(resolver, router, graph.spec.hbm_slice_bytes), {}, {})
    return state


def space_of(pa: PhysAddr) -> str:
    """Memory-store space name of a physical address."""
    return "hbm" if pa.kind == "hbm" else _SPACE[pa.unit_type]


def leg_timing(spec, plan, start: float, end: float, wait: float, drain: float, bn: float,
               waited: tuple) -> LegTiming:
    paid = plan.overhead_ns - (plan.overheads[0] if spec.continues else 0.0)
    return LegTiming(plan, spec.nbytes, paid, start, spec.continues, waited, wait, drain, end, bn)


def flow_params(flow: FlowSpec, timing: tuple) -> dict:
    """The op-log parameters of a flow (built only when the op log is read)."""
    params: dict = {}
    if isinstance(flow.src, PhysAddr):
        params["src_addr"] = flow.src.encode()
    if isinstance(flow.dst, PhysAddr):
        params["dst_addr"] = flow.dst.encode()
    if flow.kind != "command":
        params["nbytes"] = flow.nbytes
    params.update(src=str(flow.src), dst=str(flow.dst),
                  hops=sum(len(raw[0].nodes) - 1 for raw in timing),
                  wait_ns=sum(raw[3] for raw in timing))
    return params


class FlowResult(NamedTuple):
    """Outcome of one flow: timing per leg and, for reads in data mode, the bytes."""

    flow: FlowSpec
    issue_ns: float
    done_ns: float
    timing: tuple  # per leg: (plan, start, end, wait, drain, bottleneck, waited hops)
    data: np.ndarray | None = None

    @property
    def legs(self) -> tuple[LegTiming, ...]:
        """Per-leg timing (built on request: most results are only waited on)."""
        return tuple(leg_timing(spec, *raw) for spec, raw in zip(self.flow.legs, self.timing,
                                                                  strict=True))

    @property
    def total_ns(self) -> float:
        return self.done_ns - self.issue_ns

    @property
    def overhead_ns(self) -> float:
        return sum(leg.overhead_ns for leg in self.legs)

    @property
    def wire_ns(self) -> float:
        return sum(leg.plan.wire_ns for leg in self.legs)

    @property
    def drain_ns(self) -> float:
        return sum(leg.drain_ns for leg in self.legs)

    @property
    def wait_ns(self) -> float:
        return sum(leg.wait_ns for leg in self.legs)

    @property
    def bottleneck_gbs(self) -> float:
        data = [leg.bottleneck_gbs for leg in self.legs if leg.nbytes]
        return min(data) if data else float("inf")

    def hop_trace(self) -> list[tuple[str, str, float]]:
        """(leg label, node, ns since issue) for every node the head passed."""
        out = []
        for spec, leg in zip(self.flow.legs, self.legs, strict=True):
            skip = 1 if spec.continues else 0  # same node, same time as the previous leg's end
            for node, t in zip(leg.plan.nodes[skip:], leg.hop_ns[skip:], strict=True):
                out.append((spec.label, node, t - self.issue_ns))
        return out



def count_steps(env: simpy.Environment) -> list[int]:
    """Count the events ``env`` processes from now on (``[n]``, updated in place):
    SimPy's own ``step`` is wrapped, so process resumptions count too. For speed
    benchmarks and the events-per-transfer tests."""
    count = [0]
    step = env.step

    def counted() -> None:
        count[0] += 1
        step()

    env.step = counted
    return count

class GraphEngine:
    """Owns the SimPy environment, the fabric (link and HBM-channel occupancy), the
    flow builder and router, the op log, the memory store (data mode), the PE
    models and the PE-to-PE network. It knows nothing of kernels or tensors:
    programs attach themselves to PEs and register here for deadlock reports.
    It also serves as the ``PeServices`` of every PE unit: ``network`` is the
    transport, the only way their bytes reach the fabric."""

    def __init__(self, graph: TopologyGraph, *, enable_data: bool = False,
                 env: simpy.Environment | None = None, router: PathRouter | None = None,
                 keep_records: bool = True, planned_composites: bool = True) -> None:
        self.graph = graph
        # a composite on TCM operands whose engines are idle is timed from its plan, in
        # one pass (docs/adr/0027); False times every one tile by tile (equivalence checks)
        self.planned_composites = planned_composites
        self.env = env or simpy.Environment()
        with quiet_collector():  # (the route tables: thousands of lists that live on)
            shared = _graph_state(graph)
        if router is None or router is shared.router:
            self.resolver, self.router, self.flows = shared.resolver, shared.router, shared.flows
        else:  # a caller's own router: its own flow cache too
            self.resolver, self.router = shared.resolver, router
            self.flows = FlowBuilder(self.resolver, router, graph.spec.hbm_slice_bytes)
        self.plans = shared.plans  # composite plans by shape (components/builtin/composite_plan)
        self.fabric = Fabric(graph, shared.shapes)
        self.network = self.transport = Transport(self.env, self.fabric, graph.spec.sharing)
        self.op_log = OpLogger(keep_records)
        self.store: MemoryStore | None = MemoryStore() if enable_data else None
        self.data: DataPlane | None = DataPlane(self.store, self.env) if enable_data else None
        self.cost_model = PeCostModel.from_spec(graph.spec)
        self._pes: dict[tuple[int, int, int], PeUnit] = {}
        self.programs: list = []
        self.submitted = 0  # flows handed to submit()

    # -- PEs ---------------------------------------------------------------------
    def pe(self, sip: int, cube: int, pe: int) -> PeUnit:
        """The PE model at (sip, cube, pe), created on first use."""
        key = (sip, cube, pe)
        unit = self._pes.get(key)
        if unit is None:
            self.resolver.find_pe(sip, cube, pe)  # RoutingError if absent
            unit = self._pes[key] = PeUnit(sip, cube, pe, self, self.graph.spec, self.cost_model)
        return unit

    @property
    def pes(self) -> dict[tuple[int, int, int], PeUnit]:
        return dict(sorted(self._pes.items()))

    def register_program(self, program) -> None:
        """Track a program (``started``, ``finished``, ``where``, ``name``,
        ``waiting_on``) so a drained event queue can name what is blocked."""
        self.programs.append(program)

    @property
    def now(self) -> float:
        return self.env.now

    # -- core ------------------------------------------------------------------
    def submit(self, flow: FlowSpec, *, src: tuple[str, int] | None = None,
               dst: tuple[str, int] | None = None, data: np.ndarray | None = None,
               op_name: str | None = None) -> simpy.Event:
        """Start ``flow`` now; the returned event fires at completion with a FlowResult.

        In data mode, ``src`` (space, addr) is read at issue unless ``data`` is given,
        and the bytes are written to ``dst`` (space, addr) at completion.
        """
        issue = self.env.now
        payload = None
        if self.store is not None:
            if data is not None:
                payload = np.ascontiguousarray(data).reshape(-1).view(np.uint8).copy()
            elif src is not None:
                payload = self.store.read_bytes(src[0], src[1], flow.nbytes)
        timing: list = []
        comp = self.transport.send(flow, issue, timing=timing)
        self.submitted += 1
        store = self.store if payload is not None and dst is not None else None

        def record(done: float) -> FlowResult:
            legs = tuple(timing)
            self.op_log.record(issue, done, flow.initiator, "memory", op_name or flow.kind,
                               lambda: flow_params(flow, legs))
            return FlowResult(flow, issue, done, legs, payload)

        if comp.done_at is not None:  # timed at once (fifo): one timeout carries it
            event = self.env.timeout(comp.done_at - issue, record(comp.done_at))
            if store is not None:
                event.callbacks.append(lambda _ev: store.write(dst[0], dst[1], payload))
            return event
        event = self.env.event()

        def arrived() -> None:
            if store is not None:
                store.write(dst[0], dst[1], payload)
            event.succeed(record(comp.done_at))

        # the event fires when the flow arrives (its time may be known a little earlier)
        comp.then(lambda c: self.transport.schedule(c.done_at, arrived))
        return event

    def run(self, until: float | simpy.Event | None = None) -> None:
        """Advance the simulation; a drained queue with kernels still waiting is a deadlock."""
        try:
            with quiet_collector():
                self.env.run(until=until)
        except RuntimeError as exc:
            if "No scheduled events left" not in str(exc):
                raise
            self._raise_deadlock()
        if until is None:
            self._raise_deadlock()

    def settle(self) -> bool:
        """Process the events due now that nothing waits on (a finished launch's tail:
        its completion, its kernels' ends), as the next step would first; True when no
        other event is pending, so nothing is in flight anywhere."""
        env = self.env
        queue = env._queue  # SimPy keeps (time, priority, id, event) in a heap
        while queue and queue[0][0] == env.now and not queue[0][3].callbacks:
            env.step()
        return not queue

    def _raise_deadlock(self) -> None:
        blocked = [r for r in self.programs if r.started and not r.finished]
        if blocked:
            what = "; ".join(f"{r.where} ({r.name}) waits for {r.waiting_on or 'an event'}"
                             for r in blocked)
            raise SimulationError(f"deadlock: the event queue is empty but {len(blocked)} "
                                  f"kernel(s) are blocked: {what}")

    # -- convenience flows -----------------------------------------------------
    def h2d_write(self, pa: PhysAddr, nbytes: int, *, data: np.ndarray | None = None,
                  from_host: bool = False) -> simpy.Event:
        flow = self.flows.h2d_write(pa, nbytes, from_host=from_host)
        return self.submit(flow, data=data, dst=(space_of(pa), pa.encode()))

    def d2h_read(self, pa: PhysAddr, nbytes: int, *, to_host: bool = False) -> simpy.Event:
        flow = self.flows.d2h_read(pa, nbytes, to_host=to_host)
        return self.submit(flow, src=(space_of(pa), pa.encode()))

    def pe_dma_write(self, sip: int, cube: int, pe: int, dst: PhysAddr, nbytes: int, *,
                     src_tcm: PhysAddr | None = None) -> simpy.Event:
        flow = self.flows.pe_dma_write(sip, cube, pe, dst, nbytes)
        if self.store is None:  # addresses matter only to the data plane
            return self.submit(flow)
        src = ("tcm", src_tcm.encode()) if src_tcm is not None else None
        return self.submit(flow, src=src, dst=(space_of(dst), dst.encode()))

    def pe_dma_read(self, sip: int, cube: int, pe: int, src: PhysAddr, nbytes: int, *,
                    dst_tcm: PhysAddr | None = None) -> simpy.Event:
        flow = self.flows.pe_dma_read(sip, cube, pe, src, nbytes)
        if self.store is None:
            return self.submit(flow)
        dst = ("tcm", dst_tcm.encode()) if dst_tcm is not None else None
        return self.submit(flow, src=(space_of(src), src.encode()), dst=dst)

    def mcpu_dma_write(self, sip: int, cube: int, dst: PhysAddr, nbytes: int, *,
                       data: np.ndarray | None = None) -> simpy.Event:
        flow = self.flows.mcpu_dma_write(sip, cube, dst, nbytes)
        return self.submit(flow, data=data, dst=(space_of(dst), dst.encode()))
