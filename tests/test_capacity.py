"""The capacity planner's three axes against hand-derived values, and its bad inputs."""

from __future__ import annotations

import json
import math

import pytest

from kernbench.capacity.formulas import FORMULAS, evaluate, names
from kernbench.capacity.planner import Chip, Efficiency, plan, quantities
from kernbench.cli.main import main
from kernbench.errors import UsageError
from kernbench.models import load_model

from .conftest import TOPOLOGIES

GIB = 2**30
HEADER = "kind,sweep,users,context,efficiency,C,variant,topology\n"


@pytest.fixture
def table(tmp_path):
    p = tmp_path / "gqa.csv"
    p.write_text(HEADER + "decode,sweep,1,8192,0.5,1,opt3,t\n"
                 "decode,sweep,1,16384,0.7,1,opt3,t\n"
                 "decode,sweep,1,16384,0.6,2,opt3,t\n"  # the better mapping counts
                 "decode,headline,4,32768,0.9,1,opt3,t\n"  # not a sweep point
                 "prefill,sweep,1,32768,0.9,8,,t\n")
    return p


def test_llama3_8b_weights_and_kv_bytes_per_token():
    v = {**quantities(load_model("llama3-8b")), "hbm_pe": 6 * GIB}
    N = evaluate(FORMULAS["N"][0], v)
    assert N == 32 * (4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336) == 6_979_321_856
    assert round(N / 1e9, 2) == 6.98 and round(2 * N / 1e9, 2) == 13.96  # GB, 16-bit
    v.update(N=N, W=2 * N)
    assert evaluate(FORMULAS["pes"][0], v) == math.ceil(13_958_643_712 / (6 * GIB)) == 3
    assert evaluate(FORMULAS["kv_bpt"][0], v) == 128 * 1024  # 128 KiB per token


def test_llama3_70b_weights_and_kv_bytes_per_token():
    v = {**quantities(load_model("llama3-70b")), "hbm_pe": 6 * GIB}
    N = evaluate(FORMULAS["N"][0], v)
    assert N == 80 * (8192 * 8192 * 2 + 8192 * 1024 * 2 + 3 * 8192 * 28672) == 68_451_041_280
    v.update(N=N, W=2 * N)
    assert evaluate(FORMULAS["pes"][0], v) == 22  # 136.9 GB over 6 GiB slices: 21.25
    assert evaluate(FORMULAS["kv_bpt"][0], v) == 320 * 1024


