"""The code rules no review should have to repeat: module and function size, no import
cycle. Both read the source with ``ast`` (nothing is imported), so an offender is named
with its file and line."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "kernbench"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules(src: Path = SRC) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package under ``src``."""
    out = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def size_offenders(src: Path = SRC) -> list[str]:
    """Modules over the line limit and functions over theirs, as ``file:line: what``."""
    found = []
    for path in _modules(src).values():
        rel = path.relative_to(src)
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            found.append(f"{rel}: module has {lines} lines (max {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{rel}:{node.lineno}: {node.name} has {length} lines "
                                 f"(max {MAX_FUNCTION_LINES})")
    return found


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name a relative ``from`` import refers to."""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _imported_names(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every kernbench name ``module`` imports, anywhere in it (functions included);
    ``from a import b`` is ``a.b`` when that is a module, else ``a``."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = _resolve_relative(module, path.name == "__init__.py", node.level,
                                         node.module)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                names.add(sub if sub in modules else base)
    return {n for n in names if n == PACKAGE or n.startswith(PACKAGE + ".")}


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Module -> the kernbench modules it imports (``import a.b.c`` of a name that is
    not a module counts as its nearest enclosing module)."""
    modules = _modules(src)
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imported in _imported_names(name, path, modules):
            while imported not in modules and "." in imported:
                imported = imported.rsplit(".", 1)[0]
            if imported in modules and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_modules_and_functions_are_small():
    offenders = size_offenders()
    assert not offenders, "over the size rules:\n" + "\n".join(offenders)


def test_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles (each a set of modules that import each other):\n" + \
        "\n".join(" <-> ".join(c) for c in found)


def test_the_checks_catch_a_planted_offender(tmp_path):
    pkg = tmp_path / PACKAGE
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from kernbench.sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from .. import a\n\n\ndef long():\n"
                                      + "    x = 1\n" * MAX_FUNCTION_LINES)
    (pkg / "ok.py").write_text("from kernbench import a\n")
    assert cycles(import_graph(tmp_path)) == [["kernbench.a", "kernbench.sub.b"]]
    assert [o.split(": ", 1)[1] for o in size_offenders(tmp_path)] == [
        f"long has {MAX_FUNCTION_LINES + 1} lines (max {MAX_FUNCTION_LINES})"]
