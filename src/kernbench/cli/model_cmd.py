"""``kernbench model``: one inference step of a whole model on a system (a decode step,
or the prefill of one prompt), with the per-layer breakdown, TPOT or TTFT, tokens/s and
the analytic prediction."""

from __future__ import annotations

import argparse
import json
import sys

PHASES = ("decode", "prefill")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="simulate one model step (decoder layers with tensor "
                                     "parallelism, embedding, LM head)")
    p.add_argument("--model", required=True, help="llama3-8b | llama3-70b | a Hugging Face "
                                                  "config.json or the same keys in YAML")
    p.add_argument("--topology", required=True, help="topology file or name")
    p.add_argument("--phase", required=True, help="decode | prefill")
    p.add_argument("--batch", type=int, required=True, help="decode: users, one new token "
                                                            "each; prefill: 1 (one prompt)")
    p.add_argument("--context", type=int, required=True, help="decode: tokens already in "
                                                              "each user's KV cache; prefill: "
                                                              "the prompt's tokens")
    p.add_argument("--layers", type=int, help="layers to simulate (default all; the rest "
                                              "count as the last simulated one)")
    p.add_argument("--tp", type=int, help="tensor-parallel ranks: k PEs of every CUBE "
                                          "(default every PE)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a topology key (dotted, repeatable), e.g. "
                        "fabric.sharing=fifo, the whole-model study's link model")
    p.add_argument("--capacity-factor", type=float, dest="capacity_factor",
                   help="MoE: an expert takes at most factor x tokens x top-k / experts "
                        "assignments, later ones are dropped (default experts / top-k: none)")
    p.add_argument("--moe-parallel", default="tp", dest="moe_parallel",
                   help="MoE: tp (every rank a column slice of every expert, combined by "
                        "the all-reduce) | ep (experts placed on rank groups, tokens "
                        "dispatched and combined by all-to-all)")
    p.add_argument("--moe-all-to-all", dest="moe_all_to_all", metavar="ALGORITHM",
                   help="MoE, --moe-parallel ep: the all-to-all algorithm of the dispatch and "
                        "combine (default: ccl.yaml's, a2a_hierarchical)")
    p.add_argument("--moe-placement", default="blocks", dest="moe_placement",
                   help="MoE, --moe-parallel ep: blocks (an expert on consecutive ranks, "
                        "experts dealt to SIPs then CUBEs) | strided (round-robin: every "
                        "expert spans every SIP)")
    p.add_argument("--skew", type=float, default=0.0,
                   help="MoE, timing mode: Zipf exponent of the routing over experts "
                        "(default 0: uniform)")
    p.add_argument("--simulate-every-piece", action="store_true", dest="every_piece",
                   help="simulate every all-reduce piece (default: a piece the size of one "
                        "already simulated on an idle system takes its span; docs/adr/0050)")
    p.add_argument("--simulate-every-block", action="store_true", dest="every_block",
                   help="simulate every row block of the projections (default: a launch of "
                        "many blocks on an idle system is simulated with 2 and 3 and counts "
                        "the rest by their difference; docs/adr/0057)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead")
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto timeline")
    p.add_argument("--data", action="store_true", help="data mode: compute real values")
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights (--data)")
    p.add_argument("--dump", metavar="OUT.npz", help="write x, the weights, the KV caches and "
                                                     "out (needs --data)")
    p.set_defaults(func=run, exit_at_once=True)


def check_fit(model, spec, batch: int, context: int) -> None:
    """Weights plus every user's KV cache must fit the system's HBM."""
    from kernbench.errors import UsageError
    from kernbench.experiments.llm.fit import footprint

    need, have = footprint(model, spec, batch, context)
    if need > have:
        raise UsageError(f"--model {model.name} --batch {batch} --context {context}: weights "
                         f"plus KV cache need {need} bytes, {spec.name!r} has {have} bytes "
                         f"of HBM")


