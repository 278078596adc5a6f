"""Closed-form timing of a composite that only its own PE engines serve (ADR 0027, 0028).

A composite whose GEMM operands and output sit in TCM books nothing but its
PE's fetch, GEMM, math and store engines. When those are idle from the
composite's start, its whole schedule -- recipe prologue ops, the supertile
loop, whole-output ops after it -- depends on the op shapes alone. A
:class:`Planner` computes that schedule once per shape on private timelines
starting at 0, with the same booking and gap rules as the event path, and the
feeder reuses it shifted to each start. Attention issues the same few shapes
hundreds of thousands of times, so a composite then costs a dictionary lookup
and one booking per merged busy run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from kernbench.components.builtin import gemm_array
from kernbench.components.builtin.pe_stages import FETCH, GEMM, MATH, STAGES, STORE, Stages
from kernbench.components.stage_report import StageReport
from kernbench.components.tiling import GemmTile, gemm_tiles, n_group, supertile
from kernbench.isa.dtypes import dtype_bytes
from kernbench.isa.ops import OpSpec, Scope

if TYPE_CHECKING:  # (typed so the compiled twin books on the engines directly)
    from kernbench.components.builtin.engine import Engine

ACC_BYTES = 4  # composite accumulators are f32
_KERNEL: Final = Scope.KERNEL  # (a module constant: looking up an enum member on each op costs)
_K_TILE: Final = Scope.K_TILE


class Booking:
    """What a plan books on one engine, relative to the plan's start: ``ops`` ops, whose
    busy time is the merged runs [starts[i], ends[i]) (``busy_ns`` in all), reported
    as ``counts`` ((op name, ops) pairs). Shared by every composite of the plan's shape,
    so never changed (typed, so the compiled ``apply`` reads it without lookups)."""

    def __init__(self, engine: str, ops: int, starts: tuple[float, ...],
                 ends: tuple[float, ...], busy_ns: float,
                 counts: tuple[tuple[str, int], ...]) -> None:
        self.engine: Final = engine
        self.ops: Final = ops
        self.starts: Final = starts
        self.ends: Final = ends
        self.busy_ns: Final = busy_ns
        self.counts: Final = counts


@dataclass(frozen=True)
class Plan:
    """A composite's schedule relative to its start (times in ns from 0)."""

    end: float
    gemm_at: float  # when the supertile loop may begin: its operands must be ready by then
    steps: tuple  # (start, end) of every KERNEL-scope op in command order, head excluded
    first_gemm: float
    commits: tuple  # (done, m0, n0, m, n) per output tile (data mode writes)
    tk: int  # the supertile's k depth (k-tile epilogues in data mode)
    bookings: tuple[Booking, ...]  # what apply books, in STAGES order (engines with ops only)


def chain_bytes(op: OpSpec, head_out=None) -> tuple[int, int, int]:
    """(bytes fetched, bytes stored, elements) of a KERNEL-scope op run once: a recipe
    op (its own output, if any), or, given the head's output, an op after the head
    without one (an epilogue over the whole output)."""
    out = op.out
    if out is not None or head_out is None:  # (integer sums and maxima: any order will do)
        fetched, elements = 0, out.numel if out is not None else 0
        for h in op.operands.values():
            fetched += h.nbytes
            if h.numel > elements:
                elements = h.numel
        return fetched, out.nbytes if out is not None else 0, elements
    return (head_out.nbytes + sum(h.nbytes for h in op.operands.values()), head_out.nbytes,
            head_out.numel)


def chain_kernel_op(stages: Stages, t: float, op: OpSpec, head_out, now: float,
                    params=None) -> tuple[float, float]:
    """FETCH -> MATH -> STORE of a KERNEL-scope op of a composite run once (a recipe op,
    or, given the head's output, a whole-output op after the head); (start, end)."""
    fetched, stored, elements = chain_bytes(op, head_out)
    return stages.chain(t, fetched, stored, lambda r, now: stages.math_run(r, elements, now),
                        now, op.kind, "math", params, composite=True)


def _chain(stages: Stages, t: float, op: OpSpec, head_out) -> tuple[float, float]:
    return chain_kernel_op(stages, t, op, head_out, 0.0)


def tile_epilogues(ops, g: int) -> tuple[list[OpSpec], list[OpSpec]]:
    """(per k-tile, per output tile) epilogues of the head GEMM at ``ops[g]``, in command
    order: the ops after it that run on each tile rather than once."""
    after = [op for op in ops[g + 1:] if op.scope is not Scope.KERNEL]
    return ([op for op in after if op.scope is Scope.K_TILE],
            [op for op in after if op.scope is Scope.OUTPUT_TILE])


