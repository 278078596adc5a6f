"""Kernels: plain Python functions that see only ``tl`` (plus ints and floats)."""
