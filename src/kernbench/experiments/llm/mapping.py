"""Where a decoder layer runs: the tensor-parallel ranks and the attention groups.

Megatron-style tensor parallelism at PE granularity. The ``tp`` ranks are the
first ``k = tp / (SIPs x CUBEs)`` PEs of every CUBE, in (SIP, CUBE, PE)
order, the order of the all-reduce's process group. The FFN is split over all
of them (gate/up by columns, down by rows). Attention keeps the gqa study's
mapping: one group of ``C`` CUBEs x ``P`` PEs per KV head
(:func:`~kernbench.geometry.groups.place_groups`). The ranks of a SIP are
shared out among that SIP's KV heads: each takes an equal slice of its head's
Q/K columns, V columns and W_o rows, so every transfer between the
projections and attention stays on one SIP, and SIPs meet only in the two
all-reduces. Design: docs/adr/0039-decoder-layer-mapping.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.errors import UsageError
from kernbench.geometry.groups import CubeGroup, place_groups, root_of


@dataclass(frozen=True)
class Dims:
    """The shapes a layer needs, from a model file."""

    layers: int
    D: int  # hidden size
    Hq: int
    Hkv: int
    d: int  # head dim
    F: int  # FFN inner size
    vocab: int
    theta: float
    eps: float
    experts: int | None = None  # MoE: experts per layer (None: a dense FFN of width F)
    top_k: int | None = None  # MoE: experts per token

    @property
    def G(self) -> int:
        return self.Hq // self.Hkv

    @classmethod
    def of(cls, model, layers: int | None = None) -> Dims:
        """The shapes of a :class:`kernbench.models.ModelConfig` (a MoE model's F is one
        expert's FFN width; top-k defaults to 2, transformers' Mixtral default)."""
        return cls(layers or model.num_hidden_layers, model.hidden_size,
                   model.num_attention_heads, model.num_key_value_heads, model.head_dim,
                   model.intermediate_size, model.vocab_size, float(model.rope_theta),
                   float(model.rms_norm_eps), model.num_local_experts,
                   model.num_experts_per_tok or (min(2, model.num_local_experts)
                                                 if model.num_local_experts else None))


@dataclass(frozen=True)
class Slice:
    """One rank's share of its KV head's projections (columns/rows from ``*0``)."""

    group: CubeGroup
    qk0: int
    qk: int
    v0: int
    v: int
    o0: int
    o: int


@dataclass(frozen=True)
class Mapping:
    tp: int
    k: int  # PEs per CUBE among the ranks
    ranks: tuple[tuple[int, int, int], ...]
    groups: tuple[CubeGroup, ...]
    C: int
    P: int
    slices: dict  # rank -> Slice (ranks on SIPs without a KV head have none)
    ffn_cols: int
    vocab_cols: int

    def root(self, g: CubeGroup) -> tuple[int, int, int]:
        return root_of(g)


def _tp_degree(spec, tp: int | None) -> tuple[int, int]:
    sips, cubes, pes = spec.sips.count, spec.cubes_per_sip, spec.pes_per_cube
    per_k = sips * cubes
    allowed = [per_k * k for k in range(1, pes + 1)]
    tp = allowed[-1] if tp is None else tp
    if tp not in allowed:
        raise UsageError(f"--tp {tp}: on {spec.name!r} the ranks are k PEs of each of the "
                         f"{per_k} CUBEs (allowed: {', '.join(map(str, allowed))})")
    return tp, tp // per_k


def _groups(spec, dims: Dims, C: int | None, P: int | None,
            ring: bool) -> tuple[list, int, int]:
    """The attention groups; by default the widest C that fits, with every PE of a CUBE.
    The prefill ring gives each CUBE of a group the same number of query heads, so with
    ``ring`` only a C dividing G is taken (Mixtral's G = 4 on 8-CUBE groups: C = 4)."""
    P = spec.pes_per_cube if P is None else P
    tries = [C] if C is not None else [c for c in range(spec.cubes_per_sip, 0, -1)
                                       if not (ring and dims.G % c)]
    last = None
    for c in tries:
        try:
            return place_groups(spec, dims.Hkv, c, P), c, P
        except ValueError as exc:
            last = exc
    tried = f"C={C}" if C is not None else f"C in {tries}"
    raise UsageError(f"attention of {dims.Hkv} KV heads on {spec.name!r} ({tried}, P={P}): "
                     f"{last} (one group of CUBEs per KV head)")


def _split(what: str, total: int, parts: int) -> int:
    if total % parts:
        raise UsageError(f"--tp: {what} ({total}) do not split evenly over {parts} ranks "
                         f"(choose a --tp whose ranks per KV head divide it)")
    return total // parts


def build(spec, dims: Dims, tp: int | None = None, C: int | None = None,
          P: int | None = None, ring: bool = False) -> Mapping:
    """The mapping of one layer of ``dims`` on ``spec`` (one line for what does not fit);
    ``ring``: attention is the prefill ring (C must divide G)."""
    tp, k = _tp_degree(spec, tp)
    ranks = tuple((s, c, p) for s in range(spec.sips.count) for c in range(spec.cubes_per_sip)
                  for p in range(k))
    groups, C, P = _groups(spec, dims, C, P, ring)
    slices = {}
    for sip in range(spec.sips.count):
        mine = [g for g in groups if g.sip == sip]
        if not mine:
            continue
        local = [r for r in ranks if r[0] == sip]
        per = _split("the SIP's ranks", len(local), len(mine))
        qk = _split(f"each KV head's {(dims.G + 1) * dims.d} query/key columns",
                    (dims.G + 1) * dims.d, per)
        v = _split(f"each KV head's {dims.d} value columns", dims.d, per)
        o = _split(f"each KV head's {dims.G * dims.d} W_o rows", dims.G * dims.d, per)
        for j, g in enumerate(mine):
            for i, r in enumerate(local[j * per:(j + 1) * per]):
                slices[r] = Slice(g, i * qk, qk, i * v, v, i * o, o)
    ffn = _split(f"the FFN's {dims.F} columns", dims.F, tp)
    vocab = -(-dims.vocab // tp)  # the last shard is padded: its extra rows are never looked up
    return Mapping(tp, k, ranks, tuple(groups), C, P, slices, ffn, vocab)