def _overrides(pairs: list[str]) -> dict:
    """``--set KEY=VALUE`` pairs as topology overrides (values read as YAML scalars)."""
    import yaml

    from kernbench.errors import UsageError

    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UsageError(f"--set {pair!r}: expected KEY=VALUE with a dotted topology key, "
                             f"e.g. fabric.sharing=fifo")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise UsageError(f"--set {pair!r}: the value is not a YAML scalar") from None
    return out


def _moe_settings(args, dims):
    """The MoE routing options, checked against the model (one line each)."""
    from kernbench.errors import UsageError
    from kernbench.experiments.llm.moe_run import MoeSettings, check_settings
    from kernbench.models.routing import check_routing

    if args.data and args.skew:
        raise UsageError("--skew sets timing mode's routing; data mode routes by the router's "
                         "logits")
    if args.moe_all_to_all is not None:
        from kernbench.ccl import config as ccl_config

        known = ccl_config.configured_algorithms(collective="all_to_all")
        if args.moe_all_to_all not in known:
            raise UsageError(f"--moe-all-to-all {args.moe_all_to_all!r}: not an all-to-all "
                             f"algorithm (allowed: {', '.join(known)})")
        if args.moe_parallel != "ep":
            raise UsageError(f"--moe-all-to-all {args.moe_all_to_all}: applies to "
                             f"--moe-parallel ep only")
    if args.moe_placement != "blocks" and args.moe_parallel != "ep":
        raise UsageError(f"--moe-placement {args.moe_placement}: applies to --moe-parallel ep "
                         f"only")
    settings = MoeSettings(args.capacity_factor, args.skew, args.seed, args.moe_parallel,
                           args.moe_all_to_all, args.moe_placement)
    if dims.experts is not None:
        check_routing(dims.experts, dims.top_k, settings.factor(dims), args.skew)
    return check_settings(settings, dims)


def _check(args) -> None:
    from kernbench.cli.common import check_output_path
    from kernbench.errors import UsageError
    from kernbench.models import check_model_name

    check_model_name(args.model)
    if args.phase not in PHASES:
        raise UsageError(f"--phase must be decode or prefill, got {args.phase!r}")
    for name in ("batch", "context", "layers", "tp"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name} must be a positive integer, got {value}")
    if args.phase == "prefill" and args.batch != 1:
        raise UsageError(f"--batch {args.batch}: a prefill step runs one prompt (--batch 1)")
    from kernbench.experiments.llm.moe_layout import PARALLEL, PLACEMENTS

    for flag, value, allowed in (("--moe-parallel", args.moe_parallel, PARALLEL),
                                 ("--moe-placement", args.moe_placement, PLACEMENTS)):
        if value not in allowed:
            raise UsageError(f"{flag} must be one of {', '.join(allowed)}, got {value!r}")
    if args.dump and not args.data:
        raise UsageError("--dump needs --data (timing mode computes no values)")
    check_output_path("--dump", args.dump)
    check_output_path("--trace", args.trace)


def run(args: argparse.Namespace) -> int:
    from kernbench.cli.common import resolve_topology
    from kernbench.experiments.llm.mapping import Dims
    from kernbench.experiments.llm.study import step_function
    from kernbench.models import load_model
    from kernbench.topology import load_topology

    _check(args)
    model = load_model(args.model)
    dims = Dims.of(model)
    moe = _moe_settings(args, dims)
    graph = load_topology(resolve_topology(args.topology), _overrides(args.set))
    check_fit(model, graph.spec, args.batch, args.context)
    r = step_function(args.phase)(graph, dims, args.batch, args.context,
                                  layers=args.layers, tp=args.tp, data=args.data,
                                  seed=args.seed, model=model.name,
                                  keep_records=bool(args.trace), moe=moe,
                                  replay=not args.every_piece,
                                  count_blocks=not args.every_block)
    if args.dump:
        import numpy as np

        np.savez(args.dump, **r.arrays)
    if args.trace:
        from kernbench.sim_engine.chrome_trace import write_chrome_trace

        write_chrome_trace([(None, r.engine.op_log.records)], args.trace)
    if args.json:
        sys.stdout.write(json.dumps(r.record, sort_keys=True) + "\n")
        return 0
    _table(sys.stdout, r.record)
    for opt, path in (("arrays", args.dump), ("trace", args.trace)):
        if path:
            sys.stdout.write(f"# {opt} written to {path}\n")
    return 0


