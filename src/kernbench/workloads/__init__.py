"""Workloads: whole-system runs of a kernel family (inputs, placement, launch, checks)."""
