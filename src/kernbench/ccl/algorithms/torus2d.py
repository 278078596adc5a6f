"""``torus2d``: a ring per dimension over the global grid of CUBEs.

Every rank sits at global (X, Y): X runs over the SIP columns' CUBE columns
(and the PEs of a CUBE), Y over the SIP rows' CUBE rows. Rows reduce-scatter
the buffer, columns all-reduce the chunk each rank owns, rows all-gather: each
rank moves about 2 N (1/W + 1/(W H)) bytes instead of the ring's 2 N.
"""

from __future__ import annotations

from kernbench.ccl.algorithms.base import (
    Algorithm,
    complete,
    ring_all_gather,
    ring_allreduce,
    ring_links,
    ring_reduce_scatter,
)
from kernbench.ccl.registry import register


@register
class Torus2d(Algorithm):
    name = "torus2d"
    phases = ("row_reduce_scatter", "col_reduce_scatter", "col_all_gather", "row_all_gather")

    def _grid(self):
        g = self.group
        pes = len(g.pes)
        w, h = g.sip_w * g.cube_w * pes, g.sip_h * g.cube_h
        at = {}
        for sip in range(g.sips):
            sx, sy = g.sip_xy(sip)
            for cube in range(g.cubes):
                cx, cy = g.cube_xy(cube)
                for k, pe in enumerate(g.pes):
                    at[((sx * g.cube_w + cx) * pes + k, sy * g.cube_h + cy)] = (sip, cube, pe)
        rows = [[at[(x, y)] for x in range(w)] for y in range(h)]
        cols = [[at[(x, y)] for y in range(h)] for x in range(w)]
        return rows, cols

    def directions(self):
        tables = {}
        rows, cols = self._grid()
        for row in rows:
            ring_links(tables, row, "row_next")
        for col in cols:
            ring_links(tables, col, "col_next")
        return tables

    def program(self, n: int):
        programs = {}
        rows, cols = self._grid()
        owned = {}
        for row in rows:
            owned.update(ring_reduce_scatter(programs, row, 0, n, "row_next", "row_prev",
                                             "row_reduce_scatter"))
        for col in cols:
            start, length = owned[col[0]]  # a column owns the same chunk of every row
            ring_allreduce(programs, col, start, length, "col_next", "col_prev",
                           "col_reduce_scatter", "col_all_gather")
        for row in rows:
            ring_all_gather(programs, row, 0, n, "row_next", "row_prev", "row_all_gather")
        return complete(programs, self.group)
