"""Check a workflow config and expand it into independent jobs.

The Snakefile calls :func:`load_sweep` once at start-up with the config, the
path of the base schema and the folder records go to (the workflow owns its
paths; this module hard-codes none). The base schema is completed with the
schema fragment of every known experiment, the config is checked (one-line
errors naming the key), schema defaults are filled in, every referenced
topology is validated, and each experiment expands into (topology x workload
x variant) jobs. Each job carries only its own config slice, so editing one
workload or variant changes only that slice and Snakemake reruns only the
affected jobs. An experiment may batch short points: the points that name the
same batch id (per topology and variant) become one job whose slice lists them
(``{"workloads": [[id, params], ...], "variant": ...}``). Reruns come last:
``sensitivity`` (modelling choices, compared in their own table) and ``whatif``
(hardware parameters scaled by factors, tabulated by the study that ran them;
:mod:`kernbench.experiments.whatif`), each a job of its own with its overrides.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernbench.errors import ConfigError
from kernbench.experiments import whatif
from kernbench.experiments.registry import Experiment, all_experiments, get, load_plugins
from kernbench.topology.spec import load_spec
from kernbench.validation import load_yaml_file, validate


@dataclass(frozen=True)
class Job:
    experiment: str
    topology: str
    workload: str
    variant: str
    topology_file: str
    topology_sources: tuple[str, ...]  # the file and its `extends` ancestors
    slice: dict[str, Any]
    output: str  # the record path
    setting: str | None = None  # a sensitivity rerun under this setting (sweep.sensitivity)
    base: str | None = None  # the record path of the default run it is compared with
    whatif: bool = False  # a hardware what-if rerun (config ``whatif``), tabulated by its study

    def slice_json(self) -> str:
        return json.dumps(self.slice, sort_keys=True, separators=(",", ":"))

    @property
    def points(self) -> list[tuple[str, dict]]:
        """(workload id, params) of every point the job simulates."""
        if "workloads" in self.slice:
            return [(wid, params) for wid, params in self.slice["workloads"]]
        return [(self.workload, self.slice["workload"])]


@dataclass(frozen=True)
class Sweep:
    config: dict[str, Any]
    jobs: tuple[Job, ...]

    def by_output(self) -> dict[str, Job]:
        return {j.output: j for j in self.jobs}

    def outputs(self, experiment: str | None = None) -> list[str]:
        """The records of the default runs (of one experiment); sensitivity reruns are
        compared separately (:meth:`sensitivity_outputs`)."""
        return [j.output for j in self.jobs
                if j.setting is None and experiment in (None, j.experiment)]

    def sensitivity_outputs(self) -> list[str]:
        """Every sensitivity rerun's record and the default record it is compared with."""
        reruns = [j for j in self.jobs if j.setting is not None and not j.whatif]
        return sorted({j.output for j in reruns} | {j.base for j in reruns})

    def table_inputs(self, experiment: str) -> list[str]:
        """The records an experiment's table is built from: its default runs, then its
        what-if reruns (config ``whatif``)."""
        return self.outputs(experiment) + [j.output for j in self.jobs
                                           if j.whatif and j.experiment == experiment]

    @property
    def experiments(self) -> list[str]:
        return sorted(self.config["experiments"])

    @property
    def plugins(self) -> list[str]:
        return list(self.config.get("plugins", []))

    def experiment(self, name: str) -> Experiment:
        return get(name)

    def post_settings(self, experiment: str) -> dict:
        """The keys of an experiment's block that only its post-processing reads."""
        block = self.config["experiments"][experiment]
        return {k: block[k] for k in get(experiment).post_keys if k in block}

    def estimate(self, job: Job) -> dict:
        """A job's resource estimate from its experiment: the largest memory and the
        summed runtime of its points ({} when the experiment gives none)."""
        estimate = get(job.experiment).resources
        if estimate is None:
            return {}
        parts = [estimate(params) for _, params in job.points]
        out = {}
        mems = [p["mem_mb"] for p in parts if p.get("mem_mb") is not None]
        runs = [p["runtime"] for p in parts if p.get("runtime") is not None]
        if mems:
            out["mem_mb"] = max(mems)
        if runs:
            out["runtime"] = sum(runs)
        return out


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


