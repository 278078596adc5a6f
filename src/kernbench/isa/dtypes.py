"""Device dtypes: the one table of names, numpy dtypes and element sizes.

numpy has no bfloat16, so ``bf16`` is carried by ``ml_dtypes.bfloat16``: a
bf16 tensor is stored as 2-byte elements and converts to and from numpy like
any other dtype. Every byte count in the simulator derives from this table.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from kernbench.errors import KernbenchError

_NUMPY: dict[str, np.dtype] = {
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "i32": np.dtype(np.int32),
    "i8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "bool": np.dtype(np.bool_),
}
DTYPE_NAMES: tuple[str, ...] = tuple(_NUMPY)
_BYTES = {name: dt.itemsize for name, dt in _NUMPY.items()}
_BY_NUMPY = {dt: name for name, dt in _NUMPY.items()}


class DtypeError(KernbenchError, ValueError):
    """A dtype name or numpy dtype the device does not have."""


def np_dtype(name: str) -> np.dtype:
    """The numpy dtype that holds a device dtype's values."""
    try:
        return _NUMPY[name]
    except (KeyError, TypeError):
        raise DtypeError(f"unknown dtype {name!r} (allowed: {', '.join(DTYPE_NAMES)})") from None


def dtype_bytes(name: str) -> int:
    """Bytes per element of a device dtype."""
    try:
        return _BYTES[name]
    except (KeyError, TypeError):
        raise DtypeError(f"unknown dtype {name!r} (allowed: {', '.join(DTYPE_NAMES)})") from None


def dtype_name(dtype) -> str:
    """The device dtype name of a numpy dtype (``np.float16`` -> ``"f16"``)."""
    dt = np.dtype(dtype)
    try:
        return _BY_NUMPY[dt]
    except KeyError:
        raise DtypeError(f"numpy dtype {dt} has no device dtype (device dtypes: "
                         f"{', '.join(f'{n}={d}' for n, d in _NUMPY.items())})") from None
