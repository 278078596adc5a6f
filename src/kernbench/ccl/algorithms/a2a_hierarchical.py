"""``a2a_hierarchical``: all-to-all inside each CUBE, then across CUBEs, then across SIPs.

A rank is (sip, cube, pe). First the PEs of a CUBE exchange so that each holds
every block bound for a PE of its own index; then the CUBEs of a SIP exchange
(rank (s, c, p) with (s, c', p)) so that each holds the blocks bound for its
(cube, pe) on any SIP; last the SIPs exchange (rank (s, c, p) with (s', c, p)).
Every inter-SIP message then carries the blocks of a whole SIP's CUBEs for one
rank: (S - 1) messages of N / S per rank cross SIPs, against (n - n / S) of N / n
for ``a2a_direct``, at the price of moving each block up to three times.
"""

from __future__ import annotations

from kernbench.ccl.algorithms.exchange import Exchange, Level
from kernbench.ccl.registry import register


@register
class A2aHierarchical(Exchange):
    name = "a2a_hierarchical"
    phases = ("intra_cube", "inter_cube", "inter_sip")

    def levels(self) -> list[Level]:
        g = self.group
        return [
            Level("intra_cube", "a2a_pe", lambda r: tuple((r[0], r[1], p) for p in g.pes),
                  lambda r, dst: (r[0], r[1], dst[2])),
            Level("inter_cube", "a2a_cube",
                  lambda r: tuple((r[0], c, r[2]) for c in range(g.cubes)),
                  lambda r, dst: (r[0], dst[1], r[2])),
            Level("inter_sip", "a2a_sip", lambda r: tuple((s, r[1], r[2]) for s in range(g.sips)),
                  lambda r, dst: (dst[0], r[1], r[2])),
        ]
