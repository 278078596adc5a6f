"""One model step on the system: embedding, the layers back to back, the LM head.

Decode: B users, one new token each at position S (the context already in the
KV cache). Prefill: one prompt of S tokens, causal, up to its first output
token (the LM head on the last row). Fewer layers than the model has may be simulated
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
from kernbench.experiments.llm.layer_run import PHASES, DecodeLayer, LayerWeights
from kernbench.experiments.llm.mapping import Dims, build
from kernbench.experiments.llm.moe_run import MoeSettings, check_settings
from kernbench.experiments.llm.reference import rope_angles
from kernbench.experiments.llm.row_blocks import RowBlocks
from kernbench.experiments.llm.tensors import Placer, ptr, row_block
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


def collective_chunk_bytes(spec) -> int:
    """The largest piece of a buffer one all-reduce takes: half the kernel scratch (the
    collective holds its buffer there beside its receive buffers), whole slots."""
    return spec.pe.kernel_scratch_bytes // 2 // COLLECTIVE_SLOT_BYTES * COLLECTIVE_SLOT_BYTES


@dataclass
class StepRun:
    record: dict
    arrays: dict = field(default_factory=dict)
    engine: object = field(default=None, repr=False)


def _positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"--{name} must be a positive integer, got {value!r}")
    return value


class StepState:
    """What a step's phases share: the engine, mapping, collectives, residual buffers
    of ``rows`` token rows, and the RoPE angles of the rows' ``positions``."""

    def __init__(self, graph, dims: Dims, rows: int, positions, tp, data: bool,
                 seed: int, algorithm: str, keep_records: bool = False,
                 ring: bool = False, replay: bool = True, count_blocks: bool = True) -> None:
        self.dims, self.T, self.data = dims, rows, data
        self.mapping = build(graph.spec, dims, tp, ring=ring)
        self.engine = GraphEngine(graph, enable_data=data, keep_records=keep_records)
        self.ctx = RuntimeContext(self.engine)
        for c in self.mapping.ranks:  # create every rank's PE before the queue sets
            self.engine.pe(*c)
        self.chunk_bytes = collective_chunk_bytes(graph.spec)
        self.collective = {"algorithm": algorithm, "slot_bytes": COLLECTIVE_SLOT_BYTES,
                           "chunk_bytes": self.chunk_bytes, "simulated_pieces": 0,
                           "replayed_pieces": 0}
        # timing mode only: data must be reduced, and a trace shows every event
        self.replay = replay and not data and not keep_records
        self.piece_spans: dict[int, tuple[float, float]] = {}  # bytes -> (span, prediction)
        # the same conditions for counting a projection's row blocks (row_blocks.py)
        self.row_blocks = RowBlocks(self.engine, count_blocks and not data and not keep_records)
        self.backend = AhbmBackend(self.ctx, algorithm, pes=tuple(range(self.mapping.k)),
                                   ipcq={"slot_bytes": COLLECTIVE_SLOT_BYTES})
        self.queues = {"collective": queue_sets(self.engine)}
        self.place = Placer(self.ctx, self.mapping, data)
        self.rng = np.random.default_rng(seed)
        self.arrays: dict[str, np.ndarray] = {}
        T, D = rows, dims.D
        self.bufs = (self.place.per_rank("x", (T, D), "f16"),
                     self.place.per_rank("r", (T, D), "f16"))
        cos, sin = rope_angles(positions, dims.d, dims.theta)
        self.angles = {"cos": self.place.replicated("cos", cos.astype(np.float32),
                                                    cos.shape, "f32"),
                       "sin": self.place.replicated("sin", sin.astype(np.float32),
                                                    sin.shape, "f32")}
        self.collectives: list = []

    def install_attention(self, tables, slots: int, slot_bytes: int) -> None:
        """The attention's PE_IPCQ queues (its own set: direction names overlap)."""
        self.ctx.install_ipcq(tables, slots=slots, slot_bytes=slot_bytes)
        self.queues["attention"] = queue_sets(self.engine)
        self.use_queues("collective")

    def _timed(self, fn) -> float:
        env = self.engine.env
        t = env.now
        fn()
        return env.now - t

    def use_queues(self, name: str) -> None:
        """Switch every PE to the collective's or the attention's IPCQ queues."""
        use_queue_sets(self.engine, self.queues[name])

    def _all_reduce(self, tensors) -> None:
        """All-reduce the per-rank buffers, in pieces of at most ``chunk_bytes`` (the
        collective holds its whole buffer in TCM scratch; a prompt's rows do not fit),
        one after another; the prediction of the whole is the pieces' sum."""
        self.use_queues("collective")
        shard = tensors[0].placements[0].nbytes
        predicted = 0.0
        for off in range(0, shard, self.chunk_bytes):
            size = min(self.chunk_bytes, shard - off)
            predicted += self._piece({sip: t.chunk(off, size) for sip, t in tensors.items()},
                                     size)
        self.collectives.append(predicted)

    def _piece(self, part: dict, size: int) -> float:
        """All-reduce one piece of ``size`` bytes per rank; its prediction.

        On an idle system (nothing in flight) a piece takes the same span whatever its
        start time and addresses, as every piece of the same size before it
        (docs/adr/0050). With ``replay`` such a piece is not simulated again: time
        advances by the first one's span, and the record counts it as replayed."""
        env = self.engine.env
        idle = self.replay and self.engine.settle()  # off: the simulation as it always ran
        known = self.piece_spans.get(size) if idle else None
        if known is not None:
            span, predicted = known
            self.engine.run(until=env.now + span)
            self.collective["replayed_pieces"] += 1
            return predicted
        start = env.now
        predicted = self.backend.all_reduce_all(part).predicted_ns
        if idle:
            self.piece_spans.setdefault(size, (env.now - start, predicted))
        self.collective["simulated_pieces"] += 1
        return predicted

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

    def head(self, last: int) -> float:
        """Final RMSNorm and this rank's vocabulary columns of the logits of the ``last``
        token rows (every user's token in decode, the prompt's last in prefill)."""
        dims, m, T = self.dims, self.mapping, last
        vc = m.vocab_cols
        w = self.place.per_rank("lm_head", (dims.D, vc), "f16",
                                lambda r: (self.rng.standard_normal((dims.D, vc))
                                           / np.sqrt(dims.D)).astype(np.float16))
        norm = self.place.replicated("norm", np.ones(dims.D, np.float32), (dims.D,), "f32")
        logits = self.place.per_rank("logits", (T, vc), "f32")
        rows = row_block(self.ctx.spec, dims.D, vc)
        first = (self.T - T) * dims.D * 2  # bytes of the f16 rows before them
        plan = {r: (ptr(self.bufs[0], r) + first, ptr(norm, r), ptr(w, r), ptr(logits, r), T,
                    dims.D, vc, dims.eps, rows) for r in m.ranks}
        return self._timed(lambda: self.ctx.wait(self.ctx.launch(
            "lm_head", per_rank, lm_head, plan, dp=self.place.rank_dp, sips="all")))

    def read_x(self) -> np.ndarray:
        return self.ctx.to_numpy(self.bufs[0][0])[:self.T].astype(np.float32)


