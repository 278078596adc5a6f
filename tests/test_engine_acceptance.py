"""Acceptance checks of the timing engine against the latency model's invariants."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.policy.address import PhysAddr
from kernbench.probes.catalog import build_catalog
from kernbench.sim_engine import GraphEngine
from kernbench.sim_engine.engine import count_steps
from kernbench.units import KiB, MiB


def formula_ns(graph, flow):
    """Ovhd + Wire + Drain from the topology alone (independent of the engine code)."""
    total = 0.0
    for leg in flow.legs:
        paid = leg.nodes[1:] if leg.continues else leg.nodes  # data leaves the node the request reached
        total += sum(graph.nodes[n].overhead_ns for n in paid)
        edges = [graph.edge_map[(a, b)] for a, b in zip(leg.nodes, leg.nodes[1:], strict=False)]
        total += sum(e.distance_mm * e.ns_per_mm for e in edges)
        if leg.nbytes:
            bw = min(e.bw_gbs for e in edges)
            if leg.hbm_node:
                spec = graph.spec
                bw = min(bw, spec.hbm.pseudo_channels // spec.pes_per_cube
                         * spec.hbm.pseudo_channel_bw_gbs)
            total += leg.nbytes / bw
    return total


def run_alone(graph, router, flow):
    eng = GraphEngine(graph, router=router)
    ev = eng.submit(flow)
    eng.run()
    return ev.value


@pytest.mark.parametrize("nbytes", [32 * KiB, 4 * KiB, 1 * MiB])
def test_every_probe_case_matches_the_formula(default_graph, default_router, nbytes):
    eng = GraphEngine(default_graph, router=default_router)
    cases = build_catalog(default_graph.spec)
    assert len(cases) >= 16
    for case in cases:
        flow = case.flow(eng, nbytes)
        result = run_alone(default_graph, default_router, flow)
        expected = formula_ns(default_graph, flow)
        assert result.total_ns == pytest.approx(expected, rel=0.01), case.name
        assert result.wait_ns == 0.0


def test_every_hop_costs_time_and_head_times_increase(default_graph, default_router):
    eng = GraphEngine(default_graph, router=default_router)
    for case in build_catalog(default_graph.spec):
        result = run_alone(default_graph, default_router, case.flow(eng, 4 * KiB))
        times = [t for _, _, t in result.hop_trace()]
        assert all(b > a for a, b in zip(times, times[1:], strict=False)), case.name


def _slice(graph, cube, pe, offset=0):
    return PhysAddr.pe_hbm_addr(0, cube, pe, offset, graph.spec.hbm_slice_bytes)


@pytest.mark.parametrize("policy", ["interleaved", "fifo"])
def test_two_flows_on_one_route_take_twice_the_drain(with_sharing, policy):
    graph = with_sharing("default", policy)
    n = 1 * MiB
    lone = run_alone(graph, None, GraphEngine(graph).flows.pe_dma_write(
        0, 0, 0, _slice(graph, 0, 4), n))
    eng = GraphEngine(graph)
    a = eng.pe_dma_write(0, 0, 0, _slice(graph, 0, 4), n)
    b = eng.pe_dma_write(0, 0, 0, _slice(graph, 0, 4, n), n)
    eng.run()
    head = lone.overhead_ns + lone.wire_ns
    makespan = max(a.value.done_ns, b.value.done_ns)
    assert (makespan - head) / (2 * lone.drain_ns) == pytest.approx(1.0, rel=0.05)
    if policy == "fifo":  # whole transfers in turn: the first is not slowed
        assert a.value.total_ns == pytest.approx(lone.total_ns)
    else:  # interleaved packets: both take the whole time
        assert a.value.done_ns == pytest.approx(makespan, rel=1e-9)


def test_two_sources_sharing_a_bottleneck_link_serialise(default_graph, default_router):
    """PE 2 and PE 3 both write PE 0's slice: their routes share mesh links."""
    n = 1 * MiB
    eng = GraphEngine(default_graph, router=default_router)
    f2 = eng.flows.pe_dma_write(0, 0, 2, _slice(default_graph, 0, 0), n)
    f3 = eng.flows.pe_dma_write(0, 0, 3, _slice(default_graph, 0, 0, n), n)
    shared = set(zip(f2.legs[0].nodes, f2.legs[0].nodes[1:], strict=False)) & set(
        zip(f3.legs[0].nodes, f3.legs[0].nodes[1:], strict=False))
    bw = {default_graph.edge_map[e].bw_gbs for e in shared}
    assert shared and min(bw) == default_graph.spec.noc_link_bw_gbs
    lone2 = run_alone(default_graph, default_router, f2)
    lone3 = run_alone(default_graph, default_router, f3)
    a, b = eng.submit(f2), eng.submit(f3)
    eng.run()
    drain = n / default_graph.spec.noc_link_bw_gbs
    makespan = max(a.value.done_ns, b.value.done_ns)
    head = max(lone2.total_ns, lone3.total_ns) - drain
    assert (makespan - head) / (2 * drain) == pytest.approx(1.0, rel=0.05)


