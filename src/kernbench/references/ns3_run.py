"""Time packet flows on ns-3 point-to-point links (runs under ``.venv-refs``, not KernBench).

Reads one JSON request on stdin and prints one JSON answer as the last line of
stdout (``references/ns3.py`` builds the request and reads the answer):

* request: ``{"nodes": [name], "links": [{"src", "dst", "bw_gbs", "delay_ns"}],
  "flows": [{"name", "path": [node], "packets": [payload bytes], "start_ns"}],
  "header_bytes": int}``; links are directed, 1 GB/s = 8e9 bit/s;
* answer: ``{"completions_ns": {flow: ns}, "packets": int}``, a completion
  being when the flow's last packet reached its destination's IP layer
  (FlowMonitor's ``timeLastRxPacket``).

Each directed link is its own point-to-point channel (the reverse device stays
idle), so both directions of a pair may differ. Static host routes pin every
flow to its path. Packets are UDP datagrams sized so that UDP + IPv4 + PPP
(30 bytes) add up to the requested header. A source hands its next packet to
the stack when the previous one starts serialising on the first link (one
packet waiting at a time), which is back to back when the link is free and is
the source model of the packet reference: a whole burst queued at once would
instead let a local flow overtake every transit packet at a shared link.
That pacing and the statistics are small C++ helpers compiled by cppyy,
because Python callbacks from ns-3 trace sources are awkward in the bindings.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

STACK_HEADER = 2 + 20 + 8  # PPP + IPv4 + UDP bytes that ns-3 puts on every datagram
BASE_PORT = 9000
STOP_AFTER_S = 1.0  # after the last start: far beyond any traffic (FlowMonitor never idles)
# The ns-3 modules a run uses, in link order (each after those it links against). The
# wheel's own ``from ns import ns`` parses the headers of all ~50 modules (Wi-Fi, LTE,
# ...) and takes 13-20 s; these eight take about 2.5 s (docs/adr/0051).
MODULES = ("core", "network", "stats", "traffic-control", "internet", "point-to-point",
           "applications", "flow-monitor")

HELPERS = r"""
#include <map>
#include <vector>

namespace kbref {

// A UDP source that keeps at most one packet waiting: the next one is sent when
// the previous one starts serialising on the source's first device.
struct PacedSource {
    ns3::Ptr<ns3::Socket> socket;
    std::vector<uint32_t> sizes;
    size_t next = 0;
    uint64_t pending = 0;
    bool waiting = false;  // a packet of ours is queued and not yet on the wire

    void SendNext() {
        if (next >= sizes.size()) return;
        ns3::Ptr<ns3::Packet> p = ns3::Create<ns3::Packet>(sizes[next++]);
        pending = p->GetUid();
        waiting = true;
        NS_ABORT_MSG_IF(socket->Send(p) < 0, "UDP send failed");
    }

