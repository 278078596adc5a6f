"""The geometry of a process group: which PEs take part and where they sit.

Three levels: the PEs of a CUBE that take part (default: PE 0 only), the CUBE
mesh of a SIP (``cube_w`` x ``cube_h``, CUBE id = y * w + x, row 0 next to the
IO chiplet) and the SIP grid (``sip_w`` x ``sip_h`` of kind ring_1d, torus_2d
or mesh_2d_no_wrap). Every rank is a (sip, cube, pe) coordinate. Lines and grid
tours (``centre``, ``grid_cycle``) are the shared ones of ``kernbench.geometry``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.geometry.groups import centre, grid_cycle
from kernbench.geometry.ipcq import Coord

SIP_KINDS = ("ring_1d", "torus_2d", "mesh_2d_no_wrap")


@dataclass(frozen=True)
class Group:
    sip_kind: str
    sip_w: int
    sip_h: int
    cube_w: int
    cube_h: int
    pes: tuple[int, ...] = (0,)

    @classmethod
    def from_spec(cls, spec, pes: tuple[int, ...] = (0,)) -> Group:
        s = spec.sips
        return cls(s.topology, s.w, s.h, spec.cube_w, spec.cube_h, tuple(pes))

    @property
    def sips(self) -> int:
        return self.sip_w * self.sip_h

    @property
    def cubes(self) -> int:
        return self.cube_w * self.cube_h

    @property
    def size(self) -> int:
        return self.sips * self.cubes * len(self.pes)

    def ranks(self) -> list[Coord]:
        """Every participating PE in (sip, cube, pe) order."""
        return [(s, c, p) for s in range(self.sips) for c in range(self.cubes) for p in self.pes]

    def sip_xy(self, sip: int) -> tuple[int, int]:
        return sip % self.sip_w, sip // self.sip_w

    def sip_at(self, x: int, y: int) -> int:
        return y * self.sip_w + x

    def cube_xy(self, cube: int) -> tuple[int, int]:
        return cube % self.cube_w, cube // self.cube_w

    def cube_at(self, x: int, y: int) -> int:
        return y * self.cube_w + x

    def centre_cube(self) -> int:
        return self.cube_at(centre(self.cube_w), centre(self.cube_h))


def sip_order(g: Group) -> list[int]:
    """SIPs in ring order: along the ring for ring_1d, a grid tour otherwise."""
    if g.sip_kind == "ring_1d" or g.sip_h == 1:
        return list(range(g.sips))
    return [g.sip_at(x, y) for x, y in grid_cycle(g.sip_w, g.sip_h)]


def ring_order(g: Group) -> list[Coord]:
    """All ranks in one ring: SIPs in ring order, CUBEs along a grid tour, then PEs."""
    cubes = [g.cube_at(x, y) for x, y in grid_cycle(g.cube_w, g.cube_h)]
    return [(s, c, p) for s in sip_order(g) for c in cubes for p in g.pes]


def chunks(n: int, parts: int) -> list[tuple[int, int]]:
    """(start, length) of ``parts`` near-equal chunks of ``n`` elements (some may be 0)."""
    base, extra = divmod(n, parts)
    out, start = [], 0
    for i in range(parts):
        length = base + (1 if i < extra else 0)
        out.append((start, length))
        start += length
    return out
