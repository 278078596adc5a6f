"""The simulated clock, read on the hot paths.

SimPy's ``Environment.now`` is a Python property. Read from a compiled module it is a
call into the interpreter (some 500 machine instructions, measured with callgrind),
several times per tile of a composite; the attribute it returns costs one dictionary
lookup. ``sim_now`` reads that attribute. It is the one place that knows SimPy's
private name, and a test checks it against ``env.now`` while a simulation runs.
"""

from __future__ import annotations

from typing import Any


def sim_now(env: Any) -> float:
    """``env.now`` without the property call."""
    return env._now
