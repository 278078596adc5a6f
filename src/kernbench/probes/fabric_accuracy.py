"""How far the analytic fabric is from a packet-level reference, on the same flows.

Every scenario builds its FlowSpecs once and times them on both models: the
analytic engine (a fresh :class:`GraphEngine` per scenario) and the packet
reference (a fresh :class:`PacketReference` per scenario). The reference is
taken as the truth, so a relative error is ``|analytic - reference| /
reference``. Shared by ``benchmarks/fabric_reference.py`` and the paper pipeline.

* :func:`uncontended` runs every probe flow alone at each size;
* :func:`contended` runs flows that start together and share links or an HBM
  slice, and compares makespans and mean completion times;
* :func:`accuracy_report` does both and adds the wall-clock speed-up of the
  analytic engine over the reference.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kernbench.ccl.algorithms.torus2d import Torus2d
from kernbench.ccl.group import Group
from kernbench.components.flows import FlowBuilder, FlowSpec, LegSpec
from kernbench.errors import UsageError
from kernbench.policy.address.phys_addr import PhysAddr
from kernbench.policy.routing import PathRouter
from kernbench.probes.catalog import build_catalog, find_case
from kernbench.probes.probe import SWEEP_SIZES
from kernbench.sim_engine.engine import GraphEngine
from kernbench.sim_engine.packet_reference import PacketReference
from kernbench.topology import load_topology
from kernbench.topology.graph import TopologyGraph
from kernbench.units import KiB

UNCONTENDED_SIZES = SWEEP_SIZES  # 4 KiB .. 1 MiB, as the probe sweep
CONTENDED_BYTES = 64 * KiB  # per flow


# -- running one set of flows on each model ------------------------------------------
@dataclass(frozen=True)
class ModelRun:
    """Completion time of each flow (ns from a common start at 0) and the wall time."""

    completions: tuple[float, ...]
    wall_s: float
    packets: int = 0  # packets the reference moved (0 for the analytic engine)


def run_analytic(graph: TopologyGraph, flows: Sequence[FlowSpec],
                 router: PathRouter | None = None) -> ModelRun:
    """Submit ``flows`` together to a fresh GraphEngine and run it.

    The wall time covers submit + run; building the engine (mostly its router,
    which timing never consults for prebuilt flows) is left out, as is building
    the reference, so the speed-up compares the timing models only.
    """
    engine = GraphEngine(graph, router=router, keep_records=False)
    t0 = time.perf_counter()
    events = [engine.submit(f) for f in flows]
    engine.run()
    wall = time.perf_counter() - t0
    return ModelRun(tuple(ev.value.done_ns for ev in events), wall)


def run_reference(graph: TopologyGraph, flows: Sequence[FlowSpec], packet_bytes: int = 256,
                  hbm: str = "slice") -> ModelRun:
    """Submit ``flows`` together to a fresh PacketReference and run it."""
    ref = PacketReference(graph, packet_bytes=packet_bytes, hbm=hbm)
    t0 = time.perf_counter()
    events = [ref.submit(f) for f in flows]
    ref.run()
    wall = time.perf_counter() - t0
    return ModelRun(tuple(ev.value for ev in events), wall, ref.packets)


def rel_err(analytic: float, reference: float) -> float:
    """Relative error of the analytic value, the reference taken as truth."""
    return abs(analytic - reference) / reference


def builder(graph: TopologyGraph, router: PathRouter | None = None) -> GraphEngine:
    """An engine used only to build flows (``ProbeCase.flow`` and ``engine.flows``)."""
    return GraphEngine(graph, router=router, keep_records=False)


# -- uncontended ---------------------------------------------------------------------
@dataclass(frozen=True)
class CaseAccuracy:
    name: str
    category: str
    nbytes: int
    analytic_ns: float
    reference_ns: float
    rel_err: float


@dataclass(frozen=True)
class UncontendedAccuracy:
    cases: tuple[CaseAccuracy, ...]
    analytic_wall_s: float
    reference_wall_s: float

    @property
    def max_rel_err(self) -> float:
        return max(c.rel_err for c in self.cases)


def uncontended(graph: TopologyGraph, sizes: Sequence[int] = UNCONTENDED_SIZES, *,
                packet_bytes: int = 256, hbm: str = "slice",
                router: PathRouter | None = None) -> UncontendedAccuracy:
    """Every probe flow of the catalog at every size, each alone, on both models."""
    flows_from = builder(graph, router)
    cases = []
    wall_a = wall_r = 0.0
    for case in build_catalog(graph.spec):
        for nbytes in sizes:
            flow = case.flow(flows_from, nbytes)
            a = run_analytic(graph, [flow], router)
            r = run_reference(graph, [flow], packet_bytes, hbm)
            wall_a += a.wall_s
            wall_r += r.wall_s
            cases.append(CaseAccuracy(case.name, case.category, nbytes, a.completions[0],
                                      r.completions[0],
                                      rel_err(a.completions[0], r.completions[0])))
    return UncontendedAccuracy(tuple(cases), wall_a, wall_r)


# -- contended -----------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    flows: tuple[FlowSpec, ...]

    def shared_links(self) -> int:
        """Directed edges carrying data of two or more flows of the scenario."""
        use: Counter[tuple[str, str]] = Counter()
        for f in self.flows:
            edges = {e for leg in f.legs if leg.nbytes
                     for e in zip(leg.nodes, leg.nodes[1:], strict=False)}
            use.update(edges)
        return sum(1 for n in use.values() if n > 1)


@dataclass(frozen=True)
class ScenarioAccuracy:
    name: str
    description: str
    flows: int
    shared_links: int
    analytic_makespan_ns: float
    reference_makespan_ns: float
    makespan_rel_err: float
    analytic_mean_completion_ns: float
    reference_mean_completion_ns: float
    mean_completion_rel_err: float
    max_flow_rel_err: float  # worst single flow's completion time
    worst_flow: str  # that flow: kind and initiator
    worst_flow_analytic_ns: float
    worst_flow_reference_ns: float
    analytic_wall_s: float
    reference_wall_s: float
    reference_packets: int


def _pe_hbm(graph: TopologyGraph, cube: int, pe: int, offset: int) -> PhysAddr:
    return PhysAddr.pe_hbm_addr(0, cube, pe, offset, graph.spec.hbm_slice_bytes)


def _corner_pes(graph: TopologyGraph) -> dict[str, int]:
    """First PE of each corner group of a CUBE (``nw``, ``ne``, ``sw``, ``se``)."""
    out: dict[str, int] = {}
    for p in graph.mesh.pes:
        out.setdefault(p.corner, p.pe)
    return out


def _same_route(flows_from: GraphEngine, name: str, k: int,
                nbytes: int) -> tuple[FlowSpec, ...]:
    """``k`` identical flows of probe case ``name`` at consecutive offsets (one route)."""
    case = find_case(flows_from.graph.spec, name)
    return tuple(case.flow(flows_from, nbytes, offset=i * nbytes) for i in range(k))


def _mesh_crossing(graph: TopologyGraph, fb: FlowBuilder, nbytes: int) -> tuple[FlowSpec, ...]:
    """PE DMA writes across the UCIe mesh (W<->E along the middle row, N<->S down the
    middle column) and across one CUBE's NoC (corner to opposite corner, both ways)."""
    spec = graph.spec
    w, h = spec.cube_w, spec.cube_h
    row, col = h // 2, w // 2
    west, east = row * w, row * w + w - 1
    north, south = col, (h - 1) * w + col
    pairs = []  # (src cube, src pe, dst cube, dst slice)
    if east != west:
        pairs += [(west, 0, east, 0), (west, 1 % spec.pes_per_cube, east, 0), (east, 0, west, 0)]
    if south != north:
        pairs += [(north, 0, south, 0), (south, 0, north, 0)]
    c = _corner_pes(graph)
    for a, b in (("nw", "se"), ("se", "nw"), ("ne", "sw"), ("sw", "ne")):
        if a in c and b in c:
            pairs.append((0, c[a], 0, c[b]))
    return tuple(fb.pe_dma_write(0, sc, sp, _pe_hbm(graph, dc, dp, i * nbytes), nbytes)
                 for i, (sc, sp, dc, dp) in enumerate(pairs))


