"""KernBench: a discrete-event simulator of a memory-centric AI accelerator.

The package is layered one way: ``cli/experiments/benches -> runtime_api ->
sim_engine -> components -> policy/topology``. Lower layers never import
higher ones.
"""

__version__ = "0.1.0"

from kernbench import native as _native

_native.install()  # compiled twins of the hot modules, when built and fresh
