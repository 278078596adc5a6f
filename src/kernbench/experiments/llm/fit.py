"""Whether a model and its users' KV caches fit a system's HBM: the one rule that
``kernbench model`` refuses a point by and the ``llm`` study reports a point with."""

from __future__ import annotations


def footprint(model, spec, batch: int, context: int) -> tuple[int, int]:
    """(bytes needed, bytes of HBM): every weight plus each of ``batch`` users' KV cache of
    ``context`` tokens and the new one, against every PE slice of the system."""
    pes = spec.sips.count * spec.cubes_per_sip * spec.pes_per_cube
    return model.weight_bytes + model.kv_bytes(context + 1, batch), pes * spec.hbm_slice_bytes
