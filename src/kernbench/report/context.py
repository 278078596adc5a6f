"""What report steps share to read an experiment's results: its table, and the context
its ``values`` may consult (the run's topologies)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from kernbench.topology import load_topology


class ReportContext:
    """What an experiment's ``values`` may consult besides its table."""

    def __init__(self, config: dict) -> None:
        self.config = config

    @cache  # noqa: B019 - one context per report run
    def topology(self, topology_id: str):
        """The compiled topology of a config id (the first one for unknown ids)."""
        paths = self.config["topologies"]
        return load_topology(paths.get(topology_id, next(iter(paths.values()))))


def load_table(post, csv: str | Path):
    """The table as the experiment reads it back (its ``load``, else a plain CSV)."""
    load = getattr(post, "load", None)
    if load is not None:
        return load(csv)
    import pandas as pd

    return pd.read_csv(csv)
