"""The bench registry (docs/adr/0020-bench-modules.md): decorator contract, module
audit, ``run(torch)`` and NO_REQUESTS, name/index resolution, alphabetical 1-based
indices; every registered bench runs through ``run_bench`` and ``kernbench run``.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import pytest

import kernbench.benches as benches_pkg
from kernbench.benches import registry
from kernbench.benches.registry import BenchSpec, audit_modules, bench, list_all, resolve
from kernbench.runtime_api.bench_runner import run_bench

ROOT = Path(__file__).resolve().parents[1]
EXPECTED_MODULES = {"kernbench.benches.attention_decode", "kernbench.benches.gemm",
                    "kernbench.benches.transfer"}


@contextlib.contextmanager
def _isolated():
    """An empty registry for the duration; the real one is put back afterwards."""
    saved = (list(registry._PENDING), dict(registry._REGISTRY), set(registry._REGISTERED_MODULES))
    registry._PENDING.clear()
    registry._REGISTRY.clear()
    registry._REGISTERED_MODULES.clear()
    try:
        yield registry
    finally:
        registry._PENDING[:] = saved[0]
        registry._REGISTRY.clear()
        registry._REGISTRY.update(saved[1])
        registry._REGISTERED_MODULES.clear()
        registry._REGISTERED_MODULES.update(saved[2])


@pytest.fixture
def isolated_registry():
    """Run a test against an empty registry and put the real one back afterwards."""
    with _isolated():
        yield registry


def _names() -> list[str]:
    return [s.name for s in list_all()]


# -- decorator contract -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["Gemm", "gemm_single", "1gemm", "gemm-", "-gemm", "gemm--pe",
                                  "", "gemm pe", "gémm", None, 3])
def test_bad_names_are_rejected(isolated_registry, name):
    with pytest.raises(ValueError, match="kebab-case"):
        bench(name=name, description="A description.")
    assert registry._PENDING == []


@pytest.mark.parametrize("description", ["", "   ", "\n\t", None])
def test_empty_descriptions_are_rejected(isolated_registry, description):
    with pytest.raises(ValueError, match="description"):
        bench(name="good-name", description=description)
    assert registry._PENDING == []


@pytest.mark.parametrize("name", ["a", "gemm", "gemm-1", "decode-attention-opt3", "x9-y8"])
def test_good_names_register_and_the_function_is_returned_unchanged(isolated_registry, name):
    def run(torch):
        return "ran"

    decorated = bench(name=name, description="  Padded description.  ")(run)
    assert decorated is run and run(None) == "ran"
    (spec,) = list_all()
    assert spec.name == name and spec.description == "Padded description."
    assert spec.run is run and spec.index == 1 and spec.module == __name__


def test_duplicate_names_fail_at_finalize(isolated_registry):
    bench(name="same-name", description="First.")(lambda torch: None)
    bench(name="same-name", description="Second.")(lambda torch: None)  # decoration succeeds
    with pytest.raises(RuntimeError, match="duplicate bench name: same-name"):
        list_all()
    with pytest.raises(RuntimeError, match="duplicate"):
        resolve("same-name")


def test_the_isolated_registry_is_restored():
    """The fixture empties the registry for a test and puts every real bench back after
    it, whatever ran before (checked here around a test of its own, in any order)."""
    before = [(s.name, s.module) for s in list_all()]
    assert len(before) >= 7 and EXPECTED_MODULES <= {m for _, m in before}
    with _isolated():
        assert list_all() == []
        bench(name="only-here", description="A bench that must not survive.")(lambda torch: None)
        assert _names() == ["only-here"]
    assert [(s.name, s.module) for s in list_all()] == before
    assert all(m.startswith("kernbench.benches.") for _, m in before)


# -- module audit -----------------------------------------------------------------------------------------
def test_audit_rejects_modules_without_a_bench():
    with pytest.raises(RuntimeError, match="missing @bench decorator: pkg.b, pkg.c"):
        audit_modules(["pkg.a", "pkg.c", "pkg.b"], {"pkg.a"})
    audit_modules(["pkg.a", "pkg.b"], {"pkg.a", "pkg.b", "other"})  # all registered: fine
    audit_modules([], set())


def _make_package(root: Path, name: str, files: dict[str, str]) -> Path:
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for fname, body in files.items():
        (pkg / fname).write_text(body)
    return pkg


_BENCH_MODULE = ("from kernbench.benches.registry import bench\n"
                 "@bench(name='{name}', description='Registered.')\n"
                 "def run(torch):\n    return None\n")


def test_eager_import_audits_every_non_helper_module(isolated_registry, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    pkg = _make_package(tmp_path, "kb_fake_benches_ok", {
        "alpha.py": _BENCH_MODULE.format(name="fake-alpha"),
        "_helper.py": "X = 1\n",  # helpers are skipped, so they need no @bench
        "registry.py": "Y = 2\n",
    })
    benches_pkg._eager_import_and_audit([str(pkg)], "kb_fake_benches_ok")
    assert _names() == ["fake-alpha"]
    assert "kb_fake_benches_ok._helper" not in registry._REGISTERED_MODULES


def test_eager_import_rejects_a_module_without_bench(isolated_registry, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    pkg = _make_package(tmp_path, "kb_fake_benches_bad", {
        "alpha.py": _BENCH_MODULE.format(name="fake-beta"),
        "forgot.py": "def run(torch):\n    return None\n",
    })
    with pytest.raises(RuntimeError, match="kb_fake_benches_bad.forgot"):
        benches_pkg._eager_import_and_audit([str(pkg)], "kb_fake_benches_bad")


# -- resolution and indices -------------------------------------------------------------------------------
def test_indices_are_one_based_in_alphabetical_order():
    specs = list_all()
    names = [s.name for s in specs]
    assert names == sorted(names)
    assert [s.index for s in specs] == list(range(1, len(specs) + 1))
    assert len(set(names)) == len(names)


def test_indices_follow_names_not_registration_order(isolated_registry):
    for name in ("zeta", "alpha", "mid-one"):
        bench(name=name, description=f"{name}.")(lambda torch: None)
    assert [(s.index, s.name) for s in list_all()] == [(1, "alpha"), (2, "mid-one"), (3, "zeta")]
    # a new bench can shift existing indices (they are not a stable API)
    bench(name="beta", description="beta.")(lambda torch: None)
    assert resolve("zeta").index == 4 and resolve("2").name == "beta"


def test_resolve_by_name_and_by_index():
    for spec in list_all():
        assert resolve(spec.name) is spec
        assert resolve(str(spec.index)) is spec
        assert resolve(f"  {spec.index} ") is spec
        assert resolve(f" {spec.name}\n") is spec


@pytest.mark.parametrize("ident", ["0", "999", "00", "-1", "1.0", "no-such-bench",
                                   "GEMM-PRIMITIVE", "gemm"])
def test_unknown_identifiers_raise(ident):
    if ident.isdigit() and 1 <= int(ident) <= len(list_all()):  # pragma: no cover
        pytest.skip("index exists")
    with pytest.raises(ValueError, match="(No bench with index|Unknown bench)"):
        resolve(ident)


@pytest.mark.parametrize("ident", ["", "   ", None])
def test_empty_identifiers_raise(ident):
    with pytest.raises(ValueError, match="non-empty"):
        resolve(ident)


def test_digits_only_lookup_is_by_index(isolated_registry):
    # a name can never be all digits (it must start with a letter), so digits mean an index
    bench(name="b1", description="b1.")(lambda torch: None)
    bench(name="a2", description="a2.")(lambda torch: None)
    assert resolve("1").name == "a2" and resolve("2").name == "b1"
    with pytest.raises(ValueError, match="No bench with index 3"):
        resolve("3")


# -- every bench runs; a silent bench is NO_REQUESTS ------------------------------------------------------
@pytest.mark.parametrize("name", _names())
def test_every_registered_bench_runs_ok(small_graph, name):
    result = run_bench(small_graph, resolve(name))
    assert result.ok and result.error_code is None
    assert result.sim_ns > 0 and result.op_counts
    for launch in result.launches:
        assert launch["kernel_ns"] > 0 and launch["host_ns"] >= launch["kernel_ns"]


def test_a_bench_that_submits_nothing_is_no_requests(small_graph):
    calls = []
    spec = BenchSpec("silent", "Submits nothing.", lambda torch: calls.append(torch), __name__, 1)
    result = run_bench(small_graph, spec)
    assert len(calls) == 1  # run(torch) was called with the context
    assert result.ok is False and result.error_code == "NO_REQUESTS"
    assert result.launches == []


# -- CLI --------------------------------------------------------------------------------------------------------------------------
def _cli(*args):
    return subprocess.run([sys.executable, "-m", "kernbench.cli.main", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_cli_list_shows_every_bench_with_its_index():
    proc = _cli("list")
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip() and ln.split()[0].isdigit()]
    specs = list_all()
    seeds = [ln.split()[1] for ln in proc.stdout.splitlines() if ln.strip().startswith("-")]
    assert seeds == ["milestone-1h-ccl", "milestone-1h-gemm", "milestone-gqa-headline"]
    assert len(lines) == len(specs)
    for line, spec in zip(lines, specs, strict=True):
        index, name, *desc = line.split()
        assert int(index) == spec.index and name == spec.name
        assert " ".join(desc) == spec.description


@pytest.mark.parametrize("name", _names())
def test_cli_run_every_bench_exits_zero(name):
    proc = _cli("run", "--topology", "small_2x2", "--bench", name)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"bench {name} on small_2x2")
    assert ": ok" in proc.stdout.splitlines()[0]


def test_cli_run_by_index_runs_the_same_bench():
    spec = resolve("gemm-composite")
    proc = _cli("run", "--topology", "small_2x2", "--bench", str(spec.index))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("bench gemm-composite on small_2x2")


@pytest.mark.parametrize("ident", ["no-such-bench", "999"])
def test_cli_unknown_bench_exits_2_with_one_line(ident):
    proc = _cli("run", "--topology", "small_2x2", "--bench", ident)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernbench: error:")
    assert "Traceback" not in proc.stderr and proc.stdout == ""


@pytest.mark.parametrize("name", ["gemm-composite", "gemm-primitive", "gemm-composite-cube",
                                  "decode-attention-opt3", "decode-attention-opt2"])
def test_compute_benches_run_in_data_mode(default_graph, name, monkeypatch):
    """``kernbench run --data``: a compute bench's inputs hold seeded values (reading
    never-written bytes would stop the run), spread like a standard normal."""
    import numpy as np

    from kernbench.benches import _shapes

    monkeypatch.setenv("GEMM_M", "64")
    monkeypatch.setenv("GEMM_K", "64")
    monkeypatch.setenv("GEMM_N", "64")
    monkeypatch.setenv("ATTN_S", "256")
    made = {}
    real = _shapes.bench_input

    def keep(torch, shape, dtype, label, dp=None):
        made[label] = t = real(torch, shape, dtype, label, dp)
        made["_ctx"] = torch
        return t

    monkeypatch.setattr("kernbench.benches.gemm.bench_input", keep)
    monkeypatch.setattr("kernbench.benches.attention_decode.bench_input", keep)
    result = run_bench(default_graph, resolve(name), enable_data=True)
    assert result.ok
    ctx = made["_ctx"]
    for label in set(made) - {"_ctx"}:
        values = ctx.to_numpy(made[label]).astype(np.float32)
        assert np.isfinite(values).all() and values.std() > 0.5, label
