"""Numbers for the paper, the summary and the results page: computed once, formatted per medium.

An experiment's ``values(table)`` returns ``{key: Value}``; a Value holds the
raw quantity and how it is meant to be read (a count, microseconds, a
percentage, ...). :func:`latex`, :func:`markdown` and :func:`html` turn the
same Value into each medium's text, so no number is computed twice and no
experiment writes LaTeX digits by hand.
"""

from __future__ import annotations

import html as _html
import math
from dataclasses import dataclass
from typing import Any

KINDS = ("fixed", "sig", "g", "us", "pct", "ratio", "errpct", "text", "dims", "missing")


@dataclass(frozen=True, slots=True)
class Value:
    """A quantity and its reading. ``kind`` (see the constructors below):

    fixed: fixed-point with thousands separators, ``digits`` decimals (integers stay integral);
    sig: ``digits`` significant figures; g: Python's ``g`` format;
    us: a duration given in ns, shown in microseconds with 3-4 significant digits;
    pct: a percentage (one decimal, two significant digits below 1);
    ratio: a factor (two decimals below 10, else one);
    errpct: a relative error (fraction) shown as a percentage, with a floor;
    text: a name or label; dims: a tuple shown as a x b; missing: no such quantity.
    """

    number: Any
    kind: str = "fixed"
    digits: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Value kind must be one of {', '.join(KINDS)}, got {self.kind!r}")

    @property
    def missing(self) -> bool:
        n = self.number
        return self.kind == "missing" or n is None or (isinstance(n, float) and math.isnan(n))


MISSING = Value(None, "missing")


# -- constructors (what experiments call) ------------------------------------------------

def num(value, digits: int = 1) -> Value:
    return _or_missing(value, "fixed", digits)


def count(value) -> Value:
    return _or_missing(value, "fixed", 0)


def sig(value, digits: int = 3) -> Value:
    return _or_missing(value, "sig", digits)


def g(value) -> Value:
    return _or_missing(value, "g")


def us(ns) -> Value:
    return _or_missing(ns, "us")


def pct(value) -> Value:
    return _or_missing(value, "pct")


def ratio(value) -> Value:
    return _or_missing(value, "ratio")


def errpct(rel_error) -> Value:
    return _or_missing(rel_error, "errpct")


def text(value) -> Value:
    return MISSING if value is None else Value(str(value), "text")


def dims(*sizes: int) -> Value:
    return Value(tuple(int(s) for s in sizes), "dims")


def _or_missing(value, kind: str, digits: int = 1) -> Value:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return Value(value, kind, digits)


# -- formatting ----------------------------------------------------------------------------

ERR_FLOOR_PCT = 1e-6  # relative errors below this many percent print as a bound


def _fixed(value, digits: int) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and digits == 0):
        return f"{int(value):,}"
    return f"{value:,.{digits}f}"


def _sig(value: float, digits: int) -> str:
    """``digits`` significant figures, never in exponent form (303 at 2 digits: 300)."""
    if value == 0:
        return "0"
    short = f"{value:.{digits}g}"
    return f"{float(short):.0f}" if "e+" in short else short


def _plain(v: Value) -> str | None:
    """The digits of a numeric Value (same in every medium), or None if not plain."""
    n, k = v.number, v.kind
    if isinstance(n, float) and math.isinf(n) and k in ("fixed", "sig", "g"):
        return None
    if k == "fixed":
        return _fixed(n, v.digits)
    if k == "sig":
        return _sig(n, v.digits)
    if k == "g":
        return f"{n:g}"
    if k == "us":
        value = n / 1000.0
        return _fixed(value, 2 if value < 10 else 1 if value < 100 else 0)
    if k == "pct":
        return _sig(n, 2) if abs(n) < 1 else _fixed(n, 1)
    if k == "ratio":
        return _fixed(n, 2) if n < 10 else _fixed(n, 1)
    if k == "errpct":
        pct_ = 100.0 * n
        return None if pct_ < ERR_FLOOR_PCT else _sig(pct_, 2)
    return None


_LATEX_ESCAPES = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "<": r"\textless{}", ">": r"\textgreater{}",
}


def latex_escape(s: str) -> str:
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in str(s))


def latex(v: Value) -> str:
    if v.missing:
        return "--"
    plain = _plain(v)
    if plain is not None:
        return plain
    if v.kind == "text":
        return latex_escape(v.number)
    if v.kind == "dims":
        return r"$\times$".join(str(d) for d in v.number)
    if v.kind == "errpct":
        return f"$<10^{{{round(math.log10(ERR_FLOOR_PCT))}}}$"
    return r"$\infty$" if v.number > 0 else r"$-\infty$"


def markdown(v: Value) -> str:
    if v.missing:
        return "n/a"
    plain = _plain(v)
    if plain is not None:
        return plain
    if v.kind == "text":
        return str(v.number)
    if v.kind == "dims":
        return "×".join(str(d) for d in v.number)
    if v.kind == "errpct":
        return f"< {ERR_FLOOR_PCT:g}"
    return "∞" if v.number > 0 else "-∞"


def html(v: Value) -> str:
    return _html.escape(markdown(v))


def fill(template: str, values: dict[str, Value], fmt=markdown) -> str | None:
    """``template`` with ``{key}`` replaced by formatted values; None when a value it
    names is missing (so optional lines drop out)."""
    import string

    keys = [f for _, f, _, _ in string.Formatter().parse(template) if f]
    if any(values.get(k, MISSING).missing for k in keys):
        return None
    return template.format_map({k: fmt(values[k]) for k in keys})
