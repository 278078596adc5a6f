"""The alpha-beta model of a collective, evaluated over the algorithm's own program.

Every cost comes from the topology file through the same formulas the
simulator's units use, on an idle system (no contention, nothing fitted):

* a message of ``b`` bytes from PE ``s`` to PE ``d`` costs
  ``alpha(s, d) + b * beta(s, d)``: ``alpha`` is the route's node overheads and
  wires, ``beta`` the inverse of its slowest link;
* the receive's slot read, the reduction (fetch, vector op, store) and the
  PE_CPU dispatch of every command are costed the same way.

The program is then played per rank with one clock each: a send leaves after
its dispatch and does not block; a receive waits for its message; a reduction
follows the receive. The makespan of that play is the prediction; for the ring
it reduces to the textbook ``2 (p - 1) (alpha + (N / p) beta)`` plus the
per-step PE costs (docs/adr/0025-collectives.md).
"""

from __future__ import annotations

from collections import defaultdict, deque

from kernbench.geometry.ipcq import opposite
from kernbench.isa.commands import DmaReadCmd, DmaWriteCmd, IpcqRecvCmd, IpcqSendCmd, MathCmd
from kernbench.isa.dtypes import dtype_bytes
from kernbench.isa.handles import TensorHandle
from kernbench.policy.address.phys_addr import PhysAddr

Coord = tuple[int, int, int]


class Costs:
    """Idle-system costs of the pieces of a collective on one engine's topology."""

    def __init__(self, engine, tier: str = "tcm") -> None:
        self.engine = engine
        self.tier = tier
        spec = engine.graph.spec
        self.clock = spec.pe.clock_ghz
        self.sched = spec.pe.overhead_ns["pe_scheduler"]
        cm = engine.cost_model
        h = TensorHandle("x", 0, (1,), "f16", "tcm", True)
        self.d_send = cm.dispatch_cycles(IpcqSendCmd("E", h)) / self.clock
        self.d_recv = cm.dispatch_cycles(IpcqRecvCmd("E", h)) / self.clock
        self.d_math = cm.dispatch_cycles(MathCmd("add", (h, h), h)) / self.clock
        self.d_dma = cm.dispatch_cycles(DmaReadCmd(h, h)) / self.clock
        self.d_store = cm.dispatch_cycles(DmaWriteCmd(h, h)) / self.clock
        self._routes: dict[tuple, tuple[float, float]] = {}
        self._ops: dict[tuple, tuple] = {}
        self.hbm_slice_gbs = spec.channels_per_slice * spec.hbm.pseudo_channel_bw_gbs

    def _plan(self, nodes) -> tuple[float, float]:
        plan = self.engine.fabric.plan(nodes)
        return plan.overhead_ns + plan.wire_ns, 1.0 / plan.bottleneck_gbs

    def alpha_beta(self, src: Coord, dst: Coord) -> tuple[float, float]:
        """(alpha ns, beta ns/B) of an IPCQ message from ``src`` to ``dst``."""
        key = ("msg", src, dst)
        hit = self._routes.get(key)
        if hit is None:
            hit = self._routes[key] = self._plan(
                self.engine.flows.ipcq_message(src, dst, self.tier))
        return hit

    def message(self, src: Coord, dst: Coord, nbytes: int) -> float:
        a, b = self.alpha_beta(src, dst)
        return a + nbytes * b

    def slot_read(self, pe: Coord, nbytes: int) -> float:
        key = ("copy", pe)
        hit = self._routes.get(key)
        if hit is None:
            slot = (PhysAddr.pe_tcm_addr(*pe, 0) if self.tier == "tcm"
                    else PhysAddr.sram_addr(pe[0], pe[1], 0))
            flow = self.engine.flows.ipcq_copy(pe, self.tier, slot, None, 1)
            hit = self._routes[key] = self._plan(flow.legs[0].nodes)
        return hit[0] + nbytes * hit[1]

    def op(self, rank: Coord, peers: dict[str, Coord], kind: str, direction: str, nbytes: int,
           elements: int) -> tuple:
        """One program action as the play needs it (cached): (is_send, queue key, a, b);
        a send costs ``a`` on the CPU and arrives ``b`` later, a receive completes at
        max(clock + a, arrival) + b."""
        key = (rank, kind, direction, nbytes)
        hit = self._ops.get(key)
        if hit is None:
            peer = peers[direction]
            if kind == "send":
                hit = (True, (rank, peer, direction), self.d_send,
                       self.sched + self.message(rank, peer, nbytes))
            else:
                b = self.slot_read(rank, nbytes)
                if kind == "reduce":
                    b += self.d_math + self.sched + self.reduce(rank, elements, nbytes)
                hit = (False, (peer, rank, opposite(direction)), self.d_recv + self.sched, b)
            self._ops[key] = hit
        return hit

    def reduce(self, pe: Coord, elements: int, nbytes: int) -> float:
        unit = self.engine.pe(*pe)
        fs, math = unit.fetch_store, unit.math
        return (fs.fetch.overhead_ns + fs.transfer_ns(2 * nbytes)
                + math.overhead_ns + math.service_ns(elements)
                + fs.store.overhead_ns + fs.transfer_ns(nbytes))

    def dma(self, pe: Coord, pa: PhysAddr, nbytes: int, write: bool) -> float:
        """Idle time of the buffer's load (``write`` False) or store."""
        flows = self.engine.flows
        flow = flows.pe_dma_write(*pe, pa, nbytes) if write else flows.pe_dma_read(*pe, pa, nbytes)
        unit = self.engine.pe(*pe)
        t = unit.dma.translate_ns
        slowest = 0.0
        for leg in flow.legs:
            a, b = self._plan(leg.nodes)
            t += a
            if leg.nbytes:
                slowest = max(slowest, b, 1.0 / self.hbm_slice_gbs if leg.hbm_node else 0.0)
        return t + nbytes * slowest


