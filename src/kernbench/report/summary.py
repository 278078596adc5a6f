"""The run's one-page summary (SUMMARY.md) and each experiment's headline lines: its
``SUMMARY`` templates filled with its values, shared with the paper and the site."""

from __future__ import annotations

from pathlib import Path

from kernbench.analysis.values import fill
from kernbench.experiments.registry import ordered
from kernbench.fileio import write_atomic
from kernbench.report.context import ReportContext, load_table


def summary_markdown(sweep, manifest_doc: dict, tables: dict[str, str | Path],
                     config: dict) -> str:
    """One page: the run, then each experiment's headline lines (from its values)."""
    t = manifest_doc["totals"]
    mean = t["simulate_wall_s_mean"]
    lines = ["# KernBench run summary", "",
             f"- kernbench {manifest_doc['kernbench_version']}, revision "
             f"{manifest_doc['git_revision'] or 'n/a'}",
             f"- {t['simulate_jobs']} simulation jobs ({', '.join(sweep.experiments)}); "
             f"mean job wall time {mean:.3f} s" if mean is not None else
             f"- {t['simulate_jobs']} simulation jobs",
             "- outputs: the tables, figures, the paper and the manifest", ""]
    per = manifest_doc.get("per_experiment", {})
    heads_of = headline_lines(sweep.experiments, tables, config)
    for name in sweep.experiments:  # every experiment, with or without headline lines
        heads = heads_of.get(name, [])
        lines += [f"## {name}", ""]
        p = per.get(name)
        if p and p["slowest"]:
            lines.append(f"- {p['jobs']} jobs, {p['wall_s_sum']:.1f} s of job wall time in all; "
                         f"slowest {p['slowest']['workload']} ({p['slowest']['wall_s']:.1f} s)")
        lines += [f"- {line}" for line in heads] + [""]
    return "\n".join(lines)


def headline_lines(experiments, tables: dict[str, str | Path], config: dict) -> dict:
    """{experiment: its SUMMARY lines filled with its values}, for experiments whose
    table exists (the summary page and the results site)."""
    ctx = ReportContext(config)
    out = {}
    present = [name for name in experiments if Path(tables[name]).exists()]
    for exp in ordered(present):
        post = exp.post_module()
        templates = getattr(post, "SUMMARY", ())
        if not templates:
            continue
        vals = post.values(load_table(post, tables[exp.name]), ctx)
        out[exp.name] = [line for line in (fill(t, vals) for t in templates) if line is not None]
    return out


def write_summary(text: str, path: str | Path) -> Path:
    return write_atomic(path, text)