def _slice_read_write(graph: TopologyGraph, fb: FlowBuilder, nbytes: int) -> tuple[FlowSpec, ...]:
    """Every PE of CUBE 0 reads PE 0's HBM slice while PE 0 of CUBE 1 writes it: reads
    leave the slice first, the write arrives last, and the slice serves both."""
    reads = tuple(fb.pe_dma_read(0, 0, pe, _pe_hbm(graph, 0, 0, pe * nbytes), nbytes)
                  for pe in range(graph.spec.pes_per_cube))
    cube = 1 % graph.spec.cubes_per_sip
    write = fb.pe_dma_write(0, cube, 0, _pe_hbm(graph, 0, 0, len(reads) * nbytes), nbytes)
    return (*reads, write)


def row_step_flows(graph: TopologyGraph, nbytes: int) -> tuple[FlowSpec, ...]:
    """One torus2d all-reduce row step: every rank sends ``nbytes`` to its ``row_next``
    neighbour at once, over the IPCQ message routes (rows wrap across SIPs)."""
    tables = Torus2d(Group.from_spec(graph.spec)).directions()
    fb = builder(graph).flows
    out = []
    for a, table in sorted(tables.items()):
        if "row_next" in table:
            nodes = fb.ipcq_message(a, table["row_next"], "tcm")
            out.append(FlowSpec("ipcq_message", nodes[1], nbytes,
                                (LegSpec("data", nodes, nbytes),), nodes[0], nodes[-1]))
    return tuple(out)


