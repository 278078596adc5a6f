"""PE commands: what a kernel's ``tl`` calls hand to its PE.

Every command is a frozen dataclass with ``logical_bytes``, the size of its
hardware descriptor (framing 4 B, opcode 1 B, enum 1 B, tensor reference 8 B,
scalar 4 B, tuple length 1 B; docs/adr/0011-pe-dispatch-cost.md), from which
PE_CPU derives its dispatch cost, and ``accesses()``, the handles it reads and
writes, from which PE_SCHEDULER derives hazards. Class-level traits tell
PE_CPU how to issue a command; which unit executes it is registered next to
that unit (``components/builtin/dispatch.py``), never decided here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernbench.isa.handles import TensorHandle
from kernbench.isa.ops import FRAMING_BYTES, HANDLE_BYTES, SCALAR_BYTES, OpSpec, ops_accesses

# A move between two handles: opcode, source, destination, byte count.
MOVE_BYTES = FRAMING_BYTES + 1 + 2 * HANDLE_BYTES + SCALAR_BYTES


@dataclass(frozen=True, eq=False)
class PeCommand:
    """Base class; subclasses define their fields and ``logical_bytes``.

    Issue traits (class attributes, read by PE_CPU):

    * ``single_op``: dispatch pays the light fixed cost of one descriptor push
      (every command but a composite, which makes the scheduler build a plan);
    * ``waits_for_inputs``: the CPU stalls until the producers of the inputs
      are done (first-use auto-wait); a lazy command (a DMA read, a composite)
      lets its unit wait instead;
    * ``needs_known_deps``: the executing unit times the command when it
      arrives, so every dependency's end time must be known by then; a unit
      that waits on events itself (a composite's feeder) sets this False;
    * ``hands_to_fabric``: the command books shared fabric resources, so the
      CPU hands it over at its own issue time to keep bookings in time order;
    * ``records_reads``: later writers of what it reads must wait for its end. A
      command that captures its source when it starts (an IPCQ send's snapshot)
      sets this False: a later writer starts after it anyway (it is issued later
      and orders after the source's producer).
    """

    single_op = True
    waits_for_inputs = True
    needs_known_deps = True
    hands_to_fabric = False
    records_reads = True

    @property
    def logical_bytes(self) -> int:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def accesses(self) -> tuple[list[TensorHandle], list[TensorHandle]]:
        """(handles read, handles written): what PE hazard tracking orders on."""
        return ([], [])

    @property
    def explicit_cycles(self) -> int | None:
        """Dispatch cycles fixed by the command itself (None: use the cost formula)."""
        return None


@dataclass(frozen=True, eq=False)
class MoveCmd(PeCommand):
    """Base of the three commands that move ``src`` into ``dst``."""

    src: TensorHandle
    dst: TensorHandle

    @property
    def logical_bytes(self) -> int:
        return MOVE_BYTES

    def accesses(self) -> tuple[list[TensorHandle], list[TensorHandle]]:
        return ([self.src], [self.dst])


@dataclass(frozen=True, eq=False)
class DmaReadCmd(MoveCmd):
    """``src``: HBM view being read; ``dst``: TCM handle receiving it (lazy)."""

    waits_for_inputs = False
    hands_to_fabric = True


@dataclass(frozen=True, eq=False)
class DmaWriteCmd(MoveCmd):
    """``src``: TCM handle; ``dst``: HBM view written."""

    hands_to_fabric = True


@dataclass(frozen=True, eq=False)
class GemmCmd(PeCommand):
    a: TensorHandle
    b: TensorHandle
    out: TensorHandle
    accumulate: bool = False  # out += a @ b
    stationary: str = "b"  # operand the array holds: "b" (weights), "a", or "auto" (cheaper)

    @property
    def logical_bytes(self) -> int:
        return FRAMING_BYTES + 1 + 3 * HANDLE_BYTES + 3 * SCALAR_BYTES + 1  # m,k,n + flag

    def accesses(self) -> tuple[list[TensorHandle], list[TensorHandle]]:
        return ([self.a, self.b] + ([self.out] if self.accumulate else []), [self.out])


@dataclass(frozen=True, eq=False)
class MathCmd(PeCommand):
    op: str
    inputs: tuple[TensorHandle, ...]
    out: TensorHandle
    axis: int | None = None
    scalars: tuple[float, ...] = ()

    @property
    def logical_bytes(self) -> int:
        return (FRAMING_BYTES + 1 + 1 + HANDLE_BYTES * len(self.inputs) + HANDLE_BYTES
                + (SCALAR_BYTES if self.axis is not None else 0)
                + 1 + SCALAR_BYTES * len(self.scalars))

    def accesses(self) -> tuple[list[TensorHandle], list[TensorHandle]]:
        return (list(self.inputs), [self.out])


@dataclass(frozen=True, eq=False)
class CopyCmd(MoveCmd):
    """TCM -> TCM copy on the vector engine (``tl.copy_to``)."""


@dataclass(frozen=True, eq=False)
class BroadcastCmd(PeCommand):
    """Replicate ``src`` along size-1 axes into ``out`` (``tl.broadcast``)."""

    src: TensorHandle
    out: TensorHandle
    new_shape: tuple[int, ...]

    @property
    def logical_bytes(self) -> int:
        return FRAMING_BYTES + 1 + 2 * HANDLE_BYTES + 1 + SCALAR_BYTES * len(self.new_shape)

    def accesses(self) -> tuple[list[TensorHandle], list[TensorHandle]]:
        return ([self.src], [self.out])


@dataclass(frozen=True, eq=False)
class CompositeCmd(PeCommand):
    """A flat, ordered op list PE_SCHEDULER turns into a tile pipeline (docs/tl-api.md)."""

    ops: tuple[OpSpec, ...]
    rw_handles: tuple[TensorHandle, ...] = ()
    # (m, k, n), None for the scheduler's supertile, or "stream" (tiling.stream_supertile)
    tile_shape: tuple[int, int, int] | str | None = None
    single_op = False
    waits_for_inputs = False
    needs_known_deps = False

    # both computed once, when the command is built: the cap check, the dispatch cost and
    # the log read the size, the scheduler the head GEMM's position (None: no GEMM)
    size: int = field(init=False, repr=False)
    gemm_index: int | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        size = FRAMING_BYTES + 1 + 1 + HANDLE_BYTES * len(self.rw_handles)
        gemm = None
        for i, op in enumerate(self.ops):
            size += op.logical_bytes
            if gemm is None and op.kind == "gemm":
                gemm = i
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "gemm_index", gemm)

    @property
    def logical_bytes(self) -> int:
        return self.size

    def accesses(self) -> tuple[list[TensorHandle], list[TensorHandle]]:
        return ops_accesses(self.ops, self.rw_handles)


@dataclass(frozen=True, eq=False)
class PeCpuOverheadCmd(PeCommand):
    """Explicit PE_CPU cycles (``tl.cycles``); bypasses the dispatch formula."""

    cycles: int

    @property
    def logical_bytes(self) -> int:
        return 0

    @property
    def explicit_cycles(self) -> int:
        return self.cycles


@dataclass(frozen=True, eq=False)
class IpcqSendCmd(PeCommand):
    """``tl.send``: push TCM handle ``src`` into the queue toward ``direction``.

    PE_IPCQ books the message itself at the send's start time (a scheduled
    booking keeps the fabric in time order without stopping the kernel)."""

    direction: str
    src: TensorHandle
    records_reads = False

    @property
    def logical_bytes(self) -> int:
        return FRAMING_BYTES + 1 + 1 + HANDLE_BYTES + SCALAR_BYTES  # opcode, direction, src, size

    def accesses(self) -> tuple[list[TensorHandle], list[TensorHandle]]:
        return ([self.src], [])


@dataclass(frozen=True, eq=False)
class IpcqRecvCmd(PeCommand):
    """``tl.recv`` / ``tl.recv_async``: take the next message from ``direction`` into ``dst``.

    ``consume=False`` is the diagnostic ``tl.recv_no_consume``: the message is
    taken without charging the slot read.
    """

    direction: str
    dst: TensorHandle
    consume: bool = True
    # the slot read books only links near this PE, at the message's arrival or the
    # CPU's issue time, whichever is later; gap-fit timelines take it in any order
    hands_to_fabric = False

    @property
    def logical_bytes(self) -> int:
        return FRAMING_BYTES + 1 + 1 + HANDLE_BYTES + SCALAR_BYTES + 1  # + mode flag

    def accesses(self) -> tuple[list[TensorHandle], list[TensorHandle]]:
        return ([], [self.dst])

