"""Dead-end groups of a topology graph ("spurs"): the part a route search may leave out.

A PE's units hang off one NoC router, and so does each HBM controller: every edge
between such a group and the rest of the graph touches that one node, its
attachment. A shortest route between two nodes outside a group never enters it
(it would have to leave through the node it came in by), and a node inside it
never lowers a distance outside it. So a search that skips every group but its
own source's settles the other nodes in the same order, with the same distances
and predecessors, as one that does not -- on topologies where three nodes in five
are PE units or HBM controllers (docs/adr/0064). A route into another
group is the route to its attachment followed by a search inside the group,
started at the attachment's distance so that the sums are the same floats.

A group qualifies only when the graph confirms it (one attachment, itself outside
every group); any other grouping is simply searched in full.
"""

from __future__ import annotations

from kernbench.policy.routing.edges import Adjacency, Edges
from kernbench.topology.elements import Node


class Spurs:
    """The groups that qualify: ``group_of`` a node (absent: in none), and per group
    number its ``members`` and its ``attachment``."""

    __slots__ = ("group_of", "members", "attachment")

    def __init__(self, group_of: dict[str, int], members: list[list[str]],
                 attachment: list[str]) -> None:
        self.group_of, self.members, self.attachment = group_of, members, attachment


def find_spurs(nodes: dict[str, Node], edges: list[tuple[str, str, str, float]]) -> Spurs:
    """The groups of ``nodes`` that qualify: the units of one PE, one HBM controller."""
    candidates: dict[tuple, list[str]] = {}
    for node_id, node in nodes.items():
        attrs = node.attrs
        if "pe" in attrs and node.kind != "router":
            key = (attrs.get("sip"), attrs.get("cube"), attrs["pe"], node.kind == "hbm_ctrl")
            candidates.setdefault(key, []).append(node_id)
    member = {n: key for key, group in candidates.items() for n in group}
    outside: dict[tuple, set[str]] = {key: set() for key in candidates}
    for src, dst, _, _ in edges:
        a, b = member.get(src), member.get(dst)
        if a != b:
            if a is not None:
                outside[a].add(dst)
            if b is not None:
                outside[b].add(src)
    found = Spurs({}, [], [])
    for key, group in candidates.items():
        ends = outside[key]
        if len(ends) != 1 or next(iter(ends)) in member:
            continue
        for n in group:
            found.group_of[n] = len(found.members)
        found.members.append(group)
        found.attachment.append(next(iter(ends)))
    return found


def edges_of(edges: Edges, spurs: Spurs, group: int, leaving: bool) -> Adjacency:
    """The edges a search follows in ``group``: the group's own, and its attachment's
    into it -- and, with ``leaving`` (a search that starts in the group), the
    attachment's other edges but those into other groups. In their order."""
    local = {n: edges.full(n) for n in spurs.members[group]}
    attachment, group_of = spurs.attachment[group], spurs.group_of
    outside = group if leaving else -1  # what an edge leading out of every group counts as
    local[attachment] = [e for e in edges.full(attachment)
                         if group_of.get(e[0], outside) == group]
    return local
