"""An independent route search for the routing tests: plain Dijkstra over every node."""

from __future__ import annotations

import heapq


def full_search(graph, origin: str, target: str, excluded, backward: bool = False):
    """(route from origin to target, its length): Dijkstra over every node of the graph
    with the router's tie rule (the first predecessor at the final distance; equal
    distances pop in push order; edges in graph order), forward or over reversed edges."""
    adj: dict[str, list] = {}
    for e in graph.edges:
        if e.kind not in excluded:
            a, b = (e.dst, e.src) if backward else (e.src, e.dst)
            adj.setdefault(a, []).append((b, e.wire_ns + graph.nodes[e.dst].overhead_ns))
    dist, prev, done, heap, pushed = {origin: 0.0}, {}, set(), [(0.0, 0, origin)], 1
    while heap:
        d, _, node = heapq.heappop(heap)
        if node in done:
            continue
        done.add(node)
        if node == target:
            break
        for nxt, w in adj.get(node, []):
            if d + w < dist.get(nxt, float("inf")):
                dist[nxt], prev[nxt] = d + w, node
                heapq.heappush(heap, (d + w, pushed, nxt))
                pushed += 1
    path = [target]
    while path[-1] != origin:
        path.append(prev[path[-1]])
    return (path if backward else path[::-1]), dist[target]
