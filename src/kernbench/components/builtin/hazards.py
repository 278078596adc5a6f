"""PE_SCHEDULER's table of in-flight memory accesses (read/write hazards by address).

Every command's operands become (space, start, end) byte ranges it reads or
writes. A new command depends on earlier commands that write what it reads
(RAW), read what it writes (WAR) or write what it writes (WAW). Tracking
addresses rather than handle identities also protects recycled scratch: a
buffer reused after ``tl.scratch_scope`` waits for the ops still using it.

The table keeps, per space, only what can still matter (docs/adr/0016-hazard-index.md):
the *last writer* of every byte, as disjoint address segments searched by
bisection, and the *readers* since those writes, as intervals sorted by start.
A write orders itself after both, so older accesses to the bytes it covers
are implied and dropped: a dependency on the last writer is a dependency on
everything it waited for. Reads never search the readers (they only conflict
with writers), so a region read by many overlapping views -- the column tiles
of a strided matrix, each spanning nearly all of it -- costs O(log n) per read;
a write searches only the readers that start within the longest reader's
length of it. The ready times equal those of comparing every access ever
issued.
"""

from __future__ import annotations

import bisect
from typing import Any, Final

from kernbench.isa.handles import ByteRange, Completion, TensorHandle

# (Final: the compiled twin keeps these in C statics, not looked up by name per call; ADR 0065)
bisect_left: Final = bisect.bisect_left
bisect_right: Final = bisect.bisect_right

Range = ByteRange  # (space, start, end), boxed (ADR 0066)


def access_ranges(cmd) -> tuple[list[Range], list[Range]]:
    """(byte ranges read, byte ranges written) by a command, computed once per dispatch.

    Writes that touch or overlap merge into one range, and repeated reads count once:
    both leave every dependency as it is. A command that does not wait for its inputs
    on the CPU (a composite) also drops the reads its own writes cover -- the write
    already orders it after the last writer and the readers of those bytes -- so a
    recipe's intermediates, written and read inside one composite, cost nothing.
    """
    reads: list[TensorHandle]
    writes: list[TensorHandle]
    reads, writes = cmd.accesses()  # (typed: the compiled twin calls byte_range directly)
    written = [h.byte_range() for h in writes]
    wr = _merged(written)
    drop = not cmd.waits_for_inputs
    seen = set(written) if drop else set()
    rr: list[Range] = []
    for h in reads:
        r = h.byte_range()
        if r in seen:
            continue
        seen.add(r)
        if drop and _covered(r, wr):
            continue
        rr.append(r)
    return rr, wr


def _covered(r: Range, ranges: list[Range]) -> bool:
    """Whether ``r`` lies inside one of ``ranges``."""
    space, s, e = r
    for ws, ws_s, ws_e in ranges:
        if ws_s <= s and e <= ws_e and ws == space:
            return True
    return False


def _merged(ranges: list[Range]) -> list[Range]:
    if len(ranges) < 2:
        return ranges
    out: list[Range] = []
    for space, s, e in sorted(ranges):
        if out and out[-1][0] == space and s <= out[-1][2]:
            if e > out[-1][2]:
                out[-1] = (space, out[-1][1], e)
        else:
            out.append((space, s, e))
    return out


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
        return i, bisect_left(self.starts, e, i)  # (disjoint: starts are sorted too)

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
        """Segments [i, j) become the one segment [s, e) -> value. (A new segment or one
        replaced, the common cases, without building slices.)"""
        if j == i + 1:
            self.starts[i], self.ends[i], self.values[i] = s, e, value
        elif j == i:
            self.starts.insert(i, s)
            self.ends.insert(i, e)
            self.values.insert(i, value)
        else:
            self.starts[i:j] = [s]
            self.ends[i:j] = [e]
            self.values[i:j] = [value]

    def remove(self, i: int, j: int) -> None:
        del self.starts[i:j], self.ends[i:j], self.values[i:j]


def _copy(value):
    return list(value) if isinstance(value, list) else value