def composed_schema(base: dict) -> dict:
    """The base schema with ``experiments.<name>`` filled from every known experiment."""
    schema = copy.deepcopy(base)
    props = schema["properties"]["experiments"].setdefault("properties", {})
    for exp in all_experiments():
        props[exp.name] = exp.schema
    return schema


def check_config(config: Any, source: str, root: Path, schema_path: Path) -> dict:
    """Schema + semantic checks; returns the config with defaults filled in."""
    if not isinstance(config, dict):
        raise ConfigError(source, "", "top level must be a mapping of keys")
    plugins = config.get("plugins", [])
    if isinstance(plugins, list) and all(isinstance(p, str) for p in plugins):
        load_plugins(plugins, source)  # their schema fragments join the check below
    schema = composed_schema(load_yaml_file(schema_path))
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


def expand(config: dict, source: str, root: Path, raw_dir: str) -> Sweep:
    jobs: list[Job] = []
    for name in sorted(config["experiments"]):
        block = config["experiments"][name]
        exp = get(name)
        for tid in block["topologies"]:
            rel = config["topologies"][tid]
            spec = load_spec(root / rel)
            workloads, variants = exp.expand(block, spec, source)
            seen: set[str] = set()
            for wid, _ in workloads:
                if wid in seen:
                    raise ConfigError(source, f"experiments.{name}",
                                      f"two entries give the same workload id {wid!r}; "
                                      f"remove the duplicate")
                seen.add(wid)
            sources = tuple(_relative(p, root) for p in spec.sources)
            groups = _batches(exp, workloads, seen, source, config.get("batch_points", True))
            for wid, members in groups:
                for vid, vparams in variants:
                    alone = len(members) == 1 and members[0][0] == wid
                    slice_ = ({"workload": members[0][1], "variant": vparams} if alone else
                              {"workloads": [list(m) for m in members], "variant": vparams})
                    jobs.append(Job(name, tid, wid, vid, rel, sources, slice_,
                                    f"{raw_dir}/{name}/{tid}/{wid}/{vid}.json"))
    reruns = sensitivity_jobs(config, jobs, source, raw_dir)
    reruns += whatif_jobs(config, jobs, source, root, raw_dir)
    return Sweep(config, tuple(jobs + reruns))


def sensitivity_jobs(config: dict, jobs: list[Job], source: str, raw_dir: str) -> list[Job]:
    """The reruns ``sensitivity.runs`` asks for: each matching job again, its variant
    carrying the setting's topology overrides (variant id ``<id>@<setting>``)."""
    block = config.get("sensitivity")
    if not block:
        return []
    settings = block["settings"]
    out = []
    for i, run in enumerate(block["runs"]):
        key = f"sensitivity.runs[{i}]"
        for j, name in enumerate(run["settings"]):
            if name not in settings:
                raise ConfigError(source, f"{key}.settings[{j}]", f"unknown setting {name!r} "
                                  f"(allowed: {', '.join(sorted(settings))})")
        for job in _matching(config, run, key, jobs, source):
            for name in run["settings"]:
                variant = dict(job.slice["variant"],
                               overrides=_over(job, settings[name]["overrides"]))
                out.append(_rerun(job, name, variant, raw_dir))
    return out


