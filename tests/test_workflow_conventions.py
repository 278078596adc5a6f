"""Workflow conventions: lint, documented config keys, lean simulation jobs."""

from __future__ import annotations

import os
import subprocess
import sys

import yaml

from .workflow_helpers import ROOT, snakemake


def schema_keys(schema: dict, prefix: str = "") -> list[str]:
    keys = []
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}{name}"
        keys.append(path)
        keys += schema_keys(sub, path + ".")
        extra = sub.get("additionalProperties")
        if isinstance(extra, dict) and extra.get("properties"):
            keys += schema_keys(extra, path + ".<id>.")
    return keys


def test_every_config_key_is_documented():
    """Base keys in config/README.md; each experiment's keys in its own schema, whose
    descriptions `kernbench experiments NAME` prints."""
    from kernbench.experiments.registry import all_experiments, describe_keys

    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    readme = (ROOT / "config" / "README.md").read_text()
    keys = schema_keys(schema)
    assert {"topologies", "experiments", "plugins", "report.engine"} <= set(keys)
    missing = [k for k in keys if f"`{k}`" not in readme]
    assert not missing, f"config/README.md does not document: {missing}"
    for exp in all_experiments():
        rows = describe_keys(exp)
        assert len(rows) > 2
        bare = [key for key, _, text in rows if not text.strip()]
        assert not bare, f"{exp.name}: config keys without a description: {bare}"


def test_lint_is_clean():
    proc = snakemake(ROOT, "--lint", "--configfile", "config/smoke.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations" in proc.stdout + proc.stderr


def test_simulation_jobs_do_not_import_pandas_or_matplotlib(tmp_path):
    code = (
        "import sys\n"
        "from kernbench.cli.main import main\n"
        "rc = main(['job', '--experiment', 'transfer', '--topology-id', 't', '--topology-file',"
        f" {str(ROOT / 'config/topologies/small_2x2.yaml')!r}, '--workload-id', 'w',"
        " '--variant-id', 'v', '--slice',"
        " '{\"workload\": {\"flow\": \"h2d-1hop\", \"sizes\": [4096]},"
        " \"variant\": {\"concurrent_flows\": 1}}',"
        f" '--out', {str(tmp_path / 'r.json')!r}])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'matplotlib'))\n"
        "print(rc, heavy)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.stdout.strip() == "0 []", proc.stdout + proc.stderr


def test_profiles_and_catalog_metadata_parse():
    for name in ("local", "slurm", "cluster-generic"):
        cfg = yaml.safe_load((ROOT / f"workflow/profiles/{name}/config.yaml").read_text())
        assert cfg.get("rerun-incomplete") is True
    slurm = yaml.safe_load((ROOT / "workflow/profiles/slurm/config.yaml").read_text())
    assert slurm["executor"] == "slurm"
    assert {"aggregate", "report_generated", "paper"} <= set(slurm["set-resources"])
    assert "simulate" not in slurm["set-resources"]  # it would replace each job's estimate
    assert (ROOT / "profiles/default").resolve() == (ROOT / "workflow/profiles/local")
    catalog = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())
    assert catalog["usage"]["software-stack-deployment"]["conda"] is True
    env = yaml.safe_load((ROOT / "workflow/envs/kernbench.yaml").read_text())
    assert any(str(d).startswith("tectonic") for d in env["dependencies"])


def test_jobs_share_bytecode_only_when_the_environment_forbids_writing_it(monkeypatch, tmp_path):
    from kernbench.experiments.checkout import share_bytecode

    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    assert share_bytecode(tmp_path / "pyc") is False  # bytecode is written anyway
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert share_bytecode(tmp_path / "pyc") is True
    assert os.environ["PYTHONPYCACHEPREFIX"] == str((tmp_path / "pyc").resolve())
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # a prefix chosen by the user wins
    assert share_bytecode(tmp_path / "other") is False
    assert os.environ["PYTHONPYCACHEPREFIX"] == str((tmp_path / "pyc").resolve())
