"""The host runtime: a ``torch``-like API that benches and experiments drive."""

from kernbench.policy.placement import DPPolicy, ShardSpec
from kernbench.runtime_api.context import LaunchHandle, PerSip, RuntimeContext
from kernbench.runtime_api.tensors import Tensor

__all__ = ["DPPolicy", "LaunchHandle", "PerSip", "RuntimeContext", "ShardSpec", "Tensor"]
