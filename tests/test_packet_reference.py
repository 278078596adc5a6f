"""The packet-level reference: closed form when alone, contention, packets, determinism.

Expected values come from the topology through ``transfer_model.predict``
(Ovhd + Wire + k x nbytes / BN) or from stated invariants of packet
interleaving, never from the reference itself.
"""

from __future__ import annotations

import pytest

from kernbench.policy.address.phys_addr import PhysAddr
from kernbench.probes import fabric_accuracy as fa
from kernbench.probes.catalog import find_case
from kernbench.probes.formula import predict
from kernbench.sim_engine.engine import GraphEngine
from kernbench.sim_engine.packet_reference import PacketReference, packet_sizes

# With the slice HBM model the reference reproduces the closed form exactly;
# only float rounding separates them (the sums are taken in a different order).
EXACT = 1e-9


@pytest.fixture(scope="module")
def engine(small_graph):
    """Builds flows (and serves as the analytic model where a test needs it)."""
    return GraphEngine(small_graph)


def reference_times(graph, flows, **kw) -> list[float]:
    ref = PacketReference(graph, **kw)
    events = [ref.submit(f) for f in flows]
    ref.run()
    return [ev.value for ev in events]


def analytic_times(graph, flows) -> list[float]:
    eng = GraphEngine(graph)
    events = [eng.submit(f) for f in flows]
    eng.run()
    return [ev.value.done_ns for ev in events]


CASES = ["h2d-1hop", "d2h-2hop", "pe-local-hbm", "pe-cross-half-hbm",
         "pe-cross-cube-hbm-worst", "mcpu-cross-cube-hbm"]


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("nbytes", [4096, 10_000, 65536])
def test_lone_flow_takes_ovhd_plus_wire_plus_drain(small_graph, engine, name, nbytes):
    flow = find_case(small_graph.spec, name).flow(engine, nbytes)
    (done,) = reference_times(small_graph, [flow])
    assert done == pytest.approx(predict(small_graph, flow).latency_ns, rel=EXACT)


@pytest.mark.parametrize("packet_bytes", [64, 1000, 4096])
def test_closed_form_holds_for_any_packet_size(small_graph, engine, packet_bytes):
    flow = find_case(small_graph.spec, "d2h-2hop").flow(engine, 50_000)
    (done,) = reference_times(small_graph, [flow], packet_bytes=packet_bytes)
    assert done == pytest.approx(predict(small_graph, flow).latency_ns, rel=EXACT)


def test_reads_and_non_hbm_destinations(small_graph, engine):
    sb = small_graph.spec.hbm_slice_bytes
    flows = [engine.flows.pe_dma_read(0, 0, 0, PhysAddr.pe_hbm_addr(0, 3, 2, 0, sb), 20_000),
             engine.flows.pe_dma_write(0, 0, 0, PhysAddr.pe_tcm_addr(0, 1, 3, 0), 20_000)]
    for flow in flows:
        (done,) = reference_times(small_graph, [flow])
        assert done == pytest.approx(predict(small_graph, flow).latency_ns, rel=EXACT)


def test_start_time_shifts_completion(small_graph, engine):
    flow = find_case(small_graph.spec, "pe-cross-half-hbm").flow(engine, 4096)
    ref = PacketReference(small_graph)
    ev = ref.submit(flow, at=100.0)
    ref.run()
    assert ev.value == pytest.approx(100.0 + predict(small_graph, flow).latency_ns, rel=EXACT)
    with pytest.raises(ValueError):
        ref.submit(flow, at=0.0)  # now is past 100 ns


@pytest.mark.parametrize("policy", ["interleaved", "fifo"])
def test_two_identical_flows_share_the_link(with_sharing, policy):
    """Both models finish at Ovhd + Wire + 2 x Drain. The reference's packets alternate;
    the interleaved fabric drains both together, FIFO bookings one after the other."""
    small_graph = with_sharing("small_2x2", policy)
    engine = GraphEngine(small_graph)
    case = find_case(small_graph.spec, "pe-cross-cube-hbm-best")
    nbytes = 32 * 1024
    flows = [case.flow(engine, nbytes, offset=i * nbytes) for i in range(2)]
    model = predict(small_graph, flows[0], concurrent_flows=2)
    ref, ana = reference_times(small_graph, flows), analytic_times(small_graph, flows)
    assert max(ref) == pytest.approx(model.latency_ns, rel=EXACT)
    assert max(ana) == pytest.approx(model.latency_ns, rel=EXACT)
    # packets alternate, so the first flow ends one packet time before the second ...
    packet_ns = 256 / model.bottleneck_gbs
    assert abs(ref[1] - ref[0]) == pytest.approx(packet_ns, rel=EXACT)
    if policy == "fifo":  # ... while FIFO books the whole first transfer first
        assert ana[1] - ana[0] == pytest.approx(model.drain_ns, rel=EXACT)
    else:  # ... and the fluid shares the link evenly to the end
        assert ana[1] == pytest.approx(ana[0], rel=EXACT)


