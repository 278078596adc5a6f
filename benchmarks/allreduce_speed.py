"""All-reduce simulation speed: the acceptance point and the whole study sweep.

    python benchmarks/allreduce_speed.py [--json] [--sweep] [--repeats R]

* ``point``: one all-reduce of 96 KiB per rank (1.5 MiB per SIP) on six SIPs of
  16 CUBEs (``sips6_torus``, 96 ranks), ring and the two other algorithms, in
  timing mode on one core: wall and CPU seconds of the simulation (engine and
  model; the topology load and route search are reported apart), alternating
  with a bare SimPy timeout loop whose event rate is reported next to it, so a
  run on a slower or faster machine can be scaled.
* ``--sweep``: the ``allreduce`` jobs of config/config.yaml run as the workflow
  runs them (one ``kernbench job`` process each) on two worker processes; wall
  seconds of the whole sweep and of each job.

Reports figures; asserts nothing. Results also go to benchmarks/out/allreduce_speed.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from engine_speed import bare_simpy  # noqa: E402 - the same baseline loop as the engine benchmark

from kernbench.experiments.allreduce.run import AllReduceSession  # noqa: E402
from kernbench.topology import load_topology  # noqa: E402

SIZE = 96 * 1024


def point(algorithm: str, repeats: int) -> dict:
    t0 = time.perf_counter()
    graph = load_topology(ROOT / "config" / "topologies" / "sips6_torus.yaml")
    load_s = time.perf_counter() - t0
    runs, bare = [], []
    for _ in range(repeats):
        bare.append(bare_simpy(300_000))
        session = AllReduceSession(graph, algorithm)  # a fresh engine: routes searched again
        w0, c0 = time.perf_counter(), time.process_time()
        r = session.run(SIZE)
        runs.append((time.perf_counter() - w0, time.process_time() - c0, r.time_ns))
    wall = statistics.median(x[0] for x in runs)
    return {"algorithm": algorithm, "bytes_per_rank": SIZE, "ranks": r.ranks,
            "wall_s": wall, "cpu_s": statistics.median(x[1] for x in runs),
            "topology_load_s": load_s, "simulated_us": runs[-1][2] / 1000,
            "bare_simpy_events_per_s": statistics.median(bare),
            "messages": r.op_counts.get("ipcq_send", 0),
            "wall_s_per_message_us": 1e6 * wall / max(1, r.op_counts.get("ipcq_send", 0))}


def sweep(workers: int = 2) -> dict:
    from kernbench.experiments.sweep import load_sweep_file

    with tempfile.TemporaryDirectory() as tmp:
        s = load_sweep_file(ROOT / "config" / "config.yaml", ROOT,
                            ROOT / "workflow" / "schemas" / "config.schema.yaml", tmp)
        jobs = [j for j in s.jobs if j.experiment == "allreduce"]
        kb = str(Path(sys.executable).with_name("kernbench"))

        def one(j):
            t = time.perf_counter()
            subprocess.run([kb, "job", "--experiment", j.experiment, "--topology-id",
                            j.topology, "--topology-file", j.topology_file, "--workload-id",
                            j.workload, "--variant-id", j.variant, "--slice", j.slice_json(),
                            "--out", j.output], check=True, cwd=ROOT, capture_output=True)
            return f"{j.topology}/{j.workload}", time.perf_counter() - t

        # longest first, as a scheduler that knew the costs would order them
        order = sorted(jobs, key=lambda j: (not j.workload.startswith("ring"),
                                            not j.workload.startswith("torus2d")))
        t0 = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            per_job = dict(pool.map(one, order))
        return {"jobs": len(jobs), "workers": workers, "wall_s": time.perf_counter() - t0,
                "job_s": dict(sorted(per_job.items()))}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--sweep", action="store_true", help="also time the whole study sweep")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    out = {"points": [point(a, args.repeats) for a in ("ring", "torus2d", "lrab_hierarchical")]}
    if args.sweep:
        out["sweep"] = sweep()
    (ROOT / "benchmarks" / "out").mkdir(exist_ok=True)
    (ROOT / "benchmarks" / "out" / "allreduce_speed.json").write_text(
        json.dumps(out, indent=2, sort_keys=True) + "\n")
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
    else:
        for p in out["points"]:
            print(f"{p['algorithm']:>18s}: {p['wall_s']:.2f} s wall ({p['cpu_s']:.2f} s CPU) for "
                  f"{p['messages']} messages, {p['wall_s_per_message_us']:.0f} us each; "
                  f"bare SimPy {p['bare_simpy_events_per_s'] / 1e6:.2f} M events/s")
        if "sweep" in out:
            print(f"sweep: {out['sweep']['jobs']} jobs on {out['sweep']['workers']} workers in "
                  f"{out['sweep']['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
