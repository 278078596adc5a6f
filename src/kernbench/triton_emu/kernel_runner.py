"""Run a kernel body in a greenlet, driven by a SimPy process.

The kernel is plain Python. When it must wait for simulated time, it switches
to the SimPy side with an event; the process yields that event and switches
back with its value (or throws the event's failure into the kernel). The
process is itself an event: it succeeds with the body's value or fails.

Errors are sorted at this boundary (docs/adr/0018-honest-errors.md): a
KernBench user error (``tl`` misuse, an MMU fault) or an exception raised by
the kernel's own code becomes a :class:`KernelError` naming the kernel, the
PE and the kernel source line; any other exception is a simulator bug and
propagates unchanged, with a note saying which kernel was running.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from greenlet import greenlet

from kernbench.errors import KernbenchError, MmuFault, SimulationError


class KernelError(SimulationError):
    """A kernel raised; the message says which kernel, where, and why."""


class KernelRunner:
    def __init__(self, env, name: str, where: str, body: Callable[[], object],
                 kernel_file: str | None = None, on_resume: Callable[[], None] | None = None,
                 on_leave: Callable[[], None] | None = None,
                 describe_va: Callable[[int], str] | None = None):
        """``describe_va(va)`` says who owns an address (for access-fault messages)."""
        self.env = env
        self.name = name
        self.where = where
        self._body = body
        self._kernel_file = kernel_file
        self._on_resume = on_resume
        self._on_leave = on_leave
        self._describe_va = describe_va
        self._greenlet: greenlet | None = None
        self._waiting: tuple[str, float | None] | None = None  # see ``waiting_on``
        self.started = False
        self.finished = False
        self.context: Any = None  # the kernel's tl context (its scratch high-water mark, ...)

    def process(self, start_at: float):
        """The SimPy process: start at ``start_at``, relay waits, return the body's value."""
        if start_at > self.env.now:
            yield self.env.timeout(start_at - self.env.now)
        self.started = True
        self._greenlet = greenlet(self._run)
        request = self._greenlet.switch()
        self._leave()
        while not self._greenlet.dead:
            try:
                value = yield request
            except Exception as exc:  # the awaited work failed: the kernel sees it
                request = self._greenlet.throw(exc)
            else:
                request = self._greenlet.switch(value)
            self._leave()
        self.finished = True
        if isinstance(request, _Failure):
            raise request.error
        return request

    def _leave(self) -> None:
        """Back on the SimPy side: no kernel context is active outside kernels."""
        if self._on_leave:
            self._on_leave()

    def _run(self):
        if self._on_resume:
            self._on_resume()
        try:
            return self._body()
        except KernelError as exc:
            return _Failure(exc)
        except Exception as exc:  # sorted into user error or bug below
            if isinstance(exc, KernbenchError) or self._raised_by_kernel(exc):
                return _Failure(self._describe(exc))
            exc.add_note(f"(raised inside the simulator while kernel {self.name!r} ran on "
                         f"{self.where})")
            return _Failure(exc)

    @property
    def waiting_on(self) -> str | None:
        """What the suspended kernel waits for (deadlock reports); None when running.
        Formatted only when asked: a kernel sleeps to its issue time at every DMA."""
        if self._waiting is None:
            return None
        what, t = self._waiting
        return what if t is None else f"{what} {t:.1f} ns"

    def wait(self, event, what: str, until: float | None = None):
        """Called from inside the kernel: suspend until ``event`` fires (``until``: the
        time it fires at, when it is a timeout, for ``waiting_on``)."""
        self._waiting = (what, until)
        assert self._greenlet is not None  # (called from inside the running kernel)
        try:
            value = self._greenlet.parent.switch(event)
        finally:
            self._waiting = None
            if self._on_resume:
                self._on_resume()
        return value

    def sleep_until(self, t: float, what: str = "time") -> None:
        now = self.env.now
        if t > now:
            self.wait(self.env.timeout(t - now), what, t)

    def _raised_by_kernel(self, exc: Exception) -> bool:
        """True when the innermost frame is the kernel's own source."""
        frames = traceback.extract_tb(exc.__traceback__)
        return bool(frames and self._kernel_file and frames[-1].filename == self._kernel_file)

    def _describe(self, exc: Exception) -> KernelError:
        frames = traceback.extract_tb(exc.__traceback__)
        mine = [f for f in frames if self._kernel_file and f.filename == self._kernel_file]
        at = mine[-1] if mine else None
        loc = f" at {at.filename}:{at.lineno} ({at.line})" if at else ""
        fault = _fault(exc)
        if fault is not None and fault.va is not None:  # (``_fault`` returns only those)
            owner = self._describe_va(fault.va) if self._describe_va else "no SIP maps it"
            text = (f"kernel {self.name!r} on {self.where}{loc}: virtual address {fault.va:#x} "
                    f"is not mapped on this PE ({owner})")
        else:
            text = f"kernel {self.name!r} on {self.where} failed{loc}: {type(exc).__name__}: {exc}"
        err = KernelError(text)
        err.__cause__ = exc
        return err


def _fault(exc: BaseException | None) -> MmuFault | None:
    """The access fault behind ``exc`` (SimPy re-raises copies of failures, keeping the
    original as the cause)."""
    while exc is not None:
        if isinstance(exc, MmuFault) and exc.va is not None:
            return exc
        exc = exc.__cause__
    return None


class _Failure:
    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error
