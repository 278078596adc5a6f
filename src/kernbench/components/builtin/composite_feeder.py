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

from typing import TYPE_CHECKING, Final

import numpy as np

from kernbench.components import background
from kernbench.components.builtin.composite_plan import (
    Planner,
    chain_bytes,
    chain_kernel_op,
    tile_epilogues,
)
from kernbench.components.builtin.composite_values import (
    epilogue_value,
    gemm_value,
    recipe_value,
)
from kernbench.components.builtin.dispatch import executes
from kernbench.components.builtin.pe_ops import operand_ready
from kernbench.components.builtin.tile_streams import GemmStream, MathStream
from kernbench.components.clock import sim_now
from kernbench.isa.commands import CompositeCmd
from kernbench.isa.handles import Completion, TensorHandle
from kernbench.isa.ops import OpSpec, Scope

if TYPE_CHECKING:  # (typed so the compiled twin reads the engines directly)
    from kernbench.components.builtin.engine import Engine

_KERNEL: Final = Scope.KERNEL  # (Final: a C static in the compiled twin; ADR 0065)


@executes(CompositeCmd)
def execute_composite(pe, cmd: CompositeCmd, t_issue: float, deps) -> Completion:
    """Feed ``cmd``'s tile plan from a SimPy process once ``deps`` have completed.

    ``deps`` come from the address hazard table: in-flight ops whose writes
    this composite reads, or whose reads/writes it overwrites. Two composites
    sharing a read-write handle therefore run in dispatch order (strict FIFO).
    The completion is pending until the feeder signals it; nobody waits on the feeder
    itself, so it runs without a Process of its own (``background``).
    """
    comp = Completion(label="composite")
    sched = pe.scheduler
    background.start(pe.env, sched.feeder.run(cmd, t_issue + sched.overhead_ns, comp, list(deps)))
    return comp


