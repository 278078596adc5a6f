"""The API references cover the API, and their runnable examples run.

* every public member of ``TLContext`` has a ``### tl.<name>`` heading in
  docs/tl-api.md, and its instance attributes appear as `` `tl.<name>` ``;
* every public member of ``RuntimeContext`` has a ``### `ctx.<name>` ``
  heading in docs/host-api.md;
* every ```python block whose first line is ``# runnable`` executes, in a
  fresh namespace with the repository root as the working directory.

The names are computed from the classes, so adding a public method without
documenting it fails here (the ``*_would_fail_*`` tests check exactly that).
"""

from __future__ import annotations

import re

import pytest

from kernbench.runtime_api import RuntimeContext
from kernbench.triton_emu.tl_context import TLContext

from .conftest import ROOT

TL_DOC = ROOT / "docs" / "tl-api.md"
HOST_DOC = ROOT / "docs" / "host-api.md"
RUNNABLE = "# runnable"


def public_names(cls: type) -> set[str]:
    """Public attributes of a class: methods, static methods and properties."""
    return {n for n in dir(cls) if not n.startswith("_")}


def headings(text: str) -> set[str]:
    return {m.strip() for m in re.findall(r"^###[ \t]+(.+?)[ \t]*$", text, re.MULTILINE)}


def undocumented_tl(cls: type, text: str) -> list[str]:
    found = headings(text)
    return sorted(n for n in public_names(cls) if f"tl.{n}" not in found)


def undocumented_ctx(cls: type, text: str) -> list[str]:
    found = headings(text)
    return sorted(n for n in public_names(cls) if f"`ctx.{n}`" not in found)


def runnable_blocks(text: str) -> list[str]:
    blocks = re.findall(r"^```python[ \t]*\n(.*?)^```[ \t]*$", text, re.MULTILINE | re.DOTALL)
    return [b for b in blocks if b.lstrip().startswith(RUNNABLE)]


# -- (a) tl -------------------------------------------------------------------------------------
def test_every_public_tl_member_has_a_heading():
    assert undocumented_tl(TLContext, TL_DOC.read_text()) == []


def test_every_public_tl_instance_attribute_is_mentioned():
    text = TL_DOC.read_text()
    instance_only = {n for n in vars(TLContext()) if not n.startswith("_")} - public_names(TLContext)
    assert instance_only  # cost_model, tile_shape, commands, peak_scratch
    assert sorted(n for n in instance_only if f"`tl.{n}`" not in text) == []


def test_an_undocumented_tl_method_would_fail_the_check():
    class Extended(TLContext):
        def brand_new_op(self, x):  # not in the document
            return x

    assert undocumented_tl(Extended, TL_DOC.read_text()) == ["brand_new_op"]


def test_tl_operators_have_their_heading():
    assert "Operators on handles" in headings(TL_DOC.read_text())


# -- (b) host ---------------------------------------------------------------------------------
def test_every_public_runtime_context_member_has_a_heading():
    assert undocumented_ctx(RuntimeContext, HOST_DOC.read_text()) == []


def test_an_undocumented_runtime_context_method_would_fail_the_check():
    class Extended(RuntimeContext):
        def all_reduce(self, t):  # not in the document
            return t

    assert undocumented_ctx(Extended, HOST_DOC.read_text()) == ["all_reduce"]


# -- (c) runnable examples --------------------------------------------------------------------------
EXAMPLES = [(doc, i) for doc in (TL_DOC, HOST_DOC) for i in range(len(runnable_blocks(doc.read_text())))]


def test_both_documents_have_runnable_examples():
    assert {doc.name for doc, _ in EXAMPLES} == {"tl-api.md", "host-api.md"}


@pytest.mark.parametrize(("doc", "index"), EXAMPLES, ids=lambda v: getattr(v, "name", str(v)))
def test_runnable_example_executes(doc, index, monkeypatch):
    code = runnable_blocks(doc.read_text())[index]
    monkeypatch.chdir(ROOT)
    namespace = {"__name__": f"docs_example_{doc.stem.replace('-', '_')}_{index}"}
    exec(compile(code, f"{doc.name}[runnable {index}]", "exec"), namespace)  # our docs
