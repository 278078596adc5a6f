"""Group geometry: where a group's ranks sit and the trees and rings they reduce over.

Three shapes, each with the neighbour table it installs (mirrored, ``ipcq.link``):

* a CUBE group (``CubeGroup``, ``place_groups``): the C CUBEs x P PEs of one SIP
  that own a KV head; its PEs reduce over a binomial tree (``tree_role``), its
  CUBEs over a centre-root mesh (``centre_role``): ``reduce_tables``;
* the CUBEs of a group along a closed grid tour (``grid_cycle``, ``ring_cubes``):
  ``ring_tables``;
* a group of n PEs of one CUBE as rows of ``PE_ROW`` (``row_tree``):
  ``row_tree_tables``.

Coordinates are (sip, cube, pe); CUBE id = y * w + x in a SIP's CUBE mesh.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernbench.geometry.ipcq import Coord, Tables, link


# -- lines and grids ------------------------------------------------------------------------
def centre(n: int) -> int:
    """The index a line of ``n`` nodes reduces toward (the left of two middles)."""
    return (n - 1) // 2


def grid_cycle(w: int, h: int) -> list[tuple[int, int]]:
    """A closed tour of a w x h grid that starts at (0, 0) and ends in row 0.

    Down column 0, then back and forth over columns 1.. from the bottom row up,
    then along row 0: every step is between grid neighbours, and the tour both
    starts and ends next to the IO chiplet (row 0), where inter-SIP traffic
    enters and leaves. Closing the tour is a neighbour step too whenever the
    last node is (1, 0).
    """
    if w == 1 or h == 1:
        return [(x, y) for y in range(h) for x in range(w)]
    out = [(0, y) for y in range(h)]
    right = True
    for y in range(h - 1, 0, -1):
        xs = range(1, w) if right else range(w - 1, 0, -1)
        out.extend((x, y) for x in xs)
        right = not right
    xs = range(w - 1, 0, -1) if not right else range(1, w)
    out.extend((x, 0) for x in xs)
    return out


# -- CUBE groups --------------------------------------------------------------------------------
@dataclass(frozen=True)
class CubeGroup:
    """The ``C`` CUBEs x ``P`` PEs of one SIP that own one KV head.

    ``cubes`` lists the group's CUBE ids in rank order (cube_local 0..C-1);
    ``w`` x ``h`` is the rectangle they form in the SIP's CUBE mesh.
    """

    head: int
    sip: int
    cube_start: int
    cubes: tuple[int, ...]
    pes: int
    w: int
    h: int

    @property
    def ranks(self) -> int:
        return len(self.cubes) * self.pes

    def rank(self, cube: int, pe: int) -> int:
        """rank = cube_local * P + pe_local (the contiguous-block order)."""
        return self.cubes.index(cube) * self.pes + pe

    def coords(self) -> list[tuple[int, int, int]]:
        return [(self.sip, c, p) for c in self.cubes for p in range(self.pes)]


def group_shape(C: int, mesh_w: int) -> tuple[int, int]:
    """The rectangle of ``C`` CUBEs: whole rows of the mesh when C >= its width
    (a 4 x 2 block for C = 8 on a 4 x 4 mesh), else a 1-row strip."""
    if C <= mesh_w:
        return C, 1
    if C % mesh_w:
        raise ValueError(f"C={C} CUBEs do not form whole rows of a {mesh_w}-wide CUBE mesh")
    return mesh_w, C // mesh_w


def place_groups(spec, heads: int, C: int, P: int) -> list[CubeGroup]:
    """One CUBE group per KV head, spread evenly over every SIP of ``spec``.

    Each SIP takes ``heads / sips`` groups; group ``k`` of a SIP starts at CUBE
    ``k * cubes_per_sip / groups_per_sip`` (``cube_start``), so two groups per
    SIP sit in the two halves of the mesh whatever ``C`` is. With fewer heads
    than SIPs (a small study), the first ``heads`` SIPs take one group each.
    """
    sips, w, hh = spec.sips.count, spec.cube_w, spec.cube_h
    cubes_per_sip, pes = w * hh, spec.pes_per_cube
    if heads >= sips and heads % sips:
        raise ValueError(f"{heads} KV heads do not spread evenly over {sips} SIPs")
    per_sip = max(1, heads // sips)
    if P < 1 or P > pes:
        raise ValueError(f"P={P} must be in 1..{pes} (PEs per CUBE)")
    if C < 1 or C * per_sip > cubes_per_sip:
        raise ValueError(f"C={C}: {per_sip} groups of C CUBEs do not fit the "
                         f"{cubes_per_sip} CUBEs of a SIP")
    gw, gh = group_shape(C, w)
    stride = cubes_per_sip // per_sip
    out = []
    for head in range(heads):
        sip, k = divmod(head, per_sip)
        start = k * stride
        x0, y0 = start % w, start // w
        if x0 + gw > w or y0 + gh > hh:
            raise ValueError(f"C={C}: the group at CUBE {start} leaves the {w}x{hh} mesh")
        cubes = tuple((y0 + y) * w + x0 + x for y in range(gh) for x in range(gw))
        out.append(CubeGroup(head, sip, start, cubes, P, gw, gh))
    return out


def root_of(g: CubeGroup) -> Coord:
    """The group root: PE 0 of the group's centre CUBE (where both reduce levels end)."""
    return g.sip, g.cubes[centre(g.h) * g.w + centre(g.w)], 0


