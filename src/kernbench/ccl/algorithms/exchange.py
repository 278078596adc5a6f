"""All-to-all as exchanges inside teams, one level at a time: what both all-to-all
algorithms build on.

Every rank starts with one block per destination rank (block ``(i, j)``: from rank
``i`` to rank ``j``, ``block`` elements). A level splits the ranks into teams; in
it each rank hands every block whose destination lies "behind" another team member
(``Level.target``) to that member, directly, in ``m - 1`` rounds (round ``k``: send
to the member ``k`` places on, receive from the one ``k`` places back, so no rank is
the hot spot of a round). After the last level every block sits at its destination.

Blocks may differ in size (``plan_sizes``: the uneven all-to-all; an empty block is
never sent). A rank's input holds its blocks back to back in destination order, its
output the blocks it receives in source order. Blocks live in one TCM work buffer per
rank: the input first, every level's arrivals after it; blocks a rank keeps stay
where they are. A message carries the blocks that
are contiguous in the sender's buffer, and lands contiguously in the receiver's, so
sender and receiver cut every slice alike. The output is written from the work
buffer in runs that are contiguous on both sides (``ExchangePlan.stores``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kernbench.ccl.algorithms.base import Algorithm, Programs, Tables
from kernbench.ccl.group import Coord
from kernbench.geometry.ipcq import link, shift

Block = tuple[int, int]  # (source rank index, destination rank index)


@dataclass(frozen=True)
class Level:
    name: str  # the phase label of its rounds
    family: str  # its numbered IPCQ directions (geometry.ipcq.SHIFT_FAMILIES)
    team: Callable[[Coord], tuple[Coord, ...]]  # a rank's team, in round order
    target: Callable[[Coord, Coord], Coord]  # (rank, block's destination) -> team member


@dataclass
class ExchangePlan:
    programs: Programs  # per rank: (phase, actions) steps over the work buffer (elements)
    work: dict[Coord, int]  # elements of each rank's work buffer
    stores: dict[Coord, list[tuple[int, int, int]]]  # (work start, output start, elements)
    loads: dict[Coord, int]  # elements of each rank's input (its blocks back to back)


class Exchange(Algorithm):
    """An all-to-all algorithm: its ``levels()`` say who exchanges with whom."""

    collective = "all_to_all"

    def levels(self) -> list[Level]:  # pragma: no cover - every algorithm overrides
        raise NotImplementedError

    def directions(self) -> Tables:
        tables: Tables = {}
        for lv in self.levels():
            for r in self.group.ranks():
                team = lv.team(r)
                i = team.index(r)
                for k in range(1, len(team)):
                    link(tables, r, shift(lv.family, k), team[(i + k) % len(team)])
        return tables

    def plan(self, block: int) -> ExchangePlan:
        """The programs that move ``block`` elements from every rank to every rank."""
        return self.plan_sizes(lambda i, j: block)

    def plan_sizes(self, size: Callable[[int, int], int]) -> ExchangePlan:
        """The programs that move ``size(i, j)`` elements from rank ``i`` to rank ``j``
        (indices in rank order; 0: nothing)."""
        ranks = self.group.ranks()
        index = {r: i for i, r in enumerate(ranks)}
        n = len(ranks)
        sizes = {(i, j): size(i, j) for i in range(n) for j in range(n)}
        pos: dict[Coord, dict[Block, int]] = {}
        free: dict[Coord, int] = {}
        for r in ranks:
            mine = [((index[r], j), sizes[(index[r], j)]) for j in range(n)]
            pos[r] = dict(zip((b for b, _ in mine), _offsets([s for _, s in mine]), strict=True))
            pos[r] = {b: p for b, p in pos[r].items() if sizes[b]}
            free[r] = sum(s for _, s in mine)
        loads = dict(free)
        programs: Programs = {r: [] for r in ranks}
        levels = [lv for lv in self.levels() if len(lv.team(ranks[0])) > 1]
        for step, lv in enumerate(levels):
            nxt = levels[step + 1] if step + 1 < len(levels) else None
            _level(lv, _landing_order(nxt, ranks), ranks, pos, free, programs, sizes)
        stores = {}
        for r in ranks:
            got = [sizes[(i, index[r])] for i in range(n)]
            stores[r] = _both_runs([(pos[r][(i, index[r])], out, got[i]) for i, out
                                    in zip(range(n), _offsets(got), strict=True) if got[i]])
        return ExchangePlan(programs, free, stores, loads)


def _offsets(lengths: list[int]) -> list[int]:
    out, at = [], 0
    for length in lengths:
        out.append(at)
        at += length
    return out


def _landing_order(nxt: Level | None, ranks: list[Coord]):
    """How arriving runs are laid out: by the member the next level sends their first
    block to (so its sends are contiguous), after the last level by source rank (so
    the output is written in few runs)."""
    if nxt is None:
        return lambda r, b: b[0]

    def key(r: Coord, b: Block) -> int:
        return nxt.team(r).index(nxt.target(r, ranks[b[1]]))
    return key


def _level(lv: Level, order, ranks: list[Coord], pos: dict, free: dict,
           programs: Programs, sizes: dict[Block, int]) -> None:
    """Add one level's rounds to every rank's program and move the blocks: a message
    is a run of blocks contiguous at the sender; arriving runs land in ``order``."""
    outgoing: dict[tuple[Coord, int], list[list[Block]]] = {}
    source: dict[tuple[Coord, int], Coord] = {}
    for r in ranks:
        team = lv.team(r)
        m, i = len(team), team.index(r)
        by_member: dict[Coord, list[Block]] = {}
        for b in sorted(pos[r], key=pos[r].get):
            by_member.setdefault(lv.target(r, ranks[b[1]]), []).append(b)
        for k in range(1, m):
            outgoing[(r, k)] = _block_runs(by_member.get(team[(i + k) % m], []), pos[r],
                                           sizes)
            source[(r, k)] = team[(i - k) % m]
    landing: dict[tuple[Coord, int, int], int] = {}
    for r in ranks:
        arriving = sorted((order(r, run[0]), k, j) for k in range(1, len(lv.team(r)))
                          for j, run in enumerate(outgoing[(source[(r, k)], k)]))
        for _, k, j in arriving:
            landing[(r, k, j)] = free[r]
            free[r] += sum(sizes[b] for b in outgoing[(source[(r, k)], k)][j])
    for r in ranks:

        for k in range(1, len(lv.team(r))):
            sends = [("send", shift(lv.family, k), pos[r][run[0]],
                      sum(sizes[b] for b in run)) for run in outgoing[(r, k)]]
            copies = [("copy", shift(lv.family, -k), landing[(r, k, j)],
                       sum(sizes[b] for b in run))
                      for j, run in enumerate(outgoing[(source[(r, k)], k)])]
            if sends or copies:
                programs[r].append((lv.name, _alternate(sends, copies)))
    for (r, k), runs in outgoing.items():
        team = lv.team(r)
        dst = team[(team.index(r) + k) % len(team)]
        for j, run in enumerate(runs):
            at = landing[(dst, k, j)]
            for b in run:
                del pos[r][b]
                pos[dst][b] = at
                at += sizes[b]


def _alternate(sends: list, copies: list) -> tuple:
    """Send, receive, send, ...: a rank never issues more sends in a row than its peer
    does, so credits always come back (all ranks sending into full queues at once
    would deadlock)."""
    out = []
    for a, b in zip(sends, copies, strict=False):
        out += [a, b]
    longer = sends if len(sends) > len(copies) else copies
    return tuple(out + longer[min(len(sends), len(copies)):])


def _block_runs(blocks: list[Block], where: dict[Block, int],
                sizes: dict[Block, int]) -> list[list[Block]]:
    """``blocks`` (in position order) cut where they stop being back to back."""
    runs: list[list[Block]] = []
    for b in blocks:
        if runs and where[b] == where[runs[-1][-1]] + sizes[runs[-1][-1]]:
            runs[-1].append(b)
        else:
            runs.append([b])
    return runs


def _both_runs(items: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """(work start, output start, length) items merged where both sides continue."""
    runs: list[list[int]] = []
    for p, q, length in items:
        last = runs[-1] if runs else None
        if last and p == last[0] + last[2] and q == last[1] + last[2]:
            last[2] += length
        else:
            runs.append([p, q, length])
    return [tuple(x) for x in runs]
