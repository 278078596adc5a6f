"""The planner's formulas, written once in a syntax Python and JavaScript both read.

Each formula is an arithmetic expression over named quantities and the
functions ``ceil``, ``floor``, ``min``, ``max``. :func:`evaluate` computes it
in Python (a checked AST walk, no ``eval``); the results site emits the same
strings into its script, where the functions are bound to ``Math``. The CLI and
the page therefore cannot drift apart: there is one definition of each axis.
"""

from __future__ import annotations

import ast
import math

# name -> (expression, unit, what it means in plain English); evaluated in this order
FORMULAS: dict[str, tuple[str, str, str]] = {
    "N": ("layers * (2 * hidden * heads * d_head + 2 * hidden * kv_heads * d_head"
          " + 3 * hidden * ffn)", "parameters",
          "attention (Q, K, V, O) and FFN (gate, up, down) weights of all layers"),
    "W": ("N * b", "bytes", "weight bytes"),
    "pes": ("ceil(W / hbm_pe)", "PEs", "PEs whose HBM holds one copy of the weights (a replica)"),
    "kv_bpt": ("2 * kv_heads * d_head * b * layers", "bytes", "KV-cache bytes per token"),
    "free": ("pes * hbm_pe - W", "bytes", "HBM of a replica left after the weights"),
    "users_kv": ("floor(free / (kv_bpt * context))", "users",
                 "users whose KV cache at this context fits a replica"),
    "bw": ("pes * bw_pe", "bytes/s", "HBM bandwidth of a replica"),
    "t_w": ("W / bw", "s", "time to stream the weights once (at the HBM bound)"),
    "t_kv": ("context * kv_bpt / bw / eff", "s",
             "time to read one user's KV cache, at the measured attention efficiency"),
    "batch_tpot": ("max(0, floor((tpot - t_w) / t_kv))", "users",
                   "largest batch whose decode step fits the time-per-token target"),
    "batch": ("min(users_kv, batch_tpot)", "users", "batch one replica serves"),
    "t_step": ("t_w + batch * t_kv", "s", "decode step time at that batch"),
    "replicas": ("ceil(users / max(1, batch))", "replicas", "replicas for all users"),
    "systems": ("ceil(replicas / max(1, floor(system_pes / pes)))", "systems",
                "systems of this topology holding those replicas"),
}

_FUNCS = {"ceil": math.ceil, "floor": math.floor, "min": min, "max": max}
_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b}


def evaluate(expr: str, env: dict[str, float]) -> float:
    """Value of ``expr`` with the quantities in ``env``."""
    return _eval(ast.parse(expr, mode="eval").body, env)


def _eval(node, env):
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, env)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCS and not node.keywords):
        return _FUNCS[node.func.id](*(_eval(a, env) for a in node.args))
    raise ValueError(f"formula element {ast.dump(node)} is outside the shared syntax")


def names(expr: str) -> list[str]:
    """Quantities ``expr`` reads, in order of first use (for the substituted line)."""
    out: list[str] = []
    for node in ast.walk(ast.parse(expr, mode="eval")):
        if isinstance(node, ast.Name) and node.id not in _FUNCS and node.id not in out:
            out.append(node.id)
    return out


def evaluate_all(inputs: dict[str, float], only=None) -> dict[str, float]:
    """Every formula in order (or those in ``only``), each seeing the inputs and the
    results before it."""
    env = dict(inputs)
    for name, (expr, _, _) in FORMULAS.items():
        if only is None or name in only:
            env[name] = evaluate(expr, env)
    return env
