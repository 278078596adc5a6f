"""The instruction-set vocabulary shared by the kernel side and the hardware side.

Tensor handles, command types, completions and dtypes live here, below every
other simulator layer, so that ``triton_emu`` (which builds commands) and
``components`` (which execute them) both import this package and never each
other.
"""

from kernbench.isa.dtypes import DTYPE_NAMES, dtype_bytes, dtype_name, np_dtype
from kernbench.isa.handles import Completion, TensorHandle, numel

__all__ = ["DTYPE_NAMES", "Completion", "TensorHandle", "dtype_bytes", "dtype_name", "np_dtype",
           "numel"]
