"""Run manifest (every job, its config hash, wall time, peak memory) and SUMMARY.md.

Both are rewritten by the workflow's ``onsuccess`` hook after every run that
did work. Wall time and sampled memory (``max_rss_mb``) come from each job's
Snakemake ``benchmark:`` file; because Snakemake samples memory only every few
hundred ms, simulation jobs also report their own peak RSS (``peak_rss_mb``,
from getrusage) in their log. Config hashes come from the records' provenance.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from kernbench import __version__
from kernbench.experiments.job import git_revision

BENCH = Path("results/benchmarks")
LOGS = Path("results/logs")
_PEAK = re.compile(r"peak_rss_mb=([0-9.]+)")


def _bench(path: Path) -> dict:
    """Wall seconds and peak RSS (MB) from a Snakemake benchmark TSV, if present."""
    try:
        with path.open() as fh:
            row = next(csv.DictReader(fh, delimiter="\t"))
    except (OSError, StopIteration):
        return {"wall_s": None, "max_rss_mb": None}

    def number(key):
        try:
            return float(row[key])
        except (KeyError, TypeError, ValueError):
            return None  # Snakemake writes "-" when a job was too short to sample

    return {"wall_s": number("s"), "max_rss_mb": number("max_rss")}


def _peak_from_log(path: Path) -> float | None:
    """Peak RSS the job measured itself (getrusage); exact even for sub-second jobs."""
    try:
        m = _PEAK.search(path.read_text())
    except OSError:
        return None
    return float(m.group(1)) if m else None


def manifest(sweep) -> dict:
    jobs = []
    for job in sorted(sweep.jobs, key=lambda j: j.output):
        rel = Path(job.output).relative_to("results/raw").with_suffix(".tsv")
        record = Path(job.output)
        cfg_hash = None
        if record.exists():
            cfg_hash = json.loads(record.read_text())["provenance"]["config_hash"]
        jobs.append({"rule": "simulate", "output": job.output, "experiment": job.experiment,
                     "topology": job.topology, "workload": job.workload, "variant": job.variant,
                     "config_hash": cfg_hash, **_bench(BENCH / "simulate" / rel),
                     "peak_rss_mb": _peak_from_log(LOGS / "simulate" / rel.with_suffix(".log"))})
    stage_jobs = [("aggregate", f"results/tables/{e}.csv", BENCH / "aggregate" / f"{e}.tsv")
                  for e in sweep.experiments]
    stage_jobs += [("figures", "results/figures", BENCH / "figures.tsv"),
                   ("report_generated", "report/generated", BENCH / "report_generated.tsv"),
                   ("paper", "report/build/paper.pdf", BENCH / "paper.tsv")]
    for rule, output, bench in stage_jobs:
        jobs.append({"rule": rule, "output": output, "config_hash": None, **_bench(bench)})
    sim = [j["wall_s"] for j in jobs if j["rule"] == "simulate" and j["wall_s"] is not None]
    return {
        "kernbench_version": __version__,
        "git_revision": git_revision(),
        "experiments": sweep.experiments,
        "jobs": jobs,
        "totals": {
            "jobs": len(jobs),
            "simulate_jobs": len(sweep.jobs),
            "simulate_wall_s_sum": sum(sim),
            "simulate_wall_s_mean": sum(sim) / len(sim) if sim else None,
            "all_wall_s_sum": sum(j["wall_s"] or 0.0 for j in jobs),
        },
    }


def write_manifest(sweep, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(manifest(sweep), indent=2, sort_keys=True) + "\n")
    return out


def _pct(rel: float | None) -> str:
    if rel is None:
        return "n/a"
    return "< 1e-6 %" if rel * 100 < 1e-6 else f"{100 * rel:.3g} %"


def summary_markdown(sweep, manifest_doc: dict) -> str:
    import pandas as pd

    from kernbench.report.transfer_report import transfer_headline

    t = manifest_doc["totals"]
    mean = t["simulate_wall_s_mean"]
    lines = ["# KernBench run summary", "",
             f"- kernbench {manifest_doc['kernbench_version']}, revision "
             f"{manifest_doc['git_revision'] or 'n/a'}",
             f"- {t['simulate_jobs']} simulation jobs ({', '.join(sweep.experiments)}); "
             f"mean job wall time {mean:.3f} s" if mean is not None else
             f"- {t['simulate_jobs']} simulation jobs",
             "- outputs: `results/tables/`, `results/figures/`, `report/build/paper.pdf`, "
             "`results/manifest.json`", ""]
    table = Path("results/tables/transfer.csv")
    if "transfer" in sweep.experiments and table.exists():
        h = transfer_headline(pd.read_csv(table))
        lines += [
            "## transfer", "",
            f"- {h['records']} points: {h['flows']} flows x sizes {', '.join(h['sizes'])} on "
            f"{h['topologies']} topolog{'y' if h['topologies'] == 1 else 'ies'}",
            f"- largest deviation from Ovhd + Wire + k x Drain: {_pct(h['max_rel_error'])}",
            f"- {h['ref_flow']} on {h['ref_topology']}: {h['ref_small_latency_ns']:.1f} ns at "
            f"{h['ref_small_size']} ({h['ref_small_util_pct']:.1f} % of "
            f"{h['ref_bottleneck_gbs']:g} GB/s), {h['ref_large_latency_ns']:.1f} ns at "
            f"{h['ref_large_size']} ({h['ref_large_util_pct']:.1f} %)",
            f"- least efficient lone flow at {h['large_size']}: {h['worst_flow']} on "
            f"{h['worst_topology']} ({h['worst_util_pct']:.1f} %)",
        ]
        if h["contention_flows"] is not None:
            lines.append(f"- {h['contention_flows']} flows sharing a route: the last finishes "
                         f"{h['contention_ratio']:.2f}x later than a lone flow at "
                         f"{h['ref_large_size']}")
        lines.append("")
    table = Path("results/tables/gemm.csv")
    if "gemm" in sweep.experiments and table.exists():
        lines += _gemm_summary(pd.read_csv(table))
    return "\n".join(lines)


def _span(rng, fmt: str = ".3g") -> str:
    lo, hi = rng
    return "n/a" if lo is None else f"{lo:{fmt}}-{hi:{fmt}}"


def _gemm_summary(df) -> list[str]:
    from kernbench.report.gemm_report import gemm_headline

    h = gemm_headline(df)
    out = ["## gemm", "",
           f"- {h['records']} points: {h['shapes']} shapes x {h['variants']} variants on "
           f"{h['topology']}"]
    for bound in ("compute", "memory"):
        if h[f"{bound}_count"]:
            out.append(f"- composite on one PE, {h[f'{bound}_count']} {bound}-bound shapes: "
                       f"{_span(h[f'{bound}_err'])} % above the roofline, MAC utilisation "
                       f"{_span(h[f'{bound}_util'])} %, {_span(h[f'{bound}_excess'], '.0f')} ns "
                       f"over it")
    for kern in ("primitive", "prefetch"):
        if h[f"{kern}_slowdown"][0] is not None:
            out.append(f"- {kern} kernel: {_span(h[f'{kern}_slowdown'])}x slower than the "
                       f"composite; {_span(h[f'{kern}_commands'], '.0f')} commands, PE_CPU "
                       f"dispatch {_span(h[f'{kern}_cpu_share'])} % of its time")
    if h["cube_speedup"][0] is not None:
        out.append(f"- composite split over {h['cube_pes']} PEs: {_span(h['cube_speedup'])}x "
                   f"faster than one PE")
    out.append("")
    return out


def write_summary(sweep, path: str | Path) -> Path:
    out = Path(path)
    doc = json.loads(Path("results/manifest.json").read_text()) if Path(
        "results/manifest.json").exists() else manifest(sweep)
    out.write_text(summary_markdown(sweep, doc))
    return out
