"""``tl`` PE-to-PE queue verbs: ``send`` and the ``recv`` family (docs/tl-api.md).

Mixed into :class:`~kernbench.triton_emu.tl_context.TLContext`: payloads are
checked against the queue's slot size and the allowed dtypes before an
``IpcqSendCmd`` / ``IpcqRecvCmd`` goes to the PE's IPCQ unit.
"""

from __future__ import annotations

import math

from kernbench.errors import KernelMisuse
from kernbench.isa.commands import IpcqRecvCmd, IpcqSendCmd
from kernbench.isa.dtypes import DTYPE_NAMES, dtype_bytes
from kernbench.isa.handles import Completion, TensorHandle

_DTYPES = DTYPE_NAMES  # a queue moves bytes: any device dtype


class QueuesMixin:
    # -- PE-to-PE queues (PE_IPCQ) ---------------------------------------------------------
    def _ipcq(self):
        """The PE's IPCQ unit (None in command-list mode)."""
        return None if self._exec is None else self._exec.pe.ipcq

    def _check_payload(self, verb: str, direction: str, nbytes: int, dtype: str, queue) -> None:
        if dtype not in _DTYPES:
            raise KernelMisuse(f"tl.{verb} toward {direction!r}: dtype {dtype!r} is not "
                               f"supported (allowed: {', '.join(_DTYPES)})")
        if queue is not None and nbytes > queue.cfg.slot_bytes:
            raise KernelMisuse(f"tl.{verb} toward {direction!r}: {nbytes} B do not fit a "
                               f"{queue.cfg.slot_bytes} B IPCQ slot (split the payload)")

    def send(self, direction: str, src: TensorHandle) -> Completion | None:
        """Send TCM tensor ``src`` to the neighbour toward ``direction``.

        Blocks while the queue has no free slot; the bytes are those of ``src`` when
        the send starts. Returns the delivery's completion (``tl.wait`` takes it).
        """
        self._check(src)
        if src.space != "tcm":
            raise KernelMisuse(f"tl.send toward {direction!r} sends a TCM tensor, got {src} "
                               f"(tl.load it first)")
        ipcq = self._ipcq()
        q = ipcq.queue_out(direction) if ipcq is not None else None
        self._check_payload("send", direction, src.nbytes, src.dtype, q)
        return self._emit(IpcqSendCmd(direction, src))

    def _recv(self, verb: str, direction: str, shape, dtype: str, dst: TensorHandle | None,
              consume: bool, block: bool) -> TensorHandle:
        ipcq = self._ipcq()
        q = ipcq.queue_in(direction, verb) if ipcq is not None else None
        if dst is None:
            shape = tuple(int(s) for s in shape) if not isinstance(shape, int) else (shape,)
            self._check_payload(verb, direction, math.prod(shape) * dtype_bytes(dtype)
                                if dtype in _DTYPES else 0, dtype, q)
            out = self._alloc(shape, dtype)
        else:
            self._check(dst)
            if dst.transposed or dst.row_stride not in (None, dst.shape[-1]):
                raise KernelMisuse(f"tl.{verb} from {direction!r} needs a contiguous "
                                   f"destination, got {dst}")
            self._check_payload(verb, direction, dst.nbytes, dst.dtype, q)
            out = dst
        comp = self._emit(IpcqRecvCmd(direction, out, consume))
        if block:
            self._block(comp)
        out.pending = comp
        return out

    def recv(self, direction: str, shape=(), dtype: str = "f16", *,
             dst: TensorHandle | None = None, dst_addr: int | None = None,
             dst_space: str | None = None) -> TensorHandle:
        """Blocking receive of the next message from ``direction``.

        Return-slot mode (no destination): the slot is copied into a new TCM tensor
        of ``shape``/``dtype``. Copy-to-destination mode: ``dst`` (a TCM tensor or a
        ``tl.ref`` memory view), or ``dst_addr`` with ``dst_space`` "tcm" (encoded TCM
        address) or "hbm" (virtual address), receives the bytes.
        """
        if dst is None and (dst_addr is not None or dst_space is not None):
            if dst_addr is None or dst_space not in ("tcm", "hbm"):
                raise KernelMisuse(f"tl.recv from {direction!r}: copy-to-destination needs "
                                   f"dst_addr and dst_space 'tcm' or 'hbm', got "
                                   f"{dst_addr!r}, {dst_space!r}")
            shape = tuple(int(s) for s in shape)
            dst = (TensorHandle(self._new_id(), int(dst_addr), shape, dtype, "tcm", True)
                   if dst_space == "tcm" else self.ref(dst_addr, shape, dtype))
        return self._recv("recv", direction, shape, dtype, dst, True, True)

    def recv_async(self, direction: str, shape=(), dtype: str = "f16", *,
                   dst: TensorHandle | None = None) -> TensorHandle:
        """Non-blocking :meth:`recv`: the returned tensor is pending until the message
        has been copied (``tl.wait(t)``, or any op that reads it, waits)."""
        return self._recv("recv_async", direction, shape, dtype, dst, True, False)

    def recv_no_consume(self, direction: str, shape=(), dtype: str = "f16") -> TensorHandle:
        """DIAGNOSTIC: :meth:`recv` without the slot-read charge (the tensor is ready at
        arrival). Only for latency breakdowns; production kernels use ``recv``."""
        return self._recv("recv_no_consume", direction, shape, dtype, None, False, True)
