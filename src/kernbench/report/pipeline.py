"""The workflow's post-processing steps, each iterating over the registry.

Workflow scripts are thin calls into these functions (so they are unit
testable); none of them knows an experiment by name.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kernbench.analysis.tables import load_records, write_csv
from kernbench.experiments.registry import get, load_plugins
from kernbench.report.context import load_table


def aggregate(experiment: str, record_paths: Iterable[str | Path], out_csv: str | Path,
              plugins: Iterable[str] = (), settings: dict | None = None) -> Path:
    """Aggregate one experiment's records into its CSV (the experiment's ``frame``; with
    the post-processing ``settings`` of its block when it declares ``post_keys``)."""
    load_plugins(plugins)
    exp = get(experiment)
    post = exp.post_module()
    records = load_records(record_paths)
    table = post.frame(records, settings or {}) if exp.post_keys else post.frame(records)
    return write_csv(table, out_csv)


def render_figures(tables: Iterable[str | Path], out_dir: str | Path,
                   plugins: Iterable[str] = (), expected: Iterable[str] | None = None
                   ) -> list[Path]:
    """Render the figures of every table (named ``{experiment}.csv``)."""
    load_plugins(plugins)
    paths: list[Path] = []
    for table in tables:
        exp = get(Path(table).stem)
        post = exp.post_module()
        made = post.figures(load_table(post, table), Path(out_dir))
        stems = {Path(p).stem for p in made}
        if stems != set(exp.figures):
            raise RuntimeError(f"experiment {exp.name!r} declares figures {sorted(exp.figures)} "
                               f"but rendered {sorted(stems)}")
        paths += made
    if expected is not None:
        missing = sorted(set(map(str, expected)) - {str(p) for p in paths})
        if missing:
            raise RuntimeError(f"figure renderers did not produce: {', '.join(missing)}")
    return paths
