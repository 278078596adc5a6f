"""A routing policy's edges, listed node by node when a route search first reaches them.

A search under one policy used to start by listing every edge the policy allows, and
again without the spurs (``spurs``), and for a backward search both once more over
the reversed edges: some twelve passes over the 13,000 edges of ``default`` before
a program's first command could be routed, where its searches settle a few hundred
nodes. :class:`Edges` lists a node's edges the first time a search asks, in the
order the full listing had them, so routes and their ties are unchanged (docs/adr/0067).
"""

from __future__ import annotations

# (other end, weight, kind, index of the edge in the graph's list): one edge seen
# from one of its ends
Wire = tuple[str, float, str, int]
Adjacency = dict[str, list[tuple[str, float]]]


def wires_of(edges: list[tuple[str, str, str, float]]) -> tuple[dict[str, list[Wire]],
                                                               dict[str, list[Wire]]]:
    """Every node's outgoing and incoming edges, each list in the graph's edge order."""
    out: dict[str, list[Wire]] = {}
    into: dict[str, list[Wire]] = {}
    for i, (src, dst, kind, weight) in enumerate(edges):
        out.setdefault(src, []).append((dst, weight, kind, i))
        into.setdefault(dst, []).append((src, weight, kind, i))
    return out, into


class Edges:
    """The edges one policy allows, in one direction, listed per node on demand.

    :meth:`full` gives a node's allowed edges as ``(next node, weight)``: in the
    graph's edge order, or, backwards (``forward`` given), in the order a listing
    built from the forward one has them (by the position of each source's first
    allowed edge, then by edge). :meth:`core` gives the same without the edges into
    spurs (``group_of``), and nothing for a node inside one.
    """

    __slots__ = ("_wires", "_excluded", "_group_of", "_forward", "_full", "_core", "_first")

    def __init__(self, wires: dict[str, list[Wire]], excluded: frozenset[str],
                 group_of: dict[str, int], forward: Edges | None = None) -> None:
        self._wires = wires
        self._excluded = excluded
        self._group_of = group_of
        self._forward = forward
        self._full: Adjacency = {}
        self._core: Adjacency = {}
        self._first: dict[str, int] = {}

    def full(self, node: str) -> list[tuple[str, float]]:
        got = self._full.get(node)
        if got is None:
            excluded = self._excluded
            kept = [w for w in self._wires.get(node, []) if w[2] not in excluded]
            forward = self._forward
            if forward is not None:
                kept.sort(key=lambda w: (forward.first(w[0]), w[3]))
            got = self._full[node] = [(w[0], w[1]) for w in kept]
        return got

    def core(self, node: str) -> list[tuple[str, float]]:
        got = self._core.get(node)
        if got is None:
            group_of = self._group_of
            got = [] if node in group_of else [e for e in self.full(node)
                                                if e[0] not in group_of]
            self._core[node] = got
        return got

    def first(self, node: str) -> int:
        """The graph index of ``node``'s first allowed edge (-1: none)."""
        got = self._first.get(node)
        if got is None:
            excluded = self._excluded
            got = next((w[3] for w in self._wires.get(node, []) if w[2] not in excluded), -1)
            self._first[node] = got
        return got
