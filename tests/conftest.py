"""Shared fixtures: compiled topologies are built once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernbench.policy.routing import PathRouter
from kernbench.topology import load_topology

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGIES = ROOT / "config" / "topologies"


@pytest.fixture(scope="session")
def default_graph():
    return load_topology(TOPOLOGIES / "default.yaml")


@pytest.fixture(scope="session")
def ideal_graph():
    """The default topology with the ideal GEMM array (a weight block per cycle)."""
    return load_topology(TOPOLOGIES / "array_ideal.yaml")


@pytest.fixture(scope="session")
def default_router(default_graph):
    return PathRouter(default_graph)


@pytest.fixture(scope="session")
def small_graph():
    return load_topology(TOPOLOGIES / "small_2x2.yaml")
