"""``components.background.start`` runs a generator exactly as ``env.process`` would."""

from __future__ import annotations

import pytest
import simpy

from kernbench.components import background


def _worker(env, trace, name, delays, failing=None, done=None):
    """Sleeps through ``delays`` (0 included: ties with other workers), then waits on an
    event that fails, if given, then on one already processed."""
    trace.append((env.now, name, "start"))
    for d in delays:
        yield env.timeout(d)
        trace.append((env.now, name, d))
    if failing is not None:
        try:
            yield failing
        except ValueError as exc:
            trace.append((env.now, name, "caught", str(exc), exc is not failing.value,
                          exc.__cause__ is failing.value))
    if done is not None:
        value = yield done
        trace.append((env.now, name, "done", value))


def _scenario(start_background) -> list:
    """Workers started through ``start_background`` among ones that are ordinary
    processes, started at the same times, so every tie of the event queue is exercised."""
    env = simpy.Environment()
    trace: list = []
    done = env.event()
    done.succeed("early")
    failing = env.event()

    def fail_later():
        yield env.timeout(2.0)
        failing.fail(ValueError("link down"))
        trace.append((env.now, "failer", "failed"))

    def spawner():
        env.process(_worker(env, trace, "p0", [0.0, 1.0, 0.0]))
        start_background(env, _worker(env, trace, "b0", [0.0, 1.0, 0.0], failing, done))
        env.process(_worker(env, trace, "p1", [1.0, 0.0, 1.0], failing))
        yield env.timeout(0.0)
        start_background(env, _worker(env, trace, "b1", [1.0, 1.0], None, done))
        env.process(_worker(env, trace, "p2", [0.0, 2.0]))

    env.process(fail_later())
    env.process(spawner())
    env.run()
    return trace


def test_a_background_generator_runs_event_for_event_like_a_process():
    as_processes = _scenario(lambda env, gen: env.process(gen))
    assert _scenario(background.start) == as_processes
    assert ("caught", "link down", True, True) in [t[2:] for t in as_processes]


def test_an_exception_a_background_generator_lets_out_is_not_swallowed():
    env = simpy.Environment()

    def broken():
        yield env.timeout(1.0)
        raise RuntimeError("bug in a feeder")

    background.start(env, broken())
    with pytest.raises(RuntimeError, match="bug in a feeder"):
        env.run()
