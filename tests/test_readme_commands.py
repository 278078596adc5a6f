"""The README's examples work: its kernel example computes what it says, and every
``kernbench`` command line shown in README.md and docs/*.md either runs (the quick ones,
in a fresh process in a scratch directory) or, for the slow and the long-running ones,
parses and passes every argument check up to the moment the work would start."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest

from kernbench.cli.main import main
from kernbench.policy.placement import DPPolicy
from kernbench.runtime_api import RuntimeContext
from kernbench.sim_engine import GraphEngine

from .conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[\w-]*[ \t]*\n(.*?)^```", re.MULTILINE | re.DOTALL)

# Shown but not run here, each with why; their arguments are still checked (below).
SLOW = {
    "kernbench run --bench milestone-1h-gemm --cores 2": "runs a study's workflow",
    "kernbench allreduce --topology sips6_torus --algorithm ring --bytes-per-pe 98304":
        "96 ranks x 96 KiB",
    "kernbench attention --mode decode --context 131072 --C 1 --P 8 --variant opt3":
        "a 128K-token decode on four SIPs",
    "kernbench web --port 8000": "serves until stopped",
    "kernbench model --model llama3-70b --topology llama70b_4sip --phase decode --batch 16 "
    "--context 32768 --layers 3 --set fabric.sharing=fifo": "three 70B layers on 512 PEs",
}
PLACEHOLDERS = {"kernbench job ..."}  # the workflow's command, not meant to be typed
TIMEOUT_S = 120  # per command; the quick ones take a few seconds


def command_lines() -> list[tuple[str, str]]:
    """(document, command) for every ``kernbench ...`` line in a fenced block, with
    continuation lines joined and trailing comments dropped."""
    out = []
    for doc in DOCS:
        for block in FENCE.findall(doc.read_text()):
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                line = line.strip().removeprefix("$ ")
                if not line.startswith("kernbench "):
                    continue
                out.append((doc.name, shlex.join(shlex.split(line, comments=True))))
    return out


COMMANDS = command_lines()
QUICK = list(dict.fromkeys(c for _, c in COMMANDS if c not in SLOW and c not in PLACEHOLDERS))


def test_the_commands_are_found_and_the_lists_are_current():
    found = {c for _, c in COMMANDS}
    assert {"README.md", "host-api.md"} <= {d for d, _ in COMMANDS}
    assert len(QUICK) >= 15
    assert set(SLOW) <= found, set(SLOW) - found  # a renamed example must be renamed here
    assert PLACEHOLDERS <= found


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A directory with a copy of config/ (topology names resolve against it)."""
    d = tmp_path_factory.mktemp("readme")
    shutil.copytree(ROOT / "config", d / "config",
                    ignore=shutil.ignore_patterns("*.cube_mesh.yaml"))
    return d


RUNNER = """
import contextlib, io, json, shlex, signal, sys, time
from kernbench.cli.main import main

def alarm(*_):
    raise TimeoutError
signal.signal(signal.SIGALRM, alarm)
for line in sys.stdin.read().splitlines():
    err, start = io.StringIO(), time.perf_counter()
    signal.alarm(int(sys.argv[1]))
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = main(shlex.split(line)[1:])
    except SystemExit as exc:
        rc = exc.code
    except TimeoutError:
        rc = "timeout"
    signal.alarm(0)
    print(json.dumps({"cmd": line, "rc": rc, "s": round(time.perf_counter() - start, 2),
                      "err": err.getvalue().strip().splitlines()[-3:]}), flush=True)
"""


@pytest.fixture(scope="module")
def quick_results(scratch):
    """Every quick command, one after another in one fresh process (the imports paid
    once), each with its own timeout."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(TIMEOUT_S)], cwd=scratch,
                          input="\n".join(QUICK), capture_output=True, text=True, env=env,
                          timeout=TIMEOUT_S * len(QUICK), check=False)
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            doc = json.loads(line)
            results[doc["cmd"]] = doc
    assert proc.returncode == 0, proc.stderr[-2000:]
    return results


@pytest.mark.parametrize("command", QUICK)
def test_a_quick_command_runs(command, quick_results):
    result = quick_results[command]
    assert result["rc"] == 0, result


class Started(BaseException):  # past the CLI's own error handling
    """Raised where a slow command's work would begin: every argument was accepted."""


@pytest.mark.parametrize("command", sorted(SLOW))
def test_a_slow_command_parses_and_validates(command, scratch, monkeypatch):
    import kernbench.cli.study_cmd as study_cmd
    import kernbench.cli.web_cmd as web_cmd

    def started(*_a, **_k):
        raise Started

    monkeypatch.setattr(GraphEngine, "run", started)  # the first simulated step
    monkeypatch.setattr(study_cmd, "run_study", started)  # the workflow
    monkeypatch.setattr(web_cmd, "serve", started)  # the server
    monkeypatch.chdir(scratch)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        with pytest.raises(Started):
            main(shlex.split(command)[1:])
    assert "error" not in err.getvalue(), err.getvalue()


def test_a_broken_example_would_fail(scratch, monkeypatch):
    """The README's old prefill example: its arguments are refused, so it is caught
    whether it runs or is only checked."""
    monkeypatch.chdir(scratch)
    monkeypatch.setattr(GraphEngine, "run", lambda *_a, **_k: pytest.fail("it ran"))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(shlex.split("attention --mode prefill --topology default --context 300 "
                              "--C 8 --P 2 --data --dump o.npz"))
    assert rc == 2 and "C=8: 4 groups of C CUBEs do not fit" in err.getvalue()


def test_readme_kernel_example(small_graph):
    text = (ROOT / "README.md").read_text()
    code = text.split("## Writing a kernel")[1].split("```python")[1].split("```")[0]
    scope = {"np": np, "DPPolicy": DPPolicy}
    exec(code, scope)  # our own documentation
    ctx = RuntimeContext(GraphEngine(small_graph, enable_data=True))
    scope["run"](ctx)
    y = ctx._tensors[-1]
    np.testing.assert_array_equal(ctx.to_numpy(y), np.full((64, 128), 2.0, np.float16))
