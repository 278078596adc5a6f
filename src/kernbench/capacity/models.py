"""Model presets and user model files for the capacity planner."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from kernbench.errors import UsageError

FIELDS = ("layers", "hidden", "heads", "kv_heads", "d_head", "ffn", "b")


@dataclass(frozen=True)
class Model:
    name: str
    layers: int
    hidden: int
    heads: int  # query heads
    kv_heads: int
    d_head: int
    ffn: int  # FFN inner size
    b: int  # bytes per weight and KV element (dtype bytes)

    def quantities(self) -> dict[str, int]:
        return {k: v for k, v in asdict(self).items() if k != "name"}


# published Llama 3 shapes (Meta, "The Llama 3 Herd of Models", 2024), 16-bit weights
PRESETS = {
    "llama3-8b": Model("llama3-8b", 32, 4096, 32, 8, 128, 14336, 2),
    "llama3-70b": Model("llama3-70b", 80, 8192, 64, 8, 128, 28672, 2),
}


def load_model(name: str) -> Model:
    """A preset by name, or a YAML file with the keys of :data:`FIELDS`."""
    if name in PRESETS:
        return PRESETS[name]
    path = Path(name)
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        raise UsageError(f"--model {name!r}: not a preset ({', '.join(PRESETS)}) "
                         f"nor a model YAML file")
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML ({exc.__class__.__name__})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: expected a mapping with keys {', '.join(FIELDS)}")
    unknown = sorted(set(doc) - set(FIELDS) - {"name"})
    if unknown:
        raise UsageError(f"{path}: unknown key {unknown[0]!r} (allowed: name, {', '.join(FIELDS)})")
    values = {}
    for key in FIELDS:
        v = doc.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise UsageError(f"{path}: {key} must be a positive integer, got {v!r}")
        values[key] = v
    if values["heads"] % values["kv_heads"]:
        raise UsageError(f"{path}: heads ({values['heads']}) must be a multiple of kv_heads "
                         f"({values['kv_heads']})")
    return Model(str(doc.get("name", path.stem)), **values)
