"""``lrab_hierarchical``: reduce to the centre, exchange among SIPs, broadcast back.

Inside each SIP the CUBE shards are reduced along every row toward the centre
column, then along that column toward the centre CUBE (index
``(n - 1) // 2``); both halves of a line move at once and the centre takes its
left and right inputs alternately, piece by piece (left-right alternating).
The SIPs' centre CUBEs then combine by the SIP topology's kind: a ring
all-reduce on ``ring_1d``, a ring per dimension on ``torus_2d``, a reduce to
the centre SIP and back on ``mesh_2d_no_wrap``. The result is broadcast back
along the same lines. With several PEs per CUBE they first reduce along a
line of their own (and receive the result last); a single CUBE skips the mesh
phases.
"""

from __future__ import annotations

from kernbench.ccl.algorithms.base import (
    Algorithm,
    complete,
    line_broadcast,
    line_links,
    line_reduce,
    ring_all_gather,
    ring_allreduce,
    ring_links,
    ring_reduce_scatter,
)
from kernbench.ccl.group import SIP_KINDS, centre
from kernbench.ccl.registry import register


@register
class LrabHierarchical(Algorithm):
    name = "lrab_hierarchical"
    phases = ("intra_cube", "mesh", "inter_sip", "broadcast")

    def __init__(self, group) -> None:
        if group.sip_kind not in SIP_KINDS:
            raise ValueError(f"lrab_hierarchical: SIP topology kind {group.sip_kind!r} is not "
                             f"supported (allowed: {', '.join(SIP_KINDS)})")
        super().__init__(group)

    # -- geometry ------------------------------------------------------------------------
    def _pe_line(self, sip: int, cube: int):
        return [(sip, cube, pe) for pe in self.group.pes]

    def _lead(self, sip: int, cube: int):
        """The PE of a CUBE that takes part in the mesh phases."""
        g = self.group
        return (sip, cube, g.pes[centre(len(g.pes))])

    def _mesh_lines(self, sip: int):
        g = self.group
        rows = [[self._lead(sip, g.cube_at(x, y)) for x in range(g.cube_w)]
                for y in range(g.cube_h)]
        column = [self._lead(sip, g.cube_at(centre(g.cube_w), y)) for y in range(g.cube_h)]
        return rows, column

    def _sip_grid(self):
        """Rows and columns of the SIPs' centre CUBEs (leads)."""
        g = self.group
        lead = {s: self._lead(s, g.centre_cube()) for s in range(g.sips)}
        rows = [[lead[g.sip_at(x, y)] for x in range(g.sip_w)] for y in range(g.sip_h)]
        cols = [[lead[g.sip_at(x, y)] for y in range(g.sip_h)] for x in range(g.sip_w)]
        return rows, cols

    def directions(self):
        g = self.group
        tables = {}
        for sip in range(g.sips):
            for cube in range(g.cubes):
                line_links(tables, self._pe_line(sip, cube), "E")
            rows, column = self._mesh_lines(sip)
            for row in rows:
                line_links(tables, row, "cube_E")
            line_links(tables, column, "cube_S")
        rows, cols = self._sip_grid()
        wrap = g.sip_kind != "mesh_2d_no_wrap"
        for row in rows:
            (ring_links if wrap else line_links)(tables, row, "global_E")
        for col in cols:
            (ring_links if wrap else line_links)(tables, col, "global_S")
        return tables

    # -- program ---------------------------------------------------------------------------
    def program(self, n: int):
        g = self.group
        progs = {}
        for sip in range(g.sips):
            for cube in range(g.cubes):
                line_reduce(progs, self._pe_line(sip, cube), "E", "W", 0, n, "intra_cube")
            rows, column = self._mesh_lines(sip)
            for row in rows:
                line_reduce(progs, row, "cube_E", "cube_W", 0, n, "mesh")
            line_reduce(progs, column, "cube_S", "cube_N", 0, n, "mesh")
        self._inter_sip(progs, n)
        for sip in range(g.sips):
            rows, column = self._mesh_lines(sip)
            line_broadcast(progs, column, "cube_S", "cube_N", 0, n, "broadcast")
            for row in rows:
                line_broadcast(progs, row, "cube_E", "cube_W", 0, n, "broadcast")
            for cube in range(g.cubes):
                line_broadcast(progs, self._pe_line(sip, cube), "E", "W", 0, n, "broadcast")
        return complete(progs, g)

    def _inter_sip(self, progs, n: int) -> None:
        g = self.group
        rows, cols = self._sip_grid()
        if g.sip_kind == "mesh_2d_no_wrap":
            for row in rows:
                line_reduce(progs, row, "global_E", "global_W", 0, n, "inter_sip")
            col = cols[centre(g.sip_w)]
            line_reduce(progs, col, "global_S", "global_N", 0, n, "inter_sip")
            line_broadcast(progs, col, "global_S", "global_N", 0, n, "inter_sip")
            for row in rows:
                line_broadcast(progs, row, "global_E", "global_W", 0, n, "inter_sip")
            return
        # ring_1d (one row) and torus_2d: a ring per dimension
        owned = {}
        for row in rows:
            owned.update(ring_reduce_scatter(progs, row, 0, n, "global_E", "global_W",
                                             "inter_sip"))
        for col in cols:
            start, length = owned[col[0]]
            ring_allreduce(progs, col, start, length, "global_S", "global_N", "inter_sip",
                           "inter_sip")
        for row in rows:
            ring_all_gather(progs, row, 0, n, "global_E", "global_W", "inter_sip")
