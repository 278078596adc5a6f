"""Checks the studies' config blocks share: which topologies an entry runs on, and
whether a study's topology overrides make a valid topology (one line each)."""

from __future__ import annotations

from kernbench.errors import ConfigError


def entry_applies(block: dict, entry: dict, where: str, spec, source: str) -> bool:
    """Whether an entry runs on ``spec`` (every topology of the block by default); the
    ids an entry names must be the block's, and the topology file's name its id."""
    if "topologies" not in entry:
        return True
    for j, tid in enumerate(entry["topologies"]):
        if tid not in block["topologies"]:
            raise ConfigError(source, f"{where}.topologies[{j}]", f"{tid!r} is not a topology "
                              f"of this block (allowed: {', '.join(block['topologies'])})")
    if spec.name not in block["topologies"]:
        raise ConfigError(source, f"{where}.topologies", f"the topology file named "
                          f"{spec.name!r} has another id here; entries name topologies by "
                          f"the file's name")
    return spec.name in entry["topologies"]


def check_overrides(block: dict, spec, source: str, experiment: str) -> None:
    """The study's topology overrides must make a valid topology of ``spec``."""
    from kernbench.topology.spec import load_spec

    if block.get("overrides"):
        try:
            load_spec(spec.source, block["overrides"])
        except ConfigError as exc:
            raise ConfigError(source, f"experiments.{experiment}.overrides",
                              f"on topology {spec.name!r}: {exc}") from None
