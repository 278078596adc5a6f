"""Honest errors: a user's bad input is one line and exit 2; a fault inside KernBench is
a traceback, a line saying it is a bug, and exit 1 -- for every command."""

from __future__ import annotations

import pytest

from kernbench.cli.main import main

from .conftest import ROOT

SMALL = str(ROOT / "config/topologies/small_2x2.yaml")
SLICE = '{"workload": {"flow": "h2d-1hop", "sizes": [4096]}, "variant": {"concurrent_flows": 1}}'


def job(slice_: str = SLICE, experiment: str = "transfer", out: str = "r.json") -> list[str]:
    return ["job", "--experiment", experiment, "--topology-id", "t", "--topology-file", SMALL,
            "--workload-id", "w", "--variant-id", "v", "--slice", slice_, "--out", out]


# (command line with a bad input, text the one-line message must contain)
BAD = {
    "list": (["list", "--plugin-that-does-not-exist"], None),  # argparse: exit 2
    "run": (["run", "--topology", SMALL, "--bench", "no-such-bench"], "Unknown bench"),
    "run-env": (["run", "--topology", SMALL, "--bench", "gemm-composite"], "GEMM_N"),
    "probe": (["probe", "--topology", SMALL, "--case", "no-such-case"], "unknown probe case"),
    "topology-validate": (["topology", "validate", "no/such/file.yaml"], "file not found"),
    "topology-show": (["topology", "show", "no/such/file.yaml"], "file not found"),
    "topology-render": (["topology", "render", SMALL, "--views", "roof"], "unknown view"),
    "job-json": (job("{not json"), "not valid JSON"),
    "job-slice": (job('{"workload": 1}'), "--slice"),
    "job-experiment": (job(experiment="no_such_experiment"), "unknown experiment"),
    "experiments": (["experiments", "no_such_experiment"], "unknown experiment"),
    # an output path that cannot be written is found before the simulation runs
    "allreduce-dump": (["allreduce", "--topology", SMALL, "--algorithm", "ring",
                        "--bytes-per-pe", "64", "--data", "--dump", "/nonexistent/dir/x.npz"],
                       "--dump /nonexistent/dir/x.npz: folder /nonexistent/dir does not exist"),
    "allreduce-trace": (["allreduce", "--topology", SMALL, "--algorithm", "ring",
                         "--bytes-per-pe", "64", "--trace", "."],
                        "--trace .: is a folder, not a file"),
    "attention-dump": (["attention", "--mode", "decode", "--topology", SMALL, "--context", "64",
                        "--data", "--dump", "/nonexistent/o.npz"],
                       "--dump /nonexistent/o.npz: folder /nonexistent does not exist"),
    "run-trace": (["run", "--topology", SMALL, "--bench", "host-roundtrip", "--trace",
                   "no/such/t.json"], "--trace no/such/t.json: folder no/such does not exist"),
    "probe-trace": (["probe", "--topology", SMALL, "--case", "h2d-1hop", "--trace",
                     "/dev/null/t.json"], "/dev/null is not a folder"),
    "job-out": (job(out="/dev/null/raw/r.json"), "--out /dev/null/raw/r.json: /dev/null is not"),
    "topology-render-out": (["topology", "render", SMALL, "--out", "/dev/null"],
                            "--out /dev/null: exists and is not a folder"),
}

# (command line that works, the internal function to break)
GOOD = {
    "list": (["list"], "kernbench.benches.registry.list_all"),
    "run": (["run", "--topology", SMALL, "--bench", "host-roundtrip"],
            "kernbench.runtime_api.bench_runner.run_bench"),
    "probe": (["probe", "--topology", SMALL, "--case", "h2d-1hop"],
              "kernbench.probes.probe.run_probe"),
    "topology-validate": (["topology", "validate", SMALL], "kernbench.topology.load_topology"),
    "topology-show": (["topology", "show", SMALL], "kernbench.topology.load_topology"),
    "topology-render": (["topology", "render", SMALL, "--views", "pe"],
                        "kernbench.topology.svg.emit_diagrams"),
    "job": (job(), "kernbench.experiments.job.run_job"),
    "experiments": (["experiments"], "kernbench.experiments.registry.all_experiments"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_one_line_and_exit_2(name, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GEMM_N", "0")
    argv, expect = BAD[name]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse rejects unknown options itself
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if expect is None:
        assert lines[-1].startswith("kernbench")
    else:
        assert len(lines) == 1, err
        assert lines[0].startswith("kernbench: error: ") and expect in lines[0], err


@pytest.mark.parametrize("name", sorted(GOOD))
def test_an_internal_fault_is_reported_as_a_bug(name, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    argv, target = GOOD[name]
    assert main(argv) == 0, capsys.readouterr().err  # the command works as given...
    capsys.readouterr()

    def broken(*_args, **_kwargs):
        raise KeyError("injected internal fault")  # a KeyError is no longer a user error

    module, attr = target.rsplit(".", 1)
    monkeypatch.setattr(module + "." + attr, broken)
    code = main(argv)  # ...and the same command with a broken internal function
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Traceback (most recent call last)" in err and "injected internal fault" in err
    assert err.strip().splitlines()[-1].startswith("kernbench: internal error: this is a bug")


def test_a_bug_inside_a_kernel_run_is_not_disguised_as_kernel_misuse(small_graph, monkeypatch):
    """An exception raised by the simulator while a kernel runs propagates as itself."""
    from kernbench.components.builtin import gemm_array
    from kernbench.kernels.gemm import gemm_primitive
    from kernbench.runtime_api import RuntimeContext
    from kernbench.sim_engine import GraphEngine
    from kernbench.triton_emu.kernel_runner import KernelError

    def broken(*_args, **_kwargs):
        raise ZeroDivisionError("injected")

    monkeypatch.setattr(gemm_array, "busy_cycles", broken)
    ctx = RuntimeContext(GraphEngine(small_graph))
    a, b, c = ctx.empty((32, 64)), ctx.empty((64, 32)), ctx.empty((32, 32), "f32")
    with pytest.raises(ZeroDivisionError, match="injected") as info:
        ctx.wait(ctx.launch("g", gemm_primitive, a, b, c, 32, 64, 32))
    assert not isinstance(info.value, KernelError)
    chain, exc = [], info.value  # SimPy re-raises a copy; the original is its cause
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__
    notes = [n for e in chain for n in getattr(e, "__notes__", ())]
    assert any("while kernel 'g' ran on sip0.cube0.pe0" in n for n in notes)