class CompositeFeeder:
    def __init__(self, pe, ops, node_id: str) -> None:
        self.pe = pe
        self.ops = ops
        self.node_id = node_id
        self.planner = Planner(pe)
        self.planned = pe.services.planned_composites  # the engine's option
        fs = pe.fetch_store
        # the engines a plan books and whether records are kept, read once (a composite
        # asks at every start; fixed for the engine's life)
        self._plan_engines: list[Engine] = [fs.fetch, fs.store, pe.gemm, pe.math]
        self._keep_records: bool = pe.op_log.keep_records
        # time from a GEMM composite's start to its supertile loop: its recipe prologue
        # (the decoder's RMSNorm), which the whole-model breakdown reports on its own
        self.prologue_ns = 0.0
        # "gemm" / "math" -> where its composites are recorded
        self._sinks = {kind: pe.op_log.sink(node_id, kind, "COMPOSITE")
                       for kind in ("gemm", "math")}

    def _private(self, a: TensorHandle, b: TensorHandle, out: TensorHandle | None,
                 t0: float) -> bool:
        """The plan may be timed in one pass: no DMA, and the engines it books are idle
        from ``t0`` on (so nothing else can interleave with it)."""
        if not (self.planned and a.pinned and b.pinned and out is not None
                and out.space == "tcm" and not self._keep_records):
            return False
        for eng in self._plan_engines:
            ends = eng.timeline.ends
            if ends and ends[-1] > t0:
                return False
        return True

    def run(self, cmd: CompositeCmd, t0: float, comp: Completion, waits):
        """The feeder process; a failure (e.g. an MMU fault) is handed to whoever
        waits on the composite, which is the kernel that issued it."""
        try:
            yield from self._run(cmd, t0, comp, waits)
        except Exception as exc:  # re-raised in the waiting kernel
            comp.fail(exc)

    def _run(self, cmd: CompositeCmd, t0: float, comp: Completion, waits):
        env = self.pe.env
        for c in waits:
            if c.done_at is None:
                yield c.waitable(env)
            t0 = max(t0, c.done_at)
        now = sim_now(env)
        if t0 > now:
            yield env.timeout(t0 - now)
        g = cmd.gemm_index
        if g is None:
            end = yield from self._math_composite(cmd, t0)
        elif (end := self._whole_plan(cmd, g, t0)) is not None:
            pass
        else:
            end = t0
            for op in cmd.ops[:g]:
                end = self._single_shot(op, end)
            self.prologue_ns += end - t0
            epilogues = [op for op in cmd.ops[g + 1:] if op.scope is not _KERNEL]
            end = yield from self._gemm_loop(cmd, cmd.ops[g], epilogues, end)
            for op in cmd.ops[g + 1:]:
                if op.scope is _KERNEL:
                    end = self._after_head(op, cmd.ops[g].out, end)
        now = sim_now(env)
        if end > now:
            yield env.timeout(end - now)
        self._record(cmd, g, t0, end)
        comp.complete(end)

    def _record(self, cmd: CompositeCmd, g: int | None, t0: float, end: float) -> None:
        head = cmd.ops[g] if g is not None else cmd.ops[0]
        sink = self._sinks["gemm" if g is not None else "math"]
        params = self._params(cmd, head, g) if sink.log.keep_records else None  # (kept only then)
        sink.add(t0, end, f"composite_{head.kind}", params)

    @staticmethod
    def _params(cmd: CompositeCmd, head: OpSpec, g: int | None) -> dict:
        """The composite's record parameters."""
        out = head.out
        params = {"ops": [op.kind for op in cmd.ops], "logical_bytes": cmd.logical_bytes,
                  "out_addr": out.addr if out is not None else None,
                  "out_space": out.space if out is not None else None}
        if g is not None:
            a, b = head.operands["a"], head.operands["b"]
            params.update(m=head.extra["m"], k=head.extra["k"], n=head.extra["n"],
                          src_a_addr=a.addr, src_b_addr=b.addr, src_a_space=a.space,
                          src_b_space=b.space, dtype_in=a.dtype)
        return params

    def _after_head(self, op: OpSpec, out, t: float) -> float:
        """A KERNEL-scope op after the head: a recipe op, or an epilogue over the whole
        output (one vector op once the last tile is in)."""
        if op.out is not None:
            return self._single_shot(op, t)
        start, end = chain_kernel_op(self.ops.stages, t, op, out, self.ops.floor,
                                     {"elements": out.numel, "epilogue": True})
        self._after_head_data(op, out, start, end)
        return end

    def _after_head_data(self, op: OpSpec, out, start: float, end: float) -> None:
        if self.pe.data is not None:
            box = {}

            def compute():
                value = self.ops.read(out).astype(np.float32)
                box["v"] = epilogue_value(op, value, self.ops.read, out)

            self.ops.data_at(start, compute)
            self.ops.data_at(end, lambda: self.ops.write(out, box["v"]))

    def _single_shot(self, op: OpSpec, t: float) -> float:
        """A KERNEL-scope op on TCM operands, once, after ``t``."""
        start, end = chain_kernel_op(self.ops.stages, t, op, None, self.ops.floor,
                                     {"elements": chain_bytes(op)[2], "recipe_op": True})
        self._single_shot_data(op, start, end)
        return end

    def _single_shot_data(self, op: OpSpec, start: float, end: float) -> None:
        out = op.out
        if self.pe.data is not None and out is not None:
            names = sorted(op.operands)
            inputs = [op.operands[k] for k in names]
            box = {}

            def compute():
                vals = {n: self.ops.read(h) for n, h in zip(names, inputs, strict=True)}
                box["v"] = recipe_value(op, vals)

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
        if max(operand_ready(a, cmd), operand_ready(b, cmd)) > t0 + plan.gemm_at:
            return None
        self.planner.apply(plan, t0)
        if g:
            self.prologue_ns += plan.gemm_at
        if self.pe.data is not None:
            steps = iter(plan.steps)
            for i, op in enumerate(ops):
                if i == g or op.scope is not _KERNEL:
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
                epi = [e for e in cmd.ops[i + 1:] if e.scope is not _KERNEL]
                end = yield from MathStream(self, op, epi, end).run()
            elif op.scope is _KERNEL:
                end = (self._after_head(op, cmd.ops[head_i].out, end)
                       if head_i is not None and i > head_i else self._single_shot(op, end))
        return end

    def _gemm_loop(self, cmd: CompositeCmd, head: OpSpec, epilogues: list[OpSpec], t0: float):
        """The supertile loop: planned when private (TCM operands, idle engines), else
        tile by tile (``tile_streams.GemmStream``)."""
        a, b, out = head.operands["a"], head.operands["b"], head.out
        if self._private(a, b, out, t0):  # the loop alone, planned from its ready time
            k_epi, o_epi = tile_epilogues((head, *epilogues), 0)
            ready = max(t0, operand_ready(a, cmd), operand_ready(b, cmd))
            plan = self.planner.plan((head, *epilogues), 0, cmd.tile_shape)
            self.planner.apply(plan, ready)
            if self.pe.data is not None:
                self._gemm_data(head, k_epi, o_epi, ready + plan.first_gemm,
                                [(ready + c[0], *c[1:]) for c in plan.commits], (plan.tk,))
            return ready + plan.end
        return (yield from GemmStream(self, cmd, head, epilogues, t0).run())

    def _gemm_data(self, head: OpSpec, k_epi, o_epi, t_read: float, commits, tk) -> None:
        """Data mode of a planned GEMM: compute at ``t_read``, commit each output tile."""
        out, read, pe = head.out, self.ops.read, self.pe
        box: dict = {}
        self.ops.data_at(t_read, lambda: box.setdefault(
            "v", gemm_value(head, k_epi, o_epi, tk[0], read)))
        for t, m0, n0, m, n in commits:
            self.ops.data_at(t, lambda m0=m0, n0=n0, m=m, n=n: pe.data.write_block(
                out, m0, n0, box["v"][m0:m0 + m, n0:n0 + n], pe.mmu))
