"""Collectives on PE_IPCQ: process-group geometry, algorithms, their cost models.

Layering: this package sits between the host API (``runtime_api``, whose
``distributed`` module is the ``torch.distributed``-style backend) and the
kernel side (``triton_emu``). Algorithms are programs of sends and receives
that one tl-only kernel executes (``ccl.program``); each algorithm is one file
under ``ccl/algorithms/`` registered next to its class, plus an entry in
``ccl.yaml`` (package data) (docs/adr/0025-collectives.md).
"""
