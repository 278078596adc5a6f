"""A composite's tile loops over HBM operands: DMA in, compute, DMA out.

The feeder issues a supertile's (or an elementwise chunk's) DMA reads when one
of ``max_inflight_tiles`` TCM input buffers is free, and books the tile's
FETCH, engine, epilogue and STORE stages, and its DMA write, once the reads
have arrived (docs/adr/0008-pe-pipeline-timing.md). Under FIFO link sharing
an arrival is known when the read is issued, so a tile is booked at once;
under fair sharing it is known only when the last byte lands. Tiles are
booked in issue order either way (``InOrder``), as the scheduler's tile queue
would take them.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Final

from kernbench.components import numerics
from kernbench.components.builtin.composite_plan import tile_epilogues
from kernbench.components.builtin.composite_values import epilogue_value, gemm_value
from kernbench.components.builtin.pe_ops import PeOps, operand_ready, view_va
from kernbench.components.clock import sim_now
from kernbench.components.tiling import GemmTile, chunks
from kernbench.isa.dtypes import dtype_bytes
from kernbench.isa.handles import Completion, TensorHandle, ready_at

# (Final: the compiled twin keeps these in C statics, not looked up by name per call; ADR 0065)
heappop: Final = heapq.heappop
heappush: Final = heapq.heappush

if TYPE_CHECKING:
    from kernbench.components.builtin.pe_dma import PeDma

# the record parameters of a tile's operand reads (the DMA copies them into its record,
# and only when records are kept)
_A: Final = {"operand": "a"}
_B: Final = {"operand": "b"}


def time_of(x) -> float | None:
    """A ready time given as a float or a completion (None while pending)."""
    return x.done_at if isinstance(x, Completion) else x


class _Item:
    __slots__ = ("inputs", "book", "tile", "booked")

    def __init__(self, inputs: tuple, book, tile) -> None:
        self.inputs = inputs
        self.book = book
        self.tile = tile
        # the completion of its booking, made only when a process waits for it (most
        # tiles are booked with nobody waiting: one object fewer per tile)
        self.booked: Completion | None = None

    def waitable(self, env):
        if self.booked is None:
            self.booked = Completion(label="tile booking")
        return self.booked.waitable(env)


class InOrder:
    """Tiles booked in issue order, each once all of its inputs have arrived.

    A tile is ready when its inputs are in and the tile before it was taken: under
    fair sharing a later tile's reads may land first, but the scheduler's queue
    still hands it over after the earlier one, never in the past of that hand-over.
    """

    __slots__ = ("items", "_busy", "_last")

    def __init__(self) -> None:
        self.items: deque[_Item] = deque()
        self._busy = False
        self._last = 0.0  # ready time of the last tile booked

    def __len__(self) -> int:
        return len(self.items)

    def add(self, inputs: tuple, book, tile) -> None:
        """Book ``book(tile, ready)`` after the earlier tiles, once every input is known.
        (A stream's method and the tile, not a closure made per tile.)"""
        self.items.append(_Item(inputs, book, tile))
        for x in inputs:
            if isinstance(x, Completion) and x.done_at is None:
                x.then(self._drain)
        self._drain()

    def _drain(self, _completed=None) -> None:
        if self._busy:
            return
        self._busy = True
        items = self.items
        while items:
            ready = self._last
            for x in items[0].inputs:
                t = time_of(x)
                if t is None:
                    self._busy = False
                    return
                ready = max(ready, t)
            item = items.popleft()
            self._last = ready
            item.book(item.tile, ready)
            if item.booked is not None:
                item.booked.complete(ready)
        self._busy = False

    def wait_first(self, env):
        """The event of the oldest tile's booking (a process yields it)."""
        return self.items[0].waitable(env)

    def wait_all(self, env):
        """Yield until every tile added so far is booked."""
        while self.items:
            yield self.items[-1].waitable(env)


_WAIT: Final = -1.0  # (``_take_slot``: no buffer is free; simulated times are never negative)


def _take_slot(order: InOrder, slots: list[float], limit: int, t_issue: float) -> float:
    """The next tile's issue time when a TCM input buffer can be had without waiting
    (``t_issue``: now or later), else ``_WAIT``: the check a tile makes without a
    generator, which only ``_free_slot`` (the wait) needs."""
    if len(slots) + len(order) < limit:
        return t_issue
    if slots:
        return max(t_issue, heappop(slots))
    return _WAIT


def _free_slot(order: InOrder, slots: list[float], limit: int, env, t0: float):
    """After ``_take_slot`` found no buffer: yield until a tile's booking frees one;
    return the tile's issue time (never before ``t0`` nor the moment the wait ended)."""
    while True:
        yield order.wait_first(env)
        t_issue = _take_slot(order, slots, limit, max(sim_now(env), t0))
        if t_issue != _WAIT:
            return t_issue


def _wait_done(completions, env):
    """Yield until every pending completion is in; return the latest time."""
    end = 0.0
    for c in completions:
        if c.done_at is None:
            yield c.waitable(env)
        end = max(end, c.done_at)
    return end


class GemmStream:
    """The supertiles of a composite GEMM, timed tile by tile (docs/adr/0008)."""

    def __init__(self, feeder, cmd, head, epilogues, t0: float) -> None:
        self.pe = feeder.pe
        # (typed: the compiled twin calls the DMA and the stage rules directly)
        self.ops: PeOps = feeder.ops
        self.dma: PeDma = feeder.pe.dma
        self.head, self.t0, self.cmd = head, t0, cmd
        self.a: TensorHandle = head.operands["a"]
        self.b: TensorHandle = head.operands["b"]
        self.out: TensorHandle = head.out
        self.held, shape = feeder.planner.mapping(head, cmd.tile_shape)
        tiles, (tm, tk, _), budget = feeder.planner.gemm_tiles(head, shape)
        self.tm: int = tm
        self.tk: int = tk
        self.tiles: tuple[GemmTile, ...] = tiles  # (typed: the loop reads each tile's fields)
        self.epilogues = tile_epilogues((head, *epilogues), 0)  # (per k tile, per output tile)
        self.bpe = (dtype_bytes(self.a.dtype), dtype_bytes(self.b.dtype),
                    dtype_bytes(self.out.dtype))
        a = self.a
        K: int = head.extra["k"]
        # a skinny A row panel (decode) fits in the reserved TCM: fetch it with one DMA per
        # m tile instead of one small DMA per k step
        self.a_panel = (not a.pinned and not a.transposed and a.row_stride in (None, K)
                        and min(self.tm, head.extra["m"]) * K * self.bpe[0] <= budget // 2)
        self.slots: list[float] = []
        self.order = InOrder()
        # per accumulator: (array free, sums in)
        self.acc: tuple[dict[int, float], dict[int, float]] = ({}, {})
        self.writes: list[Completion] = []
        self.end = t0
        self.box: dict | None = None  # data mode: the product's values

    def run(self) -> Generator[Any, Any, float]:
        """The loop (a generator run by the feeder's process); returns the end time."""
        env, pe, dma = self.pe.env, self.pe, self.dma
        a, b = self.a, self.b
        K: int = self.head.extra["k"]
        a_ready = max(self.t0, operand_ready(a, self.cmd)) if a.pinned else self.t0
        b_ready = max(self.t0, operand_ready(b, self.cmd)) if b.pinned else self.t0
        a_tile: float | Completion = self.t0
        panel_mi = -1
        limit: int = pe.spec.pe.max_inflight_tiles
        for tile in self.tiles:
            t_issue = _take_slot(self.order, self.slots, limit, max(sim_now(env), self.t0))
            if t_issue == _WAIT:
                t_issue = yield from _free_slot(self.order, self.slots, limit, env, self.t0)
            now = sim_now(env)
            if t_issue > now:
                yield env.timeout(t_issue - now)
                now = sim_now(env)
            if a.pinned:
                a_tile = max(a_ready, now)
            elif self.a_panel and tile.mi != panel_mi:
                panel_mi = tile.mi
                a_tile = dma.read(view_va(a, tile.m0, 0), tile.m * K * self.bpe[0], now, now,
                                  "TileToken/DMA_READ", "DMA_READ", _A)[1]
            elif not self.a_panel and tile.load_a:
                a_tile = dma.read(view_va(a, tile.m0, tile.k0), tile.m * tile.k * self.bpe[0],
                                  now, now, "TileToken/DMA_READ", "DMA_READ", _A)[1]
            b_tile = max(b_ready, now) if b.pinned else dma.read(
                view_va(b, tile.k0, tile.n0), tile.k * tile.n * self.bpe[1], now, now,
                "TileToken/DMA_READ", "DMA_READ", _B)[1]
            self.order.add((a_tile, b_tile), self._book, tile)
        yield from self.order.wait_all(env)
        end = yield from _wait_done(self.writes, env)
        return max(self.end, end)

    def _book(self, tile: GemmTile, ready: float) -> None:
        """The tile's stages (``Stages.gemm_tile``), then its DMA write for an HBM output."""
        pe, ops = self.pe, self.ops
        f1, g0, stored = ops.stages.gemm_tile(tile, ready, ops.floor, self.held, self.bpe,
                                              self.acc, self.epilogues)
        heappush(self.slots, f1)
        if self.box is None and pe.data is not None:
            self._compute_at(g0)
        if stored is None:
            return
        if self.out.space != "hbm":
            self._commit(tile, stored)
            return
        write = self.dma.write(view_va(self.out, tile.m0, tile.n0),
                               tile.m * tile.n * self.bpe[2], stored, sim_now(pe.env),
                               "TileToken/DMA_WRITE", "DMA_WRITE")[1]
        self.writes.append(write)
        write.then(lambda c, tile=tile: self._commit(tile, c.done_at))

    def _commit(self, tile: GemmTile, done: float) -> None:
        self.end = max(self.end, done)
        if self.box is not None:
            box, out, pe = self.box, self.out, self.pe
            m0, n0, m, n = tile.m0, tile.n0, tile.m, tile.n
            self.ops.data_at(done, lambda: pe.data.write_block(
                out, m0, n0, box["v"][m0:m0 + m, n0:n0 + n], pe.mmu))

    def _compute_at(self, t: float) -> None:
        """Data mode: the product is read and computed when its first tile starts."""
        box: dict = {}
        self.box = box
        (k_epi, o_epi), head, tk, read = self.epilogues, self.head, self.tk, self.ops.read
        self.ops.data_at(t, lambda: box.setdefault(
            "v", gemm_value(head, k_epi, o_epi, tk, read)))


class MathStream:
    """An elementwise composite streamed in chunks: DMA (HBM operands) -> MATH -> STORE."""

    def __init__(self, feeder, op, epilogues, t0: float) -> None:
        self.pe = feeder.pe
        self.ops: PeOps = feeder.ops
        self.dma: PeDma = feeder.pe.dma
        self.op, self.epilogues, self.t0 = op, epilogues, t0
        self.x: TensorHandle = op.operands["a"]
        self.out: TensorHandle = op.out
        for h in (self.x, self.out):
            if h.space == "hbm" and h.row_stride not in (None, h.shape[-1]):
                raise RuntimeError(f"streamed MATH operand {h} is not contiguous in HBM "
                                   f"(tl.composite should have refused it)")
        self.bpe = (dtype_bytes(self.x.dtype), dtype_bytes(self.out.dtype))
        self.slots: list[float] = []
        self.order = InOrder()
        self.writes: list[Completion] = []
        self.end = t0
        self.first: float | None = None

    def run(self) -> Generator[Any, Any, float]:
        """The chunk loop (a generator); returns the end time."""
        pe, env, x = self.pe, self.pe.env, self.x
        spec = pe.spec.pe
        bpe_x = self.bpe[0]
        for off, n in chunks(self.out.numel, spec.tile_m * spec.tile_n):
            limit = spec.max_inflight_tiles
            t_issue = _take_slot(self.order, self.slots, limit, max(sim_now(env), self.t0))
            if t_issue == _WAIT:
                t_issue = yield from _free_slot(self.order, self.slots, limit, env, self.t0)
            now = sim_now(env)
            if t_issue > now:
                yield env.timeout(t_issue - now)
            ready: float | Completion
            if x.pinned:
                ready = max(t_issue, ready_at(x))
            else:
                ready = self.dma.read(x.addr + off * bpe_x, n * bpe_x, t_issue, sim_now(env),
                                      "TileToken/DMA_READ", "DMA_READ", _A)[1]
            self.order.add((ready,), self._book, (off, n))
        yield from self.order.wait_all(env)
        end = yield from _wait_done(self.writes, env)
        self.end = max(self.end, end)
        if pe.data is not None:
            assert self.first is not None  # (set by the first chunk booked)
            self._data(self.first, self.end)
        return self.end

    def _book(self, chunk: tuple[int, int], ready: float) -> None:
        off, n = chunk
        pe, ops = self.pe, self.ops
        now = ops.floor
        fs = pe.fetch_store
        bpe_x, bpe_o = self.bpe
        f0, f1 = fs.fetch.book(ready, fs.transfer_ns(n * bpe_x), now)
        m0, m1 = ops.math_run(f1, n)[:2]
        ops.log(f0, f1, "pe_fetch_store", "memory", "TileToken/FETCH", "FETCH")
        ops.log(m0, m1, "pe_math", "math", "TileToken/MATH", "MATH", {"op": self.op.kind})
        t = m1
        for e in self.epilogues:
            e0, e1 = ops.math_run(t, n)[:2]
            ops.log(e0, e1, "pe_math", "math", "TileToken/MATH", "MATH", {"op": e.kind})
            t = e1
        s0, s1 = fs.store.book(t, fs.transfer_ns(n * bpe_o), now)
        ops.log(s0, s1, "pe_fetch_store", "memory", "TileToken/STORE", "STORE")
        self.first = f0 if self.first is None else self.first
        heappush(self.slots, f1)
        self.end = max(self.end, s1)
        if self.out.space == "hbm":
            self.writes.append(self.dma.write(self.out.addr + off * bpe_o, n * bpe_o, s1,
                                              sim_now(pe.env), "TileToken/DMA_WRITE", "DMA_WRITE")[1])

    def _data(self, first: float, end: float) -> None:
        box, ops, op, x, out = {}, self.ops, self.op, self.x, self.out
        epilogues = self.epilogues

        def compute():
            value = numerics.compute(op.kind, [ops.read(x)])
            for e in epilogues:
                value = epilogue_value(e, value, ops.read, out)
            box["v"] = value

        ops.data_at(first, compute)
        ops.data_at(end, lambda: ops.write(out, box["v"]))
