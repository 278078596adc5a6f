"""The built-in collective algorithms (each registers itself on import)."""

from kernbench.ccl.algorithms import lrab_hierarchical, ring, torus2d  # noqa: F401