def ring_cubes(g: CubeGroup) -> list[int]:
    """The group's CUBEs along a closed tour of its rectangle (ring position order)."""
    return [g.cubes[y * g.w + x] for x, y in grid_cycle(g.w, g.h)]


# -- reduce trees -------------------------------------------------------------------------------
# Level 2 (PEs of a CUBE): binomial tree round r uses the r-th pair; a child sends
# toward UP[r], its parent receives from DOWN[r]. Level 1 (CUBEs of a group): the
# centre-root mesh uses the physical cube_* directions.
TREE_UP = ("ring_prev", "row_prev", "col_prev", "W")
TREE_DOWN = ("ring_next", "row_next", "col_next", "E")


def tree_rounds(P: int) -> int:
    return max(0, math.ceil(math.log2(P))) if P > 1 else 0


def tree_role(pe: int, P: int) -> tuple[list[tuple[str, int]], tuple[str, int] | None]:
    """Binomial reduce-to-root over PEs 0..P-1: (children as (receive direction,
    peer) in round order, parent as (send direction, peer) or None at the root)."""
    children, parent = [], None
    for r in range(tree_rounds(P)):
        step = 1 << r
        if pe % (2 * step) == 0:
            if pe + step < P:
                children.append((TREE_DOWN[r], pe + step))
        elif pe % (2 * step) == step:
            parent = (TREE_UP[r], pe - step)
            break
    return children, parent


def centre_role(x: int, y: int, w: int, h: int
                ) -> tuple[list[tuple[str, tuple[int, int]]], tuple[str, tuple[int, int]] | None]:
    """Centre-root reduce over a w x h CUBE rectangle: rows converge on the centre
    column, then that column on the centre CUBE. Returns (children as (receive
    direction, (x, y)), parent as (send direction, (x, y)) or None at the centre)."""
    cx, cy = centre(w), centre(h)
    children: list[tuple[str, tuple[int, int]]] = []
    if x == cx:
        if y < h - 1 and y >= cy:
            children.append(("cube_S", (x, y + 1)))
        if 0 < y <= cy:
            children.append(("cube_N", (x, y - 1)))
    if x >= cx and x < w - 1:
        children.append(("cube_E", (x + 1, y)))
    if 0 < x <= cx:
        children.append(("cube_W", (x - 1, y)))
    if x > cx:
        parent = ("cube_W", (x - 1, y))
    elif x < cx:
        parent = ("cube_E", (x + 1, y))
    elif y > cy:
        parent = ("cube_N", (x, y - 1))
    elif y < cy:
        parent = ("cube_S", (x, y + 1))
    else:
        parent = None
    return children, parent


