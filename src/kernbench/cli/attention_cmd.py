"""``kernbench attention``: one GQA attention layer on a whole system, its head shape
(KV heads, query heads per KV head, head dimension) read from a model file."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("attention", help="run one fused GQA attention layer (decode, prefill "
                                         "or a short-context mapping)")
    p.add_argument("--mode", required=True, help="decode | prefill | short")
    p.add_argument("--model", default="llama3-70b",
                   help="the heads' shape: llama3-8b | llama3-70b (default) | a Hugging Face "
                        "config.json or the same keys in YAML")
    p.add_argument("--topology", default="llama70b_4sip", help="topology file or name")
    p.add_argument("--context", type=int, required=True, help="KV tokens (prefill: also queries)")
    p.add_argument("--users", type=int, default=1, help="users in the batch, each its own KV")
    p.add_argument("--C", type=int, dest="C", help="CUBEs per KV head (decode 2, prefill 8)")
    p.add_argument("--P", type=int, dest="P", default=8, help="PEs per CUBE (default 8)")
    p.add_argument("--variant", default="opt3", help="decode pipelining: opt1 | opt2 | opt3")
    p.add_argument("--tile", type=int, help="KV tile in tokens (decode 1024, prefill 256, "
                                            "short 128)")
    p.add_argument("--q-rows", type=int, dest="q_rows",
                   help="query rows per block: prefill per CUBE head (default 128), short "
                        "prefill per PE (default 16)")
    p.add_argument("--mapping", default="A2", help="short context: A1 | A2 | A4 | B")
    p.add_argument("--tier", type=int, default=3, help="short context: 1 primitives, "
                                                       "2 GEMM composite, 3 + softmax_merge")
    p.add_argument("--phase", default="decode", help="short context: decode | prefill")
    p.add_argument("--stationary", default="auto",
                   help="operand the MAC array holds in decode and prefill GEMMs: b (K, V) | "
                        "a (Q, P) | auto (the cheaper per GEMM, the default)")
    p.add_argument("--data", action="store_true", help="data mode: compute real values")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (--data)")
    p.add_argument("--dump", metavar="OUT.npz", help="write the logical Q, K, V, O arrays "
                                                     "(needs --data)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead")
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto timeline")
    p.set_defaults(func=run, exit_at_once=True)


DEFAULT_C = {"decode": 2, "prefill": 8}


def _run(args, graph, shape, progress):
    from kernbench.errors import UsageError

    common = dict(users=args.users, data=args.data, seed=args.seed, shape=shape,
                  keep_records=bool(args.trace), progress=progress)
    if args.mode == "decode":
        from kernbench.experiments.gqa.decode_run import run_decode

        return run_decode(graph, args.context, C=args.C or DEFAULT_C["decode"], P=args.P,
                          variant=args.variant, tile=args.tile or 1024,
                          stationary=args.stationary, **common)
    if args.mode == "prefill":
        from kernbench.experiments.gqa.prefill_run import run_prefill

        return run_prefill(graph, args.context, C=args.C or DEFAULT_C["prefill"], P=args.P,
                           q_rows=args.q_rows or 128, tile=args.tile or 256,
                           stationary=args.stationary, **common)
    if args.mode == "short":
        from kernbench.experiments.gqa.short_run import run_short

        return run_short(graph, args.phase, args.context, mapping=args.mapping, tier=args.tier,
                         tile=args.tile or 128, q_rows=args.q_rows or 16, **common)
    raise UsageError(f"--mode must be decode, prefill or short, got {args.mode!r}")


def _check_fit(args, spec, model) -> None:
    """Decode and prefill give each KV head its own group of C CUBEs, the heads spread
    evenly over the SIPs: say in one line when the model's heads cannot be placed."""
    from kernbench.errors import UsageError
    from kernbench.geometry.groups import place_groups

    if args.mode not in DEFAULT_C:
        return
    C = args.C or DEFAULT_C[args.mode]
    try:
        place_groups(spec, model.num_key_value_heads, C, args.P)
    except ValueError as exc:
        raise UsageError(f"--C {C} --P {args.P} on topology {spec.name!r}: {exc} (--model "
                         f"{model.name}: {model.num_key_value_heads} KV heads, each on its own "
                         f"C CUBEs, spread evenly over {spec.sips.count} SIP(s))") from None


def run(args: argparse.Namespace) -> int:
    from kernbench.cli.common import check_output_path, resolve_topology
    from kernbench.cli.progress import Progress
    from kernbench.errors import UsageError
    from kernbench.experiments.gqa.common import Shape
    from kernbench.models import check_model_name, load_model
    from kernbench.topology import load_topology

    if args.dump and not args.data:
        raise UsageError("--dump needs --data (timing mode computes no values)")
    check_output_path("--dump", args.dump)
    check_output_path("--trace", args.trace)
    check_model_name(args.model)
    graph = load_topology(resolve_topology(args.topology))
    model = load_model(args.model)
    _check_fit(args, graph.spec, model)
    shape = Shape(heads=model.num_key_value_heads, G=model.group, d=model.head_dim)
    r = _run(args, graph, shape, None if args.json else Progress(sys.stderr))
    if args.dump:
        import numpy as np

        np.savez(args.dump, **r.arrays)
    if args.trace:
        from kernbench.sim_engine.chrome_trace import write_chrome_trace

        write_chrome_trace([(None, r.engine.op_log.records)], args.trace)
    doc = {"model": model.name, **r.summary()}
    out = sys.stdout
    if args.json:
        out.write(json.dumps(doc, sort_keys=True) + "\n")
        return 0
    knobs = ", ".join(f"{k}={v}" for k, v in r.params.items() if k not in ("kv_bytes", "flops"))
    out.write(f"# attention {r.mode} of {model.name} ({shape.heads} KV heads x G={shape.G} x "
              f"d={shape.d}) on {r.topology}: context {r.context}, users {r.users}, "
              f"{r.pes} PEs ({knobs})\n")
    out.write(f"latency {r.latency_ns / 1000:.3f} us   bound ({r.bound_kind}) "
              f"{r.bound_ns / 1000:.3f} us   gap {100 * r.gap:+.1f} %   "
              f"({100 * r.bound_ns / r.latency_ns:.1f} % of the bound)\n")
    array = r.phases.get("array_bound_ns")
    if array:
        out.write(f"# the array's own bound (both products of every KV tile of the busiest "
                  f"rank): {array / 1000:.3f} us, {array / r.bound_ns:.2f}x the KV bound\n")
    out.write("# op counts: " + ", ".join(f"{k} {v}" for k, v in r.families.items()) + "\n")
    out.write("# engine occupancy (% of the span, mean over PEs): " + ", ".join(
        f"{k} {v:.1f}" for k, v in r.occupancy.items()) + "\n")
    if r.max_error is not None:
        out.write(f"# data: max |O - numpy attention| = {r.max_error:.3g}\n")
    if args.dump:
        out.write(f"# arrays written to {args.dump}\n")
    if args.trace:
        out.write(f"# trace written to {args.trace}\n")
    return 0