class _Readers:
    """Read intervals sorted by start, possibly overlapping; the readers of one exact
    range share an entry, so a weight read by a thousand ops is one interval."""

    __slots__ = ("starts", "ends", "comps", "longest", "_index", "_prune_at")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.comps: list[list[Completion]] = []
        self.longest = 0  # an upper bound on end - start of any entry
        self._index: dict[tuple[int, int], list[Completion]] = {}
        self._prune_at = 64

    def add(self, s: Any, e: Any, comp: Completion, live) -> None:
        """Enter ``comp`` as a reader of [s, e). (The bounds stay the objects they are,
        ``Any`` to the compiler: they are only stored, and an ``int`` would be built
        anew for each list and key it goes into.)"""
        comps = self._index.get((s, e))
        if comps is not None:
            n = len(comps)
            if n >= 8 and not n & (n - 1):  # at powers of two: amortised O(1) per reader
                comps[:] = [c for c in comps if live(c)]
            comps.append(comp)
            return
        comps = self._index[(s, e)] = [comp]
        i = bisect_right(self.starts, s)
        self.starts.insert(i, s)
        self.ends.insert(i, e)
        self.comps.insert(i, comps)
        if e - s > self.longest:
            self.longest = e - s
        if len(self.starts) >= self._prune_at:  # amortised O(1): drop finished readers
            self._prune(live)

    def _prune(self, live) -> None:
        keep = []
        for k, comps in enumerate(self.comps):
            comps[:] = [c for c in comps if live(c)]
            if comps:
                keep.append(k)
            else:
                del self._index[(self.starts[k], self.ends[k])]
        self.starts = [self.starts[k] for k in keep]
        self.ends = [self.ends[k] for k in keep]
        self.comps = [self.comps[k] for k in keep]
        self.longest = max((b - a for a, b in zip(self.starts, self.ends, strict=True)),
                           default=0)
        self._prune_at = max(64, 2 * len(self.starts))

    def overlapping(self, s: int, e: int) -> list[int]:
        """Indices of the entries overlapping [s, e)."""
        starts, ends = self.starts, self.ends
        i = bisect_right(starts, s - self.longest)
        j = bisect_right(starts, e - 1)
        return [k for k in range(i, j) if ends[k] > s]

    def drop_covered(self, s: int, e: int) -> None:
        """Forget readers wholly inside [s, e): the write there now orders later ops."""
        gone = [k for k in self.overlapping(s, e) if s <= self.starts[k] and self.ends[k] <= e]
        for k in reversed(gone):
            del self._index[(self.starts[k], self.ends[k])]
            del self.starts[k], self.ends[k], self.comps[k]


class _SpaceTable:
    __slots__ = ("writers", "readers")

    def __init__(self) -> None:
        self.writers = _Segments()  # value: the last writer's Completion
        self.readers = _Readers()


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
        spaces, before = self._spaces, self._before  # (``_live`` inlined: the hot path)
        for space, s, e in rr:
            table = spaces.get(space)
            if table is None:
                continue
            w = table.writers
            i, j = w.span(s, e)
            for comp in w.values[i:j]:
                if (t := comp.done_at) is None or t > before:
                    raw.setdefault(id(comp), comp)
        for space, s, e in wr:
            table = spaces.get(space)
            if table is None:
                continue
            w = table.writers
            i, j = w.span(s, e)
            for comp in w.values[i:j]:
                if ((t := comp.done_at) is None or t > before) and id(comp) not in raw:
                    other.setdefault(id(comp), comp)
            rd = table.readers
            if not rd.starts:
                continue
            for k in rd.overlapping(s, e):
                for comp in rd.comps[k]:
                    if ((t := comp.done_at) is None or t > before) and id(comp) not in raw:
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
            if table.readers.starts:
                table.readers.drop_covered(s, e)
        for r in rr:
            if wr and _covered(r, wr):
                continue  # read-modify-write: the write entry already orders later ops
            self._table(r[0]).readers.add(r[1], r[2], comp, self._live)

    def __len__(self) -> int:
        """Entries held (a measure of what is still in flight, for tests)."""
        return sum(len(t.writers.starts) + len(t.readers.starts) for t in self._spaces.values())
