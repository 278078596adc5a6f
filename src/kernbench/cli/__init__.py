"""Command-line entry points (``kernbench ...``)."""
