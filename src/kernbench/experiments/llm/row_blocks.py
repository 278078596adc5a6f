"""Projection launches of many row blocks: two short launches simulated, the rest counted.

A norm + projection kernel takes its T token rows ``rows`` at a time (what the
scratch holds, ``tensors.row_block``) and streams the rank's weight shard again for
every block, so a 70B prefill of 8K tokens runs 482 blocks per projection, all
doing the same work. Once the pipeline is full, each further full block adds about
the same span to its launch (the same to rounding on the 70B prefill; blocks at
other addresses can differ a little, ADR 0057 gives the worst case measured). In
timing mode, a launch of F >= ``MIN_FULL`` full blocks that starts on an idle
system is simulated twice, with ``SHORT`` and ``LONG`` full blocks (each followed by
the tail block of T mod rows rows), and its span is the longer launch's plus
(F - LONG) times the difference between the two. The fused RMSNorm prologues' time
is counted the same way. The record says how many launches and blocks were counted
(``row_blocks``); ``count=False`` (``kernbench model --simulate-every-block``,
``count_blocks=False`` in the step functions) simulates every block. Design:
docs/adr/0057-projection-blocks-counted-from-two-short-launches.md.
"""

from __future__ import annotations

SHORT, LONG = 2, 3  # full blocks in the two simulated launches
MIN_FULL = LONG + 3  # below this, the two short launches cost as much as the launch itself


class RowBlocks:
    """Runs a blocked launch as is, or as two short launches and a count (see above)."""

    def __init__(self, engine, count: bool) -> None:
        self.engine, self.count = engine, count
        self.record = {"counted_launches": 0, "simulated_blocks": 0, "counted_blocks": 0}

    def run(self, launch, plan_of, T: int, rows: dict, prologues) -> tuple | None:
        """Run a launch of ``T`` token rows; ``rows`` is each rank's block, ``plan_of(n)``
        the launch's plan over the first ``n`` rows, ``launch(plan)`` launches and waits,
        ``prologues()`` gives each rank's prologue time so far. Returns (span, norm time)
        when the launch was counted, None when it ran as is (its span is the clock's)."""
        sizes = set(rows.values())
        block = next(iter(sizes)) if len(sizes) == 1 else 0
        full = T // block if block else 0
        if not self.count or full < MIN_FULL or not self.engine.settle():
            launch(plan_of(T))
            return None
        tail = T - full * block
        short = self._timed(launch, plan_of(SHORT * block + tail), prologues)
        if not self.engine.settle():
            raise AssertionError("a projection launch left events in flight behind it")
        long = self._timed(launch, plan_of(LONG * block + tail), prologues)
        extra = full - LONG
        rec = self.record
        rec["counted_launches"] += 1
        rec["simulated_blocks"] += SHORT + LONG + (2 if tail else 0)
        rec["counted_blocks"] += extra
        return tuple(b + extra * (b - a) for a, b in zip(short, long, strict=True))

    def _timed(self, launch, plan: dict, prologues) -> tuple[float, float]:
        """(span, the slowest rank's prologue time) of one launch."""
        env = self.engine.env
        start, before = env.now, prologues()
        launch(plan)
        after = prologues()
        return env.now - start, max(after[r] - before[r] for r in after)
