"""Helpers shared by CLI subcommands: topology lookup and one-line errors."""

from __future__ import annotations

from pathlib import Path

from kernbench.errors import ConfigError

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
