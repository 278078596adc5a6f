"""Aggregation (pandas) and figures (matplotlib). Never imported by simulation jobs."""
