"""Capacity planning: how many PEs, replicas and systems serve a model (``kernbench capacity``)."""
