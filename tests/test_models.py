"""Models as data: the shipped Llama 3 presets, user config.json and YAML files, the
sizes derived from them against the published parameter counts, and every bad input
as one line naming the file, the key and the value."""

from __future__ import annotations

import json

import pytest

from kernbench.errors import UsageError
from kernbench.models import PRESETS, load_model

# the published Llama 3 shapes (Meta's config.json files): L, D, Hq, Hkv, F, V
LLAMA3 = {"llama3-8b": (32, 4096, 32, 8, 14336, 128256),
          "llama3-70b": (80, 8192, 64, 8, 28672, 128256)}
# total parameters Meta publishes (untied embeddings): 8.03 B and 70.55 B
PUBLISHED = {"llama3-8b": 8.03e9, "llama3-70b": 70.55e9}

TINY = {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512,
        "vocab_size": 1000}


def llama_params(L, D, Hq, Hkv, F, V, d=128):
    """Parameters of a Llama decoder written out term by term: per layer Q (D x Hq d),
    K and V (D x Hkv d each), O (Hq d x D), gate, up (D x F), down (F x D), two norms;
    then the embedding, the final norm and an untied LM head."""
    layer = D * Hq * d + D * Hkv * d + D * Hkv * d + Hq * d * D + D * F + D * F + F * D + D + D
    return L * layer + V * D + D + D * V


@pytest.mark.parametrize("name", sorted(LLAMA3))
def test_presets_carry_the_published_shapes(name):
    m = load_model(name)
    L, D, Hq, Hkv, F, V = LLAMA3[name]
    assert (m.num_hidden_layers, m.hidden_size, m.num_attention_heads, m.num_key_value_heads,
            m.intermediate_size, m.vocab_size) == (L, D, Hq, Hkv, F, V)
    assert (m.head_dim, m.rope_theta, m.rms_norm_eps) == (128, 500000.0, 1e-5)
    assert (m.torch_dtype, m.dtype, m.dtype_bytes, m.name) == ("bfloat16", "bf16", 2, name)
    assert m.num_local_experts is None and m.num_experts_per_tok is None


@pytest.mark.parametrize("name", sorted(LLAMA3))
def test_parameter_count_matches_the_published_one(name):
    m = load_model(name)
    n = llama_params(*LLAMA3[name])
    assert m.param_count == n
    assert abs(n - PUBLISHED[name]) / PUBLISHED[name] < 0.005
    assert m.weight_bytes == 2 * n
    assert m.weight_bytes == (m.num_hidden_layers * m.weight_bytes_per_layer
                              + 2 * (2 * m.vocab_size * m.hidden_size + m.hidden_size))


def test_moe_parameter_count_written_out():
    """Mixtral 8x7B: attention as Llama's, then per layer E experts of gate, up and down
    (3 D F each) and the router (D x E); 46.7 B published."""
    m = load_model("mixtral-8x7b")
    L, D, Hq, Hkv, d, F, V, E = 32, 4096, 32, 8, 128, 14336, 32000, 8
    layer = D * Hq * d + 2 * D * Hkv * d + Hq * d * D + E * 3 * D * F + D * E + 2 * D
    assert m.param_count == L * layer + V * D + D + D * V
    assert abs(m.param_count - 46.7e9) / 46.7e9 < 0.005


def test_kv_bytes_per_token():
    m = load_model("llama3-70b")
    assert m.kv_bytes_per_token_per_layer == 2 * 8 * 128 * 2  # K and V, 8 heads, 128, bf16
    assert m.kv_bytes_per_token == 80 * 4096 == 320 * 1024
    assert m.kv_bytes(32768, users=4) == 4 * 32768 * 320 * 1024
    assert (m.group, m.q_dim, m.kv_dim) == (8, 64 * 128, 8 * 128)


def test_an_moe_config_counts_every_expert(tmp_path):
    """Mixtral 8x7B: 8 experts per layer, each a Llama FFN, plus a router; 46.7 B published."""
    f = tmp_path / "mixtral.json"
    f.write_text(json.dumps({"num_hidden_layers": 32, "hidden_size": 4096,
                             "num_attention_heads": 32, "num_key_value_heads": 8,
                             "intermediate_size": 14336, "vocab_size": 32000,
                             "num_local_experts": 8, "num_experts_per_tok": 2}))
    m = load_model(str(f))
    assert (m.num_local_experts, m.num_experts_per_tok) == (8, 2)
    assert abs(m.param_count - 46.7e9) / 46.7e9 < 0.005


