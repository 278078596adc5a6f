"""Shared fixtures: compiled topologies are built once per test session, the smoke
workflow once per test run (shared by the pytest-xdist workers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernbench import native
from kernbench.policy.routing import PathRouter
from kernbench.topology import load_topology

from .workflow_helpers import build_once, build_smoke

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGIES = ROOT / "config" / "topologies"

# The order the xdist workers take test files in (pyproject: --no-loadscope-reorder, else
# the files with the most tests go first): the long workflow chains first, so they do not
# leave one worker alone at the end while the other has finished; the smoke run's other
# reader last, so it does not wait idle for the build that test_workflow.py starts.
FIRST = ("test_workflow.py", "test_workflow_reruns.py", "test_workflow_execution.py",
         "test_experiment_plugins.py")
LAST = ("test_seed_benches.py",)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(FIRST)}
    rank.update({name: len(FIRST) + 1 for name in LAST})
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))  # stable: files keep order


def pytest_terminal_summary(terminalreporter):
    """Say whether the hot modules ran compiled or as Python (tests/__init__.py)."""
    terminalreporter.write_line(f"kernbench: the tests imported {native.status()}")


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


@pytest.fixture(scope="session")
def with_sharing(tmp_path_factory):
    """``with_sharing(name, policy)``: the shipped topology ``name`` with its links shared
    under ``policy`` (``fabric.sharing``), compiled once per session."""
    folder = tmp_path_factory.mktemp("sharing")
    cache = {}

    def build(name: str, policy: str):
        key = (name, policy)
        if key not in cache:
            path = folder / f"{name}_{policy}.yaml"
            path.write_text(f"schema_version: 1\nextends: {TOPOLOGIES / (name + '.yaml')}\n"
                            f"name: {name}_{policy}\nfabric: {{sharing: {policy}}}\n")
            cache[key] = load_topology(path)
        return cache[key]

    return build


@pytest.fixture(scope="session")
def smoke_build(tmp_path_factory):
    """The finished smoke workflow (config/smoke.yaml, every target), built once per run
    by whichever worker asks first. Read it only: a test that runs Snakemake again works
    in its own copy (``workflow_helpers.clone_run``)."""
    return build_once(tmp_path_factory, "smoke", build_smoke)
