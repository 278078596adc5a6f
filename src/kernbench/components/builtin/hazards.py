"""PE_SCHEDULER's table of in-flight memory accesses (read/write hazards by address).

Every command's operands become (space, start, end) byte ranges it reads or
writes. A new command depends on in-flight commands that write what it reads
(RAW), read what it writes (WAR) or write what it writes (WAW). Tracking
addresses rather than handle identities also protects recycled scratch: a
buffer reused after ``tl.scratch_scope`` waits for the ops still using it.
"""

from __future__ import annotations

from kernbench.triton_emu.pe_commands import Completion, TensorHandle, dtype_bytes

Range = tuple[str, int, int]


def byte_range(h: TensorHandle) -> Range:
    """Conservative byte range of a handle (a strided 2-D view spans its rows)."""
    bpe = dtype_bytes(h.dtype)
    if len(h.shape) == 2 and h.row_stride is not None:
        rows, cols = (h.shape[1], h.shape[0]) if h.transposed else h.shape
        extent = ((rows - 1) * h.row_stride + cols) * bpe
    else:
        extent = h.nbytes
    return (h.space, h.addr, h.addr + extent)


def access_ranges(cmd) -> tuple[list[Range], list[Range]]:
    """(byte ranges read, byte ranges written) by a command, computed once per dispatch."""
    reads, writes = cmd.accesses()
    return [byte_range(h) for h in reads], [byte_range(h) for h in writes]


def _overlap(a: Range, b: Range) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


class AccessTracker:
    def __init__(self) -> None:
        self._live: list[tuple[Range, bool, Completion]] = []  # (range, is_write, completion)

    def prune(self, before: float) -> None:
        """Forget accesses that ended by ``before`` (no later op can start earlier)."""
        self._live = [a for a in self._live if a[2].done_at is None or a[2].done_at > before]

    def deps(self, rr: list[Range], wr: list[Range]) -> tuple[list[Completion], list[Completion]]:
        """(producers of what is read, ops a write must wait for), without duplicates."""
        raw: list[Completion] = []
        other: list[Completion] = []
        for rng, is_write, comp in self._live:
            if is_write and any(_overlap(rng, r) for r in rr):
                if comp not in raw:
                    raw.append(comp)
            elif any(_overlap(rng, w) for w in wr) and comp not in other and comp not in raw:
                other.append(comp)
        return raw, [c for c in other if c not in raw]

    def record(self, rr: list[Range], wr: list[Range], comp: Completion) -> None:
        self._live += [(r, False, comp) for r in rr]
        self._live += [(w, True, comp) for w in wr]

    def __len__(self) -> int:
        return len(self._live)
