"""Open command dispatch: a new command and the unit that runs it are one file, and a
command may complete at a time its unit only learns later (a receive waiting for
another PE). The transport (send / receive with a mailbox) carries the messages."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from kernbench.components.builtin.dispatch import executes, executor_for, registered
from kernbench.errors import SimulationError
from kernbench.isa.commands import MOVE_BYTES, PeCommand
from kernbench.isa.handles import Completion, TensorHandle
from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine import GraphEngine
from kernbench.topology.naming import pe_prefix

from .transfer_formula import message_ns

# -- a toy pair of commands and their executor, as a plugin would write them ----------------


@dataclass(frozen=True, eq=False)
class ToySend(PeCommand):
    src: TensorHandle
    to: tuple[int, int, int]
    hands_to_fabric = True

    @property
    def logical_bytes(self) -> int:
        return MOVE_BYTES

    def accesses(self):
        return [self.src], []


@dataclass(frozen=True, eq=False)
class ToyRecv(PeCommand):
    dst: TensorHandle
    frm: tuple[int, int, int]
    waits_for_inputs = False
    needs_known_deps = False

    @property
    def logical_bytes(self) -> int:
        return MOVE_BYTES

    def accesses(self):
        return [], [self.dst]


def _coord(pe):
    return (pe.sip, pe.cube, pe.pe)


@executes(ToySend)
def run_send(pe, cmd: ToySend, t_issue: float, deps) -> Completion:
    t = pe.scheduler.accept(t_issue, deps)
    payload = pe.scheduler.ops.read(cmd.src) if pe.data is not None else None
    flow = pe.services.flows.pe_message(_coord(pe), cmd.to, cmd.src.nbytes)
    sent = pe.network.send(flow, t, "ipcq", mailbox=("toy", _coord(pe), cmd.to),
                           payload=payload)
    sent.then(lambda c: pe.op_log.record(t, c.done_at, pe.ids["pe_ipcq"], "memory",
                                         "pe_message", {"nbytes": cmd.src.nbytes}))
    return sent


@executes(ToyRecv)
def run_recv(pe, cmd: ToyRecv, t_issue: float, deps) -> Completion:
    comp = pe.network.receive(("toy", cmd.frm, _coord(pe)),
                              f"a message from {pe_prefix(*cmd.frm)}")
    done = Completion(event=pe.env.event(), label=comp.label)

    def arrived(got: Completion) -> None:
        if pe.data is not None:
            pe.data.write(cmd.dst, got.value, pe.mmu)
        done.complete(pe.env.now)

    comp.then(arrived)
    return done


# -- kernels ---------------------------------------------------------------------------------

def producer(out_unused, *, tl, peer):
    x = tl.full((8, 16), 3.0, "f32")
    x = x * 2.0  # some work before the send
    tl.cycles(500)
    tl._emit(ToySend(x, peer))


def consumer(out, *, tl, peer):
    buf = tl.zeros((8, 16), "f32")
    tl._emit(ToyRecv(buf, peer))
    y = buf + 1.0  # waits for the receive: its end was unknown when it was issued
    tl.store(out, y)


def test_commands_are_found_by_type_and_unregistered_ones_are_refused():
    table = registered()
    assert table["DmaReadCmd"].endswith("pe_dma.execute_dma_read")
    assert table["CompositeCmd"].endswith("composite_feeder.execute_composite")
    assert executor_for(ToyRecv) is run_recv

    @dataclass(frozen=True, eq=False)
    class Orphan(PeCommand):
        pass

    with pytest.raises(TypeError, match="no PE unit executes Orphan"):
        executor_for(Orphan)
    with pytest.raises(RuntimeError, match="already executed by"):
        executes(ToyRecv)(lambda *a: None)


def _start(eng, rt, where, name, kernel, args, **kwargs):
    from kernbench.triton_emu.launch import ProgramIds, start_kernel

    scratch = rt.system.allocator(*where).alloc_tcm(1 << 20)
    return start_kernel(eng, *where, name, kernel, args, kwargs, 0.0,
                        ProgramIds(where[2], 1, where[1], 1, where[0], 1),
                        (scratch.encode(), 1 << 20))


def test_a_receive_completes_when_the_message_arrives(small_graph):
    eng = GraphEngine(small_graph, enable_data=True)
    rt = RuntimeContext(eng)
    out = rt.empty((8, 16), "f32")  # on sip0.cube0.pe0
    a, b = (0, 0, 0), (0, 1, 1)  # two PEs in neighbouring CUBEs
    p = out.placements[0]
    eng.pe(*b).mmu.map(out.va, p.pa.encode(), p.nbytes)  # the consumer writes it remotely
    procs = [_start(eng, rt, b, "consumer", consumer, (out.va,), peer=a),
             _start(eng, rt, a, "producer", producer, (0,), peer=b)]
    eng.run(eng.env.all_of(procs))
    message = next(r for r in eng.op_log.records if r.op_name == "pe_message")
    assert message.component_id == "sip0.cube0.pe0.pe_ipcq"
    # the message took a lone transfer's time from the hardware numbers: its overheads
    # (8 routers, 2 UCIe PHYs, both PEs' TCM, IPCQ and DMA), wires and bytes over the
    # slowest link (small_2x2 keeps default.yaml's CUBE and links)
    expect = message_ns(8 * 16 * 4, 0, 1, east_cube=True)
    assert expect == pytest.approx(16 + 8 * 2 + 2 * 2 + 2.38 + 512 / 128, rel=1e-12)
    assert message.t_end - message.t_start == pytest.approx(expect, rel=1e-12)
    # the consumer's add started only after the message had arrived
    adds = [r for r in eng.op_log.records
            if r.op_name == "add" and r.component_id.startswith("sip0.cube1.pe1")]
    assert adds and adds[0].t_start >= message.t_end
    assert procs[0].value[1] > message.t_end > procs[1].value[0]
    np.testing.assert_array_equal(rt.to_numpy(out), np.full((8, 16), 7.0, np.float32))


def test_a_receive_that_nothing_answers_is_a_deadlock_naming_the_pe(small_graph):
    ctx = RuntimeContext(GraphEngine(small_graph))
    out = ctx.empty((8, 16), "f32")
    with pytest.raises(SimulationError) as info:
        ctx.wait(ctx.launch("lonely", consumer, out, peer=(0, 1, 3)))
    msg = str(info.value)
    assert "deadlock" in msg and "sip0.cube0.pe0 (lonely)" in msg
    assert "a message from sip0.cube1.pe3" in msg
