"""``kernbench experiments``: the registered experiments and the keys of their config blocks."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiments", help="list experiments, or the config keys of one",
                       description="Without NAME: every experiment the workflow can run. With "
                                   "NAME: the keys of its block experiments.NAME in the workflow "
                                   "config, with types and meanings (from its schema).")
    p.add_argument("name", nargs="?", help="an experiment name")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="import an experiment plugin module first (repeatable)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kernbench.experiments.registry import all_experiments, describe_keys, get, load_plugins

    load_plugins(args.plugin, "--plugin")
    if args.name is None:
        for exp in all_experiments():
            figs = ", ".join(exp.figures) or "-"
            whatif = "; takes whatif reruns" if exp.whatif else ""
            print(f"{exp.name:18s} {exp.title} (figures: {figs}{whatif})")
        return 0
    exp = get(args.name)
    print(f"experiments.{exp.name}: {exp.title}")
    for key, kind, text in describe_keys(exp):
        print(f"  {key:52s} {kind:28s} {text}")
    return 0
