"""``kernbench alltoall``: one all-to-all over a whole system, nccl-tests style."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("alltoall", help="run one all-to-all among every CUBE of every SIP")
    p.add_argument("--topology", default="default", help="topology file or name")
    p.add_argument("--algorithm", default=None,
                   help="all-to-all algorithm (kernbench/ccl/ccl.yaml's entries with "
                        "collective: all_to_all; default a2a_hierarchical)")
    p.add_argument("--bytes-per-pe", type=int, required=True, dest="bytes_per_pe",
                   help="bytes each rank sends in total (an equal block to every rank)")
    p.add_argument("--dtype", default="f16", help="f16 | f32 | bf16 | i32 (default f16)")
    p.add_argument("--buffer", default="hbm", help="where buffers live: tcm | sram | hbm")
    p.add_argument("--data", action="store_true", help="data mode: move real bytes")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (--data)")
    p.add_argument("--dump", metavar="OUT.npz",
                   help="write every rank's input and output and the rank order (needs --data)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead")
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto timeline")
    p.set_defaults(func=run, exit_at_once=True)


def run(args: argparse.Namespace) -> int:
    from kernbench.cli.common import check_output_path, resolve_topology
    from kernbench.errors import UsageError
    from kernbench.topology import load_topology
    from kernbench.workloads.alltoall_run import check_arguments, run_alltoall

    if args.dump and not args.data:
        raise UsageError("--dump needs --data (timing mode moves no bytes)")
    check_output_path("--dump", args.dump)
    check_output_path("--trace", args.trace)
    graph = load_topology(resolve_topology(args.topology))
    check_arguments(graph.spec, args.algorithm, args.bytes_per_pe, args.dtype, args.buffer)
    r = run_alltoall(graph, args.algorithm, args.bytes_per_pe, dtype=args.dtype,
                     buffer=args.buffer, data=args.data, seed=args.seed,
                     keep_records=bool(args.trace))
    check = _data_check(r) if args.data else None
    _write_files(args, r)
    doc = _document(r, check)
    if args.json:
        sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")
    else:
        _write_report(sys.stdout, args, r, doc)
    return 0


def _data_check(r) -> dict:
    """How many ranks' outputs differ from numpy's all-to-all (bit for bit)."""
    import numpy as np

    from kernbench.workloads.alltoall_run import reference

    ref = reference(r.inputs, r.ranks)
    wrong = sum(not np.array_equal(r.outputs[k].view(np.uint8), ref[k].view(np.uint8))
                for k in ref)
    return {"ranks_differing": wrong}


def _write_files(args: argparse.Namespace, r) -> None:
    """The ``--dump`` arrays (bf16 widened to f32: numpy has no bf16) and ``--trace``."""
    if args.dump:
        import numpy as np

        arrays = {k: (v.astype(np.float32) if r.dtype == "bf16" and k != "ranks" else v)
                  for k, v in r.dump_arrays().items()}
        np.savez(args.dump, **arrays)
    if args.trace:
        from kernbench.sim_engine.chrome_trace import write_chrome_trace

        write_chrome_trace([(None, r.engine.op_log.records)], args.trace)


def _document(r, check: dict | None) -> dict:
    """The run as one JSON document (``--json``)."""
    from kernbench.cli.common import collective_document

    doc = collective_document(r, len(r.ranks))
    if check is not None:
        doc["check"] = check
    return doc


def _write_report(out, args: argparse.Namespace, r, doc: dict) -> None:
    """The nccl-tests style text report (busbw = algbw (n - 1) / n)."""
    from kernbench.cli.common import write_collective_report
    from kernbench.workloads.alltoall_run import NCCL_HEADER

    check = (f"# data: {doc['check']['ranks_differing']} of {len(r.ranks)} ranks differ "
             f"from numpy's all-to-all" if "check" in doc else None)
    write_collective_report(out, r, NCCL_HEADER, f"# all_to_all {r.algorithm} on {r.topology}: "
                            f"{len(r.ranks)} ranks, buffers in {r.buffer}", check, args)