def test_disjoint_paths_do_not_slow_each_other(default_graph, default_router):
    n = 1 * MiB
    eng = GraphEngine(default_graph, router=default_router)
    f0 = eng.flows.pe_dma_write(0, 0, 0, _slice(default_graph, 0, 0), n)
    f7 = eng.flows.pe_dma_write(0, 5, 7, _slice(default_graph, 5, 7), n)
    edges0 = set(zip(f0.legs[0].nodes, f0.legs[0].nodes[1:], strict=False))
    edges7 = set(zip(f7.legs[0].nodes, f7.legs[0].nodes[1:], strict=False))
    assert not edges0 & edges7
    a, b = eng.submit(f0), eng.submit(f7)
    eng.run()
    assert a.value.total_ns == run_alone(default_graph, default_router, f0).total_ns
    assert b.value.total_ns == run_alone(default_graph, default_router, f7).total_ns


def test_eight_pes_reading_their_slices_reach_the_cube_bandwidth(default_graph, default_router):
    spec = default_graph.spec
    n = 1 * MiB
    eng = GraphEngine(default_graph, router=default_router)
    events = [eng.pe_dma_read(0, 0, pe, _slice(default_graph, 0, pe), n)
              for pe in range(spec.pes_per_cube)]
    eng.run()
    makespan = max(ev.value.done_ns for ev in events)
    cube_bw = spec.hbm.pseudo_channels * spec.hbm.pseudo_channel_bw_gbs
    achieved = spec.pes_per_cube * n / makespan
    assert achieved >= 0.9 * cube_bw
    assert achieved <= cube_bw


@pytest.mark.parametrize("policy", ["interleaved", "fifo"])
def test_events_per_transfer_do_not_grow_with_the_route(with_sharing, policy):
    """A transfer costs the same few events over 2 hops or 30, alone or queued."""
    graph = with_sharing("default", policy)
    per = {}
    for where in ("far", "near"):
        eng = GraphEngine(graph)
        flow = eng.flows.pe_dma_write(0, 0, 0, _slice(graph, 15 if where == "far" else 0, 0),
                                      4 * KiB)
        per[where] = len(flow.legs[0].nodes)
        count = count_steps(eng.env)
        events = [eng.submit(flow) for _ in range(100)]  # all at once: they contend
        eng.run()
        assert all(ev.triggered for ev in events) and eng.submitted == 100
        per[where + "_events"] = count[0]
    assert per["far"] > 5 * per["near"]
    assert per["far_events"] <= 4 * 100 and per["near_events"] <= 4 * 100
    assert abs(per["far_events"] - per["near_events"]) <= 10


def test_same_time_submissions_are_served_in_submission_order_under_fifo(with_sharing):
    graph = with_sharing("default", "fifo")
    eng = GraphEngine(graph)
    first = eng.pe_dma_write(0, 0, 0, _slice(graph, 0, 0), 64 * KiB)
    second = eng.pe_dma_write(0, 0, 0, _slice(graph, 0, 0, 64 * KiB), 64 * KiB)
    done = []
    first.callbacks.append(lambda ev: done.append("first"))
    second.callbacks.append(lambda ev: done.append("second"))
    eng.run()
    assert done == ["first", "second"]
    assert first.value.wait_ns == 0.0 and second.value.wait_ns > 0.0


