"""The one place where unit conventions and conversions live.

Time is in ns (float), sizes in bytes (int), bandwidth in GB/s with
1 GB/s = 1e9 B/s = 1 byte/ns, so ``nbytes / bw_gbs`` is a duration in ns.
Clocks are in GHz, so one cycle lasts ``1 / clock_ghz`` ns.
"""

from __future__ import annotations

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


def drain_ns(nbytes: int, bw_gbs: float) -> float:
    """Time to push ``nbytes`` through a ``bw_gbs`` GB/s pipe (GB/s == B/ns)."""
    return nbytes / bw_gbs


def cycles_to_ns(cycles: float, clock_ghz: float) -> float:
    return cycles / clock_ghz


def gb_to_bytes(gb: float) -> int:
    """Capacities in the topology are binary gigabytes (GiB), as HBM is sold."""
    return int(round(gb * GiB))


def mb_to_bytes(mb: float) -> int:
    return int(round(mb * MiB))


def kb_to_bytes(kb: float) -> int:
    return int(round(kb * KiB))


def format_size(nbytes: int) -> str:
    """Short binary label used in ids and tables: 4096 -> '4KiB', 1048576 -> '1MiB'."""
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B"


def parse_size(text: str | int) -> int:
    """Inverse of :func:`format_size`; also accepts plain integers."""
    if isinstance(text, int):
        return text
    s = str(text).strip()
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB), ("B", 1)):
        if s.endswith(unit):
            number = s[: -len(unit)]
            if number.isdigit():
                return int(number) * scale
            break
    if s.isdigit():
        return int(s)
    raise ValueError(f"cannot parse size {text!r} (use e.g. 4096, '4KiB', '1MiB')")