    void OnTxBegin(ns3::Ptr<const ns3::Packet> p) {
        if (!waiting || p->GetUid() != pending) return;
        waiting = false;
        ns3::Simulator::ScheduleNow(&PacedSource::SendNext, this);
    }
};

PacedSource* StartSource(ns3::Ptr<ns3::Node> node, ns3::Ptr<ns3::NetDevice> first,
                         ns3::Ipv4Address dst, uint16_t port,
                         std::vector<uint32_t> sizes, int64_t at_ps) {
    auto* src = new PacedSource();  // lives as long as the process (one run per process)
    src->socket = ns3::Socket::CreateSocket(node, ns3::UdpSocketFactory::GetTypeId());
    src->socket->Bind();
    src->socket->Connect(ns3::InetSocketAddress(dst, port));
    src->sizes = sizes;
    first->TraceConnectWithoutContext(
        "PhyTxBegin", ns3::MakeCallback(&PacedSource::OnTxBegin, src));
    ns3::Simulator::Schedule(ns3::PicoSeconds(at_ps), &PacedSource::SendNext, src);
    return src;
}

// Destination port -> {received packets, time of the last one in ps}.
std::map<uint16_t, std::vector<int64_t>> LastArrivals(ns3::FlowMonitorHelper& helper) {
    std::map<uint16_t, std::vector<int64_t>> out;
    auto classifier = ns3::DynamicCast<ns3::Ipv4FlowClassifier>(helper.GetClassifier());
    for (const auto& [id, stats] : helper.GetMonitor()->GetFlowStats()) {
        auto tuple = classifier->FindFlow(id);
        if (tuple.protocol != 17 || stats.rxPackets == 0) continue;
        out[tuple.destinationPort] = {stats.rxPackets, stats.timeLastRxPacket.GetPicoSeconds()};
    }
    return out;
}

}  // namespace kbref
"""


def build_links(ns, request: dict, mtu: int) -> tuple[dict, dict, dict]:
    """One channel per directed link; returns nodes, devices and addresses by (src, dst)."""
    names = request["nodes"]
    container = ns.NodeContainer()
    container.Create(len(names))
    nodes = {name: container.Get(i) for i, name in enumerate(names)}
    stack = ns.InternetStackHelper()
    stack.SetRoutingHelper(ns.Ipv4StaticRoutingHelper())  # routes are ours, nothing global
    stack.Install(container)
    address = ns.Ipv4AddressHelper()
    address.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.252"))
    devices, addresses = {}, {}
    for link in request["links"]:
        p2p = ns.PointToPointHelper()
        bps = round(link["bw_gbs"] * 8e9)
        p2p.SetDeviceAttribute("DataRate", ns.DataRateValue(ns.DataRate(bps)))
        p2p.SetDeviceAttribute("Mtu", ns.UintegerValue(mtu))
        p2p.SetChannelAttribute("Delay", ns.TimeValue(ns.PicoSeconds(round(link["delay_ns"] * 1e3))))
        key = (link["src"], link["dst"])
        if key in devices:
            raise ValueError(f"link {key} given twice")
        pair = p2p.Install(nodes[key[0]], nodes[key[1]])
        iface = address.Assign(pair)
        address.NewNetwork()
        devices[key] = (pair.Get(0), pair.Get(1))
        addresses[key] = (iface.GetAddress(0), iface.GetAddress(1))
    return nodes, devices, addresses


def add_routes(ns, flows: list[dict], nodes: dict, devices: dict, addresses: dict) -> list:
    """Host routes along every flow's path; returns each flow's destination address."""
    routing = ns.Ipv4StaticRoutingHelper()
    chosen: dict[tuple[str, str], tuple[str, str]] = {}
    targets = []
    for flow in flows:
        path = flow["path"]
        hops = list(zip(path, path[1:], strict=False))
        if not hops or any(h not in devices for h in hops):
            raise ValueError(f"flow {flow['name']!r}: every hop of its path needs a link")
        dst = addresses[hops[-1]][1]
        for a, b in hops:
            key = (a, str(dst))
            if chosen.setdefault(key, (a, b)) != (a, b):
                raise ValueError(f"flow {flow['name']!r}: node {a} already routes {dst} elsewhere")
            ipv4 = nodes[a].GetObject[ns.Ipv4]()
            interface = ipv4.GetInterfaceForDevice(devices[(a, b)][0])
            routing.GetStaticRouting(ipv4).AddHostRouteTo(dst, addresses[(a, b)][1], interface)
        targets.append(dst)
    return targets


def datagrams(flow: dict, header_bytes: int) -> list[int]:
    """UDP payload sizes that make each packet ``payload + header_bytes`` on the wire."""
    sizes = [size + header_bytes - STACK_HEADER for size in flow["packets"]]
    if not sizes or min(sizes) < 0:
        raise ValueError(f"flow {flow['name']!r}: needs packets, and header_bytes >= "
                         f"{STACK_HEADER} minus its smallest packet")
    return sizes


def simulate(ns, cppyy, request: dict) -> dict:
    """Build the network, run it, and read every flow's last arrival."""
    flows, header = request["flows"], int(request["header_bytes"])
    sizes = [datagrams(f, header) for f in flows]
    mtu = max(max(s) for s in sizes) + STACK_HEADER - 2  # the IPv4 packet, PPP excluded
    if mtu > 65535:
        raise ValueError("a packet larger than an IPv4 datagram")
    nodes, devices, addresses = build_links(ns, request, max(mtu, 1500))  # never below PPP's default
    targets = add_routes(ns, flows, nodes, devices, addresses)
    for i, (flow, dst, payloads) in enumerate(zip(flows, targets, sizes, strict=True)):
        port = BASE_PORT + i
        first, last = flow["path"][0], flow["path"][-1]
        sink = ns.PacketSinkHelper("ns3::UdpSocketFactory",
                                   ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo())
        sink.Install(nodes[last]).Start(ns.Seconds(0))
        vector = cppyy.gbl.std.vector["uint32_t"](payloads)
        start_ps = round(float(flow["start_ns"]) * 1e3)
        cppyy.gbl.kbref.StartSource(nodes[first], devices[(first, flow["path"][1])][0], dst,
                                    port, vector, start_ps)
    monitor = ns.FlowMonitorHelper()
    monitor.InstallAll()
    last_start_ps = max(round(float(f["start_ns"]) * 1e3) for f in flows)
    ns.Simulator.Stop(ns.PicoSeconds(last_start_ps) + ns.Seconds(STOP_AFTER_S))
    ns.Simulator.Run()
    arrivals = cppyy.gbl.kbref.LastArrivals(monitor)
    completions = {}
    for i, flow in enumerate(flows):
        got = arrivals[BASE_PORT + i] if arrivals.count(BASE_PORT + i) else [0, 0]
        if got[0] != len(flow["packets"]):
            raise RuntimeError(f"flow {flow['name']!r}: {got[0]} of {len(flow['packets'])} "
                               "packets arrived")
        completions[flow["name"]] = got[1] / 1e3
    ns.Simulator.Destroy()
    return {"completions_ns": completions, "packets": sum(len(f["packets"]) for f in flows)}


