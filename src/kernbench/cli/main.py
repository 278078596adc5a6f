"""``kernbench`` command line. User errors print one line and exit 2."""

from __future__ import annotations

import argparse
import sys

from kernbench import __version__
from kernbench.cli import bench_cmd, experiments_cmd, job_cmd, probe_cmd, topology_cmd
from kernbench.errors import KernbenchError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernbench", description="KernBench accelerator simulator")
    parser.add_argument("--version", action="version", version=f"kernbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in (bench_cmd, probe_cmd, topology_cmd, job_cmd, experiments_cmd):
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (KernbenchError, KeyError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"kernbench: error: {message}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `kernbench probe | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
