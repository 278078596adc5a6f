"""What every collective algorithm provides, and the building blocks they share.

An algorithm is constructed for one process group (``Group``) and answers:

* ``directions()``: the neighbour table to install, ``{rank: {direction: peer}}``;
* ``program(n)``: per rank, the steps that all-reduce ``n`` elements
  (``ccl.program``);
* ``phases``: the phase labels its program uses, in order.

Its cost model is the generic one (``ccl.model.evaluate``) played over the same
program, so a new algorithm needs no model code of its own.
"""

from __future__ import annotations

from kernbench.ccl.group import Coord, Group, chunks
from kernbench.geometry.ipcq import link

Tables = dict[Coord, dict[str, Coord]]
Programs = dict[Coord, list]


class Algorithm:
    name = ""
    phases: tuple[str, ...] = ()

    def __init__(self, group: Group) -> None:
        self.group = group

    def directions(self) -> Tables:  # pragma: no cover - every algorithm overrides
        raise NotImplementedError

    def program(self, n: int) -> Programs:  # pragma: no cover - every algorithm overrides
        raise NotImplementedError


def ring_links(tables: Tables, order: list[Coord], nxt: str) -> None:
    if len(order) > 1:
        for i, a in enumerate(order):
            link(tables, a, nxt, order[(i + 1) % len(order)])


def ring_allreduce(programs: Programs, order: list[Coord], start: int, length: int, nxt: str,
                   prv: str, rs_phase: str, ag_phase: str) -> None:
    """Reduce-scatter then all-gather of one slice around ``order``."""
    if len(order) < 2:
        return
    ring_reduce_scatter(programs, order, start, length, nxt, prv, rs_phase)
    ring_all_gather(programs, order, start, length, nxt, prv, ag_phase)


def ring_reduce_scatter(programs: Programs, order: list[Coord], start: int, length: int,
                        nxt: str, prv: str, phase: str) -> dict[Coord, tuple[int, int]]:
    """Reduce-scatter only; returns the slice each rank ends up owning."""
    p = len(order)
    parts = [(start + s, ln) for s, ln in chunks(length, p)]
    if p < 2:
        return {order[0]: (start, length)}
    for r, rank in enumerate(order):
        steps = programs.setdefault(rank, [])
        for s in range(p - 1):
            a, b = parts[(r - s) % p], parts[(r - s - 1) % p]
            steps.append((phase, _acts(("send", nxt, *a), ("reduce", prv, *b))))
    return {rank: parts[(r + 1) % p] for r, rank in enumerate(order)}


def ring_all_gather(programs: Programs, order: list[Coord], start: int, length: int,
                    nxt: str, prv: str, phase: str) -> None:
    p = len(order)
    if p < 2:
        return
    parts = [(start + s, ln) for s, ln in chunks(length, p)]
    for r, rank in enumerate(order):
        steps = programs.setdefault(rank, [])
        for s in range(p - 1):
            a, b = parts[(r + 1 - s) % p], parts[(r - s) % p]
            steps.append((phase, _acts(("send", nxt, *a), ("copy", prv, *b))))


def line_reduce(programs: Programs, line: list[Coord], fwd: str, back: str, start: int,
                length: int, phase: str) -> Coord:
    """Reduce a slice along ``line`` toward its centre (both halves at once, the centre
    taking its left and right inputs alternately per piece); returns the centre."""
    from kernbench.ccl.group import centre

    c = centre(len(line))
    for i, rank in enumerate(line):
        if i < c:
            acts = ([("reduce", back, start, length)] if i > 0 else []) + [
                ("send", fwd, start, length)]
        elif i > c:
            acts = ([("reduce", fwd, start, length)] if i < len(line) - 1 else []) + [
                ("send", back, start, length)]
        else:
            acts = ([("reduce", back, start, length)] if c > 0 else []) + (
                [("reduce", fwd, start, length)] if c < len(line) - 1 else [])
        if acts:
            programs.setdefault(rank, []).append((phase, _acts(*acts)))
    return line[c]


def line_broadcast(programs: Programs, line: list[Coord], fwd: str, back: str, start: int,
                   length: int, phase: str) -> None:
    """The centre's slice out to both ends of ``line``."""
    from kernbench.ccl.group import centre

    c = centre(len(line))
    for i, rank in enumerate(line):
        if i < c:
            acts = [("copy", fwd, start, length)] + ([("send", back, start, length)] if i > 0
                                                     else [])
        elif i > c:
            acts = [("copy", back, start, length)] + (
                [("send", fwd, start, length)] if i < len(line) - 1 else [])
        else:
            acts = ([("send", back, start, length)] if c > 0 else []) + (
                [("send", fwd, start, length)] if c < len(line) - 1 else [])
        if acts:
            programs.setdefault(rank, []).append((phase, _acts(*acts)))


def line_links(tables: Tables, line: list[Coord], fwd: str) -> None:
    for a, b in zip(line, line[1:], strict=False):
        link(tables, a, fwd, b)


def _acts(*actions) -> tuple:
    """Actions of one step; empty slices (fewer elements than ranks) carry nothing."""
    return tuple(a for a in actions if a[3] > 0)


def complete(programs: Programs, group: Group) -> Programs:
    """Every rank has a (possibly empty) program, in rank order."""
    return {r: programs.get(r, []) for r in group.ranks()}