def _layers(dims: Dims, layers: int | None) -> int:
    n = dims.layers if layers is None else _positive("layers", layers)
    if n > dims.layers:
        raise UsageError(f"--layers {n}: the model has {dims.layers} layers")
    return n


def _run_layers(st: StepState, layer, n: int, caches) -> list[dict]:
    """Embedding, ``n`` layers and the arrays of each (data mode); the layers' spans."""
    spans = []
    for l in range(n):
        w = LayerWeights(st.place, st.dims, l, st.rng, layer.moe.layout if layer.moe else None)
        cache, kv = caches(l) if caches else (None, {})
        for k, v in {**w.arrays, **kv}.items():
            st.arrays[f"l{l}.{k}"] = v.astype(np.float32)
        spans.append(layer.step(w, cache, st.bufs, st.angles))
    if st.data:
        st.arrays["out"] = st.read_x()
    return spans


def run_decode_step(graph, dims: Dims, users: int, context: int, *, layers: int | None = None,
                    tp: int | None = None, data: bool = False, seed: int = 0,
                    model: str = "", algorithm: str = "lrab_hierarchical",
                    keep_records: bool = False, moe: MoeSettings | None = None,
                    replay: bool = True, count_blocks: bool = True) -> StepRun:
    """Simulate one decode step of ``dims`` (``layers`` of its layers, default all);
    ``replay`` False simulates every all-reduce piece (``StepState._piece``),
    ``count_blocks`` False every projection row block (``row_blocks.RowBlocks``)."""
    _positive("batch", users)
    _positive("context", context)
    n = _layers(dims, layers)
    moe = check_settings(moe, dims)
    st = StepState(graph, dims, users, np.full(users, context), tp, data, seed, algorithm,
               keep_records, replay=replay, count_blocks=count_blocks)
    st.install_attention(reduce_tables(list(st.mapping.groups)), 4,
                         max(4096, dims.G * dims.d * 4))
    embed_ns = st.embedding()
    if data:
        st.arrays["x"] = st.read_x()
    layer = DecodeLayer(st.ctx, st._all_reduce, st.place, dims, users, context,
                        use_queues=st.use_queues, moe=moe, row_blocks=st.row_blocks)
    spans = _run_layers(st, layer, n, lambda l: layer.caches(l, st.rng))
    head_ns = st.head(users)
    m = st.mapping
    predicted = analytic.step(graph.spec, dims, m, _moe_ops(
        layer, analytic.decode_layer(graph.spec, dims, m, users, context)),
        users, users, st.collectives)
    record = _record(st, spans, (embed_ns, head_ns), model, graph.spec, predicted,
                     {"phase": "decode", "batch": users, "context": context, **_moe(layer)},
                     lambda ns: {"tpot_ms": ns / 1e6, "tokens_per_s_user": 1e9 / ns,
                                 "tokens_per_s_system": users * 1e9 / ns})
    return StepRun(record, st.arrays, st.engine)


