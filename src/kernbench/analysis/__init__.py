"""The post-processing toolkit experiments build on: tables, figure style, values.

Never imported by simulation jobs (pandas and matplotlib load lazily inside
these modules' functions or on import of ``tables``/``plots`` only).
"""
