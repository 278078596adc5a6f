"""What the collectives of the AHBM backend share: each rank's buffer in a per-SIP
tensor set, the result of one collective, and its per-phase times."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernbench.errors import UsageError
from kernbench.isa.dtypes import dtype_bytes

DTYPES = ("f16", "bf16", "f32", "i32")


@dataclass
class CollectiveResult:
    """One all-reduce: its launch, the model's prediction and per-phase times."""

    launch: object
    n: int
    dtype: str
    op: str
    ranks: int
    predicted_ns: float
    phases: dict = field(default_factory=dict)  # phase -> (simulated ns, predicted ns)

    @property
    def latency_ns(self) -> float:
        return self.launch.kernel_ns


def check_pes(cfg, spec) -> None:
    """A process group's buffer PEs must be the first k PEs of every CUBE."""
    if list(cfg.pes) != list(range(len(cfg.pes))) or len(cfg.pes) > spec.pes_per_cube:
        raise UsageError(f"ccl pes must be 0..k-1 with k <= {spec.pes_per_cube} "
                         f"(the PEs of a CUBE that hold a buffer), got {list(cfg.pes)}")


def rank_buffers(verb: str, tensors: dict, g, dtype: str) -> tuple[int, dict]:
    """(elements per rank, {rank: physical address}) of per-SIP tensors ``tensors``,
    each sharded over every CUBE and the group's PEs in equal shards of ``dtype``."""
    n = None
    buffers = {}
    for sip, t in sorted(tensors.items()):
        if t.dtype != dtype:
            raise UsageError(f"{verb}: tensor {t.name!r} is {t.dtype}, others {dtype}")
        for cube in range(g.cubes):
            for pe in g.pes:
                try:
                    p = t.local(cube, pe, sip)
                except KeyError:
                    raise UsageError(f"{verb}: tensor {t.name!r} has no shard on SIP "
                                     f"{sip} CUBE {cube} PE {pe} (shard it over every "
                                     f"CUBE and PEs {list(g.pes)})") from None
                elems = p.nbytes // dtype_bytes(t.dtype)
                if n is None:
                    n = elems
                elif elems != n:
                    raise UsageError(f"{verb}: shards differ in size ({elems} vs {n} "
                                     f"elements)")
                buffers[(sip, cube, pe)] = p.pa
    return n, buffers


def phase_times(engine, launch, model, start: float) -> dict:
    """Per phase: (simulated, predicted) ns from the last rank entering it to the last
    rank entering the next phase (the kernels' tl.mark times; the model's marks)."""
    entered: dict[str, float] = {}
    for coord in launch.pes:
        for t, label in engine.pe(*coord).cpu.marks:
            if t >= start:
                entered[label] = max(entered.get(label, float("-inf")), t)
    predicted: dict[str, float] = {}
    for marks in model["marks"].values():
        for label, t in marks.items():
            predicted[label] = max(predicted.get(label, float("-inf")), t)
    end_sim = max(e for _, e in launch.kernel_spans)
    end_model = model["latency_ns"]
    order = sorted(entered, key=entered.get)
    out = {}
    for i, label in enumerate(order):
        if label == "store":
            continue
        nxt = order[i + 1] if i + 1 < len(order) else None
        sim = (entered[nxt] if nxt else end_sim) - entered[label]
        pred = ((predicted.get(nxt, end_model) if nxt else end_model)
                - predicted.get(label, 0.0))
        out[label] = (max(sim, 0.0), max(pred, 0.0))
    return out
