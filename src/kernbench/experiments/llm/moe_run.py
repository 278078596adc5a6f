"""The mixture-of-experts FFN of a decoder layer, tensor-parallel (``kernels.moe``).

Every rank holds the router (replicated) and its ``F / tp`` columns of every expert
(gate and up by columns, down by rows), so the experts' outputs meet in the layer's
all-reduce as the dense FFN's do. The router runs on every rank; the host then takes
the routing: from the router's logits in data mode (``models.routing.top_k``), from a
seeded Zipf law in timing mode (``sample_routes``), either way bounded by the capacity
factor (``apply_capacity``, dropped assignments counted). Design: docs/adr/0044.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kernbench.errors import UsageError
from kernbench.experiments.llm.moe_layout import ExpertLayout
from kernbench.experiments.llm.tensors import ptr
from kernbench.kernels.moe import moe_combine, moe_expert_rows, moe_router
from kernbench.models.routing import apply_capacity, check_routing, sample_routes, top_k

ZERO_BYTES = 256 * 1024  # rows of zeros the combine writes at a time


def expert_rows(spec, D: int, cols: int) -> int:
    """Rows ``moe_expert_rows`` takes at once: per row its f16 input and f32 output
    (D wide) and its f32 gate and f16 product (``cols`` wide) stay in scratch until
    the block is written out, beside one f32 row being scaled. The fewer blocks, the
    fewer times the expert's weights are read."""
    per_row = D * (2 + 4) + cols * (4 + 2)
    return max(1, (spec.pe.kernel_scratch_bytes * 3 // 4 - D * 4 * 2) // per_row)


@dataclass(frozen=True)
class MoeSettings:
    """How tokens are routed: ``capacity_factor`` (None: the experts / top-k that drops
    nothing, as data mode needs) and, in timing mode, the Zipf ``skew`` and ``seed``."""

    capacity_factor: float | None = None
    skew: float = 0.0
    seed: int = 0
    parallel: str = "tp"  # "tp": column slices of every expert; "ep": experts placed
    all_to_all: str | None = None  # "ep": the all-to-all algorithm (None: ccl.yaml's default)
    placement: str = "blocks"  # "ep": experts on blocks of ranks, or strided (moe_layout)

    def factor(self, dims) -> float:
        return self.capacity_factor if self.capacity_factor is not None else \
            dims.experts / dims.top_k


def _scaled(rng, shape, fan_in: int) -> np.ndarray:
    return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float16)


class MoeWeights:
    """The router and each rank's expert slices of one layer (``ExpertLayout``); the
    global arrays in data mode, dumped as ``router`` and ``e<e>.w_gate`` / ``w_up`` /
    ``w_down``. ``slots[s]`` is the (gate, up, down) tensor set of every rank's slot
    ``s``."""

    def __init__(self, place, dims, l: int, rng, arrays: dict, layout) -> None:
        m, D, F, E = place.m, dims.D, dims.F, dims.experts
        if place.data:
            arrays["router"] = _scaled(rng, (D, E), D)
            for e in range(E):
                arrays[f"e{e}.w_gate"] = _scaled(rng, (D, F), D)
                arrays[f"e{e}.w_up"] = _scaled(rng, (D, F), D)
                arrays[f"e{e}.w_down"] = _scaled(rng, (F, D), F)
        a, cf = arrays, layout.cols
        idx = {r: i for i, r in enumerate(m.ranks)}

        def piece(r, s: int, name: str):
            e, c0 = layout.slot(idx[r], s)
            w = a[f"e{e}.{name}"]
            return w[c0:c0 + cf] if name == "w_down" else w[:, c0:c0 + cf]

        self.router = place.replicated(f"router{l}", a.get("router"), (D, E), "f16")
        self.slots = [
            (place.per_rank(f"wg{l}s{s}", (D, cf), "f16", lambda r, s=s: piece(r, s, "w_gate")),
             place.per_rank(f"wu{l}s{s}", (D, cf), "f16", lambda r, s=s: piece(r, s, "w_up")),
             place.per_rank(f"wd{l}s{s}", (cf, D), "f16", lambda r, s=s: piece(r, s, "w_down")))
            for s in range(layout.slots)]


@dataclass
class MoeFfn:
    """Runs the MoE FFN of each layer; ``counts`` and ``dropped`` describe the last."""

    layer: object  # the DecodeLayer (context, placement, launches)
    settings: MoeSettings
    counts: list[int] = field(default_factory=list)  # kept assignments per expert
    dropped: int = 0  # assignments the capacity factor dropped, over every layer
    assignments: int = 0
    moved_ns: float = 0.0  # the last layer's all-to-alls, as their model predicts

    def __post_init__(self) -> None:
        lay = self.layer
        dims, T = lay.dims, lay.T
        check_routing(dims.experts, dims.top_k, self.settings.factor(dims), self.settings.skew)
        self.layout = ExpertLayout(self.settings.parallel, dims.experts, len(lay.m.ranks),
                                   dims.F, self.settings.placement)
        self.logits = lay.place.per_rank("moe_logits", (T, dims.experts), "f32")
        self.normed = lay.place.per_rank("moe_normed", (T, dims.D), "f16")
        if self.settings.parallel == "tp":  # every kept assignment's result row
            self.ret = lay.place.per_rank("moe_ret", (T * dims.top_k, dims.D), "f16")
        self._calls = 0

    def run(self, w, h: dict, partial: dict, rows: int) -> None:
        """partial = the experts' part of FFN(norm(h)) on every rank (+ h on the first):
        each rank runs its slice of every expert over that expert's rows, then sums each
        token's rows; the all-reduce adds the ranks' slices."""
        lay = self.layer
        D, m = lay.dims.D, lay.m
        tokens = self._router(w, h, rows)
        assigned, owned, k = [], {t: [] for t in range(lay.T)}, 0
        for pairs in tokens:  # result rows in expert order, then token order
            assigned.append(tuple((t, wt, k + i) for i, (t, wt) in enumerate(pairs)))
            for i, (t, _) in enumerate(pairs):
                owned[t].append(k + i)
            k += len(pairs)
        ranks = {r: i for i, r in enumerate(m.ranks)}
        block = expert_rows(lay.ctx.spec, D, self.layout.cols)
        lay.launch("moe_experts", moe_expert_rows, {
            r: (ptr(self.normed, r), ptr(self.ret, r), D,
                self.slices(w, i, lambda e: assigned[e]), block) for r, i in ranks.items()})
        every = tuple((t, tuple(v)) for t, v in owned.items())
        self.combine(self.ret, h, partial, lambda r: every, lambda r: r == m.ranks[0])

    def combine(self, back: dict, h: dict, partial: dict, owned_of, carries) -> None:
        """``moe_combine`` on every rank: the tokens ``owned_of(rank)`` from their rows of
        ``back``, plus the residual where ``carries(rank)``."""
        lay = self.layer
        D = lay.dims.D
        block = max(1, ZERO_BYTES // (D * 2))
        lay.launch("moe_combine", moe_combine, {
            r: (ptr(back, r), ptr(h, r) if carries(r) else None, ptr(partial, r), lay.T, D,
                owned_of(r), block) for r in lay.m.ranks})

    def slices(self, w, idx: int, rows_of) -> tuple:
        """Rank ``idx``'s expert slices that have rows: (gate, up, down, cols, rows)."""
        r = self.layer.m.ranks[idx]
        out = []
        for s, (g, u, d) in enumerate(w.moe.slots):
            rows = rows_of(self.layout.slot(idx, s)[0])
            if rows:
                out.append((ptr(g, r), ptr(u, r), ptr(d, r), self.layout.cols, rows))
        return tuple(out)

    def _router(self, w, h: dict, rows: int) -> list[tuple]:
        """The router on every rank (logits and normalised rows to HBM), then the host's
        routing: each expert's kept (token, weight) pairs."""
        lay = self.layer
        dims = lay.dims
        lay.launch("moe_router", moe_router, {
            r: (ptr(h, r), ptr(w.ffn_norm, r), ptr(w.moe.router, r), ptr(self.logits, r),
                ptr(self.normed, r), lay.T, dims.D, dims.experts, dims.eps, rows)
            for r in lay.m.ranks})
        return self._route()

    def _route(self) -> list[tuple]:
        """Each expert's kept (token, weight) pairs, in token order."""
        lay, s = self.layer, self.settings
        dims, T = lay.dims, lay.T
        if lay.place.data:
            logits = lay.ctx.to_numpy(self.logits[0])[:T]
            routes, weights = top_k(logits, dims.top_k)
        else:
            routes, weights = sample_routes(T, dims.experts, dims.top_k, s.skew,
                                            s.seed + self._calls)
        self._calls += 1
        keep = apply_capacity(routes, dims.experts, s.factor(dims))
        tokens: list[list] = [[] for _ in range(dims.experts)]
        for t in range(T):
            for j in range(dims.top_k):
                if keep[t, j]:
                    tokens[routes[t, j]].append((t, float(weights[t, j])))
        self.counts = [len(x) for x in tokens]
        self.assignments += T * dims.top_k
        self.dropped += int((~keep).sum())
        return [tuple(x) for x in tokens]

    def record(self, dims) -> dict:
        return {"experts": dims.experts, "top_k": dims.top_k,
                "parallel": self.settings.parallel, "placement": self.layout.placement,
                "expert_ranks": self.layout.group,
                "capacity_factor": self.settings.factor(dims), "skew": self.settings.skew,
                "routing": "router logits" if self.layer.place.data else "zipf",
                "assignments": self.assignments, "dropped": self.dropped,
                "expert_tokens": self.counts}


def check_settings(settings: MoeSettings | None, dims) -> MoeSettings | None:
    """The settings a dense model refuses and a MoE model defaults."""
    if dims.experts is None:
        if settings is not None and (settings.capacity_factor is not None or settings.skew
                                     or settings.parallel != "tp"
                                     or settings.placement != "blocks"):
            raise UsageError("--capacity-factor, --skew and --moe-parallel apply to a "
                             "mixture-of-experts model only")
        return None
    return settings or MoeSettings()
