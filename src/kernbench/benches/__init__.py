"""Benches: one module per domain, each registering ``@bench`` functions.

Every module here that does not start with ``_`` is imported eagerly and must
register at least one bench (helpers start with ``_``).
"""

from __future__ import annotations

import importlib
import pkgutil

from kernbench.benches.registry import _REGISTERED_MODULES, audit_modules


def _eager_import_and_audit(path, package: str) -> None:
    imported = []
    for info in pkgutil.iter_modules(path):
        if info.name == "registry" or info.name.startswith("_"):
            continue
        name = f"{package}.{info.name}"
        importlib.import_module(name)
        imported.append(name)
    audit_modules(imported, _REGISTERED_MODULES)


_eager_import_and_audit(__path__, __name__)
