"""Routing helpers: address -> node resolution and policy-aware shortest paths."""

from kernbench.policy.routing.router import AddressResolver, PathRouter

__all__ = ["AddressResolver", "PathRouter"]
