"""PE_CPU dispatch cost (ADR-0064 Rev 2): ``FIXED(type) + logical_bytes x R`` cycles.

A composite pays the general control-path FIXED (it makes the scheduler build
a tile plan); every single-op command pays the light FIXED of one descriptor
push. ``tl.cycles(n)`` costs exactly ``n``. Composites larger than the
descriptor cap are rejected when emitted.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.triton_emu.pe_commands import PeCommand, PeCpuOverheadCmd


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
        if isinstance(cmd, PeCpuOverheadCmd):
            return float(cmd.cycles)
        return self.fixed(cmd) + cmd.logical_bytes * self.byte_cycles_recip

    def check_composite(self, logical_bytes: int) -> None:
        if logical_bytes > self.max_composite_logical_bytes:
            raise ValueError(
                f"composite descriptor is {logical_bytes} logical bytes, above the "
                f"{self.max_composite_logical_bytes}-byte cap (pe_cost_model."
                f"max_composite_logical_bytes); split it into smaller composites")
