"""PE_IPCQ: direct PE-to-PE queues toward named neighbours, with credit flow control.

A process group installs, once, a neighbour table on every participating PE
(``install_queues``): ``{direction: peer PE}``. Every (sender, receiver,
direction) gets one queue whose ``slots`` receive buffers of ``slot_bytes``
live in the receiver's TCM or in its CUBE's SRAM (the tier). The sender holds
one credit per free slot:

* ``tl.send`` takes a credit (the kernel blocks while none is left), snapshots
  the source at issue and sends the message through the transport on the IPCQ
  virtual channel, to the queue's mailbox; at arrival the bytes land in the slot;
* ``tl.recv`` receives the queue's next message, copies the slot out (the slot
  read is ordinary local traffic, logged as ``ipcq_copy``), frees the slot and
  sends the credit back over the fabric as a zero-byte message.

Messages between one pair over one direction arrive in order. A receive
posted before its message arrives is completed by the arrival; a kernel
waiting on a message or a credit that can never come is reported by the
engine's deadlock check with the PE, the direction and what it waits for.
Design decisions: docs/adr/0023-ipcq-virtual-channel.md, docs/adr/0024-pe-ipcq.md.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np

from kernbench.components.builtin.dispatch import executes
from kernbench.components.clock import sim_now
from kernbench.components.flows import FlowSpec, LegSpec
from kernbench.errors import ConfigError, KernelMisuse
from kernbench.geometry.ipcq import ALLOWED, IpcqConfig, opposite
from kernbench.isa.commands import IpcqRecvCmd, IpcqSendCmd
from kernbench.isa.dtypes import np_dtype
from kernbench.isa.handles import Completion, ready_at
from kernbench.policy.address.phys_addr import PhysAddr, decode_pa
from kernbench.topology import naming as nm

Coord = tuple[int, int, int]

class _Message:
    __slots__ = ("arrival", "slot", "shape", "dtype", "nbytes")

    def __init__(self, slot: int, shape: tuple, dtype: str, nbytes: int) -> None:
        self.arrival = 0.0  # set when it lands in its slot
        self.slot, self.shape, self.dtype, self.nbytes = slot, shape, dtype, nbytes


class IpcqQueue:
    """Messages from one PE to another over one direction: the sender's credits and
    the receiver's slots, arrivals and posted receives."""

    def __init__(self, env, src: Coord, dst: Coord, direction: str, cfg: IpcqConfig,
                 slot_base: PhysAddr) -> None:
        self.env = env
        self.src, self.dst, self.direction, self.cfg = src, dst, direction, cfg
        self.space = cfg.tier
        self.slot_addrs = [slot_base.offset_by(i * cfg.slot_bytes).encode()
                           for i in range(cfg.slots)]
        self.slot_base = slot_base
        self.credits = cfg.slots
        self.credit_waiters: deque[Completion] = deque()
        self.sent = 0
        self.received = 0
        self.route: tuple[str, ...] | None = None  # the message route (built on first send)
        self.messages: dict[int, FlowSpec] = {}  # size -> the message flow
        self.credit_ns: float | None = None  # a credit's trip back to the sender
        self.copies: dict[tuple, FlowSpec] = {}  # (slot, size) -> its read into the TCM
        # what a kernel blocked on this queue waits for (deadlock reports)
        self.message_label = (f"for a message from direction {opposite(direction)} "
                              f"({nm.pe_prefix(*src)})")
        self.credit_label = f"for a free slot in the queue toward {direction} ({nm.pe_prefix(*dst)})"


