"""Hand-written paper text holds no measured numbers: every number with a unit comes
from a generated macro (\\kbv{...}), so a rerun can never leave stale figures."""

from __future__ import annotations

import re

from .conftest import ROOT

UNIT = r"(?:ns|us|\\textmu\s*s|ms|GB/s|TB/s|\\%|%|x)(?![A-Za-z])"
NUMBER_UNIT = re.compile(r"(?<![\w\\{])\d[\d.,]*\s*(?:\\,|~|\\ )?\s*" + UNIT)


def _hand_written():
    return sorted([ROOT / "report" / "paper.tex", *(ROOT / "report" / "sections").glob("*.tex"),
                   *(ROOT / "src" / "kernbench" / "experiments").glob("*/*.tex")])


def test_no_number_followed_by_a_unit_in_hand_written_tex():
    bad = []
    for path in _hand_written():
        for i, line in enumerate(path.read_text().splitlines(), 1):
            for m in NUMBER_UNIT.finditer(re.sub(r"(?<!\\)%.*", "", line)):  # comments out
                bad.append(f"{path.relative_to(ROOT)}:{i}: {m.group(0)!r}")
    assert not bad, "\n".join(bad)


def test_the_rule_catches_what_it_should():
    assert NUMBER_UNIT.search("reaches 85\\,\\% of the bound")
    assert NUMBER_UNIT.search("takes 37.4 us")
    assert NUMBER_UNIT.search("a 2.1x speed-up")
    assert not NUMBER_UNIT.search("\\kbv{gqa/dec/lat}\\,\\textmu s")
    assert not NUMBER_UNIT.search("Llama-3 70B with 8 KV heads")
