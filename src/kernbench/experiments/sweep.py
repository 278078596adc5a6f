"""Load and check the workflow config, then expand it into independent jobs.

The Snakefile calls :func:`load_sweep` once at start-up: the config is checked
against ``workflow/schemas/config.schema.yaml`` (one-line errors naming the
key), schema defaults are filled in, every referenced topology is validated,
and each experiment expands into (topology x workload x variant) jobs. Each job
carries only its own config slice, so editing one workload or variant changes
only that slice and Snakemake reruns only the affected jobs.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernbench.errors import ConfigError
from kernbench.experiments.registry import get
from kernbench.topology.spec import load_spec
from kernbench.validation import load_yaml_file, validate

SCHEMA_PATH = Path("workflow") / "schemas" / "config.schema.yaml"
RAW_DIR = "results/raw"


@dataclass(frozen=True)
class Job:
    experiment: str
    topology: str
    workload: str
    variant: str
    topology_file: str
    topology_sources: tuple[str, ...]  # the file and its `extends` ancestors
    slice: dict[str, Any]

    @property
    def output(self) -> str:
        return f"{RAW_DIR}/{self.experiment}/{self.topology}/{self.workload}/{self.variant}.json"

    def slice_json(self) -> str:
        return json.dumps(self.slice, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Sweep:
    config: dict[str, Any]
    jobs: tuple[Job, ...]

    def by_output(self) -> dict[str, Job]:
        return {j.output: j for j in self.jobs}

    def outputs(self, experiment: str | None = None) -> list[str]:
        return [j.output for j in self.jobs if experiment in (None, j.experiment)]

    @property
    def experiments(self) -> list[str]:
        return sorted(self.config["experiments"])


def fill_defaults(doc: Any, schema: dict) -> Any:
    """Fill ``default:`` values of object properties, recursively (like snakemake's validate)."""
    if not isinstance(doc, dict) or schema.get("type") != "object":
        return doc
    for key, sub in (schema.get("properties") or {}).items():
        if key not in doc and "default" in sub:
            doc[key] = copy.deepcopy(sub["default"])
        if key in doc:
            fill_defaults(doc[key], sub)
    return doc


def load_schema(root: Path = Path(".")) -> dict:
    return load_yaml_file(root / SCHEMA_PATH)


def check_config(config: Any, source: str, root: Path = Path(".")) -> dict:
    """Schema + semantic checks; returns the config with defaults filled in."""
    if not isinstance(config, dict):
        raise ConfigError(source, "", "top level must be a mapping of keys")
    schema = load_schema(root)
    validate(config, schema, source)
    config = fill_defaults(copy.deepcopy(config), schema)
    topo_ids = sorted(config["topologies"])
    for tid, rel in config["topologies"].items():
        if not (root / rel).is_file():
            raise ConfigError(source, f"topologies.{tid}", f"file {rel!r} not found")
    for name, block in config["experiments"].items():
        for i, tid in enumerate(block["topologies"]):
            if tid not in config["topologies"]:
                raise ConfigError(source, f"experiments.{name}.topologies[{i}]",
                                  f"unknown topology id {tid!r} (allowed: {', '.join(topo_ids)})")
    return config


def expand(config: dict, source: str, root: Path = Path(".")) -> Sweep:
    jobs: list[Job] = []
    for name in sorted(config["experiments"]):
        block = config["experiments"][name]
        module = get(name)
        for tid in block["topologies"]:
            rel = config["topologies"][tid]
            spec = load_spec(root / rel)
            workloads, variants = module.expand(block, spec, source)
            seen: dict[str, int] = {}
            for i, (wid, _) in enumerate(workloads):
                if wid in seen:
                    raise ConfigError(source, f"experiments.{name}",
                                      f"two entries give the same workload id {wid!r}; "
                                      f"remove the duplicate")
                seen[wid] = i
            sources = tuple(_relative(p, root) for p in spec.sources)
            for wid, wparams in workloads:
                for vid, vparams in variants:
                    jobs.append(Job(name, tid, wid, vid, rel, sources,
                                    {"workload": wparams, "variant": vparams}))
    return Sweep(config, tuple(jobs))


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def load_sweep(config: dict, source: str, root: Path = Path(".")) -> Sweep:
    """Check ``config`` (as loaded by Snakemake) and expand it into jobs."""
    return expand(check_config(config, source, root), source, root)


def load_sweep_file(path: str | Path, root: Path = Path(".")) -> Sweep:
    """Same as :func:`load_sweep` for a config file (duplicate YAML keys are errors)."""
    return load_sweep(load_yaml_file(path), str(path), root)
