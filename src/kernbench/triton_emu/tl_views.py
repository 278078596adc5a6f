"""``tl`` views and broadcasts: new shapes over the same bytes (docs/tl-api.md).

Mixed into :class:`~kernbench.triton_emu.tl_context.TLContext`. A view
(``trans``, ``reshape``, ``view``) costs no command and dies with the scratch
scope of the tensor it views; ``broadcast`` and ``repeat`` materialise a copy
with one ``BroadcastCmd``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kernbench.errors import KernelMisuse
from kernbench.isa.commands import BroadcastCmd
from kernbench.isa.dtypes import dtype_bytes
from kernbench.isa.handles import TensorHandle


class ViewsMixin:
    # -- views (metadata only) -------------------------------------------------------
    def trans(self, x: TensorHandle) -> TensorHandle:
        """Transpose a 2-D tensor: metadata in timing, a real transpose in data mode."""
        self._check(x)
        if len(x.shape) != 2:
            raise KernelMisuse(f"tl.trans needs a 2-D tensor, got shape {x.shape}")
        return self._view_of(x, TensorHandle(self._new_id(), x.addr, (x.shape[1], x.shape[0]),
                                             x.dtype, x.space, x.pinned, x.row_stride,
                                             not x.transposed, x.pending))

    def reshape(self, x: TensorHandle, shape: Sequence[int]) -> TensorHandle:
        """Byte-conserving view of a contiguous tensor."""
        self._check(x)
        shape = tuple(int(s) for s in shape)
        if math.prod(shape) != x.numel:
            raise KernelMisuse(f"tl.reshape cannot turn {x.shape} into {shape} (element counts differ)")
        if x.transposed or (x.row_stride not in (None, x.shape[-1])):
            raise KernelMisuse(f"tl.reshape needs a contiguous tensor, got {x}")
        return self._view_of(x, TensorHandle(self._new_id(), x.addr, shape, x.dtype, x.space,
                                             x.pinned, None, False, x.pending))

    def view(self, x: TensorHandle, start: int, length: int) -> TensorHandle:
        """Elements ``start .. start+length`` of a contiguous 1-D tensor (TCM or memory
        view), sharing its bytes: how collectives address chunks of one buffer."""
        self._check(x)
        if len(x.shape) != 1 or x.row_stride is not None:
            raise KernelMisuse(f"tl.view needs a contiguous 1-D tensor, got {x}")
        if not (isinstance(start, int) and isinstance(length, int)) or start < 0 \
                or length < 1 or start + length > x.shape[0]:
            raise KernelMisuse(f"tl.view({start}, {length}) is outside {x} "
                               f"(0 <= start, 1 <= length, start + length <= {x.shape[0]})")
        addr = x.addr + start * dtype_bytes(x.dtype)
        return self._view_of(x, TensorHandle(self._new_id(), addr, (length,), x.dtype, x.space,
                                             x.pinned, None, False, x.pending))

    def _view_of(self, base: TensorHandle, view: TensorHandle) -> TensorHandle:
        """A view dies with the scratch scope of the tensor it views."""
        view.scope = base.scope
        return view

    # -- broadcast ---------------------------------------------------------------
    def broadcast(self, x: TensorHandle, new_shape: Sequence[int]) -> TensorHandle:
        self._check(x)
        new_shape = tuple(int(s) for s in new_shape)
        if len(new_shape) != len(x.shape) or any(
                a != b and a != 1 for a, b in zip(x.shape, new_shape, strict=True)):
            raise KernelMisuse(f"tl.broadcast: {x.shape} cannot broadcast to {new_shape} "
                             f"(each axis must match or be 1)")
        if x.space != "tcm":
            raise KernelMisuse(f"tl.broadcast needs a TCM tensor, got {x}")
        out = self._alloc(new_shape, x.dtype)
        comp = self._emit(BroadcastCmd(x, out, new_shape))
        self._block(comp)
        out.pending = comp
        return out

    def repeat(self, x: TensorHandle, axis: int, n: int) -> TensorHandle:
        """Expand a size-1 ``axis`` to ``n``, inserting a new axis there if that axis is not
        of size 1. A negative axis counts from the end, as in ``numpy.expand_dims``."""
        self._check(x)
        shape = list(x.shape)
        if -len(shape) <= axis < 0:
            axis += len(shape) + (0 if shape[axis] == 1 else 1)
        if not (0 <= axis < len(shape) and shape[axis] == 1):
            if not 0 <= axis <= len(shape):
                raise KernelMisuse(f"tl.repeat: axis {axis} out of range for shape {x.shape}")
            shape.insert(axis, 1)
            x = self.reshape(x, shape)
        shape[axis] = n
        return self.broadcast(x, shape)
