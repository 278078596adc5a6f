"""The booking rules of a PE's compute stages, written once (docs/adr/0008, 0027, 0038).

Every op that computes on TCM operands books the same chain: FETCH its inputs,
run the GEMM array or the vector engine, STORE the result; a composite's GEMM
books one such chain per supertile, with its accumulator and epilogue rules.
:class:`Stages` holds the four engines those bookings go to and where each
booking is reported. The scheduler books on the PE's own engines
(:meth:`Stages.of`) and reports to the op log; a composite plan books the very
same rules on private copies starting idle at 0 (:meth:`Stages.private`) and
only counts them, so a planned composite and one timed tile by tile cannot
drift apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from kernbench.components.stage_report import StageReport
from kernbench.components.tiling import GemmTile

if TYPE_CHECKING:  # (typed so the compiled twin calls the engines directly)
    from kernbench.components.builtin.engine import Engine
    from kernbench.components.builtin.pe_gemm import GemmEngine
    from kernbench.components.builtin.pe_math import MathEngine

FETCH: Final = "fetch"
GEMM: Final = "gemm"
MATH: Final = "math"
STORE: Final = "store"
# (engine, unit in the PE's ids, op kind, stage) of each engine a chain books
STAGES = ((FETCH, "pe_fetch_store", "memory", "FETCH"), (GEMM, "pe_gemm", "gemm", "GEMM"),
          (MATH, "pe_math", "math", "MATH"), (STORE, "pe_fetch_store", "memory", "STORE"))
_REPORT = {engine: (unit, kind, stage) for engine, unit, kind, stage in STAGES}
_TILE_FETCH: Final = "TileToken/FETCH"
_TILE_GEMM: Final = "TileToken/GEMM"
_TILE_MATH: Final = "TileToken/MATH"
_TILE_STORE: Final = "TileToken/STORE"


class NameCounts(StageReport):
    """Stands in for an op-log sink where only the number of ops per name matters (the
    private engines of a composite plan)."""

    __slots__ = ("counts",)

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def add(self, t_start: float, t_end: float, op_name: str,
            params: dict[str, Any] | None = None) -> None:
        self.counts[op_name] = self.counts.get(op_name, 0) + 1


class Stages:
    """FETCH, GEMM, MATH and STORE engines of one PE and where each reports its bookings
    (a sink per engine: ``sink.add(start, end, name, params)``)."""

    __slots__ = ("fetch", "gemm", "math", "store", "port_bw_gbs", "detail",
                 "fetch_log", "gemm_log", "math_log", "store_log")

    def __init__(self, fetch: Engine, gemm: GemmEngine, math: MathEngine, store: Engine,
                 port_bw_gbs: float, sinks: dict[str, StageReport], detail: bool = False) -> None:
        self.fetch, self.gemm, self.math, self.store = fetch, gemm, math, store
        self.port_bw_gbs = port_bw_gbs
        # one attribute per engine, not a report(engine, ...) function: bookings are the
        # hot path, and a compiled call on an attribute skips a function call and a lookup
        self.fetch_log, self.gemm_log = sinks[FETCH], sinks[GEMM]
        self.math_log, self.store_log = sinks[MATH], sinks[STORE]
        self.detail = detail  # whether a report's parameters are kept (worth building)

    @classmethod
    def of(cls, pe) -> Stages:
        """The PE's own engines, reporting to its op log."""
        fs, ids, log = pe.fetch_store, pe.ids, pe.op_log
        sinks = {engine: log.sink(ids[unit], kind, stage)
                 for engine, (unit, kind, stage) in _REPORT.items()}
        return cls(fs.fetch, pe.gemm, pe.math, fs.store, fs.port_bw_gbs, sinks,
                   log.keep_records)

    @classmethod
    def private(cls, pe, names: dict) -> Stages:
        """Idle copies of the PE's engines (same service rules and overheads) whose
        bookings are counted in ``names`` ({engine: {op name: count}}) only."""
        fs = pe.fetch_store
        counts: dict[str, StageReport] = {engine: NameCounts(names[engine])
                                          for engine in _REPORT}
        return cls(fs.fetch.idle_twin(), pe.gemm.idle_twin(), pe.math.idle_twin(),
                   fs.store.idle_twin(), fs.port_bw_gbs, counts)

    def engines(self) -> dict:
        return {FETCH: self.fetch, GEMM: self.gemm, MATH: self.math, STORE: self.store}

    def math_run(self, ready: float, elements: int, now: float) -> tuple[float, float, float]:
        """(start, end, result ready) of ``elements`` on the vector engine."""
        s, e = self.math.book(ready, self.math.service_ns(elements), now)
        return s, e, e

    def chain(self, t_ready: float, in_bytes: int, out_bytes: int, engine_run, now: float,
              name: str, kind: str, params=None, composite: bool = False) -> tuple[float, float]:
        """FETCH ``in_bytes`` -> ``engine_run(ready, now)`` -> STORE ``out_bytes``; returns
        (start, end). Composite stages are reported as TileTokens."""
        port = self.port_bw_gbs
        f0, f1 = self.fetch.book(t_ready, in_bytes / port, now)
        e0, e1, e_done = engine_run(f1, now)
        s0, s1 = self.store.book(e_done, out_bytes / port, now)
        self.fetch_log.add(f0, f1, _TILE_FETCH if composite else "fetch")
        (self.gemm_log if kind == "gemm" else self.math_log).add(e0, e1, name, params)
        self.store_log.add(s0, s1, _TILE_STORE if composite else "store")
        return f0, s1

    def gemm_tile(self, tile: GemmTile, ready: float, now: float, held: str, bpe: tuple,
                  acc: tuple[dict[int, float], dict[int, float]],
                  epilogues: tuple) -> tuple[float, float, float | None]:
        """One supertile of a composite GEMM: FETCH its operands -> the array -> its k-tile
        (and, on the last k step, output-tile) epilogues -> STORE on the last k step.

        k steps of one output tile follow each other through the array (``acc`` =
        (free, done) per output-tile column group: when the array may take its next k,
        when its partial sums and epilogues are in); partial sums drain into the
        accumulators without waiting for the fill. Returns (FETCH end, array start,
        STORE end or None before the last k step)."""
        bpe_a, bpe_b, bpe_out = bpe
        acc_free, acc_done = acc
        k_epi, o_epi = epilogues
        port = self.port_bw_gbs
        m, k, n = tile.m, tile.k, tile.n
        f0, f1 = self.fetch.book(ready, (m * k * bpe_a + k * n * bpe_b) / port, now)
        gemm = self.gemm
        g0, g_free = gemm.book(max(f1, acc_free.get(tile.ni, 0.0)),
                               gemm.service_ns(m, k, n, held), now)
        acc_free[tile.ni] = g_free
        self.fetch_log.add(f0, f1, _TILE_FETCH)
        self.gemm_log.add(g0, g_free, _TILE_GEMM, {"m": m, "k": k, "n": n} if self.detail else None)
        t = max(g_free + gemm.fill_ns, acc_done.get(tile.ni, 0.0))
        vector = self.math
        for op in k_epi + (o_epi if tile.last_k else []):
            e0, t = vector.book(t, vector.service_ns(m * n), now)
            self.math_log.add(e0, t, _TILE_MATH, {"op": op.kind} if self.detail else None)
        acc_done[tile.ni] = t
        if not tile.last_k:
            return f1, g0, None
        s0, s1 = self.store.book(t, m * n * bpe_out / port, now)
        self.store_log.add(s0, s1, _TILE_STORE)
        return f1, g0, s1
