"""Data-parallel placement of tensors over the cubes and PEs of one SIP."""

from kernbench.policy.placement.dp_policy import DPPolicy, ShardSpec, resolve_dp_policy

__all__ = ["DPPolicy", "ShardSpec", "resolve_dp_policy"]
