"""The one atomic file writer and the one canonical-JSON hash.

Records, caches, manifests and traces are written through :func:`write_atomic`
(temp file + rename), so a killed process never leaves half a file. Config
slices, topology documents and mesh inputs are hashed through
:func:`json_hash`, so equal content always gives an equal hash.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def canonical_json(doc: Any) -> str:
    """Key-sorted, whitespace-free JSON: the byte form that gets hashed."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def json_hash(doc: Any, length: int = 16) -> str:
    """Hex SHA-256 prefix of :func:`canonical_json` of ``doc``."""
    return hashlib.sha256(canonical_json(doc).encode()).hexdigest()[:length]


def dumps_pretty(doc: Any) -> str:
    """Indented, key-sorted JSON with a final newline (records, manifests)."""
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def write_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` via a temp file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
