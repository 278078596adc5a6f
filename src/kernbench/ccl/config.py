"""``ccl.yaml`` (package data of ``kernbench.ccl``): the configured algorithms and the
IPCQ queue sizes.

Each algorithm entry names the module that registers it and the collective it
performs (``collective``: all_reduce, the default, or all_to_all); an entry may
override ``pes``, ``ipcq`` and ``world_size`` of ``defaults``. Every error names
the file and the key.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kernbench.ccl import registry
from kernbench.errors import ConfigError
from kernbench.geometry.ipcq import IpcqConfig
from kernbench.validation import safe_load

DEFAULT_PATH = Path(str(resources.files("kernbench.ccl").joinpath("ccl.yaml")))
COLLECTIVES = {"all_reduce": "algorithm", "all_to_all": "all_to_all"}  # -> defaults key


@dataclass(frozen=True)
class AlgorithmConfig:
    name: str
    module: str
    pes: tuple[int, ...]
    ipcq: IpcqConfig
    world_size: int | None
    collective: str = "all_reduce"


def _err(path, key: str, msg: str) -> ConfigError:
    return ConfigError(str(path), key, msg)


def load(path: str | Path | None = None) -> dict:
    path = Path(path) if path else DEFAULT_PATH
    if not path.is_file():
        raise _err(path, "", "collectives config not found")
    doc = safe_load(path.read_text()) or {}
    if not isinstance(doc, dict) or doc.get("schema_version") != 1:
        raise _err(path, "schema_version", "must be 1")
    for key in ("defaults", "algorithms"):
        if not isinstance(doc.get(key), dict):
            raise _err(path, key, "must be a mapping")
    doc["_path"] = str(path)
    return doc


def _kind(path, name: str, entry: dict) -> str:
    kind = entry.get("collective", "all_reduce")
    if kind not in COLLECTIVES:
        raise _err(path, f"algorithms.{name}.collective",
                   f"must be one of {', '.join(COLLECTIVES)}, got {kind!r}")
    return kind


def resolve(doc: dict, algorithm: str | None = None, collective: str = "all_reduce",
            **overrides) -> AlgorithmConfig:
    """The merged settings of ``algorithm``, a ``collective`` algorithm (default: the
    collective's entry in ``defaults``: ``algorithm``, ``all_to_all``)."""
    path = doc["_path"]
    defaults = doc["defaults"]
    name = algorithm or defaults.get(COLLECTIVES[collective])
    entries = {k: v for k, v in doc["algorithms"].items()
               if _kind(path, k, v or {}) == collective}
    if name not in entries:
        raise _err(path, "algorithms", f"unknown algorithm {name!r} (configured "
                                       f"{collective} algorithms: {', '.join(sorted(entries))})")
    entry = entries[name] or {}
    module = entry.get("module")
    if not isinstance(module, str):
        raise _err(path, f"algorithms.{name}.module", "must name the module that registers it")
    pes = overrides.get("pes") or entry.get("pes", defaults.get("pes", [0]))
    if not isinstance(pes, list | tuple) or not pes or not all(
            isinstance(p, int) and p >= 0 for p in pes) or len(set(pes)) != len(pes):
        raise _err(path, f"algorithms.{name}.pes", f"must be distinct PE ids, got {pes!r}")
    ipcq = dict(defaults.get("ipcq") or {})
    ipcq.update(entry.get("ipcq") or {})
    ipcq.update({k: v for k, v in (overrides.get("ipcq") or {}).items() if v is not None})
    unknown = set(ipcq) - {"slots", "slot_bytes", "tier"}
    if unknown:
        raise _err(path, "defaults.ipcq", f"unknown keys {sorted(unknown)} "
                                          f"(allowed: slots, slot_bytes, tier)")
    try:
        cfg = IpcqConfig(**ipcq)
    except ConfigError as exc:
        raise _err(path, exc.key_path, exc.detail) from None
    world = entry.get("world_size", defaults.get("world_size"))
    if world is not None and (not isinstance(world, int) or world < 1):
        raise _err(path, f"algorithms.{name}.world_size", "must be a positive integer")
    return AlgorithmConfig(name, module, tuple(pes), cfg, world, collective)


def algorithm_class(cfg: AlgorithmConfig) -> type:
    """Import the entry's module (which registers the class) and return the class."""
    importlib.import_module(cfg.module)
    try:
        return registry.get(cfg.name)
    except KeyError:
        raise ConfigError(cfg.module, "", f"module does not register an algorithm named "
                                          f"{cfg.name!r}") from None


def configured_algorithms(path: str | Path | None = None,
                          collective: str = "all_reduce") -> dict[str, type]:
    """Every ``collective`` algorithm of the config, in the order it lists them, as its
    class: what reports read (names, order, ``phases``) so that a new algorithm needs
    no edit there."""
    doc = load(path)
    return {name: algorithm_class(resolve(doc, name, collective))
            for name, entry in doc["algorithms"].items()
            if _kind(doc["_path"], name, entry or {}) == collective}