class PeIpcq:
    """One PE's queues: the neighbour table and the queues out of and into this PE."""

    def __init__(self, pe) -> None:
        self.pe = pe
        self.node_id = pe.ids["pe_ipcq"]
        self.neighbours: dict[str, Coord] = {}
        self.out: dict[str, IpcqQueue] = {}
        self.inbox: dict[str, IpcqQueue] = {}
        self.config: IpcqConfig | None = None

    def _queue(self, table: dict[str, IpcqQueue], direction: str, verb: str) -> IpcqQueue:
        q = table.get(direction)  # (queues are installed under known directions only)
        if q is not None:
            return q
        if opposite(direction) is None:
            raise KernelMisuse(f"tl.{verb} on {self.pe.prefix}: unknown direction {direction!r} "
                               f"(allowed: {ALLOWED})")
        have = ", ".join(sorted(self.neighbours)) or "none: no process group installed IPCQ"
        raise KernelMisuse(f"tl.{verb} on {self.pe.prefix}: direction {direction!r} has no "
                           f"neighbour (this PE's directions: {have})")

    def queue_out(self, direction: str) -> IpcqQueue:
        return self._queue(self.out, direction, "send")

    def queue_in(self, direction: str, verb: str = "recv") -> IpcqQueue:
        return self._queue(self.inbox, direction, verb)

    def credit(self, q: IpcqQueue) -> Completion | None:
        """Take a credit of ``q``: None when one was free, else a pending completion."""
        if q.credits:
            q.credits -= 1
            return None
        comp = Completion(label=q.credit_label)
        q.credit_waiters.append(comp)
        return comp


def install_queues(engine, tables: dict[Coord, dict[str, Coord]], cfg: IpcqConfig,
                   alloc_slots: Callable[[Coord, str, int], PhysAddr]) -> int:
    """Install neighbour tables and create every queue; returns the number of queues.

    ``tables[pe][direction] = peer``; every entry needs its mirror
    (``tables[peer][opposite(direction)] == pe``). ``alloc_slots(pe, tier, nbytes)``
    returns the base of the receiver's slot memory for one queue.
    """
    for pe, table in sorted(tables.items()):
        for d, peer in sorted(table.items()):
            mirror = opposite(d)
            if mirror is None:
                raise ConfigError("IPCQ neighbour table", nm.pe_prefix(*pe),
                                  f"unknown direction {d!r} (allowed: {ALLOWED})")
            back = tables.get(peer, {}).get(mirror)
            if back != pe:
                raise ConfigError(
                    "IPCQ neighbour table", nm.pe_prefix(*pe),
                    f"sends {d} to {nm.pe_prefix(*peer)}, whose {mirror} is "
                    f"{nm.pe_prefix(*back) if back else 'not set'}")
    count = 0
    for pe, table in sorted(tables.items()):
        unit = engine.pe(*pe).ipcq
        unit.neighbours = dict(sorted(table.items()))
        unit.config = cfg
        unit.out = {}
    for pe in sorted(tables):
        engine.pe(*pe).ipcq.inbox = {}
    for pe, table in sorted(tables.items()):
        for d, peer in sorted(table.items()):
            base = alloc_slots(peer, cfg.tier, cfg.slots * cfg.slot_bytes)
            q = IpcqQueue(engine.env, pe, peer, d, cfg, base)
            engine.pe(*pe).ipcq.out[d] = q
            engine.pe(*peer).ipcq.inbox[opposite(d)] = q
            count += 1
    return count


def queue_sets(engine) -> dict:
    """Every PE's installed IPCQ state (neighbours, config, queues), to put back later
    with :func:`use_queue_sets`: two sets of tables whose directions overlap (a
    collective's ring and an attention kernel's trees) each keep their own queues."""
    return {c: (u.ipcq.neighbours, u.ipcq.config, u.ipcq.out, u.ipcq.inbox)
            for c, u in engine.pes.items()}


def use_queue_sets(engine, sets: dict) -> None:
    for c, (neighbours, config, out, inbox) in sets.items():
        unit = engine.pe(*c).ipcq
        unit.neighbours, unit.config, unit.out, unit.inbox = neighbours, config, out, inbox


# -- send ------------------------------------------------------------------------------------
def _message_flow(services, q: IpcqQueue, nbytes: int) -> FlowSpec:
    """The flow of an ``nbytes`` message of ``q`` (cached per size)."""
    flow = q.messages.get(nbytes)
    if flow is None:
        if q.route is None:
            q.route = services.flows.ipcq_message(q.src, q.dst, q.space)
        route = q.route
        flow = q.messages[nbytes] = FlowSpec("ipcq_send", route[1], nbytes,
                                             (LegSpec("data", route, nbytes),), route[0],
                                             route[-1])
    return flow


