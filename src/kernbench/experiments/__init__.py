"""Experiments: one (experiment, topology, workload, variant) point -> one JSON record.

``registry`` holds the experiments (each a plugin module that registers
itself), ``sweep`` checks a workflow config and expands it into jobs, ``job``
runs one point. Importing this package imports no experiment.
"""
