"""Data-movement bench: deploy a tensor over PCIe and read it back."""

from __future__ import annotations

from kernbench.benches._shapes import env_int
from kernbench.benches.registry import bench
from kernbench.policy.placement import DPPolicy


@bench(name="host-roundtrip",
       description="Write a tensor to every PE of CUBE 0 over PCIe (replicated), then zero it.")
def run(torch):
    n = env_int("ROUNDTRIP_ELEMS", 65536)
    pes = torch.spec.pes_per_cube
    return torch.zeros((n,), "f16", dp=DPPolicy(num_pes=pes), name="payload")
