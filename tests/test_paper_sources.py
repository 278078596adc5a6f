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
            line = re.sub(r"\\kbv\{[^}]*\}", r"\\kbv{}", line)  # a value's key is a name
            for m in NUMBER_UNIT.finditer(re.sub(r"(?<!\\)%.*", "", line)):  # comments out
                bad.append(f"{path.relative_to(ROOT)}:{i}: {m.group(0)!r}")
    assert not bad, "\n".join(bad)


def test_the_rule_catches_what_it_should():
    assert NUMBER_UNIT.search("reaches 85\\,\\% of the bound")
    assert NUMBER_UNIT.search("takes 37.4 us")
    assert NUMBER_UNIT.search("a 2.1x speed-up")
    assert not NUMBER_UNIT.search("\\kbv{gqa/dec/lat}\\,\\textmu s")
    assert not NUMBER_UNIT.search("Llama-3 70B with 8 KV heads")


def test_a_value_nobody_generates_is_one_line_naming_file_and_key():
    import pytest

    from kernbench.errors import ConfigError
    from kernbench.report.generate import check_values

    texts = {"sections/platform.tex": r"the mesh moves \kbv{hw/meshbw}\,GB/s",
             "gemm/section.tex": r"within \kbv{gemm/nosuch} of the bound, \kbv{gemm/also}"}
    check_values({"a.tex": r"\kbv{hw/meshbw}"}, {"hw/meshbw"})  # all defined: no error
    with pytest.raises(ConfigError) as info:
        check_values(texts, {"hw/meshbw"})
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(r"gemm/section.tex: \kbv{gemm/also}: no generated value"), msg
    assert "(and 1 more)" in msg


def test_the_default_title_is_a_sentence():
    import yaml

    title = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["report"]["title"]
    assert title.endswith(".") and len(title.split()) >= 8, title


def test_the_three_study_sections_have_the_same_four_beats():
    """Why (the motivation), Design, Results, Analysis -- in that order, in each of the
    three studies the introduction announces (GEMM, all-reduce, attention)."""
    from kernbench.experiments.registry import get

    for name in ("gemm", "allreduce", "gqa"):
        heads = re.findall(r"\\subsection\{([^}]*)\}", get(name).section)
        assert len(heads) == 4 and heads[0].startswith("Why "), (name, heads)
        assert heads[1:] == ["Design", "Results", "Analysis"], (name, heads)
