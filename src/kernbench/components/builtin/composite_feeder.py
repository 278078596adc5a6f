"""The composite feeder: turns a ``CompositeCmd`` into a pipelined tile plan.

A SimPy process per composite: it waits for the composite's hazards, runs
pre-loop (recipe) ops once, feeds the head GEMM's supertiles -- DMA_READ for
operands not pinned in TCM, FETCH, GEMM, epilogues, STORE, DMA_WRITE for an
HBM output -- with at most ``max_inflight_tiles`` tile buffers in flight, then
post-loop ops. One event per tile; every stage is booked analytically on its
engine (docs/adr/0008-pe-pipeline-timing.md). Without a GEMM, the head
elementwise op streams in chunks.

A GEMM whose operands and output are all in TCM touches only the PE's own
fetch, GEMM, math and store engines. When those are idle from the composite's
start (or, failing that, from its GEMM loop's start), the schedule comes from
``composite_plan.Planner``: the same bookings, computed once per shape on
private timelines and handed to the engines as merged busy runs, without
simulation events (docs/adr/0027-planned-composites.md, 0028).
"""

from __future__ import annotations

import heapq

import numpy as np

from kernbench.components import numerics
from kernbench.components.builtin.composite_plan import Planner, chain_bytes, tile_epilogues
from kernbench.components.builtin.dispatch import executes
from kernbench.components.builtin.pe_ops import ready_at, view_va
from kernbench.components.tiling import chunks
from kernbench.isa.commands import CompositeCmd, OpSpec, Scope
from kernbench.isa.dtypes import dtype_bytes
from kernbench.isa.handles import Completion


@executes(CompositeCmd)
def execute_composite(pe, cmd: CompositeCmd, t_issue: float, deps) -> Completion:
    """Feed ``cmd``'s tile plan from a SimPy process once ``deps`` have completed.

    ``deps`` come from the address hazard table: in-flight ops whose writes
    this composite reads, or whose reads/writes it overwrites. Two composites
    sharing a read-write handle therefore run in dispatch order (strict FIFO).
    The completion is pending until the feeder signals it.
    """
    comp = Completion(event=pe.env.event(), label="composite")
    sched = pe.scheduler
    pe.env.process(sched.feeder.run(cmd, t_issue + sched.overhead_ns, comp, list(deps)))
    return comp


