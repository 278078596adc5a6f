"""PE_IPCQ: queues, credits, the virtual channel, the tl API, misuse and deadlock."""

from __future__ import annotations

import time

import numpy as np
import pytest

from kernbench.components.builtin.pe_ipcq import IpcqConfig
from kernbench.components.fair_share import IPCQ
from kernbench.components.fluid_stream import TINY, Member, Resource, Stream
from kernbench.errors import ConfigError, SimulationError
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine import GraphEngine
from kernbench.triton_emu.kernel_runner import KernelError

from .transfer_formula import hardware, message_ns

A, B = (0, 0, 0), (0, 0, 1)  # PE0 and PE1 of SIP 0 CUBE 0 (horizontal neighbours)
PAIR = {A: {"E": B}, B: {"W": A}}
N = 256


def setup(graph, tables=PAIR, data=True, **ipcq):
    ctx = RuntimeContext(GraphEngine(graph, enable_data=data))
    ctx.install_ipcq(tables, **ipcq)
    return ctx


def two_pes(ctx, kernel, *args, values=None):
    dp = DPPolicy(pe="row_wise", num_pes=2)
    x = ctx.from_numpy(values if values is not None else np.arange(2 * N, dtype=np.float32),
                       dp=dp)
    handle = ctx.wait(ctx.launch("k", kernel, x, *args, dp=dp))
    return handle, x


def stream(x, n, count, *, tl):
    """PE0 sends ``count`` messages x + i; PE1 sums them and stores the sum."""
    if tl.program_id(0) == 0:
        base = tl.load(x, (n,), "f32")
        for i in range(count):
            tl.send("E", base + float(i))
    else:
        acc = tl.zeros((n,), "f32")
        for _ in range(count):
            acc = acc + tl.recv("W", (n,), "f32")
        tl.store(x, acc)


def test_messages_arrive_in_order_with_their_bytes(default_graph):
    ctx = setup(default_graph, slots=2)
    _, x = two_pes(ctx, stream, N, 5)
    out = ctx.to_numpy(x)
    assert np.array_equal(out[N:], 5 * np.arange(N, dtype=np.float32) + 10.0)
    counts = ctx.engine.op_log.counts
    assert counts["ipcq_send"] == counts["ipcq_copy"] == 5


def ordered(x, n, *, tl):
    """Each message carries its index; the receiver records them in arrival order."""
    if tl.program_id(0) == 0:
        for i in range(4):
            tl.send("E", tl.full((n,), float(i), "f32"))
    else:
        out = tl.zeros((4 * n,), "f32")
        for i in range(4):
            tl.recv("W", dst=tl.view(out, i * n, n))
        tl.store(x, tl.view(out, 0, n) * 1000.0 + tl.view(out, 3 * n, n))


def test_copy_to_destination_and_fifo_order(default_graph):
    ctx = setup(default_graph, slots=1)
    _, x = two_pes(ctx, ordered, 64, values=np.zeros(2 * 4 * 64, np.float32))
    out = ctx.to_numpy(x)
    assert np.all(out[4 * 64:4 * 64 + 64] == 3.0)  # first message 0, last message 3


def test_unloaded_message_time_is_overheads_wires_and_drain(default_graph):
    ctx = setup(default_graph, data=False)
    two_pes(ctx, stream, N, 1)
    eng = ctx.engine
    (send,) = [r for r in eng.op_log.records if r.op_name == "ipcq_send"]
    # PE0 -> PE1 of one CUBE: 2 x (TCM + IPCQ + DMA) + 2 routers = 20 ns, 0.48 ns of
    # wire, 1 KiB over the 128 GB/s mesh link: 28.48 ns, from the hardware numbers alone
    expect = message_ns(N * 4, 0, 1, east_cube=False)
    assert expect == pytest.approx(20.0 + 0.48 + N * 4 / 128.0, rel=1e-12)
    assert send.t_end - send.t_start == pytest.approx(expect, rel=1e-12)


def test_a_full_queue_blocks_the_sender_until_a_credit_returns(default_graph):
    ctx = setup(default_graph, data=False, slots=1)
    two_pes(ctx, stream, N, 3)
    eng = ctx.engine
    sends = sorted((r for r in eng.op_log.records if r.op_name == "ipcq_send"),
                   key=lambda r: r.t_start)
    copies = sorted((r for r in eng.op_log.records if r.op_name == "ipcq_copy"),
                    key=lambda r: r.t_start)
    credit = eng.fabric.ipcq_route(eng.flows.ipcq_credit(B, A)).head_ns
    assert credit > 0
    for i in (1, 2):  # one slot: send i waits for the copy of message i-1 plus the credit
        assert sends[i].t_start >= copies[i - 1].t_end + credit - 1e-9


