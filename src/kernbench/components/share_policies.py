"""How transfers that meet on a resource divide it (``fabric.sharing``).

A policy serves one resource: given the transfers that cross it (each with its
arrival rate there and the bytes it has queued there), it sets the rate at
which each leaves it. IPCQ messages have strict priority: their class is
served first and bulk transfers share what it leaves
(docs/adr/0033-fair-shared-links.md).

* ``interleaved`` (the default): a FIFO link queue, as a fluid. A resource
  passes whatever arrives while it keeps up; overloaded (or while it holds a
  backlog) it serves its inputs in proportion to the rates at which they
  arrive, as a FIFO of interleaved packets does. Bytes that arrive faster
  than they leave queue there; an input whose arrivals stopped keeps its last
  share until its queued bytes are out. A resource with one input is served
  in ``fair_share`` itself (its hot path): the input passes what arrives, at
  most what it can take of the resource, and leaves at that limit while it
  holds a queue there.
* ``max_min``: no queues; each transfer's rate is set along its whole route
  by progressive filling (``max_min_rates``), as a router that arbitrates
  round-robin between transfers rather than between its inputs would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # (typed, the compiled twin reads a stream's rates without a lookup)
    from kernbench.components.fluid_stream import Stream

IPCQ: Final = 0  # service classes, served in this order
BULK: Final = 1
EPS: Final = 1e-9  # relative slack


def arrivals_fit(inputs: list[tuple[Stream, int]], capacity: float) -> bool:
    """Whether ``inputs`` ((stream, hop) pairs of one class) hold no queue at a resource
    with ``capacity`` left for their class and their arrivals fit in it: then each
    passes what arrives, at most what it can take there (``min(arr, hop cap)``)."""
    total = 0.0
    for f, k in inputs:
        if f.backlog[k] > 0.0:
            return False
        total += f.arr[k]  # in order (what sum() does with floats on Python 3.11)
    return total <= capacity * (1.0 + EPS)


def shared_rates(inputs: list[tuple[Stream, int]], capacity: float) -> list[float]:
    """Out rates of ``inputs`` when they do not simply pass (:func:`arrivals_fit` is
    False): served in proportion to their arrival rates, each at most its limit."""
    out = [0.0] * len(inputs)
    free: list[tuple[int, float, float]] = []
    for i, (f, k) in enumerate(inputs):
        queued = f.backlog[k] > 0.0
        weight = f.arr[k] if f.arr[k] > 0.0 else (f.weight[k] if queued else 0.0)
        # without a queue an input cannot leave faster than it arrives; no transfer
        # leaves faster than its own cap there (HBM covering few pseudo-channels)
        limit = f.hop_caps[k] if queued else min(f.arr[k], f.hop_caps[k])
        if weight > 0.0:
            free.append((i, weight, limit))
    left = capacity
    while free:
        total = sum((w for _, w, _ in free), 0.0)
        capped = [x for x in free if left * x[1] / total > x[2]]
        if not capped:
            for i, w, _ in free:
                out[i] = left * w / total
            break
        for i, _, limit in capped:
            out[i] = limit
            left -= limit
        free = [x for x in free if x not in capped]
    return out


def max_min_rates(flows: list, resources: list) -> dict[int, float]:
    """Progressive filling over a connected set: every unfrozen transfer's rate rises
    together until a resource it uses is full or it reaches its cap."""
    residual = {id(r): r.capacity for r in resources}
    caps = dict(residual)
    rates: dict[int, float] = {}
    for cls in (IPCQ, BULK):
        unfrozen = [f for f in flows if f.cls == cls]
        users: dict[int, int] = {}
        for f in unfrozen:
            for r in f.resources:
                users[id(r)] = users.get(id(r), 0) + 1
        level = 0.0
        while unfrozen:
            step = min(residual[k] / n for k, n in users.items() if n)
            step = max(0.0, min(step, min(f.cap for f in unfrozen) - level))
            level += step
            for k, n in users.items():
                if n:
                    residual[k] -= step * n
            still = []
            for f in unfrozen:
                if f.cap - level <= EPS * f.cap or any(
                        residual[id(r)] <= EPS * caps[id(r)] for r in f.resources):
                    rates[f.id] = level
                    for r in f.resources:
                        users[id(r)] -= 1
                else:
                    still.append(f)
            unfrozen = still
    return rates
