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

import ml_dtypes
import numpy as np
import pytest
import yaml

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


def run_example(doc, index, monkeypatch) -> dict:
    code = runnable_blocks(doc.read_text())[index]
    monkeypatch.chdir(ROOT)
    namespace = {"__name__": f"docs_example_{doc.stem.replace('-', '_')}_{index}"}
    exec(compile(code, f"{doc.name}[runnable {index}]", "exec"), namespace)  # our docs
    return namespace


# What each example computes, checked here against values computed independently (numpy
# in float64, the hardware numbers of default.yaml), so an example whose own asserts are
# edited away, or a simulator that goes wrong where the example does not look, still fails.
HW = yaml.safe_load((ROOT / "config" / "topologies" / "default.yaml").read_text())
MACS_PER_NS = (HW["pe"]["gemm"]["mac_rows"] * HW["pe"]["gemm"]["mac_cols"]
               * HW["pe"]["clock_ghz"])


def softmax64(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def check_tl_kernels(ns: dict) -> None:
    torch, x = ns["torch"], ns["x"].astype(np.float64)
    y = torch.to_numpy(ns["Y"])
    assert y.shape == (16, 64)
    np.testing.assert_allclose(y, softmax64(0.5 * x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(y.sum(axis=-1), 1.0, rtol=1e-5)
    a, w, bias = (ns[k].astype(np.float64) for k in ("a", "w", "bias"))
    c = torch.to_numpy(ns["C"])
    np.testing.assert_allclose(c, np.maximum(a @ w + bias, 0.0), rtol=1e-5, atol=1e-4)
    assert (c == 0).any() and (c > 0).any()  # the relu cut something, and not everything
    # one PE runs 64 x 128 x 32 MACs: no faster than the MAC array allows
    assert ns["h"].kernel_ns >= 64 * 128 * 32 / MACS_PER_NS


def check_command_list(ns: dict) -> None:
    tl, commands = ns["tl"], ns["commands"]
    assert [type(c).__name__ for c in commands] == ["DmaReadCmd", "DmaReadCmd", "MathCmd",
                                                    "DmaWriteCmd"]
    model = HW["pe"]["pe_cost_model"]  # one descriptor push: FIXED + logical bytes x R
    for c in commands:
        assert tl.cost_model.dispatch_cycles(c) == (model["fixed_per_single_op_cmd_cycles"]
                                                    + c.logical_bytes
                                                    * model["byte_cycles_recip"])
    assert tl.peak_scratch >= 3 * 256 * 4  # x, y and the result, f32, live at once


def check_host_matmul(ns: dict) -> None:
    torch, a, b, h = ns["torch"], ns["a"], ns["b"], ns["h"]
    expected = a.astype(np.float64) @ b.astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_allclose(torch.to_numpy(ns["C"]), expected, rtol=1e-5, atol=1e-4)
    assert sorted(h.pes) == [(0, cube, pe) for cube in range(2) for pe in range(4)]
    assert h.kernel_ns >= 32 * 128 * 64 / MACS_PER_NS  # each PE: 32 rows of the product


def check_per_sip(ns: dict) -> None:
    torch = ns["torch"]
    assert torch.device_count() == HW["system"]["sips"]["count"] == 2
    for sip in (0, 1):
        np.testing.assert_array_equal(torch.to_numpy(ns["ys"][sip]),
                                      np.arange(64, dtype=np.float64) + sip)
    assert ns["h"].sips == [0, 1]


def check_bench(ns: dict) -> None:
    launch = ns["result"].launches[0]
    assert ns["result"].ok and launch["name"] == "gemm-composite"
    assert 0 < launch["kernel_ns"] < launch["host_ns"] <= ns["result"].sim_ns


CHECKS = {("tl-api.md", 0): check_tl_kernels, ("tl-api.md", 1): check_command_list,
          ("host-api.md", 0): check_host_matmul, ("host-api.md", 1): check_per_sip,
          ("host-api.md", 2): check_bench}


def test_every_runnable_example_has_its_own_checks():
    assert {(doc.name, i) for doc, i in EXAMPLES} == set(CHECKS)


@pytest.mark.parametrize(("doc", "index"), EXAMPLES, ids=lambda v: getattr(v, "name", str(v)))
def test_runnable_example_executes_and_computes_the_right_values(doc, index, monkeypatch):
    namespace = run_example(doc, index, monkeypatch)
    CHECKS[(doc.name, index)](namespace)
