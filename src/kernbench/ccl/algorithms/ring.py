"""``ring``: bandwidth-optimal ring all-reduce over every rank of every SIP.

One ring through all ranks (SIPs in ring order, CUBEs along a tour that starts
and ends next to the IO chiplet): reduce-scatter then all-gather, the buffer
cut into one chunk per rank and each chunk carried in slot-sized pieces, so
every rank sends and receives 2 (p - 1) chunks of N / p.
"""

from __future__ import annotations

from kernbench.ccl.algorithms.base import Algorithm, complete, ring_allreduce, ring_links
from kernbench.ccl.group import ring_order
from kernbench.ccl.registry import register


@register
class Ring(Algorithm):
    name = "ring"
    phases = ("reduce_scatter", "all_gather")

    def directions(self):
        tables = {}
        ring_links(tables, ring_order(self.group), "ring_next")
        return tables

    def program(self, n: int):
        programs = {}
        ring_allreduce(programs, ring_order(self.group), 0, n, "ring_next", "ring_prev",
                       "reduce_scatter", "all_gather")
        return complete(programs, self.group)