def test_plan_axes_by_hand(table):
    chip = Chip.from_topology("default")
    assert (chip.hbm_pe, chip.bw_pe) == (6 * GIB, 256e9)
    r = plan(load_model("llama3-8b"), chip, Efficiency.from_table(table), 12288, 1000, 50)
    v = r["values"]
    eff = 0.5 + (0.7 - 0.5) * (12288 - 8192) / (16384 - 8192)  # interpolated: 0.6
    assert r["efficiency"]["value"] == pytest.approx(eff)
    assert "interpolated between 8192 and 16384" in r["efficiency"]["source"]
    W = 13_958_643_712
    free = 3 * 6 * GIB - W
    assert v["free"] == free and v["users_kv"] == free // (131072 * 12288) == 3
    t_w, t_kv = W / (3 * 256e9), 12288 * 131072 / (3 * 256e9) / eff
    assert v["t_w"] == pytest.approx(t_w) and v["t_kv"] == pytest.approx(t_kv)
    assert v["batch_tpot"] == math.floor((0.05 - t_w) / t_kv)
    assert v["batch"] == min(3, v["batch_tpot"])
    assert v["t_step"] == pytest.approx(t_w + v["batch"] * t_kv) and v["t_step"] <= 0.05
    assert v["replicas"] == math.ceil(1000 / v["batch"])
    assert v["systems"] == math.ceil(v["replicas"] / (chip.system_pes // 3))
    step = r["axes"]["A"]["steps"][2]
    assert step["substituted"] == f"ceil({W} / {6 * GIB})" and step["value"] == 3


def test_every_formula_reads_only_known_quantities():
    known = set(quantities(load_model("llama3-8b"))) | {"hbm_pe", "bw_pe", "system_pes",
                                                      "context", "users", "tpot", "eff"}
    for name, (expr, _, _) in FORMULAS.items():
        assert set(names(expr)) <= known, name
        known.add(name)


@pytest.mark.parametrize("argv,needle", [
    (["--context", "-1"], "--context -1: must be positive"),
    (["--users", "0"], "--users 0: must be positive"),
    (["--tpot-ms", "0"], "--tpot-ms 0.0: must be positive"),
    (["--context", "65536"], "outside the measured decode range 8192..16384"),
    (["--context", "4096"], "outside the measured decode range"),
    (["--tpot-ms", "1"], "even one user takes"),
    (["--model", "gpt5"], "not a preset"),
])
def test_bad_inputs_get_one_line(table, capsys, argv, needle):
    args = {"--model": "llama3-8b", "--topology": "default", "--context": "8192",
            "--users": "10", "--tpot-ms": "50", "--table": str(table)}
    args.update(dict(zip(argv[::2], argv[1::2], strict=True)))
    assert main(["capacity", *[x for kv in args.items() for x in kv]]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_a_model_that_fits_no_replica(tmp_path, table):
    f = tmp_path / "huge.yaml"
    f.write_text("num_hidden_layers: 4000\nhidden_size: 8192\nnum_attention_heads: 64\n"
                 "num_key_value_heads: 8\nintermediate_size: 28672\nvocab_size: 128256\n")
    with pytest.raises(UsageError, match="huge needs .* fits no replica"):
        plan(load_model(str(f)), Chip.from_topology("default"), Efficiency.from_table(table),
             8192, 1, 50)


def test_a_bad_model_file_is_one_line_naming_the_key(tmp_path, table, capsys):
    f = tmp_path / "m.json"
    f.write_text(json.dumps({**TINY, "hidden_size": 0}))
    assert main(["capacity", "--model", str(f), "--context", "8192", "--users", "1",
                 "--tpot-ms", "50", "--table", str(table)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{f}: hidden_size must be a positive integer, got 0" in err and "\n" not in err


# a user's config.json: 2 layers, D 512, 8 query heads over 2 KV heads of 64, F 1024, f32
TINY = {"num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 8,
        "num_key_value_heads": 2, "intermediate_size": 1024, "vocab_size": 32000,
        "torch_dtype": "float32", "architectures": ["LlamaForCausalLM"], "use_cache": True}


def clean_clone_capacity(tmp_path, monkeypatch, capsys, model, *extra):
    """``kernbench capacity --json`` in an empty working directory (no results/)."""
    monkeypatch.chdir(tmp_path)
    assert not (tmp_path / "results").exists()
    rc = main(["capacity", "--model", model, "--topology", str(TOPOLOGIES / "default.yaml"),
               "--context", "8192", "--users", "1000", "--tpot-ms", "50", *extra])
    return rc, capsys.readouterr()


def test_axes_a_and_b_answer_on_a_clean_clone(tmp_path, monkeypatch, capsys):
    rc, out = clean_clone_capacity(tmp_path, monkeypatch, capsys, "llama3-70b", "--json")
    assert rc == 0 and out.err == ""
    doc = json.loads(out.out)
    N = 80 * (8192 * 64 * 128 * 2 + 8192 * 8 * 128 * 2 + 3 * 8192 * 28672)
    v = doc["values"]
    assert v["N"] == N and v["pes"] == math.ceil(2 * N / (6 * GIB))
    assert v["users_kv"] == (v["pes"] * 6 * GIB - 2 * N) // (80 * 2 * 8 * 128 * 2 * 8192)
    assert set(v) == {"N", "W", "pes", "kv_bpt", "free", "users_kv"}
    assert doc["efficiency"] is None and doc["axes"]["C"]["steps"] == []
    assert doc["axes"]["C"]["unavailable"].startswith(
        "results/tables/gqa.csv: the attention study's table is missing")
    rc, out = clean_clone_capacity(tmp_path, monkeypatch, capsys, "llama3-70b")
    lines = out.out.splitlines()
    c = lines.index("C. latency")
    assert rc == 0 and lines[c + 1].startswith("  unavailable: results/tables/gqa.csv")
    assert c + 2 == len(lines) and f"= {v['pes']} PEs" in out.out


def test_a_user_config_json_on_a_clean_clone(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY))
    rc, out = clean_clone_capacity(tmp_path, monkeypatch, capsys,
                                   str(folder / "config.json"), "--json")
    assert rc == 0
    doc = json.loads(out.out)
    d = 512 // 8  # head_dim defaults to hidden_size / num_attention_heads
    N = 2 * (512 * 8 * d * 2 + 512 * 2 * d * 2 + 3 * 512 * 1024)
    assert doc["model"] == "tiny-llama" and doc["inputs"]["b"] == 4
    assert doc["values"]["N"] == N and doc["values"]["W"] == 4 * N
    assert doc["values"]["kv_bpt"] == 2 * 2 * d * 4 * 2


def test_json_matches_the_text_numbers(table, capsys):
    base = ["capacity", "--model", "llama3-8b", "--context", "8192", "--users", "1000",
            "--tpot-ms", "50", "--table", str(table)]
    assert main(base + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["values"]["pes"] == 3 and doc["values"]["kv_bpt"] == 131072
    assert main(base) == 0
    text = capsys.readouterr().out
    assert f"= {doc['values']['replicas']} replicas" in text
