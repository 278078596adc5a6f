"""Run the probe catalog, compare with the analytic formula, check invariants.

Every case runs alone in a fresh :class:`GraphEngine` (no cross-talk). The
formula is computed from the topology's nodes and edges along the flow's
route, independently of the engine's timing code:

    Ovhd  = sum of node overheads over every leg
    Wire  = sum of edge distance x ns_per_mm over every leg
    Drain = nbytes / BN.BW, BN.BW = slowest edge (or HBM slice) of the data leg
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernbench.errors import UsageError
from kernbench.policy.routing import PathRouter
from kernbench.probes.catalog import ProbeCase, build_catalog
from kernbench.probes.formula import predict
from kernbench.sim_engine.chrome_trace import write_chrome_trace
from kernbench.sim_engine.engine import GraphEngine
from kernbench.topology import load_topology
from kernbench.topology.graph import TopologyGraph
from kernbench.units import KiB, MiB, format_size

SUMMARY_BYTES = 32 * KiB
SWEEP_SIZES = (4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB)
FORMULA_TOLERANCE = 0.01  # Actual must match Ovhd + Wire + Drain within 1 %


@dataclass
class LegReport:
    label: str
    nodes: list[str]
    hop_ns: list[float]  # cumulative head time per node, ns since issue
    nbytes: int
    bottleneck_edge: list[str] | None
    bottleneck_gbs: float


@dataclass
class CaseReport:
    name: str
    category: str
    description: str
    nbytes: int
    actual_ns: float
    overhead_ns: float
    wire_ns: float
    drain_ns: float
    formula_ns: float
    rel_error: float
    eff_bw_gbs: float
    bn_bw_gbs: float
    util_pct: float
    hops: int
    min_hop_ns: float  # smallest per-hop (overhead + wire) increment
    legs: list[LegReport] = field(default_factory=list)


@dataclass
class Invariant:
    name: str
    passed: bool
    detail: str


@dataclass
class ProbeReport:
    topology: str
    topology_hash: str
    nbytes: int
    cases: list[CaseReport]
    sweep_sizes: list[int]
    sweep: dict[str, list[dict]]  # case -> [{nbytes, actual_ns, util_pct}]
    invariants: list[Invariant]

    @property
    def ok(self) -> bool:
        return all(inv.passed for inv in self.invariants)

    def to_json(self) -> dict:
        return asdict(self)


def run_case(graph: TopologyGraph, case: ProbeCase, nbytes: int,
             router: PathRouter | None = None, op_logs: list | None = None) -> CaseReport:
    """Run ``case`` alone in a fresh engine; append its op log to ``op_logs`` if given."""
    engine = GraphEngine(graph, router=router)
    flow = case.flow(engine, nbytes)
    event = engine.submit(flow)
    engine.run()
    result = event.value
    if op_logs is not None:
        op_logs.append((f"case {case.name}", engine.op_log.records))
    model = predict(graph, flow)
    ovhd, wire, drain, bn = model.overhead_ns, model.wire_ns, model.drain_ns, model.bottleneck_gbs
    expected = ovhd + wire + drain
    actual = result.total_ns
    legs = []
    increments = []
    for spec, leg in zip(flow.legs, result.legs, strict=True):
        hops = [t - result.issue_ns for t in leg.hop_ns]
        increments += [b - a for a, b in zip(hops, hops[1:], strict=False)]
        bn_edge = list(leg.plan.bottleneck_edge) if (spec.nbytes and leg.plan.bottleneck_edge) else None
        legs.append(LegReport(spec.label, list(spec.nodes), hops, spec.nbytes, bn_edge,
                              leg.bottleneck_gbs if spec.nbytes else 0.0))
    eff = nbytes / actual if actual > 0 else 0.0
    return CaseReport(
        name=case.name, category=case.category, description=case.description, nbytes=nbytes,
        actual_ns=actual, overhead_ns=ovhd, wire_ns=wire, drain_ns=drain, formula_ns=expected,
        rel_error=abs(actual - expected) / expected if expected else 0.0,
        eff_bw_gbs=eff, bn_bw_gbs=bn, util_pct=100.0 * eff / bn if bn > 0 else 0.0,
        hops=sum(len(leg.nodes) - 1 for leg in flow.legs),
        min_hop_ns=min(increments) if increments else 0.0, legs=legs,
    )


def _check_invariants(cases: list[CaseReport]) -> list[Invariant]:
    by = {c.name: c for c in cases}
    out: list[Invariant] = []
    for cat in ("h2d", "d2h"):
        seq = [c for c in cases if c.category == cat]
        if len(seq) > 1:
            lats = [c.actual_ns for c in seq]
            ok = all(a < b for a, b in zip(lats, lats[1:], strict=False))
            out.append(Invariant(f"{cat.upper()} latency rises with hop count", ok,
                                 " < ".join(f"{x:.1f}" for x in lats)))
    h2d = [c for c in cases if c.category == "h2d"]
    d2h = [c for c in cases if c.category == "d2h"]
    pairs = [(a, b) for a in h2d for b in d2h if a.name.split("-", 1)[1] == b.name.split("-", 1)[1]]
    if pairs:
        ok = all(b.actual_ns >= a.actual_ns for a, b in pairs)
        out.append(Invariant("D2H >= H2D at every hop count", ok,
                             ", ".join(f"{b.actual_ns:.1f}>={a.actual_ns:.1f}" for a, b in pairs)))
    best, worst = by.get("pe-cross-cube-hbm-best"), by.get("pe-cross-cube-hbm-worst")
    if best and worst:
        out.append(Invariant("PE DMA cross-cube best < worst", best.actual_ns < worst.actual_ns,
                             f"{best.actual_ns:.1f} < {worst.actual_ns:.1f}"))
    local = by.get("pe-local-hbm")
    remote = [c for c in cases if c.category == "pe_dma" and c is not local]
    if local and remote:
        ok = all(local.actual_ns < c.actual_ns for c in remote)
        out.append(Invariant("PE DMA local slice is the fastest PE DMA case", ok,
                             f"local {local.actual_ns:.1f} ns, BN {local.bn_bw_gbs:g} GB/s; remote BN "
                             + "/".join(f"{c.bn_bw_gbs:g}" for c in remote) + " GB/s"))
    if cases:
        worst_err = max(cases, key=lambda c: c.rel_error)
        out.append(Invariant("Actual = Ovhd + Wire + Drain within 1 % for every case",
                             worst_err.rel_error <= FORMULA_TOLERANCE,
                             f"largest error {100 * worst_err.rel_error:.4f} % ({worst_err.name})"))
        min_hop = min(cases, key=lambda c: c.min_hop_ns)
        out.append(Invariant("every hop costs > 0 ns", min_hop.min_hop_ns > 0,
                             f"smallest hop {min_hop.min_hop_ns:.3f} ns ({min_hop.name})"))
        over = [c.name for c in cases if c.eff_bw_gbs > c.bn_bw_gbs * (1 + 1e-9)]
        out.append(Invariant("Eff.BW never exceeds BN.BW", not over,
                             "all within bound" if not over else "exceeded: " + ", ".join(over)))
    return out


def run_probe(topology_path: str | Path, case_filter: str | None = None,
              sweep_sizes: tuple[int, ...] = SWEEP_SIZES,
              nbytes: int = SUMMARY_BYTES, trace_path: str | Path | None = None) -> ProbeReport:
    graph = load_topology(topology_path)
    catalog = build_catalog(graph.spec)
    if case_filter not in (None, "all"):
        catalog = [c for c in catalog if c.name == case_filter]
        if not catalog:
            names = ", ".join(c.name for c in build_catalog(graph.spec))
            raise UsageError(f"unknown probe case {case_filter!r} (available: {names})")
    op_logs: list = []
    cases = [run_case(graph, c, nbytes, op_logs=op_logs) for c in catalog]
    if trace_path:
        write_chrome_trace(op_logs, trace_path)
    sweep = {
        c.name: [
            {"nbytes": n, "actual_ns": r.actual_ns, "util_pct": r.util_pct}
            for n in sweep_sizes
            for r in [run_case(graph, c, n)]
        ]
        for c in catalog
    }
    return ProbeReport(graph.spec.name, graph.spec.content_hash(), nbytes, cases,
                       list(sweep_sizes), sweep, _check_invariants(cases))


# -- text rendering -------------------------------------------------------------

def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:5.1f}" if whole else "  -  "


def format_report(rep: ProbeReport) -> str:
    lines = [f"kernbench probe: topology {rep.topology} ({rep.topology_hash}), "
             f"summary at {format_size(rep.nbytes)}", ""]
    head = (f"{'Case':26s} {'Hops':>4s} {'Actual':>9s} {'Ovhd':>8s} {'Wire':>7s} {'Drain':>8s} "
            f"{'Ovhd%':>5s} {'Drn%':>5s} {'Eff.BW':>7s} {'BN.BW':>6s} {'Util%':>6s}")
    for cat in ("h2d", "d2h", "pe_dma", "mcpu_dma"):
        group = [c for c in rep.cases if c.category == cat]
        if not group:
            continue
        lines += [f"[{cat.upper()}] times in ns, bandwidth in GB/s", head, "-" * len(head)]
        for c in group:
            lines.append(
                f"{c.name:26s} {c.hops:4d} {c.actual_ns:9.1f} {c.overhead_ns:8.1f} {c.wire_ns:7.2f} "
                f"{c.drain_ns:8.1f} {_pct(c.overhead_ns, c.actual_ns)} {_pct(c.drain_ns, c.actual_ns)} "
                f"{c.eff_bw_gbs:7.1f} {c.bn_bw_gbs:6g} {c.util_pct:6.1f}")
        lines.append("")
    if rep.sweep:
        labels = [format_size(n) for n in rep.sweep_sizes]
        lines.append("Size sweep: latency ns (util %)")
        lines.append(f"{'Case':26s} " + " ".join(f"{lab:>17s}" for lab in labels))
        for name, points in rep.sweep.items():
            cells = " ".join(f"{p['actual_ns']:10.1f} ({p['util_pct']:4.1f})" for p in points)
            lines.append(f"{name:26s} {cells}")
        lines.append("")
    lines.append("Route details (cumulative head time per hop, ns)")
    for c in rep.cases:
        lines.append(f"* {c.name}: {c.description}")
        for leg in c.legs:
            bn = set()
            if leg.bottleneck_edge:
                bn = {leg.bottleneck_edge[1]}
            parts = []
            for node, t in zip(leg.nodes, leg.hop_ns, strict=True):
                mark = f" <BN:{leg.bottleneck_gbs:g}GB/s>" if node in bn else ""
                parts.append(f"{node}@{t:.1f}{mark}")
            drain = f" + drain:{leg.nbytes / leg.bottleneck_gbs:.1f}ns" if leg.nbytes else ""
            lines.append(f"    {leg.label:7s} " + " -> ".join(parts) + drain)
    lines.append("")
    lines.append("Invariants")
    for inv in rep.invariants:
        lines.append(f"[{'v' if inv.passed else 'x'}] {'PASS' if inv.passed else 'FAIL'} "
                     f"{inv.name}: {inv.detail}")
    return "\n".join(lines) + "\n"
