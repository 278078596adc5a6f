"""Collective programs and the one kernel that runs them.

A program is, per rank, a list of steps ``(phase, actions)``; an action is
``(kind, direction, start, length)`` over the rank's buffer (elements):
``send`` sends that slice toward ``direction``; ``reduce`` receives a slice
from ``direction`` and combines it into the buffer; ``copy`` receives into the
buffer. A slice is carried in pieces of at most one IPCQ slot, and a step runs
its actions piece by piece (send piece 0, receive piece 0, send piece 1, ...),
which pipelines chains of ranks and never lets every rank wait for credits at
once. Sender and receiver cut a slice the same way, so messages always match.
"""

from __future__ import annotations

Action = tuple[str, str, int, int]
Step = tuple[str, tuple[Action, ...]]
KINDS = ("send", "reduce", "copy")


def pieces(start: int, length: int, piece: int) -> list[tuple[int, int]]:
    """(start, length) of the slot-sized pieces of a slice."""
    return [(s, min(piece, start + length - s)) for s in range(start, start + length, piece)]


def compile_program(steps: list[Step], piece: int) -> list[tuple[str, tuple[Action, ...]]]:
    """The steps as the kernel runs them: per step, its actions on pieces in issue
    order (piece 0 of every action, then piece 1, ...)."""
    out = []
    for label, actions in steps:
        if all(a[3] <= piece for a in actions):  # the common case: one piece per action
            out.append((label, tuple(actions)))
            continue
        cut = [pieces(start, length, piece) for _, _, start, length in actions]
        ops = []
        for j in range(max((len(c) for c in cut), default=0)):
            for (kind, direction, _, _), parts in zip(actions, cut, strict=True):
                if j < len(parts):
                    ops.append((kind, direction, *parts[j]))
        out.append((label, tuple(ops)))
    return out


def collective_kernel(x, n, dtype, op, scale, programs, *, tl):
    """Run this rank's compiled program on its buffer at ``x`` (``n`` elements).

    The buffer is loaded into TCM once, reduced and overwritten in place by the
    program, optionally scaled (``avg``), and stored back.
    """
    steps = programs[(tl.program_id(2), tl.program_id(1), tl.program_id(0))]
    combine = {"sum": tl.add, "avg": tl.add, "max": tl.maximum, "min": tl.minimum}[op]
    buf = tl.load(x, (n,), dtype)
    _run_steps(tl, buf, steps, dtype, combine)
    if scale is not None:
        tl.mul(buf, scale, out=buf)
    tl.mark("store")
    tl.store(x, buf)


def all_to_all_kernel(x_in, x_out, dtype, plans, *, tl):
    """This rank's part of an all-to-all: its input at ``x_in`` (its blocks back to
    back) is loaded into the head of a TCM work buffer, the program sends blocks on and
    receives others behind it, and the output at ``x_out`` is written in the plan's
    runs."""
    steps, work, stores, n = plans[(tl.program_id(2), tl.program_id(1), tl.program_id(0))]
    buf = tl.zeros((max(1, work),), dtype)
    if n:
        tl.load(x_in, (n,), dtype, out=tl.view(buf, 0, n))
    _run_steps(tl, buf, steps, dtype, None)
    tl.mark("store")
    size = tl.element_size(dtype)
    for start, out, length in stores:
        tl.store(x_out + out * size, tl.view(buf, start, length))


def _run_steps(tl, buf, steps, dtype, combine) -> None:
    """The program's sends and receives over slices of ``buf``, marking each phase."""
    views: dict[tuple[int, int], object] = {}  # one view per slice, reused by every step
    landing: dict[int, object] = {}  # one receive buffer per piece length
    phase = None
    for label, ops in steps:
        if label != phase:
            tl.mark(label)
            phase = label
        for kind, direction, start, length in ops:
            v = views.get((start, length))
            if v is None:
                v = views[(start, length)] = tl.view(buf, start, length)
            if kind == "send":
                tl.send(direction, v)
            elif kind == "copy":
                tl.recv(direction, dst=v)
            else:
                got = landing.get(length)
                if got is None:
                    got = landing[length] = tl.zeros((length,), dtype)
                tl.recv(direction, dst=got)  # waits for the previous combine to read it
                combine(v, got, out=v)