class _Send:
    """One message on its way: sent when simulated time reaches its start, landed in
    the receiver's slot on arrival. (A small object rather than closures: compiled,
    closures that call each other keep their frame alive in a reference cycle, which
    a run without the cyclic collector would only free at its end.)"""

    __slots__ = ("pe", "cmd", "q", "t", "flow", "msg", "box", "store", "addr")

    def __init__(self, pe, cmd: IpcqSendCmd, q: IpcqQueue, t: float, flow: FlowSpec,
                 msg: _Message) -> None:
        """Snapshot the source (data mode) at ``t``, the send's start."""
        self.pe, self.cmd, self.q, self.t, self.flow, self.msg = pe, cmd, q, t, flow, msg
        self.box: dict = {}
        data = pe.data
        if data is not None:  # the bytes as they are when the send starts (ADR: snapshot)
            src, box = cmd.src, self.box
            data.at(t, lambda: box.setdefault("v", pe.data.read(src, pe.mmu)))
        self.store = data.store if data is not None else None
        self.addr = q.slot_addrs[msg.slot] if data is not None else 0

    def land(self) -> None:
        self.msg.arrival = self.pe.network.now()
        if self.store is not None:
            self.store.write(self.q.space, self.addr,
                             np.ascontiguousarray(self.box["v"]).reshape(-1).view(np.uint8))

    def send(self) -> Completion:
        pe, q, t, msg = self.pe, self.q, self.t, self.msg
        unit, direction, nbytes, slot = pe.ipcq, self.cmd.direction, msg.nbytes, msg.slot
        sent = pe.network.send(self.flow, t, "ipcq", mailbox=q, payload=msg,
                               on_arrival=self.land)
        sent.then(lambda c: pe.op_log.record(
            t, c.done_at, unit.node_id, "memory", "ipcq_send",
            lambda: {"direction": direction, "dst": nm.pe_prefix(*q.dst), "nbytes": nbytes,
                     "slot": slot}, "IPCQ"))
        sent.label = "send"
        return sent


@executes(IpcqSendCmd)
def execute_send(pe, cmd: IpcqSendCmd, t_issue: float, deps) -> Completion:
    """Take a credit (blocking), snapshot the source, send the message, land it in a slot."""
    unit = pe.ipcq
    q = unit.queue_out(cmd.direction)
    t = max(pe.scheduler.accept(t_issue, deps), ready_at(cmd.src))
    waiting = unit.credit(q)
    if waiting is not None:
        pe.cpu.wait(waiting)  # the kernel blocks until the receiver frees a slot
        t = max(t, sim_now(pe.env))
    src = cmd.src
    nbytes = src.nbytes
    flow = _message_flow(pe.services, q, nbytes)
    slot = q.sent % q.cfg.slots
    q.sent += 1
    message = _Send(pe, cmd, q, t, flow, _Message(slot, src.shape, src.dtype, nbytes))
    now = sim_now(pe.env)
    if t <= now:
        # a kernel that runs behind simulated time (it waited for a result that became
        # known late) sends now: the fabric has moved on, as for its DMAs (pe_dma)
        message.t = now
        return message.send()
    # send when simulated time reaches it (the fabric sees sends in time order) while
    # the kernel runs on: no switch to SimPy and back per message
    comp = Completion(label="send")
    pe.network.schedule(t, lambda: message.send().then(lambda c: comp.complete(c.done_at)))
    return comp


# -- receive -----------------------------------------------------------------------------------
@executes(IpcqRecvCmd)
def execute_recv(pe, cmd: IpcqRecvCmd, t_issue: float, deps) -> Completion:
    """Take the next message of the queue from ``cmd.direction`` into ``cmd.dst``."""
    unit = pe.ipcq
    q = unit.queue_in(cmd.direction, "recv" if cmd.consume else "recv_no_consume")
    t = pe.scheduler.accept(t_issue, deps)
    got = pe.network.receive(q, q.message_label)
    if got.done_at is not None:
        return _take(pe, q, cmd, got.value, t)
    comp = Completion(label=q.message_label)
    got.then(lambda g: _on_message(pe, q, cmd, t, comp, g.value))
    return comp


