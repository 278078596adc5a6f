"""Workflow config: malformed files fail before any job with one line naming the key."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from kernbench.errors import ConfigError
from kernbench.experiments import sweep as sweep_module

from .conftest import ROOT

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def load_sweep_file(path, root):
    """The sweep as the workflow loads it (its schema, records under results/raw)."""
    return sweep_module.load_sweep_file(path, root, SCHEMA, "results/raw")

BASE = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def mutate(fn):
    doc = copy.deepcopy(BASE)
    fn(doc)
    return doc


CASES = [
    ("unknown_top_key", lambda d: d.update(bogus=1), "bogus", "unknown key"),
    ("unknown_experiment", lambda d: d["experiments"].update(gemmm={}), "experiments.gemmm",
     "unknown key (allowed: "),
    ("unknown_plugin", lambda d: d.update(plugins=["no_such_module_kb"]), "plugins[0]",
     "cannot be imported"),
    ("unknown_block_key", lambda d: d["experiments"]["transfer"].update(size=[1]),
     "experiments.transfer.size", "unknown key"),
    ("wrong_type_sizes", lambda d: d["experiments"]["transfer"].update(sizes="4KiB"),
     "experiments.transfer.sizes", "expected array"),
    ("negative_size", lambda d: d["experiments"]["transfer"].update(sizes=[-4096]),
     "experiments.transfer.sizes[0]", "positive byte count"),
    ("bad_size_string", lambda d: d["experiments"]["transfer"].update(sizes=["4kb"]),
     "experiments.transfer.sizes[0]", "positive byte count"),
    ("empty_sweep", lambda d: d["experiments"]["transfer"].update(sizes=[]),
     "experiments.transfer.sizes", "at least 1"),
    ("empty_flows", lambda d: d["experiments"]["transfer"].update(flows=[]),
     "experiments.transfer.flows", "'all' or a list"),
    ("no_variants", lambda d: d["experiments"]["transfer"].update(variants={}),
     "experiments.transfer.variants", "at least 1"),
    ("unknown_topology_id", lambda d: d["experiments"]["transfer"].update(topologies=["tiny"]),
     "experiments.transfer.topologies[0]", "allowed: default, llama70b_4sip"),
    ("duplicate_topology_ids",
     lambda d: d["experiments"]["transfer"].update(topologies=["default", "default"]),
     "experiments.transfer.topologies", "unique"),
    ("duplicate_sizes",
     lambda d: d["experiments"]["transfer"].update(sizes=[4096, "4KiB"]),
     "experiments.transfer.sizes", "4096 and 4KiB name the same size"),
    ("unknown_flow", lambda d: d["experiments"]["transfer"].update(flows=["h2d-9hop"]),
     "experiments.transfer.flows[0]", "unknown flow 'h2d-9hop'"),
    ("zero_concurrency",
     lambda d: d["experiments"]["transfer"]["variants"]["single"].update(concurrent_flows=0),
     "experiments.transfer.variants.single.concurrent_flows", "must be >= 1"),
    ("missing_topology_file", lambda d: d["topologies"].update(default="config/topologies/x.yaml"),
     "topologies.default", "not found"),
    ("bad_engine", lambda d: d["report"].update(engine="pdflatex"), "report.engine",
     "must be one of"),
    ("bad_variant_id", lambda d: d["experiments"]["transfer"]["variants"].update({"a/b": {}}),
     "experiments.transfer.variants", "not a valid id"),
]


@pytest.mark.parametrize("name,fn,key,expect", CASES, ids=[c[0] for c in CASES])
def test_malformed_config_fails_with_one_line(tmp_path, name, fn, key, expect):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(mutate(fn)))
    with pytest.raises(ConfigError) as info:
        load_sweep_file(path, ROOT)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}: {key}: "), msg
    assert expect in msg


def test_duplicate_yaml_key_is_reported_with_position(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("topologies:\n  default: config/topologies/default.yaml\n"
                    "  default: config/topologies/small_2x2.yaml\nexperiments: {}\n")
    with pytest.raises(ConfigError, match=r"line 3, column 3: duplicate key 'default'"):
        load_sweep_file(path, ROOT)


def test_defaults_are_filled_from_the_schema(tmp_path):
    doc = mutate(lambda d: d.pop("report"))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    sweep = load_sweep_file(path, ROOT)
    assert sweep.config["report"] == {
        "title": "KernBench: co-designing a memory-centric AI accelerator", "engine": "auto"}


def test_sweep_expands_topology_x_workload_x_variant():
    sweep = load_sweep_file(ROOT / "config" / "config.yaml", ROOT)
    # transfer: 16 probe flows on each 4x4 topology (each sweeping 5 sizes), 2 variants,
    # 2 topologies; gemm: 24 shapes x 6 variants on one topology
    default = [j for j in sweep.jobs if j.setting is None]  # not a sensitivity rerun
    transfer = [j for j in default if j.experiment == "transfer"]
    assert len(transfer) == 2 * 2  # the flows of a topology share a job per variant
    assert sum(len(j.points) for j in transfer) == 2 * 16 * 2
    gemm = [j for j in default if j.experiment == "gemm"]
    assert len(gemm) == 3 * 7  # a job per shape group (decode, prefill, synthetic) x variant
    points = sorted((j.variant, wid) for j in gemm for wid, _ in j.points)
    assert len(points) == len(set(points)) == 24 * 7  # every point once
    # sensitivity reruns: the contention variant of each topology once more, under FIFO links
    reruns = [j for j in sweep.jobs if j.experiment == "transfer" and j.setting]
    assert sorted(j.output for j in reruns) == [
        f"results/raw/transfer/{t}/flows/contention@links-fifo.json"
        for t in ("default", "llama70b_4sip")]
    assert all(j.base == j.output.replace("@links-fifo", "") for j in reruns)
    assert all(j.slice["variant"]["overrides"] == {"fabric.sharing": "fifo"} for j in reruns)
    from kernbench.experiments.allreduce import sweep_sizes
    assert sweep_sizes({"min": "16B", "max": "96KiB", "between": False}, "c") == [
        16 << i for i in range(13)] + [98304]  # doubling to 64 KiB, then the maximum
    outputs = sweep.outputs()
    assert len(set(outputs)) == len(outputs)
    job = sweep.by_output()["results/raw/transfer/default/flows/contention.json"]
    assert dict(job.points)["pe-local-hbm"] == {"flow": "pe-local-hbm",
                                                "sizes": [4096, 16384, 65536, 262144, 1048576]}
    assert job.slice["variant"] == {"concurrent_flows": 2}
    assert job.topology_sources == ("config/topologies/default.yaml",)
    llama = sweep.by_output()["results/raw/transfer/llama70b_4sip/flows/single.json"]
    assert llama.topology_sources == ("config/topologies/default.yaml",
                                      "config/topologies/llama70b_4sip.yaml")


def test_snakemake_stops_before_any_job_with_one_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(mutate(
        lambda d: d["experiments"]["transfer"].update(sizes=[0]))))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    errors = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "error" in ln.lower()]
    assert len(errors) == 1, proc.stdout + proc.stderr
    assert "experiments.transfer.sizes[0]" in errors[0]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_a_batched_job_writes_what_its_points_would_alone(tmp_path):
    """A batch runs its points one after another in one process; each point record is
    byte-identical to the record of the point simulated as its own job."""
    from kernbench.experiments.job import run_job
    from kernbench.fileio import dumps_pretty

    topo = str(ROOT / "config/topologies/small_2x2.yaml")
    shapes = [["tiny-a", {"name": "tiny-a", "m": 1, "k": 256, "n": 64, "group": "decode"}],
              ["tiny-b", {"name": "tiny-b", "m": 64, "k": 128, "n": 64, "group": "decode"}]]
    variant = {"kernel": "composite", "pes": 1}
    batch = run_job("gemm", "small_2x2", topo, "decode-shapes", "composite",
                    {"workloads": shapes, "variant": variant})
    assert batch["workload"] == "decode-shapes" and len(batch["points"]) == 2
    for (wid, params), point in zip(shapes, batch["points"], strict=True):
        alone = run_job("gemm", "small_2x2", topo, wid, "composite",
                        {"workload": params, "variant": variant})
        assert dumps_pretty(point) == dumps_pretty(alone)


def test_batch_points_false_gives_every_point_its_own_job(tmp_path):
    path = tmp_path / "unbatched.yaml"
    path.write_text(yaml.safe_dump(mutate(lambda d: d.update(batch_points=False))))
    sweep = load_sweep_file(path, ROOT)
    transfer = [j for j in sweep.jobs if j.experiment == "transfer" and not j.setting]
    assert len(transfer) == 2 * 16 * 2 and all("workload" in j.slice for j in transfer)
    assert len([j for j in sweep.jobs if j.experiment == "gemm" and not j.setting]) == 24 * 7
    # a sensitivity run that names a batch ("decode-shapes") still finds its points
    reruns = [j for j in sweep.jobs if j.experiment == "gemm" and j.setting == "array-w4"]
    assert len(reruns) == 10 + 10 + 10  # composite: decode and prefill; held-a: decode
