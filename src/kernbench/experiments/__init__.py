"""Experiments: one (experiment, topology, workload, variant) point -> one JSON record.

Each experiment module provides ``expand`` (its workloads and variants from the
config block) and ``run`` (simulate one point and compare with its analytic
model). ``registry.EXPERIMENTS`` maps names to modules.
"""
