"""Run a generator as a SimPy process that nobody waits for, at less cost (ADR 0069).

A composite's feeder is a process per composite that no one yields on: its
completion is signalled through the composite's own ``Completion``. SimPy's
``Process`` is itself an event, so each one costs an object, an interpreted
``_resume`` on every step and one more event when the generator returns.
:func:`start` drives the generator the way ``Process._resume`` does -- the same
``Initialize`` event first, each yielded event resumed through its callbacks,
a failed event thrown in as a fresh copy that keeps the original as its cause --
so every event is created, and therefore ordered, exactly as before; only the
closing event, which had no callbacks, is gone. The generator must not let an
exception out (the feeder hands its failures to the composite's completion);
one that does is a simulator bug and propagates from ``env.step``.
"""

from __future__ import annotations

from typing import Any

from simpy.events import Initialize


class _Driver:
    """Resumes one generator with the value of each event it yields."""

    __slots__ = ("generator",)

    def __init__(self, generator: Any) -> None:
        self.generator = generator

    def _resume(self, event: Any) -> None:
        generator = self.generator
        while True:
            try:
                if event._ok:
                    event = generator.send(event._value)
                else:  # as SimPy does: the waiter handles the failure, on its own copy
                    event._defused = True
                    failure = event._value
                    exc = type(failure)(*failure.args)
                    exc.__cause__ = failure
                    event = generator.throw(exc)
            except StopIteration:
                return
            callbacks = event.callbacks
            if callbacks is not None:  # not processed yet: resume when it is
                callbacks.append(self._resume)
                return


def start(env: Any, generator: Any) -> None:
    """Start ``generator`` now, as ``env.process(generator)`` would, returning nothing
    to wait on."""
    Initialize(env, _Driver(generator))  # type: ignore[arg-type]  # (it needs only _resume)
