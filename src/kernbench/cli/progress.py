"""Progress of a long attention run on a terminal: simulated time, kernels done, wall time."""

from __future__ import annotations

import time


class Progress:
    """Prints one updating line to ``stream`` (only if it is a terminal) while the
    launches run; a SimPy process samples every ``step_ns`` of simulated time and
    writes at most twice a second, so it costs a few events per microsecond."""

    def __init__(self, stream, step_ns: float = 500.0) -> None:
        self.stream, self.step_ns = stream, step_ns
        self.enabled = bool(getattr(stream, "isatty", lambda: False)())

    def watch(self, engine, handles) -> None:
        if self.enabled:
            engine.env.process(self._run(engine, handles))

    def _run(self, engine, handles):
        env, t0 = engine.env, time.monotonic()
        procs = [p for h in handles for p in h.procs]
        last = 0.0
        while True:
            done = sum(1 for p in procs if p.triggered)
            now = time.monotonic()
            if done == len(procs) or now - last > 0.5:
                last = now
                self.stream.write(f"\r  simulated {env.now / 1000:10.2f} us | kernels done "
                                  f"{done}/{len(procs)} | wall {now - t0:6.1f} s")
                self.stream.flush()
            if done == len(procs):
                self.stream.write("\n")
                return
            yield env.timeout(self.step_ns)
