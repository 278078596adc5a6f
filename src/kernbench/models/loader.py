"""Reading a model: a shipped preset, a Hugging Face ``config.json`` or the same keys in
YAML. Keys the simulator does not use are ignored, as transformers ignores them, so
a downloaded ``config.json`` works unchanged; a key it does use that is wrong gives one
line naming the file, the key and the value."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import yaml

from kernbench.errors import UsageError
from kernbench.models.config import DTYPES, ModelConfig

PRESETS = ("llama3-8b", "llama3-70b", "mixtral-8x7b", "moe-128x-top8")  # presets/<name>.json
SUFFIXES = (".json", ".yaml", ".yml")
REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
            "vocab_size")
OPTIONAL_INTS = ("num_key_value_heads", "head_dim", "num_local_experts", "num_experts_per_tok")
FLOATS = {"rope_theta": 10000.0, "rms_norm_eps": 1e-5}


def _unknown(name: str, why: str) -> UsageError:
    return UsageError(f"--model {name!r}: {why} (presets: {', '.join(PRESETS)}; or a "
                      f"config.json / YAML model file)")


def check_model_name(name: str) -> None:
    """Refuse an unknown preset or a missing model file without reading anything."""
    if name in PRESETS:
        return
    path = Path(name)
    if path.suffix not in SUFFIXES:
        raise _unknown(name, "not a preset nor a .json/.yaml/.yml file")
    if not path.is_file():
        raise _unknown(name, "no such model file")


def load_model(name: str) -> ModelConfig:
    """A preset by name, or the model file at path ``name``."""
    check_model_name(name)
    if name in PRESETS:
        text = resources.files("kernbench.models").joinpath("presets", f"{name}.json")
        return from_dict(json.loads(text.read_text(encoding="utf-8")), name, f"preset {name}")
    path = Path(name)
    text = path.read_text(encoding="utf-8")
    try:
        doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise UsageError(f"{path}: not valid YAML{where}") from None
    return from_dict(doc, model_name(path), str(path))


def model_name(path: Path) -> str:
    """A model file's name: its stem, or its folder's name for a Hugging Face checkout's
    ``config.json`` (``Meta-Llama-3-8B/config.json`` -> ``Meta-Llama-3-8B``)."""
    if path.name == "config.json" and path.resolve().parent.name:
        return path.resolve().parent.name
    return path.stem


def _int(src: str, doc: dict, key: str) -> int | None:
    """A positive integer; None for an absent (or null) optional key."""
    v = doc.get(key)
    if v is None:
        if key in REQUIRED:
            raise UsageError(f"{src}: {key} is missing (a positive integer)")
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise UsageError(f"{src}: {key} must be a positive integer, got {v!r}")
    return v


def _float(src: str, doc: dict, key: str) -> float:
    """A positive number; a numeric string too, because YAML reads ``1e-5`` as one."""
    v = doc.get(key)
    if v is None:
        return FLOATS[key]
    try:
        x = float(v) if not isinstance(v, bool) else float("nan")
    except (TypeError, ValueError):
        x = float("nan")
    if not x > 0 or x == float("inf"):
        raise UsageError(f"{src}: {key} must be a positive number, got {v!r}")
    return x


def _options(src: str, doc: dict) -> dict:
    dtype = doc.get("torch_dtype") or "bfloat16"
    if dtype not in DTYPES:
        raise UsageError(f"{src}: torch_dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    tie = doc.get("tie_word_embeddings", False)
    if not isinstance(tie, bool):
        raise UsageError(f"{src}: tie_word_embeddings must be true or false, got {tie!r}")
    return {"torch_dtype": dtype, "tie_word_embeddings": tie,
            **{k: _float(src, doc, k) for k in FLOATS}}


def from_dict(doc, name: str, src: str) -> ModelConfig:
    """Validate a parsed model document (``src`` names it in errors)."""
    if not isinstance(doc, dict):
        raise UsageError(f"{src}: expected a mapping of config.json keys "
                         f"({', '.join(REQUIRED)}, ...), got {type(doc).__name__}")
    v = {k: _int(src, doc, k) for k in REQUIRED + OPTIONAL_INTS}
    D, Hq = v["hidden_size"], v["num_attention_heads"]
    Hkv = v["num_key_value_heads"] = v["num_key_value_heads"] or Hq
    if Hq % Hkv:
        raise UsageError(f"{src}: num_attention_heads {Hq} must be a multiple of "
                         f"num_key_value_heads, got {Hkv}")
    if v["head_dim"] is None:
        if D % Hq:
            raise UsageError(f"{src}: head_dim is absent and hidden_size {D} is not a "
                             f"multiple of num_attention_heads {Hq}; give head_dim")
        v["head_dim"] = D // Hq
    if v["head_dim"] % 2:
        raise UsageError(f"{src}: head_dim must be even (RoPE rotates its two halves), "
                         f"got {v['head_dim']}")
    E, k = v["num_local_experts"], v["num_experts_per_tok"]
    if E is not None and k is not None and k > E:
        raise UsageError(f"{src}: num_experts_per_tok must be at most num_local_experts "
                         f"({E}), got {k}")
    return ModelConfig(name=name, **v, **_options(src, doc))