def test_disjoint_flows_do_not_interact(small_graph, engine):
    sb = small_graph.spec.hbm_slice_bytes
    flows = [engine.flows.pe_dma_write(0, c, 0, PhysAddr.pe_hbm_addr(0, c, 0, 0, sb), 8192)
             for c in range(small_graph.spec.cubes_per_sip)]
    done = reference_times(small_graph, flows)
    for flow, t in zip(flows, done, strict=True):
        assert t == pytest.approx(predict(small_graph, flow).latency_ns, rel=EXACT)


def test_packet_sizes():
    assert packet_sizes(1000, 256) == [256, 256, 256, 232]
    assert packet_sizes(512, 256) == [256, 256]
    assert packet_sizes(100, 256) == [100]
    assert packet_sizes(0, 256) == []
    with pytest.raises(ValueError):
        packet_sizes(100, 0)


def test_packet_count_and_zero_byte_legs(small_graph, engine):
    sb = small_graph.spec.hbm_slice_bytes
    read = engine.flows.d2h_read(PhysAddr.pe_hbm_addr(0, 2, 0, 0, sb), 1000)
    assert [leg.nbytes for leg in read.legs] == [0, 1000]  # command, then data
    ref = PacketReference(small_graph)
    ref.submit(read)
    ref.run()
    assert ref.packets == 4 and ref.packet_bytes_sent == 1000  # the command leg sends none

    command = engine.flows.command("sip0.cube0.m_cpu", "sip0.cube0.pe0.pe_cpu")
    ref = PacketReference(small_graph)
    ev = ref.submit(command)
    ref.run()
    assert ref.packets == 0
    model = predict(small_graph, command)
    assert model.drain_ns == 0
    assert ev.value == pytest.approx(model.overhead_ns + model.wire_ns, rel=EXACT)


def test_per_channel_hbm_adds_one_channel_service_time(small_graph, engine):
    """Under ``hbm="channels"`` the last packet is served by one pseudo-channel, so a
    lone write ends ``packet / channel_bw - packet / BN`` later than the closed form."""
    spec = small_graph.spec
    for name in ("pe-local-hbm", "pe-cross-half-hbm"):
        flow = find_case(spec, name).flow(engine, 16 * 1024)
        model = predict(small_graph, flow)
        (done,) = reference_times(small_graph, [flow], hbm="channels")
        extra = 256 / spec.hbm.pseudo_channel_bw_gbs - 256 / model.bottleneck_gbs
        assert done - model.latency_ns == pytest.approx(extra, rel=1e-6)


def test_runs_are_deterministic(small_graph):
    hot = next(s for s in fa.scenarios(small_graph, 8192) if s.name == "hbm-hot-spot")
    first = reference_times(small_graph, hot.flows)
    assert reference_times(small_graph, hot.flows) == first
    assert len(set(first)) > 1  # the flows really do contend


def test_accuracy_report_contract(small_graph):
    rep = fa.accuracy_report(small_graph, sizes=(4096,), contended_bytes=4096)
    assert {"speedup", "uncontended_max_rel_err", "contended"} <= rep.keys()
    assert rep["uncontended_max_rel_err"] < EXACT
    names = [s["name"] for s in rep["contended"]]
    assert names == ["two-flows-one-link", "eight-flows-one-link", "hbm-hot-spot",
                     "mesh-crossing", "torus2d-row-step", "slice-read-write"]
    for s in rep["contended"]:
        assert {"name", "flows", "makespan_rel_err", "mean_completion_rel_err"} <= s.keys()
    by = {s["name"]: s for s in rep["contended"]}
    assert by["two-flows-one-link"]["flows"] == 2 and by["eight-flows-one-link"]["flows"] == 8
    # k flows on one route: both models give Ovhd + Wire + k x Drain
    assert by["eight-flows-one-link"]["makespan_rel_err"] < EXACT
    assert rep["speedup"] > 1.0


@pytest.fixture(scope="module")
def contended_default(default_graph):
    """Every contended scenario on the default topology at the benchmark's size."""
    return {s.name: s for s in fa.contended(default_graph)}


@pytest.mark.parametrize("name", fa.SCENARIOS)
def test_every_contended_scenario_is_within_the_targets(contended_default, name):
    """Interleaved links: makespan within 5 % and mean completion within 10 % of the
    packet reference on every scenario (benchmarks/fabric_reference.py)."""
    s = contended_default[name]
    assert s.shared_links > 0, "the scenario must share links to mean anything"
    assert s.makespan_rel_err <= 0.05, (name, s.analytic_makespan_ns, s.reference_makespan_ns)
    assert s.mean_completion_rel_err <= 0.10, (name, s.analytic_mean_completion_ns,
                                               s.reference_mean_completion_ns)


def test_fifo_bookings_miss_where_packets_interleave(with_sharing):
    """The alternative the default replaced: whole transfers in turn get the mean
    completion of flows sharing one route wrong by far more than 10 %."""
    graph = with_sharing("small_2x2", "fifo")
    s = fa.compare(graph, fa.scenario(graph, "eight-flows-one-link", 16 * 1024))
    assert s.makespan_rel_err < 0.01 and s.mean_completion_rel_err > 0.3
