"""The experiment registry: each experiment is one module (or package) that registers itself.

An experiment declares everything the workflow, the report and the summary
need (docs/adr/0015-experiments-as-plugins.md):

* simulation side, imported by every job: its config schema fragment,
  ``expand(block, spec, source) -> (workloads, variants)`` and
  ``run(graph, workload, variant) -> record body`` (with its analytic model);
* post-processing side, a module named by ``post`` and imported only by
  aggregation, figures and the report: ``frame(records) -> DataFrame``,
  ``figures(table, out_dir) -> paths``, ``values(table, ctx) -> {key: Value}``
  (``frame(records, settings)`` when the experiment declares ``post_keys``),
  optionally ``load(csv)``, ``tables(table) -> {name: LaTeX}`` and ``SUMMARY``
  (Markdown line templates over its values);
* its paper text: a section, and optionally a sentence for the abstract and
  a paragraph for the conclusion (LaTeX using ``\\kbv{<name>/<key>}``).

Built-in experiments are the subpackages of ``kernbench.experiments`` and are
found by name; others are importable modules listed under ``plugins:`` in the
workflow config (or passed to ``load_plugins``). Nothing outside an
experiment's own module names it.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

from kernbench.errors import ConfigError, UsageError
from kernbench.validation import safe_load

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
PARTS = ("platform", "study")


@dataclass(frozen=True)
class Experiment:
    name: str  # id in the config, in result paths and in value keys
    title: str  # section title
    topic: str  # LaTeX noun phrase for "This edition covers ..."
    schema: dict  # JSON schema of experiments.<name>
    expand: Callable
    run: Callable
    post: str  # module with the post-processing functions
    figures: tuple[str, ...] = ()  # figure file stems (results/figures/<stem>.pdf/.png)
    tables: tuple[str, ...] = ()  # LaTeX table names (report/generated/<name>.tex)
    section: str = ""  # the paper section (LaTeX)
    abstract: str = ""  # a sentence for the abstract (LaTeX)
    conclusion: str = ""  # a paragraph for the conclusion (LaTeX)
    part: str = "study"  # "platform": appended to the platform section; "study": own section
    order: int = 100  # position among the experiments of its part (then by name)
    files: tuple[str, ...] = field(default=())  # source files the report depends on
    # (workload dict) -> {"mem_mb": ..., "runtime": minutes} for a batch scheduler, when a
    # point needs more than the workflow's default (600 MB, 10 min); not part of the slice
    resources: Callable | None = None
    # older bench names (`kernbench run --bench NAME`) that now regenerate this study's
    # table and figures through the workflow
    seed_benches: tuple[str, ...] = ()
    # (workload id, params) -> a batch id, or None: the points of one topology and
    # variant that name the same batch share one job (one process, each point still on
    # a fresh engine), so short points do not each pay a process start
    batch: Callable | None = None
    # its table also takes the hardware what-if reruns of its points (config ``whatif``,
    # variant ``<id>@<parameter>-x<factor>``); other experiments refuse such runs
    whatif: bool = False
    # keys of its config block that only post-processing reads (a target line, a
    # threshold): aggregation hands them to ``frame(records, settings)``, so editing
    # one redraws the table, figures and text without rerunning a simulation
    post_keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"experiment name {self.name!r} must be lowercase letters, digits "
                             f"and underscores, starting with a letter")
        if self.part not in PARTS:
            raise ValueError(f"experiment {self.name}: part must be one of {PARTS}")

    def post_module(self) -> ModuleType:
        return importlib.import_module(self.post)

    @property
    def label(self) -> str:
        """LaTeX label of its paper section."""
        return f"sec:{self.name.replace('_', '-')}"


_REGISTRY: dict[str, Experiment] = {}
_BUILTIN = "kernbench.experiments"
_SUPPORT = {"registry", "sweep", "job", "checkout", "whatif", "entries"}  # modules of this package that are not experiments


def register(exp: Experiment) -> Experiment:
    """Add ``exp`` (called at import of the experiment's module). Re-importing the same
    module replaces its entry; two modules claiming one name is an error."""
    old = _REGISTRY.get(exp.name)
    if old is not None and old.post != exp.post:
        raise ValueError(f"experiment {exp.name!r} is registered twice ({old.post}, {exp.post})")
    _REGISTRY[exp.name] = exp
    return exp


def builtin_names() -> list[str]:
    import kernbench.experiments as pkg

    return sorted(info.name for info in pkgutil.iter_modules(pkg.__path__)
                  if info.ispkg and info.name not in _SUPPORT)


def load_plugins(modules: Iterable[str], source: str = "plugins") -> None:
    """Import external experiment modules (each registers itself)."""
    for i, mod in enumerate(modules):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name and mod.startswith(exc.name):
                raise ConfigError(source, f"plugins[{i}]", f"module {mod!r} cannot be imported "
                                  f"(is its folder on PYTHONPATH?)") from None
            raise


def get(name: str) -> Experiment:
    """The experiment called ``name``: registered, or a built-in imported on demand."""
    exp = _REGISTRY.get(name)
    if exp is None and name in builtin_names():
        importlib.import_module(f"{_BUILTIN}.{name}")
        exp = _REGISTRY.get(name)
    if exp is None:
        raise UsageError(f"unknown experiment {name!r} (known: {', '.join(known())})")
    return exp


def known() -> list[str]:
    return sorted(set(builtin_names()) | set(_REGISTRY))


def all_experiments() -> list[Experiment]:
    """Every built-in and registered experiment (imports the built-ins)."""
    return [get(n) for n in known()]


def ordered(names: Iterable[str]) -> list[Experiment]:
    """Experiments in paper order: platform parts first, then studies, by ``order``."""
    exps = [get(n) for n in names]
    return sorted(exps, key=lambda e: (PARTS.index(e.part), e.order, e.name))


# -- helpers for experiment modules -----------------------------------------------------

def package_text(package: str, name: str) -> str:
    """A text file shipped next to an experiment's code (importlib.resources)."""
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


def package_schema(package: str, name: str = "schema.yaml") -> dict:
    return safe_load(package_text(package, name))


def package_files(module: ModuleType) -> tuple[str, ...]:
    """The files of an experiment package (or the module file) that shape its outputs."""
    path = Path(module.__file__)
    if path.name != "__init__.py":
        return (str(path),)
    return tuple(sorted(str(p) for p in path.parent.iterdir()
                        if p.is_file() and p.suffix in (".py", ".tex", ".yaml")))


def describe_keys(exp: Experiment) -> list[tuple[str, str, str]]:
    """(key path, type, description) rows of an experiment's config block, for docs."""
    rows: list[tuple[str, str, str]] = []

    def walk(schema: Any, path: str) -> None:
        if not isinstance(schema, dict):
            return
        kind = schema.get("type") or ("enum" if "enum" in schema else "")
        if "enum" in schema:
            kind = " | ".join(str(v) for v in schema["enum"])
        rows.append((path, str(kind), str(schema.get("description", ""))))
        for key, sub in (schema.get("properties") or {}).items():
            walk(sub, f"{path}.{key}")
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            walk(extra, f"{path}.<id>")
        items = schema.get("items")
        if isinstance(items, dict) and items.get("type") == "object":
            for key, sub in (items.get("properties") or {}).items():
                walk(sub, f"{path}[].{key}")

    walk(exp.schema, f"experiments.{exp.name}")
    return rows
