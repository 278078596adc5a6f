"""The compiled twins of the hot modules (``kernbench.native``): loaded only while they
match the source, and giving byte for byte the results of pure Python.

The README's test command builds the twins (``scripts/setup``), so the comparison runs
in CI; after an edit to the package, it fails until the next build (a stale build is
never used, so there is nothing compiled to compare).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from kernbench import native

from .conftest import ROOT

MODELS = ROOT / "config" / "models"
# CLI runs that cross the compiled modules: fair-shared links under contention (both
# all-to-all algorithms, the ring all-reduce), causal ring prefill and decode attention,
# one GEMM, composites, MoE and dense model steps (FIFO links)
CASES = [
    ["alltoall", "--topology", "sips3_ring", "--bytes-per-pe", "12288", "--json"],
    ["alltoall", "--topology", "sips3_ring", "--algorithm", "a2a_direct", "--bytes-per-pe",
     "12288", "--json"],
    ["allreduce", "--topology", "sips3_ring", "--algorithm", "ring", "--bytes-per-pe", "65536",
     "--json"],
    ["attention", "--mode", "prefill", "--context", "1024", "--C", "4", "--P", "4", "--json"],
    ["attention", "--mode", "decode", "--context", "16384", "--json"],
    ["gemm", "--m", "512", "--k", "512", "--n", "512", "--json"],
    ["run", "--bench", "gemm-composite"],
    ["model", "--model", str(MODELS / "tiny-moe.yaml"), "--topology", "small_2x2", "--phase",
     "decode", "--batch", "2", "--context", "64", "--moe-parallel", "ep", "--json"],
    ["model", "--model", str(MODELS / "tiny-gqa.yaml"), "--topology", "small_2x2", "--phase",
     "prefill", "--batch", "1", "--context", "128", "--set", "fabric.sharing=fifo", "--json"],
]
DRIVER = """
import contextlib, io, json, sys
import kernbench.native as native
from kernbench.cli.main import main
outputs = []
for args in json.loads(sys.argv[1]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(args)
    outputs.append([code, out.getvalue()])
print(json.dumps({"status": native.status(), "outputs": outputs}))
"""


def _run(pure: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    if pure:
        env[native.PURE_ENV] = "1"
    proc = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(CASES)], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_compiled_twins_give_the_results_of_pure_python():
    with ThreadPoolExecutor(2) as pool:
        compiled, pure = pool.map(_run, (False, True))
    assert pure["status"] == f"pure: {native.PURE_ENV}=1"
    assert compiled["status"].startswith("compiled"), (
        f"the compiled twins were not used ({compiled['status']}): run scripts/setup")
    for args, c, p in zip(CASES, compiled["outputs"], pure["outputs"], strict=True):
        assert c[0] == p[0] == 0, args
        assert c[1] == p[1], f"compiled and pure Python differ on: kernbench {' '.join(args)}"


def test_the_twins_load_only_while_the_digest_matches(tmp_path):
    """A build whose digest is not the sources' is ignored; so is one asked off."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text("x = 1\n")
    before = native.source_digest(package)
    (package / "a.py").write_text("x = 2\n")
    assert native.source_digest(package) != before

    build = tmp_path / "build"
    build.mkdir()
    stale = {"digest": before, "mypy": "x", "modules": [], "files": {"m": "m.so"}}
    (build / native.MANIFEST).write_text(json.dumps(stale))
    assert native.decide(build, package, {}) == ("pure: the sources changed since the last "
                                                "build (scripts/setup rebuilds)", None)
    fresh = dict(stale, digest=native.source_digest(package))
    (build / native.MANIFEST).write_text(json.dumps(fresh))
    status, files = native.decide(build, package, {})
    assert status.startswith("compiled") and files == {"m": build / "m.so"}
    assert native.decide(build, package, {native.PURE_ENV: "1"})[1] is None
    assert native.decide(tmp_path / "none", package, {})[1] is None


def test_the_build_holds_every_listed_module():
    manifest = native.read_manifest()
    assert manifest is not None, "no native build: run scripts/setup"
    assert manifest["modules"] == list(native.MODULES)
    assert set(native.MODULES) <= set(manifest["files"])


CYCLES = """
import gc, json
from pathlib import Path
import kernbench.native as native
from kernbench.experiments.gqa.prefill_run import run_prefill
from kernbench.topology import load_topology
graph = load_topology(Path("config/topologies/default.yaml"))
gc.collect()
gc.disable()
run = run_prefill(graph, 1024, C=4, P=4)  # kept: the engine and its state are not garbage
gc.set_debug(gc.DEBUG_SAVEALL)
gc.collect()
kinds = sorted({type(o).__name__ for o in gc.garbage})
print(json.dumps({"status": native.status(), "garbage": len(gc.garbage), "kinds": kinds}))
"""


def _run_compiled(script: str, timeout: int) -> dict:
    """Run ``script`` in a fresh interpreter on the compiled twins; its JSON output."""
    env = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    assert got["status"].startswith("compiled"), f"not compiled: {got['status']}"
    return got


def test_a_compiled_run_leaves_no_reference_cycles():
    """Runs keep the cyclic collector off (``quiet_collector``, ``kernbench job``), so
    what an op leaves in a reference cycle stays until the run ends. Compiled, a closure
    that another closure calls keeps its frame in such a cycle: a causal ring prefill
    (IPCQ sends and receives on fair-shared links) must leave none."""
    got = _run_compiled(CYCLES, timeout=600)
    assert got["garbage"] == 0, f"objects left in reference cycles: {got['kinds']}"


def test_the_hot_paths_clock_reads_what_simpy_reports():
    """``clock.sim_now`` reads SimPy's private attribute behind ``Environment.now``: it
    must follow the clock at every step (a SimPy that renamed it would fail here)."""
    import simpy

    from kernbench.components.clock import sim_now

    env = simpy.Environment()
    seen = []

    def ticker():
        for delay in (0.0, 1.5, 0.25, 3.0, 1e-9):
            yield env.timeout(delay)
            seen.append((sim_now(env), env.now))

    env.process(ticker())
    assert sim_now(env) == env.now == 0
    env.run()
    assert [a for a, _ in seen] == [b for _, b in seen] == [0.0, 1.5, 1.75, 4.75, 4.75 + 1e-9]


READ_ONLY = """
import json
from kernbench import native
from kernbench.components.tiling import gemm_tiles
from kernbench.topology import load_topology
graph = load_topology("config/topologies/small_2x2.yaml")
targets = [(graph.edges[0], "bw_gbs"), (next(iter(graph.nodes.values())), "overhead_ns"),
           (gemm_tiles(64, 64, 64, 32, 32, 32, 1)[0], "k0")]
refused = []
for obj, field in targets:
    try:
        setattr(obj, field, getattr(obj, field) + 1)
    except AttributeError:
        refused.append(field)
print(json.dumps({"status": native.status(), "refused": refused}))
"""


def test_the_compiled_graph_and_supertiles_are_read_only():
    """Edges, nodes and supertile walks are shared by every engine of a graph (and the
    walks cached), so their fields are ``Final``: the compiled classes must refuse an
    assignment, as the frozen dataclasses they replaced did."""
    got = _run_compiled(READ_ONLY, timeout=300)
    assert got["refused"] == ["bw_gbs", "overhead_ns", "k0"]
