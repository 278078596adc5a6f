"""Record loading and CSV writing shared by every experiment's aggregation."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

FLOAT_FORMAT = "%.6g"


def load_records(paths: Iterable[str | Path]) -> list[dict]:
    """The point records of the job records at ``paths`` (a batch holds several)."""
    out: list[dict] = []
    for p in paths:
        record = json.loads(Path(p).read_text())
        out.extend(record["points"] if "points" in record else [record])
    return out


def write_csv(df, out_csv: str | Path) -> Path:
    """Write a table the same way for every experiment (byte-stable floats, LF)."""
    out = Path(out_csv)
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
    return out
