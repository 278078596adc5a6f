"""One launch, different arguments per PE: the host's plan keyed by coordinate."""

from __future__ import annotations


def per_rank(kernel, plan: dict, *, tl) -> None:
    """Run ``kernel(*plan[(sip, cube, pe)], tl=tl)``; a PE with no entry does nothing."""
    args = plan.get((tl.program_id(2), tl.program_id(1), tl.program_id(0)))
    if args is not None:
        kernel(*args, tl=tl)
