"""The compiled topology: nodes, directed edges (``elements``) and the four view
projections."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from kernbench.topology.elements import Edge, Node
from kernbench.topology.mesh_gen import CubeMesh
from kernbench.topology.spec import TopologySpec


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
    """Flat node/edge graph plus views. Built once by the builder; read-only after.
    The views (drawn only for diagrams) and the outgoing edges per node (the router
    keeps its own) are made when first read."""

    def __init__(self, spec: TopologySpec, mesh: CubeMesh, nodes: dict[str, Node],
                 edges: list[Edge], views: Callable[[], dict[str, View]]) -> None:
        self.spec = spec
        self.mesh = mesh
        self.nodes = nodes
        self.edges = edges
        self._project_views = views
        self.edge_map: dict[tuple[str, str], Edge] = {(e.src, e.dst): e for e in edges}

    @cached_property
    def views(self) -> dict[str, View]:
        return self._project_views()

    @cached_property
    def out_edges(self) -> dict[str, list[Edge]]:
        """Each node's outgoing edges, in edge order (made when first read)."""
        out: dict[str, list[Edge]] = {n: [] for n in self.nodes}
        for e in self.edges:
            out[e.src].append(e)
        return out

    def edge(self, src: str, dst: str) -> Edge:
        return self.edge_map[(src, dst)]

    def __contains__(self, node_id: str) -> bool:
        return node_id in self.nodes

    def __repr__(self) -> str:
        return f"TopologyGraph({self.spec.name!r}, {len(self.nodes)} nodes, {len(self.edges)} edges)"
