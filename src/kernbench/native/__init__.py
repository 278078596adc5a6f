"""Compiled twins of the simulator's hot modules, used only while they match the source.

The modules in :data:`MODULES` are plain Python and stay the only source of truth.
``python -m kernbench.native.build`` (run by ``scripts/setup``) compiles them with
mypyc into ``_build/`` beside this file and records a digest of every ``.py`` of the
package. When ``kernbench`` is imported, :func:`install` puts a finder in front of the
import system that loads the compiled twins, but only if that digest still matches:
after any edit, anywhere in the package, everything runs as pure Python until the
next build, so an edit is never shadowed by stale machine code. It is all or none
because compiled modules call each other directly. ``KERNBENCH_PURE=1`` turns the
twins off (the test suite does, for line coverage and monkeypatching). Simulated
results are byte-identical either way (``tests/test_native.py``; docs/adr/0046).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import json
import os
import sys
from pathlib import Path

# The hot path of a simulation: fabric and link sharing, the PE's units, engines,
# stages, tile streams and hazards, the op log, tensor handles and completions, the MMU
# and the supertile walk, and a composite's ops. Not the commands (mypyc orders the
# fields of inherited dataclasses differently) nor the tl surface (its mixins). Each must
# type-check under mypy: mypyc enforces the annotations at run time.
MODULES = (
    "kernbench.components.background",
    "kernbench.components.busy_timeline",
    "kernbench.components.clock",
    "kernbench.components.fabric",
    "kernbench.components.fair_share",
    "kernbench.components.flows",
    "kernbench.components.fluid_stream",
    "kernbench.components.share_policies",
    "kernbench.components.stage_report",
    "kernbench.components.transport",
    "kernbench.components.builtin.composite_feeder",
    "kernbench.components.builtin.composite_plan",
    "kernbench.components.builtin.dispatch",
    "kernbench.components.builtin.engine",
    "kernbench.components.builtin.gemm_array",
    "kernbench.components.builtin.hazards",
    "kernbench.components.builtin.hbm_ctrl",
    "kernbench.components.builtin.pe_cpu",
    "kernbench.components.builtin.pe_dma",
    "kernbench.components.builtin.pe_fetch_store",
    "kernbench.components.builtin.pe_gemm",
    "kernbench.components.builtin.pe_ipcq",
    "kernbench.components.builtin.pe_math",
    "kernbench.components.builtin.pe_mmu",
    "kernbench.components.builtin.pe_ops",
    "kernbench.components.builtin.pe_scheduler",
    "kernbench.components.builtin.pe_stages",
    "kernbench.components.builtin.tile_streams",
    "kernbench.components.tiling",
    "kernbench.isa.handles",
    "kernbench.isa.ops",
    "kernbench.policy.address.mmu",
    "kernbench.policy.address.phys_addr",
    "kernbench.policy.routing.edges",
    "kernbench.policy.routing.router",
    "kernbench.policy.routing.spurs",
    "kernbench.sim_engine.op_log",
    "kernbench.topology.elements",
    "kernbench.triton_emu.kernel_runner",
    "kernbench.triton_emu.scratch",
    "kernbench.triton_emu.tl_recipes",
)
PACKAGE = Path(__file__).resolve().parents[1]  # src/kernbench
BUILD = Path(__file__).resolve().parent / "_build"
MANIFEST = "manifest.json"
PURE_ENV = "KERNBENCH_PURE"

_status = "pure: not installed"


def source_digest(package: Path = PACKAGE) -> str:
    """Digest of every Python source of the package and of the interpreter's version."""
    digest = hashlib.sha256(sys.version.encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def read_manifest(build: Path = BUILD) -> dict | None:
    try:
        return json.loads((build / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


class _Twins(importlib.abc.MetaPathFinder):
    """Finds the compiled extension of each module listed in the manifest."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(self, fullname, path=None, target=None):
        file = self.files.get(fullname)
        return None if file is None else importlib.util.spec_from_file_location(fullname, file)


def decide(build: Path, package: Path, environ) -> tuple[str, dict[str, Path] | None]:
    """(state, {module: extension file} or None): whether the build in ``build`` may
    stand in for the sources of ``package``."""
    if environ.get(PURE_ENV) == "1":
        return f"pure: {PURE_ENV}=1", None
    manifest = read_manifest(build)
    if manifest is None:
        return "pure: not built (scripts/setup builds it)", None
    if manifest.get("digest") != source_digest(package):
        return "pure: the sources changed since the last build (scripts/setup rebuilds)", None
    files = {name: build / rel for name, rel in manifest["files"].items()}
    return f"compiled: {len(manifest['modules'])} modules (mypyc {manifest['mypy']})", files


def install() -> str:
    """Load the compiled twins from now on if they match the source; return the state."""
    global _status
    if not any(isinstance(f, _Twins) for f in sys.meta_path):
        _status, files = decide(BUILD, PACKAGE, os.environ)
        if files is not None:
            sys.meta_path.insert(0, _Twins(files))
    return _status


def status() -> str:
    """``compiled: ...`` or ``pure: <why>``; benchmarks report it next to their figures."""
    return _status


def compiled() -> bool:
    return _status.startswith("compiled")
