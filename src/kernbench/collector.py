"""Python's cyclic garbage collector held off while the simulator builds or runs.

Building a topology, an engine's route tables or a run's op log allocates tens of
thousands of containers that live on, and an event loop allocates many more that
reference counting frees. The collector finds almost nothing to free in either,
but each young collection it triggers scans them, and an old one rescans every
object the program has (the imports included): 10-25 % of a run, and about a
quarter of loading the default topology (12 of 42 ms), went there.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_collector() -> Iterator[None]:
    """Run the body with the cyclic collector off.

    Afterwards everything the body left joins the oldest generation unscanned
    (``freeze`` then ``unfreeze``: otherwise the first young collection would scan
    every survivor at once), and the collector is on again, so cycles made meanwhile
    are found by a later full collection. Nested, or under a caller that turned the
    collector off (a ``kernbench`` simulation command), it leaves collection alone.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        gc.enable()