ROW_STEP_TOPOLOGY = "sips6_mesh.yaml"  # 2 x 3 SIPs without wrap links, next to the given file
ROW_STEP_BYTES = 4 * KiB  # one IPCQ slot per message
SCENARIOS = ("two-flows-one-link", "eight-flows-one-link", "hbm-hot-spot", "mesh-crossing",
             "torus2d-row-step", "slice-read-write")


def scenario_graph(graph: TopologyGraph, name: str) -> TopologyGraph:
    """The topology a scenario runs on: ``graph``, except the row step, which needs SIP
    rows that wrap across an intermediate SIP (``sips6_mesh.yaml`` beside ``graph``'s
    file, with ``graph``'s link sharing)."""
    if name != "torus2d-row-step":
        return graph
    return _mesh_for(Path(graph.spec.source).parent / ROW_STEP_TOPOLOGY, graph.spec.sharing)


@functools.cache
def _mesh_for(path: Path, sharing: str) -> TopologyGraph:
    return load_topology(path, {"fabric.sharing": sharing})


def scenario(graph: TopologyGraph, name: str, nbytes: int = CONTENDED_BYTES,
             router: PathRouter | None = None) -> Scenario:
    """One contended scenario (every flow starts at t = 0); ``name`` in :data:`SCENARIOS`."""
    flows_from = builder(graph, router)
    fb = flows_from.flows
    spec = graph.spec
    one_link = "pe-cross-cube-hbm-best" if spec.cubes_per_sip > 1 else "pe-local-hbm"
    pes = spec.pes_per_cube
    if name == "two-flows-one-link":
        return Scenario(name, f"2 x {one_link} over the same route",
                        _same_route(flows_from, one_link, 2, nbytes))
    if name == "eight-flows-one-link":
        return Scenario(name, f"8 x {one_link} over the same route",
                        _same_route(flows_from, one_link, 8, nbytes))
    if name == "hbm-hot-spot":
        return Scenario(name, f"all {pes} PEs of CUBE 0 write PE 0's HBM slice",
                        tuple(fb.pe_dma_write(0, 0, pe, _pe_hbm(graph, 0, 0, pe * nbytes), nbytes)
                              for pe in range(pes)))
    if name == "mesh-crossing":
        return Scenario(name, "W<->E and N<->S across the UCIe mesh, corner to corner across "
                        "CUBE 0's NoC", _mesh_crossing(graph, fb, nbytes))
    if name == "torus2d-row-step":
        mesh = scenario_graph(graph, name)
        return Scenario(name, f"torus2d row step on {mesh.spec.name}: every rank sends "
                        f"{ROW_STEP_BYTES // KiB} KiB to its row neighbour, wrapping across a "
                        f"SIP", row_step_flows(mesh, ROW_STEP_BYTES))
    if name == "slice-read-write":
        return Scenario(name, f"all {pes} PEs of CUBE 0 read PE 0's HBM slice while a PE of "
                        f"another CUBE writes it", _slice_read_write(graph, fb, nbytes))
    raise UsageError(f"unknown scenario {name!r} (known: {', '.join(SCENARIOS)})")


