"""One model step on the system: embedding, the layers back to back, the LM head.

Decode only for now: B users, one new token each at position S (the context
already in the KV cache). Fewer layers than the model has may be simulated
(``layers``); the step then counts the last simulated layer for each layer
left out, and the record says how far the simulated layers after the first
differ from each other (``layer_spread``), which is what justifies it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kernbench.components.builtin.pe_ipcq import queue_sets, use_queue_sets
from kernbench.errors import UsageError
from kernbench.experiments.llm import analytic
from kernbench.experiments.llm.layer_run import PHASES, DecodeLayer, LayerWeights, ptr, row_block
from kernbench.experiments.llm.mapping import Dims, build
from kernbench.experiments.llm.reference import rope_angles
from kernbench.experiments.llm.tensors import Placer
from kernbench.geometry.groups import reduce_tables
from kernbench.kernels.decoder import embed, lm_head
from kernbench.kernels.per_rank import per_rank
from kernbench.runtime_api.context import RuntimeContext
from kernbench.runtime_api.distributed import AhbmBackend
from kernbench.sim_engine.engine import GraphEngine

# The layer's all-reduces: the hierarchical algorithm (PE line, CUBE mesh, SIP grid) with
# 16 KiB IPCQ slots, so a [batch, D] f16 buffer moves in a few messages per hop; the
# all-reduce study's defaults (ring, 4 KiB) take ~40x the events at 512 ranks. Recorded
# in every step's record ("collective"); docs/adr/0039.
COLLECTIVE_SLOT_BYTES = 16384


@dataclass
class StepRun:
    record: dict
    arrays: dict = field(default_factory=dict)
    engine: object = field(default=None, repr=False)


def _positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"--{name} must be a positive integer, got {value!r}")
    return value


class _Step:
    def __init__(self, graph, dims: Dims, users: int, context: int, tp, data: bool,
                 seed: int, algorithm: str, keep_records: bool = False) -> None:
        self.dims, self.T, self.S, self.data = dims, users, context, data
        self.mapping = build(graph.spec, dims, tp)
        self.engine = GraphEngine(graph, enable_data=data, keep_records=keep_records)
        self.ctx = RuntimeContext(self.engine)
        for c in self.mapping.ranks:  # create every rank's PE before the queue sets
            self.engine.pe(*c)
        self.collective = {"algorithm": algorithm, "slot_bytes": COLLECTIVE_SLOT_BYTES}
        self.backend = AhbmBackend(self.ctx, algorithm, pes=tuple(range(self.mapping.k)),
                                   ipcq={"slot_bytes": COLLECTIVE_SLOT_BYTES})
        self.queues = {"collective": queue_sets(self.engine)}
        self.ctx.install_ipcq(reduce_tables(list(self.mapping.groups)), slots=4,
                              slot_bytes=max(4096, dims.G * dims.d * 4))
        self.queues["attention"] = queue_sets(self.engine)
        self.place = Placer(self.ctx, self.mapping, data)
        self.rng = np.random.default_rng(seed)
        self.arrays: dict[str, np.ndarray] = {}
        T, D = users, dims.D
        self.bufs = (self.place.per_rank("x", (T, D), "f16"),
                     self.place.per_rank("r", (T, D), "f16"))
        cos, sin = rope_angles(np.full(T, context), dims.d, dims.theta)
        self.angles = {"cos": self.place.replicated("cos", cos.astype(np.float32),
                                                    cos.shape, "f32"),
                       "sin": self.place.replicated("sin", sin.astype(np.float32),
                                                    sin.shape, "f32")}
        self.collectives: list = []

    def _timed(self, fn) -> float:
        env = self.engine.env
        t = env.now
        fn()
        return env.now - t

    def use_queues(self, name: str) -> None:
        """Switch every PE to the collective's or the attention's IPCQ queues."""
        use_queue_sets(self.engine, self.queues[name])

    def _all_reduce(self, tensors):
        self.use_queues("collective")
        res = self.backend.all_reduce_all(tensors)
        self.collectives.append(res.predicted_ns)
        return res

    def embedding(self) -> float:
        """Token rows from each rank's vocabulary shard, then an all-reduce into x."""
        dims, m, T = self.dims, self.mapping, self.T
        vc = m.vocab_cols
        ids = self.rng.integers(0, dims.vocab, T)
        table = None
        if self.data:
            table = (self.rng.standard_normal((vc * m.tp, dims.D))).astype(np.float16)
        idx = {r: i for i, r in enumerate(m.ranks)}
        shards = self.place.per_rank("embed", (vc, dims.D), "f16",
                                     lambda r: table[idx[r] * vc:(idx[r] + 1) * vc])
        plan = {r: (ptr(shards, r), ptr(self.bufs[0], r), T, dims.D,
                    tuple((t, int(i) - idx[r] * vc) for t, i in enumerate(ids)
                          if idx[r] * vc <= i < (idx[r] + 1) * vc))
                for r in m.ranks}

        def run():
            self.ctx.wait(self.ctx.launch("embed", per_rank, embed, plan,
                                          dp=self.place.rank_dp, sips="all"))
            self._all_reduce(self.bufs[0])
        return self._timed(run)

    def head(self) -> float:
        """Final RMSNorm and this rank's vocabulary columns of the logits."""
        dims, m, T = self.dims, self.mapping, self.T
        vc = m.vocab_cols
        w = self.place.per_rank("lm_head", (dims.D, vc), "f16",
                                lambda r: (self.rng.standard_normal((dims.D, vc))
                                           / np.sqrt(dims.D)).astype(np.float16))
        norm = self.place.replicated("norm", np.ones(dims.D, np.float32), (dims.D,), "f32")
        logits = self.place.per_rank("logits", (T, vc), "f32")
        rows = row_block(self.ctx.spec, dims.D, vc)
        plan = {r: (ptr(self.bufs[0], r), ptr(norm, r), ptr(w, r), ptr(logits, r), T, dims.D,
                    vc, dims.eps, rows) for r in m.ranks}
        return self._timed(lambda: self.ctx.wait(self.ctx.launch(
            "lm_head", per_rank, lm_head, plan, dp=self.place.rank_dp, sips="all")))

    def read_x(self) -> np.ndarray:
        return self.ctx.to_numpy(self.bufs[0][0])[:self.T].astype(np.float32)


