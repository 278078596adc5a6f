"""``kernbench job``: the per-point command the workflow runs (one process per point)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kernbench.errors import ConfigError, UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("job", help="simulate one sweep point and write its JSON record")
    p.add_argument("--experiment", required=True)
    p.add_argument("--topology-id", required=True)
    p.add_argument("--topology-file", required=True)
    p.add_argument("--workload-id", required=True)
    p.add_argument("--variant-id", required=True)
    p.add_argument("--slice", required=True, help='JSON {"workload": {...}, "variant": {...}}')
    p.add_argument("--out", required=True, help="record path (results/raw/...json)")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="import an experiment plugin module first (repeatable)")
    p.set_defaults(func=run, exit_at_once=True)


def run(args: argparse.Namespace) -> int:
    import resource
    import sys
    import time

    from kernbench.collector import quiet_collector
    from kernbench.experiments.job import run_job
    from kernbench.fileio import dumps_pretty, write_atomic

    start = time.perf_counter()
    slice_ = check_args(args)
    # The whole job runs with the cyclic collector off, its batch points included
    # (experiments/job.py collects between them). Run as its own process, ``cli``
    # turned it off already and the process leaves without a teardown; called
    # in-process (tests, tools), the collector is on again afterwards.
    with quiet_collector():
        record = run_job(args.experiment, args.topology_id, args.topology_file,
                         args.workload_id, args.variant_id, slice_)
        write_atomic(Path(args.out), dumps_pretty(record))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    print(f"kernbench job: wrote {args.out} in {time.perf_counter() - start:.3f} s, "
          f"peak_rss_mb={peak_mb:.1f}", file=sys.stderr)
    return 0


def check_args(args: argparse.Namespace) -> dict:
    """Every argument, in the order they are declared, before any file is read (the
    plugins first: they may define the experiment); returns the parsed slice."""
    from kernbench.cli.common import check_output_path
    from kernbench.experiments.registry import get, load_plugins

    load_plugins(args.plugin, "--plugin")
    try:
        get(args.experiment)
    except UsageError as exc:
        raise UsageError(f"--experiment: {exc}") from None
    if not Path(args.topology_file).is_file():
        raise ConfigError("--topology-file", "", f"{args.topology_file}: file not found")
    try:
        slice_ = json.loads(args.slice)
    except json.JSONDecodeError as exc:
        raise ConfigError("--slice", "", f"not valid JSON: {exc.msg}") from None
    _check_slice(slice_)
    check_output_path("--out", args.out, creates_parents=True)
    return slice_


def _check_slice(slice_) -> None:
    """A point's slice {"workload": {...}, "variant": {...}}, or a batch's
    {"workloads": [[id, {...}], ...], "variant": {...}} (the workflow writes both)."""
    if not isinstance(slice_, dict):
        raise ConfigError("--slice", "", "must be a JSON object (the workflow writes it)")
    points = slice_.get("workloads")
    if points is not None:
        if not isinstance(points, list) or not all(
                isinstance(w, list) and len(w) == 2 and isinstance(w[0], str)
                and isinstance(w[1], dict) for w in points):
            raise ConfigError("--slice", "workloads", "must list [id, {params}] pairs")
    elif not isinstance(slice_.get("workload"), dict):
        raise ConfigError("--slice", "workload", "must be an object (or give a 'workloads' "
                                                 "list); the workflow writes it")
    if not isinstance(slice_.get("variant"), dict):
        raise ConfigError("--slice", "variant", "must be an object; the workflow writes it")
