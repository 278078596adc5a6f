"""PE_IPCQ vocabulary: named directions, the side a message arrives from, queue
sizing, and the mirrored neighbour table every installer expects.

A neighbour table is ``{(sip, cube, pe): {direction: peer}}``; it is mirrored
when every ``a`` that sends ``direction`` to ``b`` is named by ``b`` under
``opposite(direction)`` (``install_queues`` checks it). Design:
docs/adr/0024-pe-ipcq.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernbench.errors import ConfigError

Coord = tuple[int, int, int]
Tables = dict[Coord, dict[str, Coord]]

# Every direction and the one a message sent that way arrives from.
_PAIRS = (("N", "S"), ("E", "W"), ("cube_N", "cube_S"), ("cube_E", "cube_W"),
          ("global_N", "global_S"), ("global_E", "global_W"), ("ring_next", "ring_prev"),
          ("row_next", "row_prev"), ("col_next", "col_prev"))
OPPOSITE: dict[str, str] = {a: b for a, b in _PAIRS} | {b: a for a, b in _PAIRS}
DIRECTIONS: tuple[str, ...] = tuple(d for pair in _PAIRS for d in pair)
TIERS = ("tcm", "sram")

# Numbered directions for exchanges where every member of a team talks to every other
# (all-to-all): ``<family>+<k>`` is the member k places on in the team's order,
# ``<family>-<k>`` the one k places back, so each is the other's mirror.
SHIFT_FAMILIES = ("a2a", "a2a_pe", "a2a_cube", "a2a_sip")
_SHIFT = re.compile(r"^(" + "|".join(SHIFT_FAMILIES) + r")([+-])([1-9][0-9]*)$")
ALLOWED = ", ".join(DIRECTIONS) + ", " + ", ".join(f"{f}+k/{f}-k" for f in SHIFT_FAMILIES)


def opposite(direction: str) -> str | None:
    """The side a message sent toward ``direction`` arrives from; None for a name that
    is not a direction."""
    back = OPPOSITE.get(direction)
    if back is not None:
        return back
    m = _SHIFT.match(direction) if isinstance(direction, str) else None
    if m is None:
        return None
    return f"{m[1]}{'-' if m[2] == '+' else '+'}{m[3]}"


def shift(family: str, k: int) -> str:
    """The numbered direction toward the member ``k`` places on (``k < 0``: back)."""
    if family not in SHIFT_FAMILIES or k == 0:
        raise ValueError(f"no numbered direction {family!r} {k:+d}")
    return f"{family}{k:+d}"


@dataclass(frozen=True)
class IpcqConfig:
    """How many receive slots each queue has, how big they are and where they live."""

    slots: int = 4
    slot_bytes: int = 4096
    tier: str = "tcm"

    def __post_init__(self) -> None:
        if not isinstance(self.slots, int) or self.slots < 1:
            raise ConfigError("IPCQ config", "ipcq.slots",
                              f"must be a positive integer, got {self.slots!r}")
        if not isinstance(self.slot_bytes, int) or self.slot_bytes < 1 or self.slot_bytes % 64:
            raise ConfigError("IPCQ config", "ipcq.slot_bytes",
                              f"must be a positive multiple of 64, got {self.slot_bytes!r}")
        if self.tier not in TIERS:
            raise ConfigError("IPCQ config", "ipcq.tier",
                              f"must be one of {', '.join(TIERS)}, got {self.tier!r}")


def link(tables: Tables, a: Coord, direction: str, b: Coord) -> None:
    """``a`` sends ``direction`` to ``b`` (and ``b`` receives it from the mirror side)."""
    tables.setdefault(a, {})[direction] = b
    tables.setdefault(b, {})[opposite(direction)] = a