def test_a_user_config_json_with_extra_keys(tmp_path):
    folder = tmp_path / "Tiny-Llama"
    folder.mkdir()
    doc = {**TINY, "architectures": ["LlamaForCausalLM"], "rope_scaling": {"factor": 8.0},
           "hidden_act": "silu", "torch_dtype": "float16", "rope_theta": 1e6}
    (folder / "config.json").write_text(json.dumps(doc))
    m = load_model(str(folder / "config.json"))
    assert m.name == "Tiny-Llama"  # a Hugging Face checkout's folder names the model
    assert (m.num_key_value_heads, m.head_dim, m.dtype, m.dtype_bytes) == (2, 64, "f16", 2)
    assert m.rope_theta == 1e6 and m.rms_norm_eps == 1e-5


def test_yaml_form_and_defaults(tmp_path):
    f = tmp_path / "tiny.yaml"
    f.write_text("num_hidden_layers: 2\nhidden_size: 256\nnum_attention_heads: 4\n"
                 "intermediate_size: 512\nvocab_size: 1000\nrms_norm_eps: 1e-6\n"
                 "torch_dtype: float32\nsomething_else: [1, 2]\n")
    m = load_model(str(f))
    assert m.name == "tiny"
    assert m.num_key_value_heads == 4  # defaults to the query heads, as transformers does
    assert m.head_dim == 256 // 4 and m.rope_theta == 10000.0
    assert m.rms_norm_eps == 1e-6  # YAML reads 1e-6 as a string; it is still a number
    assert (m.dtype, m.dtype_bytes, m.kv_bytes_per_token_per_layer) == ("f32", 4, 2 * 4 * 64 * 4)


@pytest.mark.parametrize("change,needle", [
    ({"hidden_size": 0}, "hidden_size must be a positive integer, got 0"),
    ({"num_hidden_layers": 2.5}, "num_hidden_layers must be a positive integer, got 2.5"),
    ({"vocab_size": True}, "vocab_size must be a positive integer, got True"),
    ({"intermediate_size": None}, "intermediate_size is missing"),
    ({"num_key_value_heads": 3}, "num_attention_heads 4 must be a multiple of "
                                 "num_key_value_heads, got 3"),
    ({"head_dim": 63}, "head_dim must be even (RoPE rotates its two halves), got 63"),
    ({"head_dim": None, "hidden_size": 258}, "head_dim is absent and hidden_size 258"),
    ({"torch_dtype": "int8"}, "torch_dtype must be one of bfloat16, float16, float32, "
                              "got 'int8'"),
    ({"rope_theta": -1}, "rope_theta must be a positive number, got -1"),
    ({"rms_norm_eps": "tiny"}, "rms_norm_eps must be a positive number, got 'tiny'"),
    ({"tie_word_embeddings": "no"}, "tie_word_embeddings must be true or false, got 'no'"),
    ({"num_local_experts": 2, "num_experts_per_tok": 3},
     "num_experts_per_tok must be at most num_local_experts (2), got 3"),
])
def test_a_bad_key_is_one_line_naming_file_key_and_value(tmp_path, change, needle):
    f = tmp_path / "m.json"
    f.write_text(json.dumps({**TINY, **change}))
    with pytest.raises(UsageError) as info:
        load_model(str(f))
    msg = str(info.value)
    assert msg.startswith(f"{f}: ") and needle in msg and "\n" not in msg


@pytest.mark.parametrize("text,suffix,needle", [
    ("{not json", ".json", "not valid JSON (line 1"),
    ("a: [1,\n", ".yaml", "not valid YAML"),
    ("[1, 2]", ".json", "expected a mapping of config.json keys"),
])
def test_a_malformed_file_is_one_line(tmp_path, text, suffix, needle):
    f = tmp_path / f"m{suffix}"
    f.write_text(text)
    with pytest.raises(UsageError) as info:
        load_model(str(f))
    assert str(info.value).startswith(f"{f}: ") and needle in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name,needle", [("gpt-17", "not a preset"),
                                         ("no/such/config.json", "no such model file")])
def test_an_unknown_model_lists_the_presets(name, needle):
    with pytest.raises(UsageError) as info:
        load_model(name)
    msg = str(info.value)
    assert needle in msg and f"{name!r}" in msg and "\n" not in msg
    assert all(p in msg for p in PRESETS)
