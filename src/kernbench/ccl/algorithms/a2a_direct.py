"""``a2a_direct``: all-to-all by direct pairwise exchange among all ranks.

One team of every rank; in round ``k`` (1 .. n-1) each rank sends its block for
the rank ``k`` places on (in rank order) straight to it, over whatever routers,
UCIe and inter-SIP links lie between, and receives the block of the rank ``k``
places back: n - 1 messages of N / n per rank, the least data moved and the most
messages crossing SIPs.
"""

from __future__ import annotations

from kernbench.ccl.algorithms.exchange import Exchange, Level
from kernbench.ccl.registry import register


@register
class A2aDirect(Exchange):
    name = "a2a_direct"
    phases = ("exchange",)

    def levels(self) -> list[Level]:
        everyone = tuple(self.group.ranks())
        return [Level("exchange", "a2a", lambda r: everyone, lambda r, dst: dst)]
