"""Device dtypes: the one table of names, numpy dtypes and element sizes.

numpy has no bfloat16, so ``bf16`` is carried by ``ml_dtypes.bfloat16``: a
bf16 tensor is stored as 2-byte elements and converts to and from numpy like
any other dtype. Every byte count in the simulator derives from this table.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from kernbench.errors import KernbenchError

# bytes per element: all a timing-mode simulation needs (read it through ``dtype_bytes``,
# which names the allowed dtypes when one is unknown; ``handles.element_bytes`` reads it
# directly for the compiled hot paths)
ELEMENT_BYTES: dict[str, int] = {"f16": 2, "bf16": 2, "f32": 4, "i32": 4, "i8": 1, "u8": 1,
                                 "bool": 1}
DTYPE_NAMES: tuple[str, ...] = tuple(ELEMENT_BYTES)


@cache
def _numpy() -> dict[str, np.dtype]:
    """Device dtype -> numpy dtype, built on first use: ``ml_dtypes`` takes about a
    second of CPU to import, which only runs that touch values should pay."""
    import ml_dtypes

    table = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
             "f32": np.dtype(np.float32), "i32": np.dtype(np.int32), "i8": np.dtype(np.int8),
             "u8": np.dtype(np.uint8), "bool": np.dtype(np.bool_)}
    if {n: dt.itemsize for n, dt in table.items()} != ELEMENT_BYTES:
        raise RuntimeError("the dtype tables disagree on element sizes")
    return table


@cache
def _by_numpy() -> dict[np.dtype, str]:
    return {dt: name for name, dt in _numpy().items()}


class DtypeError(KernbenchError, ValueError):
    """A dtype name or numpy dtype the device does not have."""


def np_dtype(name: str) -> np.dtype:
    """The numpy dtype that holds a device dtype's values."""
    try:
        return _numpy()[name]
    except (KeyError, TypeError):
        raise DtypeError(f"unknown dtype {name!r} (allowed: {', '.join(DTYPE_NAMES)})") from None


def dtype_bytes(name: str) -> int:
    """Bytes per element of a device dtype."""
    try:
        return ELEMENT_BYTES[name]
    except (KeyError, TypeError):
        raise DtypeError(f"unknown dtype {name!r} (allowed: {', '.join(DTYPE_NAMES)})") from None


def dtype_name(dtype) -> str:
    """The device dtype name of a numpy dtype (``np.float16`` -> ``"f16"``)."""
    dt = np.dtype(dtype)
    try:
        return _by_numpy()[dt]
    except KeyError:
        raise DtypeError(f"numpy dtype {dt} has no device dtype (device dtypes: "
                         f"{', '.join(f'{n}={d}' for n, d in _numpy().items())})") from None