def whatif_jobs(config: dict, jobs: list[Job], source: str, root: Path,
                raw_dir: str) -> list[Job]:
    """The reruns ``whatif.runs`` asks for: each matching job again under every factor
    of every named parameter (variant ``<id>@<parameter>-x<factor>``), its variant
    carrying the scaled keys as overrides and ``whatif: {parameter, factor}``. Their
    records join the experiment's own table, not the sensitivity table."""
    block = config.get("whatif")
    if not block:
        return []
    params = block["parameters"]
    taken = set(config.get("sensitivity", {}).get("settings", {}))
    out, cache = [], {}
    for i, run in enumerate(block["runs"]):
        key = f"whatif.runs[{i}]"
        names = run.get("parameters", sorted(params))
        for j, name in enumerate(names):
            if name not in params:
                raise ConfigError(source, f"{key}.parameters[{j}]", f"unknown parameter "
                                  f"{name!r} (allowed: {', '.join(sorted(params))})")
        chosen = _matching(config, run, key, jobs, source)
        exp = get(run["experiment"])
        if not exp.whatif:
            able = [n for n in sorted(config["experiments"]) if get(n).whatif]
            raise ConfigError(source, f"{key}.experiment", f"{exp.name!r} does not tabulate "
                              f"what-if reruns (allowed: {', '.join(able) or 'none'})")
        for job in chosen:
            ck = (job.topology_file, tuple(names))
            if ck not in cache:
                cache[ck] = whatif.resolve(block, names, root / job.topology_file, source)
            for s in cache[ck]:
                if s.name in taken:
                    raise ConfigError(source, f"whatif.parameters.{s.parameter}", f"setting "
                                      f"{s.name!r} is also a sensitivity setting; rename one")
                variant = dict(job.slice["variant"], overrides=_over(job, s.overrides),
                               whatif={"parameter": s.parameter, "factor": s.factor})
                out.append(_rerun(job, s.name, variant, raw_dir, whatif=True))
    return out


def _matching(config: dict, run: dict, key: str, jobs: list[Job], source: str) -> list[Job]:
    """The default jobs a rerun entry names (its experiment and filters)."""
    if run["experiment"] not in config["experiments"]:
        raise ConfigError(source, f"{key}.experiment", f"{run['experiment']!r} is not an "
                          f"experiment of this config (allowed: "
                          f"{', '.join(sorted(config['experiments']))})")
    wanted = set(run.get("workloads", ()))
    chosen = [job for job in jobs if job.experiment == run["experiment"]
              and job.topology in run.get("topologies", [job.topology])
              and (not wanted or wanted & _names(job))
              and job.variant in run.get("variants", [job.variant])]
    if not chosen:
        raise ConfigError(source, key, "matches no job of the experiment (check its "
                          "topologies, workloads and variants)")
    return chosen


def _over(job: Job, overrides: dict) -> dict:
    """A rerun's topology overrides: the study's own (its stated modelling choices, in
    the job's variant) with the setting's on top."""
    return {**job.slice["variant"].get("overrides", {}), **overrides}


def _rerun(job: Job, setting: str, variant: dict, raw_dir: str, whatif: bool = False) -> Job:
    vid = f"{job.variant}@{setting}"
    return Job(job.experiment, job.topology, job.workload, vid, job.topology_file,
               job.topology_sources, dict(job.slice, variant=variant),
               f"{raw_dir}/{job.experiment}/{job.topology}/{job.workload}/{vid}.json",
               setting, job.output, whatif)


def _names(job: Job) -> set[str]:
    """What a sensitivity run may call a job by: its workload id, its points' ids and
    the batch they would share (so a run names the same jobs with batching off)."""
    exp = get(job.experiment)
    names = {job.workload}
    for wid, params in job.points:
        names.add(wid)
        if exp.batch:
            names.add(exp.batch(wid, params))
    return names


def _batches(exp: Experiment, workloads: list, ids: set[str], source: str,
             enabled: bool) -> list:
    """[(job workload id, [(point id, params), ...])] in the order points first appear."""
    out: dict[str, list] = {}
    for wid, params in workloads:
        key = exp.batch(wid, params) if exp.batch and enabled else None
        if key is None:
            out[wid] = [(wid, params)]
            continue
        if key in ids:
            raise ConfigError(source, f"experiments.{exp.name}",
                              f"batch id {key!r} is also a workload id; rename the workload")
        out.setdefault(key, []).append((wid, params))
    return list(out.items())


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def load_sweep(config: dict, source: str, root: Path, schema_path: Path, raw_dir: str) -> Sweep:
    """Check ``config`` (as loaded by Snakemake) and expand it into jobs."""
    return expand(check_config(config, source, root, schema_path), source, root, raw_dir)


def load_sweep_file(path: str | Path, root: Path, schema_path: Path, raw_dir: str) -> Sweep:
    """Same as :func:`load_sweep` for a config file (duplicate YAML keys are errors)."""
    return load_sweep(load_yaml_file(path), str(path), root, schema_path, raw_dir)
