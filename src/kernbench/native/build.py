"""Compile the hot modules with mypyc: ``python -m kernbench.native.build [--force]``.

The package's sources are copied to a scratch directory and the modules of
``kernbench.native.MODULES`` compiled there (mypyc type-checks them first and stops on
a type error), so the source tree never holds an extension that could shadow its
``.py``. The extensions go to ``native/_build`` with a manifest: the source digest they
were built from, the interpreter and mypy versions, and which file is which module.
Nothing is done while the manifest matches the sources. Exit 1, with mypyc's log,
if compiling fails.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kernbench.native import BUILD, MANIFEST, MODULES, PACKAGE, read_manifest, source_digest

_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)

# The build script run in the scratch copy. One C file per module (``multi_file``),
# compiled on every core: the single C file of mypyc's default took ~50 s on one core,
# this ~20 s on two, and the twins run as fast (docs/adr/0049). setuptools compiles
# one extension's sources in turn, hence the thread pool around ``_compile``.
_SETUP = """\
import os
from concurrent.futures import ThreadPoolExecutor

from mypyc.build import mypycify
from setuptools import setup
from setuptools._distutils import ccompiler


def compile_in_parallel(self, sources, output_dir=None, macros=None, include_dirs=None,
                        debug=0, extra_preargs=None, extra_postargs=None, depends=None):
    macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
        output_dir, macros, include_dirs, sources, depends, extra_postargs)
    cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)

    def one(obj):
        src, ext = build[obj]
        self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        list(pool.map(one, objects))
    return objects


ccompiler.CCompiler.compile = compile_in_parallel
setup(name="kernbench_native", ext_modules=mypycify({args!r}, opt_level="3", multi_file=True))
"""


def _module_of(rel: Path) -> str | None:
    """The module an extension built at ``rel`` (relative to the scratch root) is."""
    name = rel.name
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return ".".join((*rel.parent.parts, name[: -len(suffix)]))
    return None


def _compile(scratch: Path) -> dict[str, Path]:
    """Run mypyc over MODULES in ``scratch``; {module: extension path in it}."""
    shutil.copytree(PACKAGE, scratch / "kernbench",
                    ignore=shutil.ignore_patterns("_build", "__pycache__"))
    paths = [str(Path(*m.split(".")).with_suffix(".py")) for m in MODULES]
    (scratch / "setup_native.py").write_text(_SETUP.format(
        args=["--ignore-missing-imports", "--follow-imports=silent", *paths]))
    run = subprocess.run([sys.executable, "setup_native.py", "build_ext", "--inplace"],
                         cwd=scratch, text=True, capture_output=True)
    if run.returncode:
        sys.stderr.write(run.stdout[-4000:] + run.stderr[-4000:])
        raise SystemExit(f"native build: mypyc failed (exit {run.returncode}); "
                         f"the simulator still runs as pure Python")
    built = {}
    for path in scratch.rglob("*"):
        rel = path.relative_to(scratch)
        module = _module_of(rel)
        if module is not None and rel.parts[0] != "build":  # (mypyc's own build tree)
            built[module] = rel
    missing = sorted(set(MODULES) - set(built))
    if missing:
        raise SystemExit(f"native build: mypyc produced no extension for {missing}")
    return built


def build(force: bool = False) -> bool:
    """Compile unless the last build matches the sources; True if it compiled."""
    digest = source_digest()
    manifest = read_manifest()
    if not force and manifest is not None and manifest.get("digest") == digest:
        return False
    from mypy.version import __version__ as mypy_version

    staged = BUILD.with_name(BUILD.name + ".new")  # filled first: a job never sees half
    if staged.exists():
        shutil.rmtree(staged)
    with tempfile.TemporaryDirectory(prefix="kernbench-native-") as tmp:
        built = _compile(Path(tmp))
        files = {}
        for module, rel in sorted(built.items()):
            (staged / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path(tmp) / rel, staged / rel)
            files[module] = str(rel)
    manifest = {"digest": digest, "python": sys.version, "mypy": mypy_version,
                "modules": list(MODULES), "files": files}
    (staged / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    if BUILD.exists():
        shutil.rmtree(BUILD)
    staged.rename(BUILD)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="compile even if up to date")
    args = parser.parse_args(argv)
    if build(args.force):
        print(f"native build: compiled {len(MODULES)} modules into {BUILD}")
    else:
        print("native build: up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
