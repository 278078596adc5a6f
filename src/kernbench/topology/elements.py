"""The nodes and edges a topology compiles into (``graph.TopologyGraph`` holds them).

Compiled (``kernbench.native``): a system has thousands of each, and as frozen
dataclasses building them was a quarter of loading a topology (6.6 ms for the
13,000 edges of ``default``, docs/adr/0067). Their fields are ``Final``: the compiled
classes refuse an assignment, as the frozen dataclasses did.
"""

from __future__ import annotations

from typing import Any, Final


class Node:
    """A component instance. ``overhead_ns`` is paid by every request through it."""

    __slots__ = ("id", "kind", "overhead_ns", "attrs")

    def __init__(self, id: str, kind: str, overhead_ns: float,
                 attrs: dict[str, Any] | None = None) -> None:
        self.id: Final = id
        self.kind: Final = kind
        self.overhead_ns: Final = overhead_ns
        self.attrs: Final[dict[str, Any]] = {} if attrs is None else attrs

    def __repr__(self) -> str:
        return (f"Node(id={self.id!r}, kind={self.kind!r}, overhead_ns={self.overhead_ns!r}, "
                f"attrs={self.attrs!r})")


class Edge:
    """A directed link. Wire delay is ``distance_mm * ns_per_mm``."""

    __slots__ = ("src", "dst", "kind", "bw_gbs", "distance_mm", "ns_per_mm")

    def __init__(self, src: str, dst: str, kind: str, bw_gbs: float, distance_mm: float,
                 ns_per_mm: float) -> None:
        self.src: Final = src
        self.dst: Final = dst
        self.kind: Final = kind
        self.bw_gbs: Final = bw_gbs
        self.distance_mm: Final = distance_mm
        self.ns_per_mm: Final = ns_per_mm

    @property
    def wire_ns(self) -> float:
        return self.distance_mm * self.ns_per_mm

    def __repr__(self) -> str:
        return (f"Edge(src={self.src!r}, dst={self.dst!r}, kind={self.kind!r}, "
                f"bw_gbs={self.bw_gbs!r}, distance_mm={self.distance_mm!r}, "
                f"ns_per_mm={self.ns_per_mm!r})")