def run_decode_step(graph, dims: Dims, users: int, context: int, *, layers: int | None = None,
                    tp: int | None = None, data: bool = False, seed: int = 0,
                    model: str = "", algorithm: str = "lrab_hierarchical",
                    keep_records: bool = False) -> StepRun:
    """Simulate one decode step of ``dims`` (``layers`` of its layers, default all)."""
    _positive("batch", users)
    _positive("context", context)
    n = dims.layers if layers is None else _positive("layers", layers)
    if n > dims.layers:
        raise UsageError(f"--layers {n}: the model has {dims.layers} layers")
    st = _Step(graph, dims, users, context, tp, data, seed, algorithm, keep_records)
    embed_ns = st.embedding()
    if data:
        st.arrays["x"] = st.read_x()
    layer = DecodeLayer(st.ctx, st._all_reduce, st.place, dims, users, context,
                        use_queues=st.use_queues)
    spans = []
    for l in range(n):
        w = LayerWeights(st.place, dims, l, st.rng)
        caches, kv = layer.caches(l, st.rng)
        for k, v in {**w.arrays, **kv}.items():
            st.arrays[f"l{l}.{k}"] = v.astype(np.float32)
        spans.append(layer.step(w, caches, st.bufs, st.angles))
    if data:
        st.arrays["out"] = st.read_x()
    head_ns = st.head()
    record = _record(st, dims, spans, embed_ns, head_ns, model, graph.spec)
    return StepRun(record, st.arrays, st.engine)


def _record(st: _Step, dims: Dims, spans: list, embed_ns: float, head_ns: float, model: str,
            spec) -> dict:
    totals = [sum(s.values()) for s in spans]
    last = spans[-1]
    later = totals[1:]
    spread = (max(later) - min(later)) / max(later) if len(later) > 1 else None
    step_ns = embed_ns + sum(totals) + (dims.layers - len(spans)) * totals[-1] + head_ns
    m = st.mapping
    predicted = analytic.decode_step(spec, dims, m, st.T, st.S, st.collectives)
    return {
        "model": model, "topology": spec.name, "phase": "decode", "batch": st.T,
        "context": st.S, "layers": dims.layers, "simulated_layers": len(spans),
        "tp": m.tp, "C": m.C, "P": m.P, "pes": len(m.ranks), "collective": st.collective,
        "layer_ns": {p: last[p] for p in PHASES},
        "exposed_comm_ns": analytic.exposed(last),
        "simulated_layer_totals_ns": totals, "layer_spread": spread,
        "embedding_ns": embed_ns, "lm_head_ns": head_ns, "step_ns": step_ns,
        "tpot_ms": step_ns / 1e6, "tokens_per_s_user": 1e9 / step_ns,
        "tokens_per_s_system": st.T * 1e9 / step_ns,
        "analytic": predicted, "analytic_error": (step_ns - predicted["step_ns"])
        / predicted["step_ns"],
    }