class CompositeFeeder:
    # set False to time every composite tile by tile (the equivalence tests do)
    planned = True

    def __init__(self, pe, ops, node_id: str) -> None:
        self.pe = pe
        self.ops = ops
        self.node_id = node_id
        self.planner = Planner(pe)

    def _private(self, a, b, out, t0: float) -> bool:
        """The plan may be timed in one pass: no DMA, and the engines it books are idle
        from ``t0`` on (so nothing else can interleave with it)."""
        pe = self.pe
        if not (self.planned and a.pinned and b.pinned and out.space == "tcm"
                and not pe.op_log.keep_records):
            return False
        for eng in (pe.fetch_store.fetch, pe.fetch_store.store, pe.gemm, pe.math):
            ends = eng.timeline.ends
            if ends and ends[-1] > t0:
                return False
        return True

    def run(self, cmd: CompositeCmd, t0: float, comp: Completion, waits):
        """The feeder process; a failure (e.g. an MMU fault) is handed to whoever
        waits on the composite, which is the kernel that issued it."""
        try:
            yield from self._run(cmd, t0, comp, waits)
        except Exception as exc:  # noqa: BLE001 - re-raised in the waiting kernel
            comp.fail(exc)

    def _run(self, cmd: CompositeCmd, t0: float, comp: Completion, waits):
        env = self.pe.env
        for c in waits:
            if c.done_at is None:
                yield c.event
            t0 = max(t0, c.done_at)
        if t0 > env.now:
            yield env.timeout(t0 - env.now)
        g = cmd.gemm_index
        if g is None:
            end = yield from self._math_composite(cmd, t0)
        elif (end := self._whole_plan(cmd, g, t0)) is not None:
            pass
        else:
            end = t0
            for op in cmd.ops[:g]:
                end = self._single_shot(op, end)
            epilogues = [op for op in cmd.ops[g + 1:] if op.scope is not Scope.KERNEL]
            end = yield from self._gemm_loop(cmd, cmd.ops[g], epilogues, end)
            for op in cmd.ops[g + 1:]:
                if op.scope is Scope.KERNEL:
                    end = self._after_head(op, cmd.ops[g].out, end)
        if end > env.now:
            yield env.timeout(end - env.now)
        self._record(cmd, g, t0, end)
        comp.complete(end)

    def _record(self, cmd: CompositeCmd, g: int | None, t0: float, end: float) -> None:
        head = cmd.ops[g] if g is not None else cmd.ops[0]
        out = head.out
        params = {"ops": [op.kind for op in cmd.ops], "logical_bytes": cmd.logical_bytes,
                  "out_addr": out.addr if out is not None else None,
                  "out_space": out.space if out is not None else None}
        if g is not None:
            a, b = head.operands["a"], head.operands["b"]
            params.update(m=head.extra["m"], k=head.extra["k"], n=head.extra["n"],
                          src_a_addr=a.addr, src_b_addr=b.addr, src_a_space=a.space,
                          src_b_space=b.space, dtype_in=a.dtype)
        self.pe.op_log.record(t0, end, self.node_id, "gemm" if g is not None else "math",
                              f"composite_{head.kind}", params, "COMPOSITE")

    def _after_head(self, op: OpSpec, out, t: float) -> float:
        """A KERNEL-scope op after the head: a recipe op, or an epilogue over the whole
        output (one vector op once the last tile is in)."""
        if op.out is not None:
            return self._single_shot(op, t)
        fetched, stored, elements = chain_bytes(op, out)
        start, end = self.ops.compute_chain(
            t, fetched, stored, lambda r: self.ops.math_run(r, elements), op.kind, "math",
            {"elements": elements, "epilogue": True}, "MATH", composite=True)
        self._after_head_data(op, out, start, end)
        return end

    def _after_head_data(self, op: OpSpec, out, start: float, end: float) -> None:
        if self.pe.data is not None:
            box = {}

            def compute():
                value = self.ops.read(out).astype(np.float32)
                box["v"] = _epilogue(op, value, self.ops.read, out)

            self.ops.data_at(start, compute)
            self.ops.data_at(end, lambda: self.ops.write(out, box["v"]))

    def _single_shot(self, op: OpSpec, t: float) -> float:
        """A KERNEL-scope op on TCM operands, once, after ``t``."""
        fetched, stored, elements = chain_bytes(op)
        start, end = self.ops.compute_chain(
            t, fetched, stored, lambda r: self.ops.math_run(r, elements), op.kind, "math",
            {"elements": elements, "recipe_op": True}, "MATH", composite=True)
        self._single_shot_data(op, start, end)
        return end

    def _single_shot_data(self, op: OpSpec, start: float, end: float) -> None:
        inputs = [op.operands[k] for k in sorted(op.operands)]
        names = sorted(op.operands)
        out = op.out
        if self.pe.data is not None and out is not None:
            box = {}

            def compute():
                vals = {n: self.ops.read(h) for n, h in zip(names, inputs, strict=True)}
                box["v"] = _recipe_compute(op, vals)

            self.ops.data_at(start, compute)
            self.ops.data_at(end, lambda: self.ops.write(out, box["v"]))

    def _whole_plan(self, cmd: CompositeCmd, g: int, t0: float) -> float | None:
        """Book the whole composite from its plan and return its end, when it qualifies:
        TCM operands, engines idle from ``t0``, GEMM inputs ready by the prologue's end.
        None: the caller times it stage by stage."""
        ops = cmd.ops
        head = ops[g]
        a, b = head.operands["a"], head.operands["b"]
        if not self._private(a, b, head.out, t0):
            return None
        plan = self.planner.plan(ops, g, cmd.tile_shape)
        if max(ready_at(a), ready_at(b)) > t0 + plan.gemm_at:
            return None
        self.planner.apply(plan, t0)
        if self.pe.data is not None:
            steps = iter(plan.steps)
            for i, op in enumerate(ops):
                if i == g or op.scope is not Scope.KERNEL:
                    continue
                s0, s1 = next(steps)
                if i < g or op.out is not None:
                    self._single_shot_data(op, t0 + s0, t0 + s1)
                else:
                    self._after_head_data(op, head.out, t0 + s0, t0 + s1)
            self._gemm_data(head, *tile_epilogues(ops, g), t0 + plan.first_gemm,
                            [(t0 + c[0], *c[1:]) for c in plan.commits], (plan.tk,))
        return t0 + plan.end

    def _math_composite(self, cmd: CompositeCmd, t0: float):
        """No GEMM: KERNEL ops run once in order; the head elementwise op (the one with
        operand ``a``) is streamed in chunks with its epilogues applied per chunk."""
        head_i = next((i for i, op in enumerate(cmd.ops) if "a" in op.operands), None)
        end = t0
        for i, op in enumerate(cmd.ops):
            if head_i is not None and i == head_i:
                epi = [e for e in cmd.ops[i + 1:] if e.scope is not Scope.KERNEL]
                end = yield from self._math_stream(op, epi, end)
            elif op.scope is Scope.KERNEL:
                end = (self._after_head(op, cmd.ops[head_i].out, end)
                       if head_i is not None and i > head_i else self._single_shot(op, end))
        return end

    def _math_stream(self, op: OpSpec, epilogues: list[OpSpec], t0: float):
        """Stream an elementwise op through DMA (for HBM operands) -> MATH -> STORE."""
        pe, env = self.pe, self.pe.env
        spec = pe.spec.pe
        out = op.out
        x = op.operands["a"]
        for h in (x, out):
            if h.space == "hbm" and h.row_stride not in (None, h.shape[-1]):
                raise RuntimeError(f"streamed MATH operand {h} is not contiguous in HBM "
                                   f"(tl.composite should have refused it)")
        numel = out.numel
        chunk = spec.tile_m * spec.tile_n
        bpe_x, bpe_o = dtype_bytes(x.dtype), dtype_bytes(out.dtype)
        slots: list[float] = []
        end = t0
        first = None
        for off, n in chunks(numel, chunk):
            t_issue = max(env.now, t0)
            if len(slots) >= spec.max_inflight_tiles:
                t_issue = max(t_issue, heapq.heappop(slots))
            if t_issue > env.now:
                yield env.timeout(t_issue - env.now)
            ready = max(t_issue, ready_at(x)) if x.pinned else t_issue
            if not x.pinned:
                _, ready = pe.dma.read(x.addr + off * bpe_x, n * bpe_x, t_issue, env.now,
                                       "TileToken/DMA_READ", "DMA_READ", {"operand": "a"})
            fs = pe.fetch_store
            f0, f1 = fs.fetch.book(ready, fs.transfer_ns(n * bpe_x), env.now)
            m0, m1 = self.ops.math_run(f1, n)[:2]
            self.ops.log(f0, f1, "pe_fetch_store", "memory", "TileToken/FETCH", "FETCH")
            self.ops.log(m0, m1, "pe_math", "math", "TileToken/MATH", "MATH", {"op": op.kind})
            t = m1
            for e in epilogues:
                e0, e1 = self.ops.math_run(t, n)[:2]
                self.ops.log(e0, e1, "pe_math", "math", "TileToken/MATH", "MATH", {"op": e.kind})
                t = e1
            s0, s1 = fs.store.book(t, fs.transfer_ns(n * bpe_o), env.now)
            self.ops.log(s0, s1, "pe_fetch_store", "memory", "TileToken/STORE", "STORE")
            first = f0 if first is None else first
            heapq.heappush(slots, f1)
            tile_end = s1
            if out.space == "hbm":
                _, tile_end = pe.dma.write(out.addr + off * bpe_o, n * bpe_o, s1, env.now,
                                           "TileToken/DMA_WRITE", "DMA_WRITE")
            end = max(end, tile_end)
        if pe.data is not None:
            box = {}

            def compute():
                value = numerics.compute(op.kind, [self.ops.read(x)])
                for e in epilogues:
                    value = _epilogue(e, value, self.ops.read, out)
                box["v"] = value

            self.ops.data_at(first, compute)
            self.ops.data_at(end, lambda: self.ops.write(out, box["v"]))
        return end

    def _gemm_loop(self, cmd: CompositeCmd, head: OpSpec, epilogues: list[OpSpec], t0: float):
        pe, env = self.pe, self.pe.env
        spec = pe.spec.pe
        a, b, out = head.operands["a"], head.operands["b"], head.out
        K = head.extra["k"]
        bpe_a, bpe_b = dtype_bytes(a.dtype), dtype_bytes(b.dtype)
        bpe_out = dtype_bytes(out.dtype)
        k_epi, o_epi = tile_epilogues((head, *epilogues), 0)
        if self._private(a, b, out, t0):  # the loop alone, planned from its ready time
            ready = max(t0, ready_at(a), ready_at(b))
            plan = self.planner.plan((head, *epilogues), 0, cmd.tile_shape)
            self.planner.apply(plan, ready)
            if pe.data is not None:
                self._gemm_data(head, k_epi, o_epi, ready + plan.first_gemm,
                                [(ready + c[0], *c[1:]) for c in plan.commits], (plan.tk,))
            return ready + plan.end
        M = head.extra["m"]
        held = head.extra.get("stationary", "b")
        tiles, (tm, tk, _), budget = self.planner.gemm_tiles(head, cmd.tile_shape)
        fs, gemm, dma = pe.fetch_store, pe.gemm, pe.dma
        slots: list[float] = []
        acc_free: dict[int, float] = {}  # when the array may take this accumulator's next k step
        acc_done: dict[int, float] = {}  # when its partial sums (and k-tile epilogues) are in
        a_ready = max(t0, ready_at(a)) if a.pinned else t0
        b_ready = max(t0, ready_at(b)) if b.pinned else t0
        a_tile_done = t0
        # a skinny A row panel (decode) fits in the reserved TCM: fetch it with one DMA per
        # m tile instead of one small DMA per k step
        a_panel = (not a.pinned and not a.transposed and a.row_stride in (None, K)
                   and min(tm, M) * K * bpe_a <= budget // 2)
        panel_mi = -1
        end = t0
        first_gemm = None
        commits: list[tuple[float, int, int, int, int]] = []
        for tile in tiles:
            t_issue = max(env.now, t0)
            if len(slots) >= spec.max_inflight_tiles:
                t_issue = max(t_issue, heapq.heappop(slots))
            if t_issue > env.now:
                yield env.timeout(t_issue - env.now)
            now = env.now
            if a.pinned:
                ra = a_ready
            elif a_panel:
                if tile.mi != panel_mi:
                    panel_mi = tile.mi
                    _, a_tile_done = dma.read(view_va(a, tile.m0, 0), tile.m * K * bpe_a, now, now,
                                              "TileToken/DMA_READ", "DMA_READ", {"operand": "a"})
                ra = a_tile_done
            else:
                if tile.load_a:
                    _, a_tile_done = dma.read(view_va(a, tile.m0, tile.k0), tile.m * tile.k * bpe_a,
                                              now, now, "TileToken/DMA_READ", "DMA_READ",
                                              {"operand": "a"})
                ra = a_tile_done
            if b.pinned:
                rb = b_ready
            else:
                _, rb = dma.read(view_va(b, tile.k0, tile.n0), tile.k * tile.n * bpe_b, now, now,
                                 "TileToken/DMA_READ", "DMA_READ", {"operand": "b"})
            f0, f1 = fs.fetch.book(max(ra, rb), fs.transfer_ns(
                tile.m * tile.k * bpe_a + tile.k * tile.n * bpe_b), now)
            heapq.heappush(slots, f1)
            # k steps of one output tile follow each other through the array; their
            # partial sums drain into the accumulators without waiting for the fill
            g0, g_free, g_done = gemm.run(max(f1, acc_free.get(tile.ni, 0.0)),
                                          tile.m, tile.k, tile.n, now, held)
            first_gemm = g0 if first_gemm is None else first_gemm
            acc_free[tile.ni] = g_free
            self.ops.log(f0, f1, "pe_fetch_store", "memory", "TileToken/FETCH", "FETCH")
            self.ops.log(g0, g_free, "pe_gemm", "gemm", "TileToken/GEMM", "GEMM",
                      {"m": tile.m, "k": tile.k, "n": tile.n})
            t = max(g_done, acc_done.get(tile.ni, 0.0))
            for op in k_epi + (o_epi if tile.last_k else []):
                e0, e1 = pe.math.book(t, pe.math.service_ns(tile.m * tile.n), now)
                self.ops.log(e0, e1, "pe_math", "math", "TileToken/MATH", "MATH", {"op": op.kind})
                t = e1
            acc_done[tile.ni] = t
            if not tile.last_k:
                continue
            s0, s1 = fs.store.book(t, fs.transfer_ns(tile.m * tile.n * bpe_out), now)
            self.ops.log(s0, s1, "pe_fetch_store", "memory", "TileToken/STORE", "STORE")
            done = s1
            if out.space == "hbm":
                _, done = dma.write(view_va(out, tile.m0, tile.n0), tile.m * tile.n * bpe_out,
                                    s1, now, "TileToken/DMA_WRITE", "DMA_WRITE")
            commits.append((done, tile.m0, tile.n0, tile.m, tile.n))
            end = max(end, done)
        if pe.data is not None:
            self._gemm_data(head, k_epi, o_epi, first_gemm, commits, (tk,))
        return end

    def _gemm_data(self, head: OpSpec, k_epi, o_epi, t_read: float, commits, tk) -> None:
        a, b, out = head.operands["a"], head.operands["b"], head.out
        box = {}

        def compute():
            av = self.ops.read(a).astype(np.float32)
            bv = self.ops.read(b).astype(np.float32)
            if k_epi:
                acc = np.zeros((av.shape[0], bv.shape[1]), np.float32)
                for k0 in range(0, av.shape[1], tk[0]):
                    part = av[:, k0:k0 + tk[0]] @ bv[k0:k0 + tk[0], :]
                    for op in k_epi:
                        part = _epilogue(op, part, self.ops.read, None)
                    acc += part
            else:
                acc = av @ bv
            for op in o_epi:
                acc = _epilogue(op, acc, self.ops.read, out)
            box["v"] = acc

        self.ops.data_at(t_read, compute)
        for t, m0, n0, m, n in commits:
            self.ops.data_at(t, lambda m0=m0, n0=n0, m=m, n=n: self.pe.data.write_block(
                out, m0, n0, box["v"][m0:m0 + m, n0:n0 + n], self.pe.mmu))



def _epilogue(op: OpSpec, acc: np.ndarray, read, out) -> np.ndarray:
    kind = op.kind
    if kind == "bias":
        return acc + read(op.operands["bias"]).astype(np.float32).reshape(1, -1)
    if kind == "scale":
        return acc * np.float32(op.extra["factor"])
    if kind == "add":
        return acc + read(op.operands["other"]).astype(np.float32)
    if kind in numerics.UNARY:
        return numerics.UNARY[kind](acc)
    raise ValueError(f"unknown epilogue op {kind!r}")


def _recipe_compute(op: OpSpec, vals: dict[str, np.ndarray]) -> np.ndarray:
    """Numeric value of a composite MATH op from its named operands."""
    kind = op.kind
    axis = op.extra.get("reduce_axis", op.extra.get("axis"))
    if kind in ("rmax", "rsum", "sum", "max", "min"):
        return numerics.compute(kind, [vals["src"]], axis)
    if kind == "copy":
        return vals["src"]
    if kind == "fma":
        return numerics.compute("fma", [vals["src_a"], vals["src_b"], vals["src_c"]])
    if kind in numerics.BINARY:
        return numerics.compute(kind, [vals["src_a"], vals["src_b"]])
    if kind in numerics.UNARY or kind == "softmax":
        key = "a" if "a" in vals else "src"
        return numerics.compute(kind, [vals[key]], axis)
    raise ValueError(f"unknown composite op {kind!r}")