class Planner:
    """Plans of one PE's composites, cached by shape in a cache its engine shares
    among PEs and engines of one topology (a plan depends on shapes and the PE
    parameters only)."""

    def __init__(self, pe) -> None:
        self.pe = pe
        self._cache: dict[tuple, Any] = pe.services.plans  # plans, and GEMM walks by shape
        fs, log = pe.fetch_store, pe.op_log
        engines = {FETCH: fs.fetch, GEMM: pe.gemm, MATH: pe.math, STORE: fs.store}
        # engine -> (the PE's engine, the op-log sink it reports to): where apply books
        self._targets: dict[str, tuple[Engine, StageReport]] = {
            e: (engines[e], log.sink(pe.ids[unit], kind, stage)) for e, unit, kind, stage in STAGES}

    def mapping(self, head: OpSpec, tile_shape) -> tuple[str, tuple | None]:
        """(operand the array holds, supertile) of the head GEMM (``gemm_array.mapping``;
        cached by shape: "auto" weighs two walks of the array)."""
        a, b, x = head.operands["a"], head.operands["b"], head.extra
        asked = x.get("stationary", "b")
        key = ("mapping", x["m"], x["k"], x["n"], tile_shape, asked, a.dtype, b.dtype, b.pinned)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = gemm_array.mapping(
                self.pe.spec.pe, x["m"], x["k"], x["n"], tile_shape, asked,
                dtype_bytes(a.dtype), dtype_bytes(b.dtype), b.pinned)
        return hit

    def gemm_tiles(self, head: OpSpec, tile_shape
                   ) -> tuple[tuple[GemmTile, ...], tuple[int, int, int], int]:
        """(tiles, supertile, accumulator budget) of the head GEMM: the supertile walk
        both paths use (``tile_shape``: as :meth:`mapping` resolved it)."""
        spec = self.pe.spec.pe
        a, b = head.operands["a"], head.operands["b"]
        M, K, N = head.extra["m"], head.extra["k"], head.extra["n"]
        key = ("tiles", M, K, N, tile_shape, a.dtype, b.dtype)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        tm, tk, tn = tile_shape or supertile((spec.tile_m, spec.tile_k, spec.tile_n), K, N)
        buffers = spec.max_inflight_tiles * (tm * tk * dtype_bytes(a.dtype)
                                             + tk * tn * dtype_bytes(b.dtype))
        budget = max(0, spec.tcm_reserved_bytes - buffers)
        tiles = gemm_tiles(M, K, N, tm, tk, tn, n_group(-(-N // tn), tm, tn, budget, ACC_BYTES))
        hit = self._cache[key] = (tiles, (tm, tk, tn), budget)
        return hit

    def plan(self, ops: tuple[OpSpec, ...], g: int, tile_shape) -> Plan:
        """The plan of ``ops`` (head GEMM at index ``g``), from the cache when its shapes
        were planned before."""
        head = ops[g]
        a, b, out = head.operands["a"], head.operands["b"], head.out
        assert out is not None  # a GEMM head always writes
        others = []  # every op but the head: its kind, scope and (run once) its bytes
        for i, op in enumerate(ops):
            if i != g:
                scope = op.scope
                # (the scope as an int: an enum member hashes through an interpreted
                # __hash__, a few thousand instructions per plan lookup in all)
                others.append((op.kind, 0 if scope is _KERNEL else 1 if scope is _K_TILE else 2,
                               chain_bytes(op, out if i > g else None)
                               if scope is _KERNEL else None))
        extra = head.extra
        key = (g, tile_shape, extra["m"], extra["k"], extra["n"], extra.get("stationary", "b"),
               a.dtype, b.dtype, out.dtype, tuple(others))
        plan = self._cache.get(key)
        if plan is None:
            plan = self._cache[key] = self._build(ops, g, tile_shape)
        return plan

    def _build(self, ops, g: int, tile_shape) -> Plan:
        """Book ``ops`` from 0 on idle private copies of the PE's engines, with the
        scheduler's own rules (``pe_stages.Stages``)."""
        names: dict[str, dict[str, int]] = {e: {} for e in (FETCH, GEMM, MATH, STORE)}
        stages = Stages.private(self.pe, names)
        steps = []
        t = 0.0
        for op in ops[:g]:
            step = _chain(stages, t, op, None)
            steps.append(step)
            t = step[1]
        gemm_at = t
        head = ops[g]
        a, b, out = head.operands["a"], head.operands["b"], head.out
        assert out is not None
        bpe = (dtype_bytes(a.dtype), dtype_bytes(b.dtype), dtype_bytes(out.dtype))
        epilogues = tile_epilogues(ops, g)
        held, shape = self.mapping(head, tile_shape)
        tiles, (_, tk, _), _ = self.gemm_tiles(head, shape)
        acc: tuple[dict[int, float], dict[int, float]] = ({}, {})
        end = gemm_at
        first_gemm: float | None = None
        commits = []
        for tile in tiles:
            _, g0, done = stages.gemm_tile(tile, gemm_at, 0.0, held, bpe, acc, epilogues)
            if first_gemm is None:
                first_gemm = g0
            if done is not None:
                commits.append((done, tile.m0, tile.n0, tile.m, tile.n))
                end = max(end, done)
        for op in ops[g + 1:]:
            if op.scope is Scope.KERNEL:
                step = _chain(stages, end, op, out)
                steps.append(step)
                end = step[1]
        engines = stages.engines()
        assert first_gemm is not None  # a GEMM has at least one supertile
        bookings = []
        for e, _, _, _ in STAGES:
            x = engines[e]
            if x.ops:
                bookings.append(Booking(e, x.ops, tuple(x.timeline.starts),
                                        tuple(x.timeline.ends), x.busy_ns,
                                        tuple(names[e].items())))
        return Plan(end, gemm_at, tuple(steps), first_gemm, tuple(commits), tk, tuple(bookings))

    def apply(self, plan: Plan, t0: float) -> None:
        """Book ``plan`` started at ``t0`` on the real engines and the op log (which keeps
        the plan's runs and ``t0``, not shifted copies)."""
        targets = self._targets
        for booking in plan.bookings:
            engine, sink = targets[booking.engine]
            engine.timeline.extend([t0 + s for s in booking.starts],
                                   [t0 + e for e in booking.ends], booking.busy_ns)
            engine.ops += booking.ops
            sink.add_planned(booking.counts, t0, booking.starts, booking.ends)
