"""The compiled topology: nodes, directed edges and the four view projections."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernbench.topology.mesh_gen import CubeMesh
from kernbench.topology.spec import TopologySpec


@dataclass(frozen=True, slots=True)
class Node:
    """A component instance. ``overhead_ns`` is paid by every request through it."""

    id: str
    kind: str
    overhead_ns: float
    attrs: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class Edge:
    """A directed link. Wire delay is ``distance_mm * ns_per_mm``."""

    src: str
    dst: str
    kind: str
    bw_gbs: float
    distance_mm: float
    ns_per_mm: float

    @property
    def wire_ns(self) -> float:
        return self.distance_mm * self.ns_per_mm


@dataclass(frozen=True)
class ViewNode:
    id: str
    label: str
    kind: str
    x: float
    y: float
    w: float
    h: float


@dataclass(frozen=True)
class ViewEdge:
    src: str
    dst: str
    kind: str
    label: str = ""


@dataclass(frozen=True)
class View:
    """A drawable projection of the graph at one level (system, sip, cube, pe)."""

    name: str
    title: str
    width: float
    height: float
    nodes: tuple[ViewNode, ...]
    edges: tuple[ViewEdge, ...]
    extras: dict[str, Any] = field(default_factory=dict)


class TopologyGraph:
    """Flat node/edge graph plus views. Built once by the builder; read-only after."""

    def __init__(self, spec: TopologySpec, mesh: CubeMesh, nodes: dict[str, Node],
                 edges: list[Edge], views: dict[str, View]) -> None:
        self.spec = spec
        self.mesh = mesh
        self.nodes = nodes
        self.edges = edges
        self.views = views
        self.edge_map: dict[tuple[str, str], Edge] = {(e.src, e.dst): e for e in edges}
        self.out_edges: dict[str, list[Edge]] = {n: [] for n in nodes}
        for e in edges:
            self.out_edges[e.src].append(e)

    def edge(self, src: str, dst: str) -> Edge:
        return self.edge_map[(src, dst)]

    def __contains__(self, node_id: str) -> bool:
        return node_id in self.nodes

    def __repr__(self) -> str:
        return f"TopologyGraph({self.spec.name!r}, {len(self.nodes)} nodes, {len(self.edges)} edges)"
