"""Make every workflow job import kernbench from the checkout being run.

Cluster jobs and ``--use-conda`` environments do not have the repository's
package installed, so the Snakefile puts ``<repo>/src`` first on PYTHONPATH
for all child processes (shell and script jobs alike).
"""

from __future__ import annotations

import os
from pathlib import Path


def use_checkout_sources(root: str | Path) -> str:
    src = str(Path(root).resolve() / "src")
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != src]
    os.environ["PYTHONPATH"] = os.pathsep.join([src, *rest])
    return src


def share_bytecode(cache_dir: str | Path) -> bool:
    """Let child processes cache bytecode under ``cache_dir`` when the environment
    forbids writing it beside the sources (PYTHONDONTWRITEBYTECODE).

    Every workflow job is a new interpreter; without a cache each one compiles the
    kernbench sources again (about 0.15 s a job). The cache stays out of the source
    tree, as that setting intends. This process is unaffected (its flags are set).
    Returns whether the environment was changed.
    """
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return False
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = str(Path(cache_dir).resolve())
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def clear_stale_locks(workdir: str | Path) -> list[str]:
    """Remove Snakemake's directory locks when the run that took them is dead.

    Snakemake leaves ``.snakemake/locks`` behind when it is killed with SIGKILL,
    and the next run then refuses to start until ``--unlock``. Every run of our
    Snakefile registers its pid; locks are removed only when no registered
    Snakemake process is still alive, so a concurrent live run is never touched.
    Returns the removed lock files.
    """
    meta = Path(workdir) / ".snakemake"
    registry = meta / "kernbench-pids"
    registry.mkdir(parents=True, exist_ok=True)
    me = os.getpid()
    live = False
    for entry in registry.iterdir():
        pid = int(entry.name) if entry.name.isdigit() else None
        if pid is not None and pid != me and _alive(pid):
            live = True
        elif pid != me:
            entry.unlink(missing_ok=True)
    (registry / str(me)).touch()
    removed: list[str] = []
    if not live and (meta / "locks").is_dir():
        for lock in sorted((meta / "locks").glob("*.lock")):
            lock.unlink(missing_ok=True)
            removed.append(str(lock))
    return removed


POST_PROCESSING = ("analysis", "report", "capacity")  # their edits re-render, not re-simulate
POST_MODULE = "post.py"  # an experiment's post-processing module (experiments/<name>/post.py)
POST_PREFIX = "post_"  # and the modules it splits into (experiments/<name>/post_figures.py)


def simulator_code_hash(package_dir: str | Path | None = None) -> str:
    """Hash of the simulator's Python sources (post-processing excluded: the
    ``analysis`` and ``report`` packages and each experiment's ``post.py`` and
    ``post_*.py``).

    The workflow passes it to every simulation job as a parameter, so editing
    the simulator reruns the points it may have changed; records carry it too.
    """
    import hashlib

    root = Path(package_dir) if package_dir else Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if (rel.parts[0] in POST_PROCESSING or rel.name == POST_MODULE
                or rel.name.startswith(POST_PREFIX)):
            continue
        digest.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
