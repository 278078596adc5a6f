"""Experiment name -> module. Adding an experiment is one module plus one line here."""

from __future__ import annotations

from types import ModuleType

from kernbench.experiments import gemm, transfer

EXPERIMENTS: dict[str, ModuleType] = {transfer.NAME: transfer, gemm.NAME: gemm}


def get(name: str) -> ModuleType:
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise KeyError(f"unknown experiment {name!r} (known: {', '.join(sorted(EXPERIMENTS))})") from None
