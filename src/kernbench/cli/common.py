"""Helpers shared by CLI subcommands: topology lookup, output paths, one-line errors."""

from __future__ import annotations

import os
from pathlib import Path

from kernbench.errors import ConfigError, UsageError

TOPOLOGY_DIR = Path("config") / "topologies"


def resolve_topology(arg: str) -> Path:
    """Accept a path or a name from ``config/topologies/`` (``default`` -> default.yaml)."""
    p = Path(arg).expanduser()
    if p.is_file():
        return p
    by_name = TOPOLOGY_DIR / f"{arg}.yaml"
    if by_name.is_file():
        return by_name
    known = sorted(x.stem for x in TOPOLOGY_DIR.glob("*.yaml") if not x.name.endswith(".cube_mesh.yaml"))
    hint = f" (known names in {TOPOLOGY_DIR}: {', '.join(known)})" if known else ""
    raise ConfigError(arg, "", f"topology file not found{hint}")


def check_output_path(option: str, path: str | None, *, folder: bool = False,
                      creates_parents: bool = False) -> None:
    """Stop before any work when an output path cannot be written: the user's mistake,
    said in one line (option, path, what is wrong) rather than a traceback at the end.

    ``folder``: the path names a folder (it may exist). ``creates_parents``: the writer
    makes missing parent folders, so the nearest existing one must be writable.
    """
    if not path:
        return
    target = Path(path).expanduser()
    if folder and target.exists() and not target.is_dir():
        raise UsageError(f"{option} {path}: exists and is not a folder")
    if not folder and target.is_dir():
        raise UsageError(f"{option} {path}: is a folder, not a file")
    parent = target.parent
    if creates_parents or folder:
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
    if not parent.exists():
        raise UsageError(f"{option} {path}: folder {parent} does not exist")
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: folder {parent} is not writable")