def evaluate(programs: dict[Coord, list], peers: dict[Coord, dict[str, Coord]], n: int,
             dtype: str, costs: Costs, buffers: dict[Coord, PhysAddr],
             scale: bool = False, stores: dict[Coord, list] | None = None,
             loads: dict[Coord, int] | None = None) -> dict:
    """Play every rank's compiled program on the idle-system costs; returns the
    makespan and the time each rank entered each phase. ``stores``: the element
    counts of the runs each rank writes its output in, one store after another
    (all-to-all), instead of one store of its whole buffer; ``loads``: the elements
    each rank loads, when they differ (an uneven all-to-all; 0: no load)."""
    bpe = dtype_bytes(dtype)
    clock = _loaded(programs, n, bpe, costs, buffers, loads)
    arrivals: dict[tuple, deque] = defaultdict(deque)
    cursor = {r: (0, 0) for r in programs}  # (step, op)
    marks: dict[Coord, dict[str, float]] = {r: {} for r in programs}
    plays = {r: [(label, [costs.op(r, peers[r], kind, d, ln * bpe, ln) for kind, d, _, ln in ops])
                 for label, ops in steps] for r, steps in programs.items()}
    pending = deque(sorted(programs))
    stalled = 0
    while pending:
        r = pending.popleft()
        steps = plays[r]
        si, oi = cursor[r]
        start = cursor[r]
        t = clock[r]
        blocked = False
        while si < len(steps):
            label, ops = steps[si]
            marks[r].setdefault(label, t)
            while oi < len(ops):
                send, key, a, b = ops[oi]
                if send:  # a: dispatch, b: sched + message
                    t += a
                    arrivals[key].append(t + b)
                else:  # a: dispatch + sched, b: slot read (+ the combine)
                    q = arrivals[key]
                    if not q:
                        blocked = True
                        break
                    arrived = q.popleft()
                    t = (t + a if t + a > arrived else arrived) + b
                oi += 1
            if blocked:
                break
            si, oi = si + 1, 0
        cursor[r] = (si, oi)
        clock[r] = t
        # only a blocked rank that moved no further counts toward a deadlock (a rank
        # with nothing to do finishes at once and is no stall)
        stalled = stalled + 1 if blocked and cursor[r] == start else 0
        if blocked:
            pending.append(r)
            if stalled > len(pending):
                raise RuntimeError("the collective program deadlocks in the cost model")
    end = _stored(clock, marks, n, bpe, costs, buffers, scale, stores)
    return {"latency_ns": max(end.values()), "marks": marks, "end": end}


def _loaded(programs, n: int, bpe: int, costs: Costs, buffers, loads) -> dict:
    """Each rank's clock once its buffer is in TCM (``loads``: elements per rank)."""
    if loads is None:
        return {r: costs.d_dma + costs.sched + costs.dma(r, buffers[r], n * bpe, False)
                for r in programs}
    return {r: costs.d_dma + costs.sched + costs.dma(r, buffers[r], loads[r] * bpe, False)
            if loads[r] else 0.0 for r in programs}


def _stored(clock: dict, marks: dict, n: int, bpe: int, costs: Costs, buffers, scale: bool,
            stores) -> dict:
    """Each rank's end: the ``avg`` scaling, then its store (or store runs)."""
    end = {}
    for r, t in clock.items():
        if scale:
            t += costs.d_math + costs.sched + costs.reduce(r, n, n * bpe)
        marks[r].setdefault("store", t)
        for length in (stores[r] if stores is not None else [n]):
            t = t + costs.d_store + costs.sched + costs.dma(r, buffers[r], length * bpe, True)
        end[r] = t
    return end
