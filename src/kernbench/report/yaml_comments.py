"""Recover the source comment written next to each key of a block-style YAML file.

The hardware table cites the source of every number; those citations live as
``# comments`` in the topology file, which a YAML parser drops. This reads them
back by tracking indentation: ``key: value  # comment`` -> {"a.b.key": "comment"}.
"""

from __future__ import annotations

import re
from pathlib import Path

_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z0-9_]+):(?P<rest>.*)$")


def _split_comment(rest: str) -> tuple[str, str]:
    quote = None
    for i, ch in enumerate(rest):
        if ch in "\"'":
            quote = None if quote == ch else (quote or ch)
        elif ch == "#" and quote is None and (i == 0 or rest[i - 1].isspace()):
            return rest[:i].strip(), rest[i + 1:].strip()
    return rest.strip(), ""


def key_comments(text: str) -> dict[str, str]:
    stack: list[tuple[int, str]] = []
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m or line.lstrip().startswith("#"):
            continue
        indent = len(m.group("indent"))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [m.group("key")])
        _, comment = _split_comment(m.group("rest"))
        if comment:
            out[path] = comment
        stack.append((indent, m.group("key")))
    return out


def chain_comments(files: list[Path] | tuple[Path, ...]) -> dict[str, str]:
    """Comments of an ``extends`` chain, later files overriding earlier ones."""
    merged: dict[str, str] = {}
    for f in files:
        merged.update(key_comments(Path(f).read_text(encoding="utf-8")))
    return merged
