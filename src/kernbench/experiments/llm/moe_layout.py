"""Where a MoE layer's experts live: every rank a column slice of every expert (``tp``),
or each expert whole on a group of ranks that split its columns (``ep``: expert
parallelism; with more experts than ranks each rank holds several whole ones).

Ranks are the layer's tensor-parallel ranks in (SIP, CUBE, PE) order. ``placement``
says how experts are dealt to them under ``ep``: ``blocks`` gives an expert a block of
consecutive ranks (and a rank consecutive experts), so experts are dealt to SIPs, then
CUBEs; ``strided`` deals them round-robin, expert ``e`` on ranks ``e``, ``e + E``, ...
(and rank ``r`` experts ``r``, ``r + R``, ...), so an expert's group spans every SIP.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.errors import UsageError

PARALLEL = ("tp", "ep")
PLACEMENTS = ("blocks", "strided")


@dataclass(frozen=True)
class ExpertLayout:
    parallel: str
    experts: int
    ranks: int
    F: int  # one expert's FFN width
    placement: str = "blocks"

    def __post_init__(self) -> None:
        if self.parallel not in PARALLEL:
            raise UsageError(f"--moe-parallel must be one of {', '.join(PARALLEL)}, "
                             f"got {self.parallel!r}")
        if self.placement not in PLACEMENTS:
            raise UsageError(f"--moe-placement must be one of {', '.join(PLACEMENTS)}, "
                             f"got {self.placement!r}")
        E, R = self.experts, self.ranks
        if self.parallel == "ep" and (E % R if E > R else R % E):
            raise UsageError(f"expert parallelism: {E} experts do not place evenly on {R} "
                             f"ranks (one expert per group of R/E ranks, or E/R per rank)")
        if self.F % self.group:
            raise UsageError(f"{self.parallel}: an expert's {self.F} FFN columns do not split "
                             f"over its {self.group} ranks")

    @property
    def group(self) -> int:
        """Ranks one expert spans (its columns split among them)."""
        if self.parallel == "tp":
            return self.ranks
        return self.ranks // self.experts if self.experts <= self.ranks else 1

    @property
    def slots(self) -> int:
        """Experts (column slices) each rank holds."""
        if self.parallel == "tp":
            return self.experts
        return self.experts // self.ranks if self.experts > self.ranks else 1

    @property
    def cols(self) -> int:
        return self.F // self.group

    @property
    def _strided(self) -> bool:
        return self.parallel == "ep" and self.placement == "strided"

    def slot(self, rank: int, s: int) -> tuple[int, int]:
        """(expert, first column) of rank ``rank``'s slot ``s``."""
        if self.parallel == "tp":
            return s, rank * self.cols
        if self.experts > self.ranks:
            return (rank + s * self.ranks if self._strided else rank * self.slots + s), 0
        if self._strided:
            return rank % self.experts, (rank // self.experts) * self.cols
        return rank // self.group, (rank % self.group) * self.cols

    def members(self, expert: int) -> range:
        """The ranks (indices) holding a slice of ``expert``, in column order."""
        if self.parallel == "tp":
            return range(self.ranks)
        if self.experts > self.ranks:
            at = expert % self.ranks if self._strided else expert // self.slots
            return range(at, at + 1)
        if self._strided:
            return range(expert, self.ranks, self.experts)
        return range(expert * self.group, (expert + 1) * self.group)
