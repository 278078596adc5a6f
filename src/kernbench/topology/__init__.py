"""Topology: spec loading + validation, mesh generation, graph compilation, views."""

from kernbench.topology.builder import compile_topology, load_topology
from kernbench.topology.graph import Edge, Node, TopologyGraph, View
from kernbench.topology.spec import TopologySpec, load_spec

__all__ = ["Edge", "Node", "TopologyGraph", "TopologySpec", "View", "compile_topology",
           "load_spec", "load_topology"]
