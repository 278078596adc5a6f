"""``kernbench probe``: single-flow traffic patterns checked against the formula."""
