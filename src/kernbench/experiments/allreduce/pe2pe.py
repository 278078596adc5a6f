"""The PE-to-PE latency table: one message through PE_IPCQ against one raw DMA write.

Pairs: PE0 -> PE1 (horizontal in a CUBE), PE0 -> PE4 (vertical), CUBE 0 -> CUBE 1
(horizontal, PE 0 each), CUBE 0 -> the CUBE below it, and SIP 0 -> SIP 1. For
each size, three unloaded measurements on an idle system:

* ``ipcq_ns``: the send's start at the sender to the end of the receiver's slot
  read (``tl.send`` / ``tl.recv``: the data is in the receiver's TCM);
* ``arrival_ns``: to the message's arrival in the slot (``tl.recv_no_consume``);
* ``dma_ns``: a ``tl.store`` of the same bytes from the sender's TCM straight into
  the receiver's TCM (a PE DMA write to a mapped physical address).
"""

from __future__ import annotations

from kernbench.geometry.ipcq import OPPOSITE, link
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine.engine import GraphEngine


def pairs(spec) -> list[tuple[str, tuple, tuple, str]]:
    w = spec.cube_w
    return [("PE0-PE1", (0, 0, 0), (0, 0, 1), "E"),
            ("PE0-PE4", (0, 0, 0), (0, 0, 4), "S"),
            ("CUBE0-CUBE1", (0, 0, 0), (0, 1, 0), "cube_E"),
            (f"CUBE0-CUBE{w}", (0, 0, 0), (0, w, 0), "cube_S"),
            ("SIP0-SIP1", (0, 0, 0), (1, 0, 0), "global_E")]


def _kernel(va, n, src, dst, direction, mode, *, tl):
    me = (tl.program_id(2), tl.program_id(1), tl.program_id(0))
    if me == src:
        buf = tl.zeros((n,), "i8")
        if mode == "dma":
            tl.store(va, buf)
        else:
            tl.send(direction, buf)
    elif me == dst and mode != "dma":
        if mode == "peek":
            tl.recv_no_consume(OPPOSITE[direction], (n,), "i8")
        else:
            tl.recv(OPPOSITE[direction], (n,), "i8")


def measure(graph, sizes: list[int]) -> list[dict]:
    spec = graph.spec
    slot = -(-max(sizes) // 64) * 64
    page = spec.pe.page_size
    target = -(-slot // page) * page
    rows = []
    for name, src, dst, direction in pairs(spec):
        engine = GraphEngine(graph, keep_records=True)
        ctx = RuntimeContext(engine)
        tables: dict = {}
        link(tables, src, direction, dst)
        ctx.install_ipcq(tables, slots=1, slot_bytes=slot)
        system = ctx.system
        # the DMA target: the receiver's TCM, mapped at a fresh VA on the sender
        pa = system.allocator(*dst).alloc_tcm(target, align=page)
        va = system.reserve(target, src[0], "pe2pe-target")
        engine.pe(*src).mmu.map(va, pa.encode(), target)
        sips = sorted({src[0], dst[0]})
        cubes = max(src[1], dst[1]) + 1
        pes = max(src[2], dst[2]) + 1
        dp = DPPolicy(num_cubes=cubes, num_pes=pes)
        nodes = engine.flows.ipcq_message(src, dst, "tcm")
        plan = engine.fabric.plan(nodes)
        for size in sizes:
            got = {}
            for mode in ("ipcq", "peek", "dma"):
                mark = len(engine.op_log.records)
                ctx.wait(ctx.launch(f"pe2pe-{mode}", _kernel, va, size, src, dst, direction,
                                    mode, dp=dp, sips=sips))
                engine.run()
                recs = engine.op_log.records[mark:]
                if mode == "dma":
                    (w,) = [r for r in recs if r.op_name == "dma_write"]
                    got["dma_ns"] = w.t_end - w.t_start
                else:
                    (s,) = [r for r in recs if r.op_name == "ipcq_send"]
                    (c,) = [r for r in recs if r.op_name in ("ipcq_copy", "ipcq_peek")]
                    if mode == "ipcq":
                        got["ipcq_ns"] = c.t_end - s.t_start
                        got["message_ns"] = s.t_end - s.t_start
                    else:
                        got["arrival_ns"] = c.t_end - s.t_start
            rows.append({"pair": name, "src": list(src), "dst": list(dst), "size": size,
                         "hops": len(nodes) - 1,
                         "predicted_ns": plan.overhead_ns + plan.wire_ns
                         + size / plan.bottleneck_gbs, **got})
    return rows
