"""Finding and running the reference environment's Python (``.venv-refs``).

The interpreter is ``$KERNBENCH_REFS_PYTHON`` when set, else ``.venv-refs``
next to the environment KernBench runs in (``scripts/setup`` makes both side
by side). A tool that is not installed fails with one line saying how to
install it; it is never skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

from kernbench.errors import UsageError

ENV_VAR = "KERNBENCH_REFS_PYTHON"
INSTALL = ("run scripts/setup (it installs requirements/references.txt into .venv-refs), or set "
           f"{ENV_VAR} to a Python that has them")
TOOLS = {"scalesim": "SCALE-Sim v3 (scalesim==3.0.0 with numpy<2.3)", "ns": "ns-3 (pip install ns3)"}


def reference_python() -> Path:
    """The reference environment's interpreter; one line naming the fix if it is missing."""
    given = os.environ.get(ENV_VAR)
    path = Path(given) if given else Path(sys.prefix).parent / ".venv-refs" / "bin" / "python"
    if not path.is_file():
        raise UsageError(f"the reference simulators are not installed ({path} not found): "
                         f"{INSTALL}")
    return path


def script_path(name: str) -> Path:
    """A standalone script of this package (run by the reference interpreter)."""
    return Path(str(resources.files("kernbench.references").joinpath(name)))


def run_tool(script: str, module: str, request: dict, timeout_s: float = 900.0) -> dict:
    """Run ``script`` under the reference interpreter with ``request`` on stdin (JSON) and
    return its JSON answer. ``module`` is the tool's import name, for the error line."""
    python = reference_python()
    proc = subprocess.run([str(python), "-P", str(script_path(script))], input=json.dumps(request),
                          capture_output=True, text=True, timeout=timeout_s, check=False)
    if proc.returncode != 0:
        if f"No module named '{module}'" in proc.stderr:
            raise UsageError(f"{TOOLS[module]} is not installed in {python}: {INSTALL}")
        tail = proc.stderr.strip().splitlines()[-1:] or ["no error output"]
        raise RuntimeError(f"{script} failed under {python} (exit {proc.returncode}): {tail[0]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
