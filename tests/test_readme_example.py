"""The README's kernel example runs and computes what it says."""

import numpy as np

from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine import GraphEngine

from .conftest import ROOT


def test_readme_kernel_example(small_graph):
    text = (ROOT / "README.md").read_text()
    code = text.split("## Writing a kernel")[1].split("```python")[1].split("```")[0]
    scope = {"np": np, "DPPolicy": DPPolicy}
    exec(code, scope)  # our own documentation
    ctx = RuntimeContext(GraphEngine(small_graph, enable_data=True))
    scope["run"](ctx)
    y = ctx._tensors[-1]
    np.testing.assert_array_equal(ctx.to_numpy(y), np.full((64, 128), 2.0, np.float16))
