"""PE_FETCH_STORE: moves operands TCM -> engine (FETCH) and results engine -> TCM (STORE).

Two independent channels through the TCM port, each a single server timed as
``bytes / tcm_port_bw`` plus the unit's overhead.
"""

from __future__ import annotations

from kernbench.components.builtin.engine import Engine


class FetchStore:
    __slots__ = ("fetch", "store", "port_bw_gbs")

    def __init__(self, node_id: str, overhead_ns: float, port_bw_gbs: float) -> None:
        self.fetch = Engine(node_id, overhead_ns)
        self.store = Engine(node_id, overhead_ns)
        self.port_bw_gbs = port_bw_gbs

    def busy_report(self) -> dict[str, float]:
        return {"fetch": self.fetch.busy_ns, "store": self.store.busy_ns}

    def transfer_ns(self, nbytes: int) -> float:
        return nbytes / self.port_bw_gbs