def test_same_time_submissions_share_the_route_when_interleaved(default_graph):
    """Packets of two transfers started together interleave: they finish together, each
    having lost one drain to the other."""
    eng = GraphEngine(default_graph)
    first = eng.pe_dma_write(0, 0, 0, _slice(default_graph, 0, 0), 64 * KiB)
    second = eng.pe_dma_write(0, 0, 0, _slice(default_graph, 0, 0, 64 * KiB), 64 * KiB)
    eng.run()
    a, b = first.value, second.value
    assert a.done_ns == pytest.approx(b.done_ns, rel=1e-12)
    assert a.wait_ns == pytest.approx(b.wait_ns, rel=1e-9)
    assert a.wait_ns == pytest.approx(a.drain_ns, rel=1e-9)


def test_data_mode_moves_real_bytes_and_keeps_timing(default_graph, default_router):
    rng = np.random.default_rng(7)
    payload = rng.integers(0, 255, 8 * KiB, dtype=np.uint8)
    logs = []
    for data_on in (False, True):
        eng = GraphEngine(default_graph, router=default_router, enable_data=data_on)
        src = _slice(default_graph, 2, 3)
        tcm = PhysAddr.pe_tcm_addr(0, 1, 5, 4096)
        dst = _slice(default_graph, 3, 0, 8192)
        w = eng.h2d_write(src, payload.size, data=payload if data_on else None)
        eng.run()
        eng.pe_dma_read(0, 1, 5, src, payload.size, dst_tcm=tcm)
        eng.run()
        wb = eng.pe_dma_write(0, 1, 5, dst, payload.size, src_tcm=tcm)
        eng.run()
        back = eng.d2h_read(dst, payload.size)
        eng.run()
        if data_on:
            assert np.array_equal(back.value.data, payload)
            assert np.array_equal(eng.store.read_bytes("tcm", tcm.encode(), payload.size), payload)
        else:
            assert back.value.data is None
        logs.append([(r.t_start, r.t_end, r.component_id, r.op_name)
                     for r in eng.op_log.records])
        assert w.value.total_ns > 0 and wb.value.total_ns > 0
    assert logs[0] == logs[1]


def test_op_log_has_one_record_per_flow_sorted_by_start(default_graph, default_router):
    eng = GraphEngine(default_graph, router=default_router)
    eng.env.timeout(5)  # nothing else scheduled; flows start at t=0 and t=100
    eng.pe_dma_write(0, 0, 1, _slice(default_graph, 0, 1), 4 * KiB)

    def later(env):
        yield env.timeout(100)
        eng.h2d_write(_slice(default_graph, 0, 0), 4 * KiB)

    eng.env.process(later(eng.env))
    eng.run()
    recs = eng.op_log.records
    assert [r.op_name for r in recs] == ["pe_dma_write", "h2d_write"]
    assert [r.t_start for r in recs] == [0.0, 100.0]
    assert recs[0].component_id == "sip0.cube0.pe1.pe_dma"
    assert recs[1].component_id == "sip0.io0.pcie_ep"
    assert all(r.op_kind == "memory" and r.t_end > r.t_start for r in recs)


@pytest.mark.parametrize("policy", ["interleaved", "fifo"])
def test_a_small_read_drains_at_the_pseudo_channels_it_covers(with_sharing, policy):
    """One interleave granule read at phase 0 sits in one pseudo-channel; read from half a
    granule on, it splits over two and drains twice as fast when the channel is the
    bottleneck. Both reads on one engine, one after the other, each against the formula
    with its own channel rate (a route's plan cached without the phase would give the
    second the first one's rate)."""
    graph = with_sharing("default", policy)
    hbm = graph.spec.hbm
    g = hbm.interleave_bytes
    eng = GraphEngine(graph)
    for offset, channels in ((0, 1), (g // 2, 2)):
        flow = eng.flows.pe_dma_read(0, 0, 0, _slice(graph, 0, 0, offset), g)
        ev = eng.submit(flow)
        eng.run()
        link_bw = min(graph.edge_map[hop].bw_gbs for leg in flow.legs if leg.nbytes
                      for hop in zip(leg.nodes, leg.nodes[1:], strict=False))
        slice_bw = hbm.pseudo_channels // graph.spec.pes_per_cube * hbm.pseudo_channel_bw_gbs
        latency = formula_ns(graph, flow) - g / min(link_bw, slice_bw)  # its drain taken out
        channel_rate = g / ((g / channels) / hbm.pseudo_channel_bw_gbs)
        drain = g / min(link_bw, channel_rate)
        assert ev.value.total_ns == pytest.approx(latency + drain, rel=1e-9)
