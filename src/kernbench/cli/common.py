"""Helpers shared by CLI subcommands: topology lookup, output paths, one-line errors."""

from __future__ import annotations

import os
from pathlib import Path

from kernbench.errors import ConfigError, UsageError

TOPOLOGY_DIR = Path("config") / "topologies"


def resolve_topology(arg: str) -> Path:
    """Accept a path or a name from ``config/topologies/`` (``default`` -> default.yaml)."""
    p = Path(arg).expanduser()
    if p.is_file():
        return p
    by_name = TOPOLOGY_DIR / f"{arg}.yaml"
    if by_name.is_file():
        return by_name
    known = sorted(x.stem for x in TOPOLOGY_DIR.glob("*.yaml") if not x.name.endswith(".cube_mesh.yaml"))
    hint = f" (known names in {TOPOLOGY_DIR}: {', '.join(known)})" if known else ""
    raise ConfigError(arg, "", f"topology file not found{hint}")


def check_output_path(option: str, path: str | None, *, folder: bool = False,
                      creates_parents: bool = False) -> None:
    """Stop before any work when an output path cannot be written: the user's mistake,
    said in one line (option, path, what is wrong) rather than a traceback at the end.

    ``folder``: the path names a folder (it may exist). ``creates_parents``: the writer
    makes missing parent folders, so the nearest existing one must be writable.
    """
    if not path:
        return
    target = Path(path).expanduser()
    if folder and target.exists() and not target.is_dir():
        raise UsageError(f"{option} {path}: exists and is not a folder")
    if not folder and target.is_dir():
        raise UsageError(f"{option} {path}: is a folder, not a file")
    parent = target.parent
    if creates_parents or folder:
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
    if not parent.exists():
        raise UsageError(f"{option} {path}: folder {parent} does not exist")
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: folder {parent} is not writable")


# -- what kernbench allreduce and kernbench alltoall report alike -----------------------------
COUNTED_OPS = ("ipcq_copy", "ipcq_send", "dma_read", "dma_write")


def collective_document(r, ranks: int, **extra) -> dict:
    """One collective run (``AllReduceRun``/``AllToAllRun``) as a JSON document."""
    return {
        "topology": r.topology, "algorithm": r.algorithm, "ranks": ranks,
        "size": r.size, "count": r.count, "type": r.dtype, "buffer": r.buffer,
        "time_us": r.time_ns / 1000, "algbw_gbs": r.algbw_gbs, "busbw_gbs": r.busbw_gbs,
        "predicted_us": r.predicted_ns / 1000, "rel_error": r.rel_error,
        "phases_us": {k: {"simulated": a / 1000, "predicted": b / 1000}
                      for k, (a, b) in r.phases.items()},
        "op_counts": {k: r.op_counts.get(k, 0) for k in COUNTED_OPS}, **extra,
    }


def write_collective_report(out, r, header: str, title: str, check_line: str | None,
                            args) -> None:
    """The nccl-tests style text report: title, header, the run's line, its phases and
    op counts, then the data check and the files written."""
    out.write(title + "\n")
    out.write("#" + header[1:] + "\n")
    out.write(r.nccl_line() + "\n")
    out.write("# phases (us, simulated / predicted): " + ", ".join(
        f"{k} {a / 1000:.3f}/{b / 1000:.3f}" for k, (a, b) in r.phases.items()) + "\n")
    out.write("# op counts: " + ", ".join(f"{k} {r.op_counts.get(k, 0)}"
                                         for k in COUNTED_OPS) + "\n")
    if check_line is not None:
        out.write(check_line + "\n")
    if args.dump:
        out.write(f"# arrays written to {args.dump}\n")
    if args.trace:
        out.write(f"# trace written to {args.trace}\n")