def test_snapshot_is_taken_when_the_send_starts(default_graph):
    def kernel(x, n, *, tl):
        if tl.program_id(0) == 0:
            buf = tl.full((n,), 1.0, "f32")
            tl.send("E", buf)
            tl.copy_to(buf, tl.full((n,), 2.0, "f32"))  # overwrite right after the send
            tl.send("E", buf)
        else:
            a = tl.recv("W", (n,), "f32")
            b = tl.recv("W", (n,), "f32")
            tl.store(x, a * 10.0 + b)

    ctx = setup(default_graph)
    _, x = two_pes(ctx, kernel, N)
    assert np.all(ctx.to_numpy(x)[N:] == 12.0)


def test_recv_async_overlaps_and_no_consume_skips_the_slot_read(default_graph):
    def kernel(x, n, mode, *, tl):
        if tl.program_id(0) == 0:
            tl.send("E", tl.full((n,), 3.0, "f32"))
        elif mode == "async":
            h = tl.recv_async("W", (n,), "f32")
            tl.wait(h)
            tl.store(x, h)
        elif mode == "peek":
            tl.store(x, tl.recv_no_consume("W", (n,), "f32"))
        else:
            tl.store(x, tl.recv("W", (n,), "f32"))

    ends = {}
    for mode in ("async", "peek", "blocking"):
        ctx = setup(default_graph)
        handle, x = two_pes(ctx, kernel, N, mode)
        assert np.all(ctx.to_numpy(x)[N:] == 3.0)
        ends[mode] = handle.kernel_spans[1][1]
        counts = ctx.engine.op_log.counts
        assert counts["ipcq_copy"] == (0 if mode == "peek" else 1)
        assert counts["ipcq_peek"] == (1 if mode == "peek" else 0)
    assert ends["peek"] < ends["blocking"]


def test_ipcq_copy_record_has_the_schema_fields(default_graph):
    ctx = setup(default_graph)
    two_pes(ctx, stream, N, 1)
    (rec,) = [r for r in ctx.engine.op_log.records if r.op_name == "ipcq_copy"]
    for key in ("src_space", "src_addr", "dst_space", "dst_addr", "shape", "dtype", "nbytes",
                "snapshot"):
        assert key in rec.params
    assert rec.params["nbytes"] == N * 4 and rec.params["shape"] == [N]
    assert rec.params["src_space"] == "tcm" and rec.params["snapshot"] is True


def test_sram_slots_work_and_cost_more_than_tcm_slots(default_graph):
    times = {}
    for tier in ("tcm", "sram"):
        ctx = setup(default_graph, tier=tier)
        handle, x = two_pes(ctx, stream, N, 3)
        assert np.array_equal(ctx.to_numpy(x)[N:], 3 * np.arange(N, dtype=np.float32) + 3.0)
        times[tier] = handle.kernel_ns
    assert times["sram"] > times["tcm"]


