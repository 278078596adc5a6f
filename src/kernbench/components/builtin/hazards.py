"""PE_SCHEDULER's table of in-flight memory accesses (read/write hazards by address).

Every command's operands become (space, start, end) byte ranges it reads or
writes. A new command depends on earlier commands that write what it reads
(RAW), read what it writes (WAR) or write what it writes (WAW). Tracking
addresses rather than handle identities also protects recycled scratch: a
buffer reused after ``tl.scratch_scope`` waits for the ops still using it.

The table keeps, per space, only what can still matter (docs/adr/0016-hazard-index.md):
the *last writer* of every byte and the *readers since that write*, each as
disjoint address segments searched by bisection. A write orders itself after
both, so older accesses to the bytes it covers are implied and dropped: a
dependency on the last writer is a dependency on everything it waited for.
Look-ups cost O(log n + overlaps) in what is in flight, whatever the
kernel's length, and give the same ready times as comparing against every
access ever issued.
"""

from __future__ import annotations

from bisect import bisect_right

from kernbench.isa.handles import Completion

Range = tuple[str, int, int]


def access_ranges(cmd) -> tuple[list[Range], list[Range]]:
    """(byte ranges read, byte ranges written) by a command, computed once per dispatch."""
    reads, writes = cmd.accesses()
    return [h.byte_range() for h in reads], [h.byte_range() for h in writes]


class _Segments:
    """Disjoint, sorted address segments ``[start, end) -> value``."""

    __slots__ = ("starts", "ends", "values")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.values: list = []

    def span(self, s: int, e: int) -> tuple[int, int]:
        """Index range [i, j) of the segments overlapping [s, e)."""
        i = bisect_right(self.ends, s)  # first segment ending after s
        j = i
        starts, n = self.starts, len(self.starts)
        while j < n and starts[j] < e:
            j += 1
        return i, j

    def cut(self, s: int, e: int) -> tuple[int, int]:
        """Split the segments straddling s and e; return the index range inside [s, e)."""
        i, j = self.span(s, e)
        starts, ends, values = self.starts, self.ends, self.values
        if i < j and starts[i] < s:  # keep the head outside [s, e) as its own segment
            starts.insert(i + 1, s)
            ends.insert(i + 1, ends[i])
            values.insert(i + 1, _copy(values[i]))
            ends[i] = s
            i += 1
            j += 1
        if i < j and ends[j - 1] > e:  # keep the tail outside as its own segment
            starts.insert(j, e)
            ends.insert(j, ends[j - 1])
            values.insert(j, _copy(values[j - 1]))
            ends[j - 1] = e
        return i, j

    def replace(self, i: int, j: int, s: int, e: int, value) -> None:
        self.starts[i:j] = [s]
        self.ends[i:j] = [e]
        self.values[i:j] = [value]

    def remove(self, i: int, j: int) -> None:
        del self.starts[i:j], self.ends[i:j], self.values[i:j]


def _copy(value):
    return list(value) if isinstance(value, list) else value


class _SpaceTable:
    __slots__ = ("writers", "readers")

    def __init__(self) -> None:
        self.writers = _Segments()  # value: the last writer's Completion
        self.readers = _Segments()  # value: list of reader Completions since that write


class AccessTracker:
    def __init__(self) -> None:
        self._spaces: dict[str, _SpaceTable] = {}
        self._before = float("-inf")

    def prune(self, before: float) -> None:
        """Accesses that ended by ``before`` can no longer delay a new op (it cannot
        start earlier); they are dropped as the segments holding them are visited."""
        self._before = before

    def _table(self, space: str) -> _SpaceTable:
        table = self._spaces.get(space)
        if table is None:
            table = self._spaces[space] = _SpaceTable()
        return table

    def _live(self, comp: Completion) -> bool:
        return comp.done_at is None or comp.done_at > self._before

    def deps(self, rr: list[Range], wr: list[Range]) -> tuple[list[Completion], list[Completion]]:
        """(producers of what is read, other ops a write must wait for), without duplicates."""
        raw: dict[int, Completion] = {}
        other: dict[int, Completion] = {}
        live = self._live
        for space, s, e in rr:
            table = self._spaces.get(space)
            if table is None:
                continue
            w = table.writers
            i, j = w.span(s, e)
            for comp in w.values[i:j]:
                if live(comp):
                    raw.setdefault(id(comp), comp)
        for space, s, e in wr:
            table = self._spaces.get(space)
            if table is None:
                continue
            w = table.writers
            i, j = w.span(s, e)
            for comp in w.values[i:j]:
                if live(comp) and id(comp) not in raw:
                    other.setdefault(id(comp), comp)
            rd = table.readers
            i, j = rd.span(s, e)
            for comps in rd.values[i:j]:
                for comp in comps:
                    if live(comp) and id(comp) not in raw:
                        other.setdefault(id(comp), comp)
        return list(raw.values()), list(other.values())

    def record(self, rr: list[Range], wr: list[Range], comp: Completion) -> None:
        """Enter ``comp`` as a reader of ``rr`` and the last writer of ``wr``.

        Call after :meth:`deps`: the writes then follow every access they cover,
        which is what lets those accesses be forgotten.
        """
        for space, s, e in wr:
            table = self._table(space)
            w = table.writers
            i, j = w.cut(s, e)
            w.replace(i, j, s, e, comp)
            rd = table.readers
            i, j = rd.cut(s, e)
            rd.remove(i, j)
        for space, s, e in rr:
            if any(ws == space and ws_s <= s and e <= ws_e for ws, ws_s, ws_e in wr):
                continue  # read-modify-write: the write entry already orders later ops
            self._add_reader(self._table(space).readers, s, e, comp)

    def _add_reader(self, rd: _Segments, s: int, e: int, comp: Completion) -> None:
        i, j = rd.cut(s, e)
        live = self._live
        pos = s
        new_starts, new_ends, new_values = [], [], []
        for idx in range(i, j):
            a, b, comps = rd.starts[idx], rd.ends[idx], rd.values[idx]
            if pos < a:  # a gap no reader covered yet
                new_starts.append(pos)
                new_ends.append(a)
                new_values.append([comp])
            n = len(comps)
            if n >= 8 and not n & (n - 1):  # at powers of two: amortised O(1) per reader
                comps = [c for c in comps if live(c)]
            comps.append(comp)
            new_starts.append(a)
            new_ends.append(b)
            new_values.append(comps)
            pos = b
        if pos < e:
            new_starts.append(pos)
            new_ends.append(e)
            new_values.append([comp])
        rd.starts[i:j] = new_starts
        rd.ends[i:j] = new_ends
        rd.values[i:j] = new_values

    def __len__(self) -> int:
        """Segments held (a measure of what is still in flight, for tests)."""
        return sum(len(t.writers.starts) + len(t.readers.starts) for t in self._spaces.values())
