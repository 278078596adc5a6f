"""One decoder-only transformer as data: the Hugging Face ``config.json`` fields the
simulator and the capacity planner need, and the sizes that follow from them.

Pure arithmetic, no simulator imports, so every layer above can read a model.
Weights are counted for the Llama block: Q, K, V, O projections, a SwiGLU FFN
(gate, up, down) and two RMSNorm weight vectors per layer, then the embedding,
the final norm and the LM head (absent when tied to the embedding).
"""

from __future__ import annotations

from dataclasses import dataclass

# Hugging Face torch_dtype -> (our dtype name, bytes per element)
DTYPES = {"bfloat16": ("bf16", 2), "float16": ("f16", 2), "float32": ("f32", 4)}


@dataclass(frozen=True)
class ModelConfig:
    """A model's shape; field names are the Hugging Face ``config.json`` keys."""

    name: str
    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    torch_dtype: str = "bfloat16"
    tie_word_embeddings: bool = False
    num_local_experts: int | None = None  # MoE: experts per layer (None: a dense FFN)
    num_experts_per_tok: int | None = None  # MoE: experts each token is routed to

    # -- shapes ----------------------------------------------------------------------------
    @property
    def dtype(self) -> str:
        """The simulator's dtype name for ``torch_dtype`` (bf16, f16, f32)."""
        return DTYPES[self.torch_dtype][0]

    @property
    def dtype_bytes(self) -> int:
        """Bytes per weight and per KV-cache element."""
        return DTYPES[self.torch_dtype][1]

    @property
    def group(self) -> int:
        """G = Hq / Hkv: query heads sharing one KV head."""
        return self.num_attention_heads // self.num_key_value_heads

    @property
    def q_dim(self) -> int:
        """Hq * d: width of the query projection's output."""
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Hkv * d: width of the key (and of the value) projection's output."""
        return self.num_key_value_heads * self.head_dim

    # -- parameters ------------------------------------------------------------------------
    @property
    def attention_params_per_layer(self) -> int:
        """W_q + W_k + W_v + W_o = D*Hq*d + 2*D*Hkv*d + Hq*d*D."""
        D = self.hidden_size
        return 2 * D * self.q_dim + 2 * D * self.kv_dim

    @property
    def ffn_params_per_layer(self) -> int:
        """Dense: gate + up + down = 3*D*F. MoE: E experts of 3*D*F plus the router D*E."""
        dense = 3 * self.hidden_size * self.intermediate_size
        if self.num_local_experts is None:
            return dense
        return self.num_local_experts * (dense + self.hidden_size)

    @property
    def params_per_layer(self) -> int:
        """Attention + FFN + the two RMSNorm weights (2*D)."""
        return self.attention_params_per_layer + self.ffn_params_per_layer + 2 * self.hidden_size

    @property
    def embedding_params(self) -> int:
        """The token embedding table, V*D."""
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        """The output projection, D*V (0 when tied to the embedding)."""
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    @property
    def param_count(self) -> int:
        """L * params_per_layer + embedding + final norm (D) + LM head."""
        return (self.num_hidden_layers * self.params_per_layer + self.embedding_params
                + self.hidden_size + self.lm_head_params)

    @property
    def weight_bytes_per_layer(self) -> int:
        """params_per_layer * dtype_bytes."""
        return self.params_per_layer * self.dtype_bytes

    @property
    def weight_bytes(self) -> int:
        """param_count * dtype_bytes: every weight, embedding and LM head included."""
        return self.param_count * self.dtype_bytes

    # -- KV cache --------------------------------------------------------------------------
    @property
    def kv_bytes_per_token_per_layer(self) -> int:
        """One K and one V vector per KV head: 2 * Hkv * d * dtype_bytes."""
        return 2 * self.kv_dim * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        """L * kv_bytes_per_token_per_layer."""
        return self.num_hidden_layers * self.kv_bytes_per_token_per_layer

    def kv_bytes(self, tokens: int, users: int = 1) -> int:
        """KV-cache bytes of ``users`` users holding ``tokens`` tokens each."""
        return users * tokens * self.kv_bytes_per_token
