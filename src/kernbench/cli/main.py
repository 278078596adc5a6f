"""``kernbench`` command line.

KernBench's own user-input errors (config, topology, arguments, kernel misuse:
every :class:`KernbenchError`) print one line and exit 2. Anything else is a
bug in KernBench: its traceback is printed, then a line saying so, and the
exit status is 1 (docs/adr/0018-honest-errors.md).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import traceback

from kernbench import __version__, native
from kernbench.cli import (
    allreduce_cmd,
    alltoall_cmd,
    attention_cmd,
    bench_cmd,
    capacity_cmd,
    experiments_cmd,
    gemm_cmd,
    job_cmd,
    model_cmd,
    probe_cmd,
    topology_cmd,
    web_cmd,
)
from kernbench.errors import KernbenchError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernbench", description="KernBench accelerator simulator")
    parser.add_argument("--version", action="version", version=f"kernbench {__version__} ({native.status()})")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in (bench_cmd, probe_cmd, topology_cmd, job_cmd, experiments_cmd, gemm_cmd,
                   allreduce_cmd, alltoall_cmd, attention_cmd, model_cmd, capacity_cmd, web_cmd):
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    return _dispatch(build_parser().parse_args(argv))


def cli() -> None:
    """The ``kernbench`` executable. A command that sets ``exit_at_once`` (``job`` and
    the simulation commands: their outputs are written and closed when they return)
    runs with the cyclic collector off and leaves without tearing down its heap: the
    collector only rescans a simulation's long-lived objects, and freeing them one by
    one at exit costs seconds (docs/adr/0031-graph-shared-state-and-job-exit.md)."""
    args = build_parser().parse_args()
    if getattr(args, "exit_at_once", False):
        gc.freeze()
        gc.disable()
    rc = _dispatch(args)
    if getattr(args, "exit_at_once", False):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    sys.exit(rc)


def _dispatch(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args) or 0)
    except KernbenchError as exc:
        print(f"kernbench: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `kernbench probe | head`
        return 0
    except Exception:  # reported as what it is: a bug
        traceback.print_exc()
        print("kernbench: internal error: this is a bug in KernBench, not in your input; "
              "please report it with the traceback above", file=sys.stderr)
        return 1


if __name__ == "__main__":
    cli()
