"""Load YAML and validate it against a JSON schema with one-line errors.

Used for topology files and the workflow config. Every failure becomes a
:class:`~kernbench.errors.ConfigError` naming the file, the key path and what
is allowed; YAML syntax errors and duplicate keys report line and column.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from kernbench.errors import ConfigError

# libyaml's parser when PyYAML was built with it: ten times faster than the pure-Python
# one, and every simulation job parses its topology and schemas at start-up.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeLoader):
    """SafeLoader that rejects duplicate mapping keys instead of keeping the last."""


class _StrictPyLoader(yaml.SafeLoader):
    """The same in pure Python: re-parses a broken file, whose messages name the
    offending character (libyaml's do not)."""


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` on the fast loader (for files we ship or have validated)."""
    return yaml.load(text, Loader=_SafeLoader)  # a SafeLoader


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False):
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", mark
            )
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


for _loader in (_StrictLoader, _StrictPyLoader):
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str, source: str) -> Any:
    """Parse YAML text; syntax errors become ``file:line:col`` one-liners."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # strict SafeLoader subclass
    except yaml.YAMLError:
        pass  # explain it with the pure-Python parser's wording (the fast path is unchanged)
    try:
        return yaml.load(text, Loader=_StrictPyLoader)  # strict SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        problem = exc.problem or exc.context or "invalid YAML"
        raise ConfigError(source, "", f"YAML syntax error at {where}: {problem}") from None
    except yaml.YAMLError as exc:  # pragma: no cover - non-marked errors are rare
        raise ConfigError(source, "", f"YAML syntax error: {exc}") from None


def load_yaml_file(path: str | Path, display: str | None = None) -> Any:
    """Parse a YAML file; ``display`` is the name used in error messages."""
    p = Path(path)
    name = display or str(path)
    if not p.exists():
        raise ConfigError(name, "", "file not found")
    if not p.is_file():
        raise ConfigError(name, "", "not a regular file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(name, "", f"not UTF-8 text (bad byte at offset {exc.start})") from None
    return parse_yaml(text, name)


def _non_finite(doc: Any, path: list[Any]) -> list[Any] | None:
    """Key path of the first NaN/inf number (JSON schema bounds cannot reject NaN)."""
    if isinstance(doc, float) and not math.isfinite(doc):
        return path
    if isinstance(doc, dict):
        for k, v in doc.items():
            hit = _non_finite(v, path + [_Key(str(k))])
            if hit is not None:
                return hit
    if isinstance(doc, list):
        for i, v in enumerate(doc):
            hit = _non_finite(v, path + [i])
            if hit is not None:
                return hit
    return None


@cache
def packaged_schema(package: str, name: str) -> dict:
    """Load a schema shipped inside the package (importlib.resources, no cwd paths)."""
    text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
    return safe_load(text)


class _Key(str):
    """A mapping key in an error path (never formatted as a list index)."""


def format_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_TYPE_NAMES = {"dict": "mapping", "list": "list", "str": "string", "int": "integer",
               "float": "number", "bool": "boolean", "NoneType": "null"}


def _describe(error: jsonschema.ValidationError) -> tuple[list[Any], str]:
    """Turn one jsonschema error into (key path, message saying what is allowed)."""
    path = list(error.absolute_path)
    v, inst, schema = error.validator, error.instance, error.schema
    if "propertyNames" in error.schema_path and v == "pattern":
        return path, f"key {_short(inst)} is not a valid id (must match {error.validator_value})"
    if v == "additionalProperties":
        allowed = sorted((schema.get("properties") or {}).keys())
        unknown = sorted(str(k) for k in inst if k not in allowed)
        return path + [_Key(unknown[0])], f"unknown key (allowed: {', '.join(allowed)})"
    if v == "required":
        missing = [k for k in error.validator_value if k not in inst]
        return path + [missing[0]], "missing required key"
    if v == "type":
        got = _TYPE_NAMES.get(type(inst).__name__, type(inst).__name__)
        want = error.validator_value
        want = " or ".join(want) if isinstance(want, list) else want
        return path, f"expected {want}, got {got} {_short(inst)}"
    if v == "exclusiveMinimum":
        return path, f"must be > {error.validator_value}, got {_short(inst)}"
    if v == "minimum":
        return path, f"must be >= {error.validator_value}, got {_short(inst)}"
    if v == "maximum":
        return path, f"must be <= {error.validator_value}, got {_short(inst)}"
    if v == "enum":
        allowed = ", ".join(str(x) for x in error.validator_value)
        return path, f"must be one of: {allowed}; got {_short(inst)}"
    if v == "const":
        return path, f"must be {error.validator_value!r}, got {_short(inst)}"
    if v == "minItems":
        return path, f"needs at least {error.validator_value} item(s), got {len(inst)}"
    if v == "maxItems":
        return path, f"allows at most {error.validator_value} item(s), got {len(inst)}"
    if v == "uniqueItems":
        return path, "items must be unique"
    if v == "pattern":
        return path, f"must match {error.validator_value}, got {_short(inst)}"
    if v == "minLength":
        return path, f"must not be empty (at least {error.validator_value} character(s))"
    if v in ("anyOf", "oneOf") and schema.get("description"):
        return path, f"must be {schema['description']}; got {_short(inst)}"
    if v == "minProperties":
        return path, f"needs at least {error.validator_value} entr(y/ies)"
    return path, error.message


def _sort_key(error: jsonschema.ValidationError) -> tuple:  # paths may mix int and str
    return (tuple(str(p) for p in error.absolute_path), str(error.validator))


def schema_errors(doc: Any, schema: dict) -> list[tuple[str, str]]:
    """All schema violations as (key path, message), in a deterministic order."""
    validator_cls = jsonschema.validators.validator_for(schema)
    validator = validator_cls(schema)
    errors = sorted(validator.iter_errors(doc), key=_sort_key)
    return [(format_path(p), m) for p, m in map(_describe, errors)]


def validate(doc: Any, schema: dict, source: str) -> None:
    """Raise a one-line ConfigError for the first violation (deterministic choice)."""
    bad = _non_finite(doc, [])
    if bad is not None:
        raise ConfigError(source, format_path(bad), "must be a finite number, got NaN or infinity")
    errors = schema_errors(doc, schema)
    if errors:
        key, message = errors[0]
        raise ConfigError(source, key, message)


def without_required(schema: Any) -> Any:
    """A copy of ``schema`` with every ``required`` dropped (for partial overlays)."""
    if isinstance(schema, dict):
        return {k: without_required(v) for k, v in schema.items() if k != "required"}
    if isinstance(schema, list):
        return [without_required(v) for v in schema]
    return schema
