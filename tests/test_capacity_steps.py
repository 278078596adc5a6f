"""Axis C from simulated decode steps: bilinear between the llm study's points, never
beyond them, citing the points used."""

from __future__ import annotations

import csv
import json

import pytest

from kernbench.capacity.steps import Outside, StepTimes
from kernbench.cli.main import main

from .conftest import ROOT

# step time (ns) = 1e6 + 1e3 * batch + 10 * context: bilinear interpolation is exact on it
GRID = [(b, c) for b in (1, 8, 32) for c in (1024, 8192)]


def step_ns(b, c):
    return 1e6 + 1e3 * b + 10 * c


def write_table(path, model="llama3-8b", topology="default"):
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, ["model", "topology", "phase", "batch", "context", "fits",
                               "step_ns", "setting"])
        w.writeheader()
        for b, c in GRID:
            w.writerow({"model": model, "topology": topology, "phase": "decode", "batch": b,
                        "context": c, "fits": "True", "step_ns": step_ns(b, c),
                        "setting": "default"})
        w.writerow({"model": model, "topology": topology, "phase": "decode", "batch": 4,
                    "context": 4096, "fits": "True", "step_ns": 1.0, "setting": "hbm_slice-x2"})


def test_interpolates_between_points_and_cites_them(tmp_path):
    write_table(tmp_path / "llm.csv")
    st = StepTimes.from_table(tmp_path / "llm.csv", "llama3-8b", "default")
    assert len(st.grid) == 6  # the what-if row is not a base point
    t, pts = st.at(20, 5000)
    assert t == pytest.approx(step_ns(20, 5000) / 1e9)
    assert pts == [(8, 1024), (8, 8192), (32, 1024), (32, 8192)]
    assert st.at(8, 8192) == (step_ns(8, 8192) / 1e9, [(8, 8192)])
    for b, c in ((40, 2048), (4, 16384), (0, 2048)):
        with pytest.raises(Outside):
            st.at(b, c)


def test_capacity_uses_the_simulated_steps(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results/tables").mkdir(parents=True)
    write_table(tmp_path / "results/tables/llm.csv")
    # 1 ms + 1 us per user + 10 ns per token: at 4096 tokens 1.06 ms allows 19 users
    assert main(["capacity", "--model", "llama3-8b", "--topology",
                 str(ROOT / "config/topologies/default.yaml"), "--context", "4096",
                 "--users", "100", "--tpot-ms", "1.06", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    c = {s["name"]: s for s in doc["axes"]["C"]["steps"]}
    best = max(b for b in range(1, 33) if step_ns(b, 4096) <= 1.06e6)
    assert c["batch"]["value"] == best == 19
    assert c["t_step"]["value"] == pytest.approx(step_ns(best, 4096) / 1e9)
    assert c["systems"]["value"] == -(-100 // best)
    assert "(8, 1024)" in c["t_step"]["substituted"] or "batch 8" in c["t_step"]["substituted"]
    assert "C_roofline" in doc["axes"]
