"""Export the op log as Chrome / Perfetto trace JSON (one track per component).

Processes group components by location (system, SIP IO chiplet, cube) unless
the caller names the group; each component is one thread. Times are converted
from ns to the format's microseconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from kernbench.fileio import write_atomic
from kernbench.sim_engine.op_log import OpRecord
from kernbench.topology import naming as nm


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items() if not isinstance(v, np.ndarray)}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def location(component_id: str) -> str:
    cube = nm.cube_of(component_id)
    if cube is not None:
        return nm.cube_prefix(*cube)
    sip = nm.sip_of(component_id)
    return nm.io_group(sip) if sip is not None else "system"


def chrome_trace(groups: Iterable[tuple[str | None, list[OpRecord]]]) -> dict:
    """Trace for (group name or None, records) pairs; None groups by location."""
    rows = [((g or location(r.component_id)), r) for g, recs in groups for r in recs]
    pids = {g: i + 1 for i, g in enumerate(sorted({g for g, _ in rows}))}
    tids = {k: i + 1 for i, k in enumerate(sorted({(g, r.component_id) for g, r in rows}))}
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                           "args": {"name": g}} for g, pid in pids.items()]
    events += [{"ph": "M", "name": "thread_name", "pid": pids[g], "tid": tid, "args": {"name": c}}
               for (g, c), tid in tids.items()]
    for g, r in rows:
        events.append({
            "ph": "X", "name": r.op_name, "cat": r.op_kind,
            "ts": r.t_start / 1000.0, "dur": max(r.t_end - r.t_start, 0.0) / 1000.0,
            "pid": pids[g], "tid": tids[(g, r.component_id)], "args": _jsonable(r.params),
        })
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"generator": "kernbench", "ts_unit": "us"}}


def write_chrome_trace(groups: Iterable[tuple[str | None, list[OpRecord]]],
                       path: str | Path) -> Path:
    return write_atomic(path, json.dumps(chrome_trace(groups), sort_keys=True) + "\n")
