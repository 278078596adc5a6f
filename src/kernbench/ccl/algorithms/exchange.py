"""All-to-all as exchanges inside teams, one level at a time: what both all-to-all
algorithms build on.

Every rank starts with one block per destination rank (block ``(i, j)``: from rank
``i`` to rank ``j``, ``block`` elements). A level splits the ranks into teams; in
it each rank hands every block whose destination lies "behind" another team member
(``Level.target``) to that member, directly, in ``m - 1`` rounds (round ``k``: send
to the member ``k`` places on, receive from the one ``k`` places back, so no rank is
the hot spot of a round). After the last level every block sits at its destination.

Blocks live in one TCM work buffer per rank: the input first, every level's arrivals
after it; blocks a rank keeps stay where they are. A message carries the blocks that
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
        ranks = self.group.ranks()
        index = {r: i for i, r in enumerate(ranks)}
        n = len(ranks)
        pos: dict[Coord, dict[Block, int]] = {r: {(index[r], j): j for j in range(n)}
                                              for r in ranks}
        free = dict.fromkeys(ranks, n)
        programs: Programs = {r: [] for r in ranks}
        levels = [lv for lv in self.levels() if len(lv.team(ranks[0])) > 1]
        for step, lv in enumerate(levels):
            nxt = levels[step + 1] if step + 1 < len(levels) else None
            _level(lv, _landing_order(nxt, ranks), ranks, pos, free, programs, block)
        stores = {r: _both_runs([(pos[r][(j, index[r])], j) for j in range(n)], block)
                  for r in ranks}
        return ExchangePlan(programs, {r: free[r] * block for r in ranks}, stores)


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
           programs: Programs, block: int) -> None:
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
            outgoing[(r, k)] = _block_runs(by_member.get(team[(i + k) % m], []), pos[r])
            source[(r, k)] = team[(i - k) % m]
    landing: dict[tuple[Coord, int, int], int] = {}
    for r in ranks:
        arriving = sorted((order(r, run[0]), k, j) for k in range(1, len(lv.team(r)))
                          for j, run in enumerate(outgoing[(source[(r, k)], k)]))
        for _, k, j in arriving:
            landing[(r, k, j)] = free[r]
            free[r] += len(outgoing[(source[(r, k)], k)][j])
    for r in ranks:
        for k in range(1, len(lv.team(r))):
            sends = [("send", shift(lv.family, k), pos[r][run[0]] * block, len(run) * block)
                     for run in outgoing[(r, k)]]
            copies = [("copy", shift(lv.family, -k), landing[(r, k, j)] * block,
                       len(run) * block)
                      for j, run in enumerate(outgoing[(source[(r, k)], k)])]
            programs[r].append((lv.name, _alternate(sends, copies)))
    for (r, k), runs in outgoing.items():
        for j, run in enumerate(runs):
            dst = lv.team(r)[(lv.team(r).index(r) + k) % len(lv.team(r))]
            for off, b in enumerate(run):
                del pos[r][b]
                pos[dst][b] = landing[(dst, k, j)] + off


def _alternate(sends: list, copies: list) -> tuple:
    """Send, receive, send, ...: a rank never issues more sends in a row than its peer
    does, so credits always come back (all ranks sending into full queues at once
    would deadlock)."""
    out = []
    for a, b in zip(sends, copies, strict=False):
        out += [a, b]
    longer = sends if len(sends) > len(copies) else copies
    return tuple(out + longer[min(len(sends), len(copies)):])


def _block_runs(blocks: list[Block], where: dict[Block, int]) -> list[list[Block]]:
    """``blocks`` (in position order) cut where their positions stop being consecutive."""
    runs: list[list[Block]] = []
    for b in blocks:
        if runs and where[b] == where[runs[-1][-1]] + 1:
            runs[-1].append(b)
        else:
            runs.append([b])
    return runs


def _both_runs(pairs: list[tuple[int, int]], block: int) -> list[tuple[int, int, int]]:
    """(work start, output start, length) in elements of the runs consecutive on both
    sides of (work position, output position) block pairs."""
    runs: list[list[int]] = []
    for p, q in pairs:
        last = runs[-1] if runs else None
        if last and p == last[0] + last[2] and q == last[1] + last[2]:
            last[2] += 1
        else:
            runs.append([p, q, 1])
    return [(p * block, q * block, ln * block) for p, q, ln in runs]
