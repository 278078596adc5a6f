"""Analytic models the simulator is checked against (roofline, transfer, ...)."""