def reduce_directions(g: CubeGroup, cube: int, pe: int
                      ) -> tuple[tuple[str, ...], str | None, tuple[str, ...], str | None]:
    """Where PE ``pe`` of ``cube`` in group ``g`` receives from and sends to in both
    reduce levels: (PE-tree children, PE-tree parent, CUBE-mesh children, CUBE-mesh
    parent); only a CUBE's PE 0 takes part in the mesh level."""
    i = g.cubes.index(cube)
    cube_children, cube_parent = centre_role(i % g.w, i // g.w, g.w, g.h)
    pe_children, pe_parent = tree_role(pe, g.pes)
    return (tuple(dr for dr, _ in pe_children), pe_parent[0] if pe_parent else None,
            tuple(dr for dr, _ in cube_children) if pe == 0 else (),
            cube_parent[0] if (pe == 0 and cube_parent) else None)


def centre_depth(w: int, h: int) -> int:
    """Rounds on the critical path of the centre-root reduce (its tree height)."""
    cx, cy = centre(w), centre(h)
    return max(cx, w - 1 - cx) + max(cy, h - 1 - cy)


def reduce_tables(groups: list[CubeGroup]) -> Tables:
    """Neighbour tables of both reduce levels (PE tree, CUBE centre mesh) of every group."""
    tables: Tables = {}
    for g in groups:
        for cube in g.cubes:
            for pe in range(g.pes):
                children, _ = tree_role(pe, g.pes)
                for _, child in children:
                    _, (send_dir, _) = tree_role(child, g.pes)
                    link(tables, (g.sip, cube, child), send_dir, (g.sip, cube, pe))
        for i, cube in enumerate(g.cubes):
            _, parent = centre_role(i % g.w, i // g.w, g.w, g.h)
            if parent is not None:
                send_dir, (px, py) = parent
                link(tables, (g.sip, cube, 0), send_dir, (g.sip, g.cubes[py * g.w + px], 0))
    return tables


def ring_tables(groups: list[CubeGroup]) -> Tables:
    """``ring_next`` / ``ring_prev`` between the same PE of consecutive ring CUBEs."""
    tables: Tables = {}
    for g in groups:
        ring = ring_cubes(g)
        for i, cube in enumerate(ring):
            nxt = ring[(i + 1) % len(ring)]
            for pe in range(g.pes):
                link(tables, (g.sip, cube, pe), "ring_next", (g.sip, nxt, pe))
    return tables


# -- a row tree of PEs --------------------------------------------------------------------------
PE_ROW = 4  # PEs per row of a row tree (a CUBE's PEs as a 2 x 4 mesh)
_STEP = {"E": 1, "W": -1, "S": PE_ROW, "N": -PE_ROW}


def row_tree(i: int, n: int) -> tuple[str | None, list[tuple[str, int]]]:
    """Tree of ``n`` PEs in rows of PE_ROW: each row chains toward its first PE
    (E/W), the first PEs chain toward PE 0 (S/N). Returns the direction toward
    the parent and (direction, PE) of each child, the row neighbour first."""
    x, y = i % PE_ROW, i // PE_ROW
    up = "W" if x else ("N" if y else None)
    down = [("E", i + 1)] if x + 1 < PE_ROW and i + 1 < n else []
    if x == 0 and i + PE_ROW < n:
        down.append(("S", i + PE_ROW))
    return up, down


def row_tree_depth(n: int) -> int:
    """Hops from the farthest PE of the row tree to its root."""
    return min(n, PE_ROW) - 1 + (-(-n // PE_ROW) - 1)


def row_tree_tables(cubes, per_cube: int, n: int) -> Tables:
    """Neighbour tables of ``per_cube`` row trees of ``n`` PEs (PEs k n .. k n + n - 1)
    in every (sip, CUBE) of ``cubes``, each PE naming its parent, then its children."""
    tables: Tables = {}
    for sip, cube in cubes:
        for base in range(0, per_cube * n, n):
            for i in range(n):
                up, down = row_tree(i, n)
                for direction in [up, *(dr for dr, _ in down)]:
                    if direction is not None:
                        tables.setdefault((sip, cube, base + i), {})[direction] = (
                            sip, cube, base + i + _STEP[direction])
    return tables
