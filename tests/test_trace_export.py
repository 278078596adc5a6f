"""Chrome/Perfetto trace export of the op log."""

import json

from kernbench.policy.address import PhysAddr
from kernbench.sim_engine import GraphEngine
from kernbench.sim_engine.chrome_trace import write_chrome_trace


def test_trace_has_one_track_per_component_and_us_timestamps(small_graph, tmp_path):
    eng = GraphEngine(small_graph)
    sb = small_graph.spec.hbm_slice_bytes
    eng.pe_dma_write(0, 0, 0, PhysAddr.pe_hbm_addr(0, 1, 0, 0, sb), 4096)
    eng.pe_dma_write(0, 0, 1, PhysAddr.pe_hbm_addr(0, 1, 1, 0, sb), 4096)
    eng.pe_dma_write(0, 0, 1, PhysAddr.pe_hbm_addr(0, 1, 1, 4096, sb), 4096)
    eng.h2d_write(PhysAddr.pe_hbm_addr(0, 2, 0, 0, sb), 4096)
    eng.run()
    out = write_chrome_trace([(None, eng.op_log.records)], tmp_path / "t.json")
    trace = json.loads(out.read_text())
    events = trace["traceEvents"]
    threads = {e["args"]["name"]: (e["pid"], e["tid"]) for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert set(threads) == {"sip0.cube0.pe0.pe_dma", "sip0.cube0.pe1.pe_dma", "sip0.io0.pcie_ep"}
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == 4
    by_tid = {}
    for e in slices:
        by_tid.setdefault(e["tid"], []).append(e)
    assert sorted(len(v) for v in by_tid.values()) == [1, 1, 2]
    # every record is one slice, in microseconds
    spans = sorted((r.t_start / 1000.0, (r.t_end - r.t_start) / 1000.0)
                   for r in eng.op_log.records)
    assert sorted((e["ts"], e["dur"]) for e in slices) == spans