def run_prefill_step(graph, dims: Dims, batch: int, context: int, *,
                     layers: int | None = None, tp: int | None = None, data: bool = False,
                     seed: int = 0, model: str = "", algorithm: str = "lrab_hierarchical",
                     keep_records: bool = False, moe: MoeSettings | None = None,
                     replay: bool = True, count_blocks: bool = True) -> StepRun:
    """Simulate the prefill of one prompt of ``context`` tokens up to its first output
    token (TTFT): embedding, ``layers`` layers over every token, the LM head on the last;
    ``replay`` and ``count_blocks`` as in :func:`run_decode_step`."""
    from kernbench.experiments.llm.prefill_run import PrefillLayer, RingAttention

    if _positive("batch", batch) != 1:
        raise UsageError(f"--batch {batch}: a prefill step runs one prompt (batch 1)")
    _positive("context", context)
    n = _layers(dims, layers)
    moe = check_settings(moe, dims)
    st = StepState(graph, dims, context, np.arange(context), tp, data, seed, algorithm,
               keep_records, ring=True, replay=replay, count_blocks=count_blocks)
    ring = RingAttention(st.ctx, st.mapping, dims, context, data)
    st.install_attention(*ring.ipcq())
    embed_ns = st.embedding()
    if data:
        st.arrays["x"] = st.read_x()
    layer = PrefillLayer(st.ctx, st._all_reduce, st.place, dims, context, ring,
                         use_queues=st.use_queues, moe=moe, row_blocks=st.row_blocks)
    spans = _run_layers(st, layer, n, None)
    head_ns = st.head(1)
    m = st.mapping
    predicted = analytic.step(graph.spec, dims, m, _moe_ops(
        layer, analytic.prefill_layer(graph.spec, dims, m, context)),
        context, 1, st.collectives)
    record = _record(st, spans, (embed_ns, head_ns), model, graph.spec, predicted,
                     {"phase": "prefill", "batch": 1, "context": context,
                      "attention": ring.layout(), **_moe(layer)},
                     lambda ns: {"ttft_ms": ns / 1e6, "prefill_tokens_per_s": context * 1e9 / ns})
    return StepRun(record, st.arrays, st.engine)


def _moe_ops(layer, ops: dict) -> dict:
    """A MoE layer's FFN bound from the routing its last layer ran with."""
    if layer.moe is None:
        return ops
    moe = layer.moe
    return {**ops, "ffn": analytic.moe_ffn_ns(layer.ctx.spec, layer.dims, layer.m, layer.T,
                                              moe.counts, moe.layout, moe.moved_ns)}


def _moe(layer) -> dict:
    return {} if layer.moe is None else {"mixture": layer.moe.record(layer.dims)}


def _record(st: StepState, spans: list, ends: tuple[float, float], model: str, spec,
            predicted: dict, point: dict, rates) -> dict:
    """What both phases report: the point, the breakdown, the layers' spread, the step
    (embedding, layers, LM head: ``ends``), its ``rates`` and its analytic prediction."""
    dims, m = st.dims, st.mapping
    embed_ns, head_ns = ends
    totals = [sum(s.values()) for s in spans]
    last = spans[-1]
    later = totals[1:]
    spread = (max(later) - min(later)) / max(later) if len(later) > 1 else None
    # the layers left out count as the last one; a MoE layer's time follows its routing,
    # a new draw per layer, so they count as the mean of the layers after the first
    rest = totals[-1] if dims.experts is None or len(later) < 1 else sum(later) / len(later)
    step_ns = embed_ns + sum(totals) + (dims.layers - len(spans)) * rest + head_ns
    return {
        "model": model, "topology": spec.name, "links": spec.sharing, **point,
        "layers": dims.layers,
        "simulated_layers": len(spans),
        "tp": m.tp, "C": m.C, "P": m.P, "pes": len(m.ranks), "collective": st.collective,
        "row_blocks": st.row_blocks.record,
        "layer_ns": {p: last[p] for p in PHASES},
        "exposed_comm_ns": analytic.exposed(last),
        "simulated_layer_totals_ns": totals, "layer_spread": spread,
        "unsimulated_layer_ns": rest,
        "embedding_ns": embed_ns, "lm_head_ns": head_ns, "step_ns": step_ns, **rates(step_ns),
        "analytic": predicted, "analytic_error": (step_ns - predicted["step_ns"])
        / predicted["step_ns"],
    }