def scenarios(graph: TopologyGraph, nbytes: int = CONTENDED_BYTES,
              router: PathRouter | None = None) -> list[Scenario]:
    """Every contended scenario, in :data:`SCENARIOS` order."""
    return [scenario(graph, name, nbytes, router) for name in SCENARIOS]


def compare(graph: TopologyGraph, scenario: Scenario, *, packet_bytes: int = 256,
            hbm: str = "slice", router: PathRouter | None = None) -> ScenarioAccuracy:
    """Run one scenario on both models and compare makespan and mean completion."""
    target = scenario_graph(graph, scenario.name)
    if target is not graph:  # the row step runs on its own topology (and its own router)
        graph, router = target, None
    a = run_analytic(graph, scenario.flows, router)
    r = run_reference(graph, scenario.flows, packet_bytes, hbm)
    n = len(scenario.flows)
    mean_a, mean_r = sum(a.completions) / n, sum(r.completions) / n
    errs = [rel_err(x, y) for x, y in zip(a.completions, r.completions, strict=True)]
    worst = max(range(n), key=errs.__getitem__)
    flow = scenario.flows[worst]
    return ScenarioAccuracy(
        name=scenario.name, description=scenario.description, flows=n,
        shared_links=scenario.shared_links(),
        analytic_makespan_ns=max(a.completions), reference_makespan_ns=max(r.completions),
        makespan_rel_err=rel_err(max(a.completions), max(r.completions)),
        analytic_mean_completion_ns=mean_a, reference_mean_completion_ns=mean_r,
        mean_completion_rel_err=rel_err(mean_a, mean_r),
        max_flow_rel_err=errs[worst], worst_flow=f"{flow.kind} from {flow.initiator}",
        worst_flow_analytic_ns=a.completions[worst],
        worst_flow_reference_ns=r.completions[worst],
        analytic_wall_s=a.wall_s, reference_wall_s=r.wall_s, reference_packets=r.packets)


def contended(graph: TopologyGraph, nbytes: int = CONTENDED_BYTES, *, packet_bytes: int = 256,
              hbm: str = "slice", router: PathRouter | None = None) -> list[ScenarioAccuracy]:
    """Every contended scenario on both models."""
    return [compare(graph, s, packet_bytes=packet_bytes, hbm=hbm, router=router)
            for s in scenarios(graph, nbytes, router)]


# -- everything ----------------------------------------------------------------------
def accuracy_report(graph: TopologyGraph, *, packet_bytes: int = 256, hbm: str = "slice",
                    sizes: Sequence[int] = UNCONTENDED_SIZES,
                    contended_bytes: int = CONTENDED_BYTES) -> dict:
    """Uncontended and contended accuracy plus speed-up, as one JSON-ready dict.

    ``speedup`` is the reference's wall time over the analytic engine's, summed
    over every flow set both models ran (uncontended and contended).
    """
    unc = uncontended(graph, sizes, packet_bytes=packet_bytes, hbm=hbm)
    con = contended(graph, contended_bytes, packet_bytes=packet_bytes, hbm=hbm)
    wall_a = unc.analytic_wall_s + sum(s.analytic_wall_s for s in con)
    wall_r = unc.reference_wall_s + sum(s.reference_wall_s for s in con)
    worst = max(unc.cases, key=lambda c: c.rel_err)
    return {
        "speedup": wall_r / wall_a,
        "uncontended_max_rel_err": unc.max_rel_err,
        "contended": [{"name": s.name, "flows": s.flows, "makespan_rel_err": s.makespan_rel_err,
                       "mean_completion_rel_err": s.mean_completion_rel_err,
                       **{k: v for k, v in asdict(s).items()
                          if k not in ("name", "flows", "makespan_rel_err",
                                       "mean_completion_rel_err")}}
                      for s in con],
        "topology": graph.spec.name,
        "packet_bytes": packet_bytes,
        "hbm_model": hbm,
        "uncontended_sizes": list(sizes),
        "uncontended_worst_case": asdict(worst),
        "contended_bytes_per_flow": contended_bytes,
        "analytic_wall_s": wall_a,
        "reference_wall_s": wall_r,
        "uncontended": [asdict(c) for c in unc.cases],
    }