def _table(out, rec: dict) -> None:
    us = 1e-3
    pred = rec["analytic"]["layer_ns"]
    out.write(f"# {rec['phase']} step of {rec['model']} on {rec['topology']}: batch "
              f"{rec['batch']}, context {rec['context']}, tp {rec['tp']} ({rec['pes']} ranks), "
              f"attention C={rec['C']} P={rec['P']}, {rec['links']} links\n")
    out.write(f"{'per layer':<16}{'simulated us':>14}{'analytic us':>14}\n")
    for name, ns in rec["layer_ns"].items():
        bound = pred.get(name)
        out.write(f"{name:<16}{ns * us:>14.3f}"
                  f"{'' if bound is None else f'{bound * us:.3f}':>14}\n")
    total = sum(rec["layer_ns"].values())
    out.write(f"{'layer':<16}{total * us:>14.3f}{rec['analytic']['layer_total_ns'] * us:>14.3f}\n")
    out.write(f"{'exposed comm':<16}{rec['exposed_comm_ns'] * us:>14.3f}\n")
    n, total_layers = rec["simulated_layers"], rec["layers"]
    note = (f"{n} of {total_layers} layers simulated, the rest counted as the last"
            if n < total_layers else f"all {n} layers simulated")
    if rec["layer_spread"] is not None:
        note += f"; layers 2..{n} differ by {100 * rec['layer_spread']:.3f} %"
    out.write(f"# {note}\n")
    pieces = rec["collective"]
    if pieces["replayed_pieces"]:
        out.write(f"# all-reduce pieces: {pieces['simulated_pieces']} simulated, "
                  f"{pieces['replayed_pieces']} the span of an equal piece before them "
                  f"(--simulate-every-piece simulates them all)\n")
    blocks = rec["row_blocks"]
    if blocks["counted_blocks"]:
        out.write(f"# projection row blocks: {blocks['counted_launches']} launches simulated "
                  f"with 2 and 3 full blocks ({blocks['simulated_blocks']} blocks), "
                  f"{blocks['counted_blocks']} more counted as the difference "
                  f"(--simulate-every-block simulates them all)\n")
    out.write(f"embedding {rec['embedding_ns'] * us:.3f} us   LM head "
              f"{rec['lm_head_ns'] * us:.3f} us\n")
    what = "TPOT" if rec["phase"] == "decode" else "TTFT"
    out.write(f"step ({what}) {rec['step_ns'] * 1e-6:.4f} ms   analytic "
              f"{rec['analytic']['step_ns'] * 1e-6:.4f} ms   error "
              f"{100 * rec['analytic_error']:+.1f} %\n")
    if "mixture" in rec:
        moe = rec["mixture"]
        out.write(f"# MoE: {moe['experts']} experts, top {moe['top_k']}, {moe['parallel']}, "
                  f"routing by {moe['routing']} (skew {moe['skew']}), capacity factor "
                  f"{moe['capacity_factor']:g}: {moe['dropped']} of {moe['assignments']} "
                  f"assignments dropped\n")
    if rec["phase"] == "decode":
        out.write(f"tokens/s per user {rec['tokens_per_s_user']:.1f}   per system "
                  f"{rec['tokens_per_s_system']:.1f}\n")
    else:
        out.write(f"prompt tokens/s {rec['prefill_tokens_per_s']:.1f}\n")
