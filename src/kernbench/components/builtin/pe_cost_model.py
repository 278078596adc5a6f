"""PE_CPU dispatch cost: ``FIXED(type) + logical_bytes x R`` cycles (docs/adr/0011-pe-dispatch-cost.md).

A composite pays the general control-path FIXED (it makes the scheduler build
a tile plan); every single-op command pays the light FIXED of one descriptor
push. ``tl.cycles(n)`` costs exactly ``n``. Composites larger than the
descriptor cap are rejected when emitted.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.errors import KernbenchError
from kernbench.isa.commands import PeCommand


class CompositeTooLarge(KernbenchError, ValueError):
    """A kernel built a composite whose descriptor exceeds the cap (kernel misuse)."""


@dataclass(frozen=True)
class PeCostModel:
    fixed_per_cmd_cycles: float = 40.0  # composite: plan build + hazard tracking + completion
    fixed_per_single_op_cmd_cycles: float = 8.0  # one descriptor push to an engine queue
    byte_cycles_recip: float = 0.0625  # R: cycles per descriptor byte (16 B/cycle queue)
    max_composite_logical_bytes: int = 1024  # descriptor capacity

    @classmethod
    def from_spec(cls, spec) -> PeCostModel:
        """Defaults, overridden by the topology's ``pe.pe_cost_model`` block."""
        block = (spec.raw.get("pe") or {}).get("pe_cost_model") or {}
        return cls(**block)

    def fixed(self, cmd: PeCommand) -> float:
        return self.fixed_per_single_op_cmd_cycles if cmd.single_op else self.fixed_per_cmd_cycles

    def dispatch_cycles(self, cmd: PeCommand) -> float:
        explicit = cmd.explicit_cycles
        if explicit is not None:
            return float(explicit)
        return self.fixed(cmd) + cmd.logical_bytes * self.byte_cycles_recip

    def check_composite(self, logical_bytes: int) -> None:
        if logical_bytes > self.max_composite_logical_bytes:
            raise CompositeTooLarge(
                f"composite descriptor is {logical_bytes} logical bytes, above the "
                f"{self.max_composite_logical_bytes}-byte cap (pe_cost_model."
                f"max_composite_logical_bytes); split it into smaller composites")
