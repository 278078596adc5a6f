"""A new collective algorithm is one file plus one entry in ``kernbench/ccl/ccl.yaml``: nothing
else (post-processing included) names it, and results of an algorithm the config does
not have are an error, not silently dropped."""

from __future__ import annotations

import json

import pytest

from kernbench.analysis.values import MISSING, latex
from kernbench.ccl import config as ccl_config
from kernbench.errors import ConfigError
from kernbench.experiments.allreduce import post
from kernbench.experiments.job import run_job

from .conftest import ROOT

SMALL = str(ROOT / "config/topologies/small_2x2.yaml")

ALGORITHM_FILE = '''
from kernbench.ccl.algorithms.ring import Ring
from kernbench.ccl.registry import register


@register
class Throwaway(Ring):
    """The ring under another name, with phases of its own."""
    name = "throwaway_ring"
    phases = ("scatter_first", "gather_then")

    def program(self, n):
        from kernbench.ccl.algorithms.base import complete, ring_allreduce
        from kernbench.ccl.group import ring_order

        programs = {}
        ring_allreduce(programs, ring_order(self.group), 0, n, "ring_next", "ring_prev",
                       "scatter_first", "gather_then")
        return complete(programs, self.group)
'''


def record(algorithm: str) -> dict:
    """One collective point of ``algorithm`` on small_2x2, as the workflow records it."""
    workload = {"kind": "collective", "algorithm": algorithm, "buffer": "hbm", "dtype": "f16",
                "sizes": [256]}
    return run_job("allreduce", "small", SMALL, f"{algorithm}-hbm", "sum",
                   {"workload": workload, "variant": {"op": "sum"}})


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    """The algorithm's file in a folder on the path and a config that adds one entry."""
    (tmp_path / "throwaway_ring.py").write_text(ALGORITHM_FILE)
    config = tmp_path / "ccl.yaml"
    config.write_text((ROOT / "src/kernbench/ccl/ccl.yaml").read_text()
                      + "  throwaway_ring:\n    module: throwaway_ring\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(ccl_config, "DEFAULT_PATH", config)
    return tmp_path


def test_an_algorithm_from_one_file_and_one_entry_runs_and_is_reported(throwaway):
    records = [json.loads(json.dumps(record(a))) for a in ("throwaway_ring", "ring")]
    df = post.frame(records)
    assert list(df["algorithm"]) == ["ring", "throwaway_ring"]  # the config's order
    assert {"phase_scatter_first_ns", "phase_gather_then_ns"} <= set(df.columns)
    v = post.values(df)
    assert latex(v["algorithms"]) == "2"
    assert v["small/throwaway_ring/busbw"] is not MISSING
    assert v["buffers/throwaway_ring/sramratio"] is MISSING  # one buffer kind was run
    assert "allreduce_table" in post.tables(df)
    paths = post.figures(df, throwaway / "figures")
    assert (throwaway / "figures" / "allreduce_phases.png") in paths


def test_results_of_an_algorithm_the_config_lacks_are_an_error(throwaway):
    records = [record("throwaway_ring")]
    records[0]["labels"]["algorithm"] = "no_such_algorithm"
    with pytest.raises(ConfigError, match="'no_such_algorithm', which is not configured"):
        post.frame(records)
    records[0]["labels"]["algorithm"] = "throwaway_ring"
    df = post.frame(records)
    df["algorithm"] = "no_such_algorithm"
    for step in (post.values, post.tables):
        with pytest.raises(ConfigError, match="no_such_algorithm"):
            step(df)
