"""``kernbench allreduce``: one all-reduce over a whole system, nccl-tests style."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("allreduce", help="run one all-reduce on every CUBE of every SIP")
    p.add_argument("--topology", default="default", help="topology file or name")
    p.add_argument("--algorithm", required=True,
                   help="collective algorithm (one of kernbench/ccl/ccl.yaml's algorithms)")
    p.add_argument("--bytes-per-pe", type=int, required=True, dest="bytes_per_pe",
                   help="bytes of every rank's buffer")
    p.add_argument("--dtype", default="f16", help="f16 | f32 | bf16 | i32 (default f16)")
    p.add_argument("--buffer", default="hbm", help="where buffers live: tcm | sram | hbm")
    p.add_argument("--op", default="sum", help="sum | max | min | avg (default sum)")
    p.add_argument("--data", action="store_true", help="data mode: move and reduce real bytes")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (--data)")
    p.add_argument("--dump", metavar="OUT.npz",
                   help="write every rank's input and output (needs --data)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead")
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto timeline")
    p.set_defaults(func=run, exit_at_once=True)


def run(args: argparse.Namespace) -> int:
    from kernbench.cli.common import resolve_topology
    from kernbench.experiments.allreduce.run import run_allreduce
    from kernbench.topology import load_topology

    _check_arguments(args)
    graph = load_topology(resolve_topology(args.topology))
    r = run_allreduce(graph, args.algorithm, args.bytes_per_pe, dtype=args.dtype,
                      buffer=args.buffer, op=args.op, data=args.data, seed=args.seed,
                      keep_records=bool(args.trace))
    check = _data_check(r) if args.data else None
    _write_files(args, r)
    doc = _document(r, check)
    if args.json:
        sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")
    else:
        _write_report(sys.stdout, args, r, doc)
    return 0


def _check_arguments(args: argparse.Namespace) -> None:
    """The user's mistakes, found before the simulation runs."""
    from kernbench.cli.common import check_output_path
    from kernbench.errors import UsageError

    if args.dump and not args.data:
        raise UsageError("--dump needs --data (timing mode moves no bytes)")
    check_output_path("--dump", args.dump)
    check_output_path("--trace", args.trace)


def _data_check(r) -> dict:
    """The largest difference between any rank's result and numpy's reduction."""
    import numpy as np

    from kernbench.experiments.allreduce.run import reference

    ref = reference(r.inputs, r.op)
    worst = max(float(np.max(np.abs(o.astype(np.float64) - ref))) for o in r.outputs.values())
    return {"max_abs_error": worst}


def _write_files(args: argparse.Namespace, r) -> None:
    """The ``--dump`` arrays (bf16 widened to f32: numpy has no bf16) and ``--trace``."""
    if args.dump:
        import numpy as np

        arrays = {k: (v.astype(np.float32) if r.dtype == "bf16" else v)
                  for k, v in r.dump_arrays().items()}
        np.savez(args.dump, **arrays)
    if args.trace:
        from kernbench.sim_engine.chrome_trace import write_chrome_trace

        write_chrome_trace([(None, r.engine.op_log.records)], args.trace)


def _document(r, check: dict | None) -> dict:
    """The run as one JSON document (``--json``)."""
    from kernbench.cli.common import collective_document

    doc = collective_document(r, r.ranks, op=r.op)
    if check is not None:
        doc["check"] = check
    return doc


def _write_report(out, args: argparse.Namespace, r, doc: dict) -> None:
    """The nccl-tests style text report."""
    from kernbench.cli.common import write_collective_report
    from kernbench.experiments.allreduce.run import NCCL_HEADER

    check = (f"# data: max |result - numpy reduction| = {doc['check']['max_abs_error']:.3g}"
             if "check" in doc else None)
    write_collective_report(out, r, NCCL_HEADER, f"# all_reduce {r.algorithm} on {r.topology}: "
                            f"{r.ranks} ranks, buffers in {r.buffer}", check, args)
