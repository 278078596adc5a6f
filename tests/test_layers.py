"""The layering of docs/adr/0012-layers.md, enforced: import-linter's contracts hold."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from .conftest import ROOT


def test_the_import_contracts_hold():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts = {c["name"]: c for c in config["contracts"]}
    layers = next(c for c in contracts.values() if c["type"] == "layers")["layers"]
    order = [layer.split(" | ")[0] for layer in layers]
    assert order.index("kernbench.cli") < order.index("kernbench.sim_engine") \
        < order.index("kernbench.components") < order.index("kernbench.isa")
    kernels = [c for c in contracts.values() if c.get("source_modules") == ["kernbench.kernels"]]
    assert len(kernels) == 1 and "kernbench.sim_engine" in kernels[0]["forbidden_modules"]
    exe = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert f"Contracts: {len(contracts)} kept, 0 broken." in proc.stdout