@pytest.mark.parametrize("policy", ["interleaved", "fifo"])
def test_ipcq_does_not_queue_behind_bulk_dma_but_delays_it(with_sharing, policy):
    """PE0 of CUBE 0 streams 256 KiB to CUBE 1's HBM; during it, PE1 of CUBE 0 sends a
    message to CUBE 1 over the same UCIe link and then starts a second write that
    shares the link with the first. The message takes its unloaded time (strict
    priority: it does not queue behind the DMA), and the bulk writes lose exactly its
    link time: under FIFO bookings it is charged at the next gap, so the queued
    write ends later by that time while the first, already booked, keeps its end;
    interleaved, the writes share what the message leaves, so the last of them ends
    later by that time."""
    default_graph = with_sharing("default", policy)
    a, c = (0, 0, 1), (0, 1, 0)
    tables = {a: {"cube_E": c}, c: {"cube_W": a}}
    m = 65536

    def kernel(y, y2, n, with_msg, *, tl):
        cube, pe = tl.program_id(1), tl.program_id(0)
        if (cube, pe) == (0, 0):
            tl.store(y, tl.zeros((m,), "f32"))
        elif (cube, pe) == (0, 1):
            tl.cycles(200)  # the first write is on the link by then
            if with_msg:
                tl.send("cube_E", tl.zeros((n,), "f32"))
            tl.cycles(200)
            tl.store(y2, tl.zeros((m // 4,), "f32"))
        elif (cube, pe) == (1, 0) and with_msg:
            tl.recv("cube_W", (n,), "f32")

    ends = {}
    for with_msg in (False, True):
        ctx = setup(default_graph, tables, data=False)
        dp = DPPolicy(cube="row_wise", num_cubes=2, pe="row_wise", num_pes=2)
        y = ctx.empty((8 * m,), "f32", dp=dp)  # CUBE 1's PE0 shard: across the UCIe link
        ptr = y.ptr(1, 0)
        ctx.wait(ctx.launch("k", kernel, ptr, ptr + 4 * m, N, with_msg, dp=dp))
        eng = ctx.engine
        dma, second = sorted((r for r in eng.op_log.records if r.op_name == "dma_write"),
                             key=lambda r: r.t_start)
        assert second.t_start < dma.t_end
        ends[with_msg] = (dma.t_end, second.t_end)
        if with_msg:
            (msg,) = [r for r in eng.op_log.records if r.op_name == "ipcq_send"]
            assert dma.t_start < msg.t_start < dma.t_end  # the DMA holds the link
            nodes = eng.flows.ipcq_message(a, c, "tcm")
            dma_nodes = eng.flows.pe_dma_write(0, 0, 0, eng.pe(0, 0, 0).mmu.translate_pa(
                y.ptr(1, 0)), 4 * m).legs[0].nodes
            shared = (set(zip(nodes, nodes[1:], strict=False))
                      & set(zip(dma_nodes, dma_nodes[1:], strict=False)))
            assert shared, "the two routes must share a link for this test to mean anything"
            # CUBE 0 PE1 -> CUBE 1 PE0, from the hardware numbers alone: 32 ns of
            # overheads (6 routers, 2 UCIe PHYs), 1.78 ns of wire, 1 KiB at 128 GB/s
            assert msg.t_end - msg.t_start == pytest.approx(
                message_ns(N * 4, 1, 0, east_cube=True), rel=1e-12)
    lost = N * 4 / 128.0  # the message's bytes over the shared 128 GB/s link
    assert lost == N * 4 / min(hardware()["cube"]["noc"]["link_bw_gbs"],
                               hardware()["sip"]["ucie"]["bw_gbs"])
    if policy == "fifo":
        assert ends[True][0] == ends[False][0]
        assert ends[True][1] - ends[False][1] == pytest.approx(lost, rel=1e-6)
    else:
        assert max(ends[True]) - max(ends[False]) == pytest.approx(lost, rel=1e-6)


def test_a_drained_stream_has_delivered_every_byte_it_sent():
    """Conservation in the shared-link fluid: a stream whose source has stopped and whose
    queues are empty has delivered all it sent, so its last message is delivered. Here the
    last hop passes a hair less than it gets (rates that differ by float noise are not
    propagated), so at every settle that hop queues fewer than TINY bytes, which are
    dropped: they must pass on, not vanish (they added up on long-lived IPCQ streams
    until a send never completed and the ring all-reduce deadlocked)."""
    rate, slack, step, steps = 128.0, 1e-9, 5.0, 1000
    assert 0.0 < rate * slack * step < TINY  # what the hop queues per settle
    s = Stream(0, "route", tuple(Resource(i, rate) for i in range(3)), (float("inf"),) * 3,
               rate, IPCQ, 0.0, 0.0)
    m = Member(int(rate * step * steps), 0.0, None)
    s.add(m)
    s.arr = [rate, rate, rate]
    s.out = [rate, rate, rate * (1.0 - slack)]
    s.refresh()
    for i in range(1, steps + 1):
        s.settle(i * step)
    assert not s.sending and s.sent_bytes == m.nbytes  # the source has sent it all
    assert s.backlog == [0.0] * 3 and s.out == [0.0] * 3  # drained: nothing moves any more
    assert s.delivered == s.sent_bytes
    assert s.delivered_members() == [m]


# -- misuse and deadlock -----------------------------------------------------------------
def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("body, fragment", [
    (lambda tl, n: tl.send("up", tl.zeros((n,), "f32")), "unknown direction 'up'"),
    (lambda tl, n: tl.send("N", tl.zeros((n,), "f32")), "direction 'N' has no neighbour"),
    (lambda tl, n: tl.send("E", tl.zeros((2048,), "f32")), "do not fit a 4096 B IPCQ slot"),
    (lambda tl, n: tl.recv("E", (n,), "f64"), "dtype 'f64' is not supported"),
    (lambda tl, n: tl.recv("W", (n,), "f32"), "direction 'W' has no neighbour"),
])
def test_misuse_fails_at_the_call_naming_kernel_pe_and_direction(default_graph, body,
                                                                   fragment):
    def kernel(x, n, *, tl):
        if tl.program_id(0) == 0:
            body(tl, n)

    ctx = setup(default_graph, data=False)
    with pytest.raises(KernelError) as info:
        two_pes(ctx, kernel, N)
    text = one_line(info.value)
    assert fragment in text and "'k'" in text and "sip0.cube0.pe0" in text


def test_a_receive_of_the_wrong_size_fails_at_the_match(default_graph):
    def kernel(x, n, *, tl):
        if tl.program_id(0) == 0:
            tl.send("E", tl.zeros((n,), "f32"))
        else:
            tl.recv("W", (n // 2,), "f32")

    ctx = setup(default_graph, data=False)
    with pytest.raises(KernelError) as info:
        two_pes(ctx, kernel, N)
    text = one_line(info.value)
    assert "the message is 1024 B of f32" in text and "sip0.cube0.pe1" in text


def test_receiving_from_a_silent_neighbour_is_a_deadlock(default_graph):
    def kernel(x, n, *, tl):
        if tl.program_id(0) == 1:
            tl.recv("W", (n,), "f32")

    ctx = setup(default_graph, data=False)
    t0 = time.perf_counter()
    with pytest.raises(SimulationError) as info:
        two_pes(ctx, kernel, N)
    assert time.perf_counter() - t0 < 5.0
    text = one_line(info.value)
    assert text.startswith("deadlock")
    assert "sip0.cube0.pe1 (k) waits for a message from direction W (sip0.cube0.pe0)" in text


def test_two_senders_with_full_queues_deadlock_on_credits(default_graph):
    def kernel(x, n, *, tl):
        d = "E" if tl.program_id(0) == 0 else "W"
        for _ in range(3):
            tl.send(d, tl.zeros((n,), "f32"))
        tl.recv(d, (n,), "f32")

    ctx = setup(default_graph, data=False, slots=2)
    with pytest.raises(SimulationError) as info:
        two_pes(ctx, kernel, N)
    text = one_line(info.value)
    assert "sip0.cube0.pe0 (k) waits for a free slot in the queue toward E (sip0.cube0.pe1)" \
        in text
    assert "sip0.cube0.pe1 (k) waits for a free slot in the queue toward W (sip0.cube0.pe0)" \
        in text


def test_neighbour_tables_must_be_mirrored(default_graph):
    ctx = RuntimeContext(GraphEngine(default_graph))
    with pytest.raises(ConfigError, match="sends E to sip0.cube0.pe1, whose W is not set"):
        ctx.install_ipcq({A: {"E": B}})
    with pytest.raises(ConfigError, match="unknown direction 'up'"):
        ctx.install_ipcq({A: {"up": B}, B: {"W": A}})


@pytest.mark.parametrize("kwargs, key", [({"slots": 0}, "ipcq.slots"),
                                         ({"slot_bytes": 100}, "ipcq.slot_bytes"),
                                         ({"tier": "hbm"}, "ipcq.tier")])
def test_queue_config_is_checked(kwargs, key):
    with pytest.raises(ConfigError, match=key):
        IpcqConfig(**kwargs)


def test_an_ipcq_route_is_built_once_and_books_as_built(default_graph):
    """Every message of a queue books the same route: ``Fabric.ipcq_route`` builds it once
    (per node tuple, equal tuples included) and hands out what a fresh build gives, the
    fabric's own IPCQ and bulk timelines per hop."""
    fabric, flows = GraphEngine(default_graph).fabric, GraphEngine(default_graph).flows
    nodes = flows.ipcq_message(A, (0, 1, 3), "tcm")
    other = flows.ipcq_message(A, B, "tcm")  # from the same PE, elsewhere
    route = fabric.ipcq_route(nodes)
    assert route.plan.nodes == nodes
    assert fabric.ipcq_route(other).plan.nodes == other
    assert fabric.ipcq_route(nodes) is route
    assert fabric.ipcq_route(tuple(list(nodes))) is route  # equal, not the same tuple
    assert route == fabric._build_ipcq_route(nodes)
    hops = list(zip(nodes, nodes[1:], strict=False))
    assert [vc for _, vc, _, _, _ in route.steps] == [fabric._ipcq_timeline(*h) for h in hops]
    assert [bulk for _, _, bulk, _, _ in route.steps] == [fabric.timeline(*h) for h in hops]
