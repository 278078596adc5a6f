"""Honest errors: a user's bad input is one line and exit 2; a fault inside KernBench is
a traceback, a line saying it is a bug, and exit 1 -- for every command."""

from __future__ import annotations

import pytest

from kernbench import native
from kernbench.cli.main import main

from .conftest import ROOT

SMALL = str(ROOT / "config/topologies/small_2x2.yaml")
SLICE = '{"workload": {"flow": "h2d-1hop", "sizes": [4096]}, "variant": {"concurrent_flows": 1}}'


def job(slice_: str = SLICE, experiment: str = "transfer", out: str = "r.json",
        topology_file: str = SMALL) -> list[str]:
    return ["job", "--experiment", experiment, "--topology-id", "t", "--topology-file",
            topology_file, "--workload-id", "w", "--variant-id", "v", "--slice", slice_,
            "--out", out]


def capacity(*change: str) -> list[str]:
    """``kernbench capacity`` with good values but ``change`` (flag, value), run where no
    results table exists."""
    args = {"--model": "llama3-8b", "--topology": str(ROOT / "config/topologies/default.yaml"),
            "--context": "4096",
            "--users": "8", "--tpot-ms": "50"}
    args.update(dict(zip(change[::2], change[1::2], strict=True)))
    return ["capacity", *(x for kv in args.items() for x in kv)]


def model_args(*change: str) -> list[str]:
    """``kernbench model`` with good values but ``change`` (flag, value)."""
    args = {"--model": str(ROOT / "config/models/tiny-gqa.yaml"), "--topology": SMALL,
            "--phase": "decode", "--batch": "1", "--context": "16"}
    args.update(dict(zip(change[::2], change[1::2], strict=True)))
    return ["model", *(x for kv in args.items() for x in kv)]


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
    # arguments are checked before any file is read: no results table is needed to hear
    # about a bad value, and the unknown experiment comes before the bad slice
    "capacity-users": (capacity("--users", "0"), "--users 0: must be positive (an integer"),
    "capacity-tpot": (capacity("--tpot-ms", "-1"), "--tpot-ms -1.0: must be positive (a finite"),
    "capacity-tpot-nan": (capacity("--tpot-ms", "nan"), "--tpot-ms nan: must be positive (a finite"),
    "capacity-context": (capacity("--context", "0"), "--context 0: must be positive (an integer"),
    "capacity-model": (capacity("--model", "gpt-17"), "--model 'gpt-17': not a preset"),
    "capacity-topology": (capacity("--topology", "nosuch"), "nosuch: topology file not found"),
    "capacity-table": (capacity("--table", "results/tables/gqa.csv"),
                       "--table results/tables/gqa.csv: the attention study's table is missing"),
    "job-experiment-first": (job('{"workload": 1}', experiment="nosuch"),
                             "--experiment: unknown experiment 'nosuch' (known: "),
    "job-topology-file": (job(topology_file="no/such.yaml"), "--topology-file: no/such.yaml: "
                                                               "file not found"),
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
    "model-unknown": (model_args("--model", "gpt-17"), "gpt-17"),
    "model-batch": (model_args("--batch", "0"), "--batch must be a positive integer, got 0"),
    "model-context": (model_args("--context", "-4"), "--context must be a positive integer"),
    "model-tp": (model_args("--tp", "5"), "--tp 5: on 'small_2x2' the ranks are k PEs"),
    "model-heads": (model_args("--tp", "8", "--model", "llama3-8b"), "KV heads"),
    "model-fit": (model_args("--context", "1000000000000"), "bytes of HBM"),
    "model-phase": (model_args("--phase", "train"), "--phase must be decode or prefill"),
    "model-dump": (model_args("--dump", "o.npz"), "--dump needs --data"),
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
    from kernbench.components.builtin.pe_cost_model import PeCostModel
    from kernbench.kernels.gemm import gemm_primitive
    from kernbench.runtime_api import RuntimeContext
    from kernbench.sim_engine import GraphEngine
    from kernbench.triton_emu.kernel_runner import KernelError

    def broken(*_args, **_kwargs):
        raise ZeroDivisionError("injected")

    # the GEMM engine's cost when its module is Python; compiled, it calls busy_cycles
    # directly, so the fault goes into the dispatch cost PE_CPU asks a Python class for
    if native.compiled():
        monkeypatch.setattr(PeCostModel, "dispatch_cycles", broken)
    else:
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


@pytest.mark.parametrize("argv, first", [
    (capacity("--model", "gpt-17", "--topology", "nosuch", "--users", "0"), "--model"),
    (capacity("--topology", "nosuch", "--context", "-5", "--users", "0"), "nosuch: topology"),
    (capacity("--context", "-5", "--users", "0", "--tpot-ms", "0"), "--context -5"),
    (capacity("--users", "0", "--tpot-ms", "0"), "--users 0"),
    (job('{"workload": 1}', experiment="nosuch", topology_file="no/such.yaml"),
     "--experiment"),
    (job('{"workload": 1}', topology_file="no/such.yaml"), "--topology-file"),
    (job("{not json"), "--slice"),
])
def test_arguments_are_checked_in_order_before_any_file_is_read(argv, first, capsys,
                                                                monkeypatch, tmp_path):
    """Several bad arguments at once: the first one declared is the one reported, and no
    topology, model, table or record is opened on the way."""
    import kernbench.capacity.planner as planner
    import kernbench.experiments.job as job_mod
    import kernbench.models as models

    def no_read(*_a, **_k):
        raise AssertionError("a file was read before the arguments were checked")

    monkeypatch.setattr(planner, "load_topology", no_read)
    monkeypatch.setattr(planner.Efficiency, "from_table", no_read)
    monkeypatch.setattr(models, "load_model", no_read)
    monkeypatch.setattr(job_mod, "run_job", no_read)
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert line.startswith(f"kernbench: error: {first}"), line
