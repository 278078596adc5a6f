"""External reference simulators (SCALE-Sim v3, ns-3), run in their own environment.

The references are yardsticks for the validation experiment and never part of
a simulation. Their pins conflict with the project's (SCALE-Sim 3.0.0 needs
numpy < 2.3), so ``scripts/setup`` installs them into ``.venv-refs`` and the
scripts in this package run there as separate processes
(docs/adr/0035-validation-against-external-references.md).
"""