def load_ns3():
    """(the ``ns3`` C++ namespace, cppyy) with only :data:`MODULES` declared and loaded."""
    spec = importlib.util.find_spec("ns3")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'ns'", name="ns")
    prefix = Path(next(iter(spec.submodule_search_locations)))
    import cppyy
    import libcppyy

    libcppyy.AddSmartPtrType("Ptr")  # ns3::Ptr<T> behaves as the T it points to
    libs = prefix / "lib64" if (prefix / "lib64").is_dir() else prefix / "lib"
    cppyy.add_library_path(str(libs))
    cppyy.add_include_path(str(prefix / "include"))
    for module in MODULES:
        cppyy.include(f"ns3/{module}-module.h")
    for module in MODULES:
        found = sorted(libs.glob(f"libns3*-{module}.so"))
        if len(found) != 1:
            raise RuntimeError(f"expected one ns-3 {module} library in {libs}, found {found}")
        cppyy.load_library(str(found[0]))
    return cppyy.gbl.ns3, cppyy


def main() -> None:
    request = json.load(sys.stdin)
    # This directory holds KernBench's ns3.py, which would shadow the ns3 package.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    ns, cppyy = load_ns3()  # after reading stdin so a bad request fails first

    ns.Time.SetResolution(ns.Time.PS)  # before any Time exists
    ns.Config.SetDefault("ns3::DropTailQueue<Packet>::MaxSize", ns.StringValue("1000000p"))
    ns.Config.SetDefault("ns3::PfifoFastQueueDisc::MaxSize", ns.StringValue("1000000p"))
    cppyy.cppdef(HELPERS)
    answer = simulate(ns, cppyy, request)
    print(json.dumps(answer, sort_keys=True))


if __name__ == "__main__":
    main()
