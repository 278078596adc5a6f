"""``PerSip``: its own module so that the collectives backend (``distributed``) can pass
per-SIP arguments without importing the context that imports it."""

from __future__ import annotations


class PerSip(dict):
    """A launch argument that differs per SIP: ``PerSip({0: x0, 1: x1})``. Each SIP's
    kernels receive their own entry (converted like any argument)."""