def _on_message(pe, q: IpcqQueue, cmd: IpcqRecvCmd, t: float, comp: Completion,
                msg: _Message) -> None:
    """A posted receive's message arrived: copy it, then wake the kernel (its clock
    moves on to the copy's end)."""
    try:
        copied = _take(pe, q, cmd, msg, t)
    except KernelMisuse as exc:
        comp.fail(exc)
        return
    copied.then(lambda c: comp.complete(c.done_at))


def _take(pe, q: IpcqQueue, cmd: IpcqRecvCmd, msg: _Message, t: float) -> Completion:
    """Copy the message's slot into the destination and free the slot (its credit goes
    back once the copy is done); the completion is the copy's."""
    dst = cmd.dst
    if dst.nbytes != msg.nbytes or dst.dtype != msg.dtype:
        raise KernelMisuse(
            f"tl.recv on {pe.prefix} from {cmd.direction}: the message is {msg.nbytes} B of "
            f"{msg.dtype} {msg.shape} but the receive expects {dst.nbytes} B of {dst.dtype} "
            f"{dst.shape}")
    q.received += 1
    start = max(t, msg.arrival, sim_now(pe.env))
    addr = q.slot_addrs[msg.slot]
    services = pe.services
    if not cmd.consume:
        done = Completion(start)  # diagnostic: no slot-read charge
    elif dst.space == "tcm":  # the common case: one cached flow per slot and size
        key = (msg.slot, msg.nbytes)
        flow = q.copies.get(key)
        if flow is None:
            flow = q.copies[key] = services.flows.ipcq_copy(
                q.dst, q.space, decode_pa(addr), None, msg.nbytes)
        done = pe.network.send(flow, start)
    else:
        flow = services.flows.ipcq_copy(q.dst, q.space, decode_pa(addr),
                                        pe.mmu.translate_pa(dst.addr), msg.nbytes)
        done = pe.network.send(flow, start)
    done.label = "receive"
    done.then(lambda c: _received(pe, q, cmd, msg, addr, start, c.done_at))
    return done


def _received(pe, q: IpcqQueue, cmd: IpcqRecvCmd, msg: _Message, addr: int, start: float,
              done: float) -> None:
    """The slot has been read: log it, commit the data, send the credit back."""
    dst, data = cmd.dst, pe.data
    pe.op_log.record(start, done, pe.ipcq.node_id, "memory",
                     "ipcq_copy" if cmd.consume else "ipcq_peek",
                     lambda: {"src_space": q.space, "src_addr": addr,
                              "dst_space": "tcm" if dst.space == "tcm" else "hbm",
                              "dst_addr": dst.addr, "shape": list(dst.shape), "dtype": dst.dtype,
                              "nbytes": msg.nbytes, "snapshot": data is not None,
                              "direction": cmd.direction}, "IPCQ")
    if data is not None:
        box: dict = {}
        dt = np_dtype(msg.dtype)
        data.at(start, lambda: box.setdefault(
            "v", data.store.read(q.space, addr, dst.shape, dt)))
        data.at(done, lambda: data.write(dst, box["v"], pe.mmu))
    # the slot is free once read: its credit (a zero-byte message, which occupies no
    # link) travels back to the sender
    if q.credit_ns is None:
        credit = pe.services.flows.ipcq_credit(q.dst, q.src)
        q.credit_ns = pe.network.latency(FlowSpec("ipcq_credit", credit[0], 0, (
            LegSpec("command", credit, 0),), credit[0], credit[-1]), 0.0)
    pe.network.schedule(done + q.credit_ns, lambda: _credit_arrives(q))


def _credit_arrives(q: IpcqQueue) -> None:
    if q.credit_waiters:
        q.credit_waiters.popleft().complete(sim_now(q.env))  # the credit passes straight on
    else:
        q.credits += 1
