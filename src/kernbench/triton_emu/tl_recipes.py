"""Composite recipes: named op sequences TLContext expands into flat OpSpecs.

This is the compiler's knowledge: PE_SCHEDULER never imports
it and never sees a recipe name, only the expanded MATH ops. A recipe states
its operand contract (read-only or read-write), its intermediates, an
optional primary output (bound to the head GEMM's ``a``), and its micro-ops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kernbench.errors import KernelMisuse
from kernbench.isa.handles import TensorHandle
from kernbench.isa.ops import OpSpec, Scope


@dataclass(frozen=True)
class EngineOp:
    op_kind: str
    dst: str
    src: str | None = None
    src_a: str | None = None
    src_b: str | None = None
    src_c: str | None = None
    reduce_axis: int | None = None
    bcast_axis: int | None = None


@dataclass(frozen=True)
class RecipeDescriptor:
    operands: dict[str, str]  # name -> "R" | "RW"
    scratch: dict[str, Callable[[dict[str, TensorHandle]], tuple[tuple[int, ...], str]]]
    primary_out: str | None  # scratch slot auto-bound to the head GEMM's operand "a"
    engine_seq: tuple[EngineOp, ...]
    doc: str = field(default="")


def _col(ops):  # (G, 1) accumulator-shaped, f32
    return ((ops["s"].shape[0], 1), "f32")


def _rows(ops):  # one f32 per row of x
    return ((ops["x"].shape[0], 1), "f32")


RECIPES: dict[str, RecipeDescriptor] = {
    "softmax_merge": RecipeDescriptor(
        operands={"s": "R", "m": "RW", "l": "RW", "O": "RW"},
        scratch={
            "m_loc": _col, "m_new": _col, "corr": _col, "l_loc": _col,
            "P": lambda ops: (ops["s"].shape, ops["s"].dtype),
        },
        primary_out="P",
        engine_seq=(
            EngineOp("rmax", dst="m_loc", src="s", reduce_axis=-1),
            EngineOp("max_elem", dst="m_new", src_a="m", src_b="m_loc"),
            EngineOp("exp_diff", dst="corr", src_a="m", src_b="m_new"),
            EngineOp("exp_diff", dst="P", src_a="s", src_b="m_new", bcast_axis=0),
            EngineOp("rsum", dst="l_loc", src="P", reduce_axis=-1),
            EngineOp("fma", dst="l", src_a="l", src_b="corr", src_c="l_loc"),
            EngineOp("mul_bcast", dst="O", src_a="O", src_b="corr", bcast_axis=1),
            EngineOp("copy", dst="m", src="m_new"),
        ),
        doc="online-softmax update of (m, l, O) by a score tile s; emits P = exp(s - m_new)",
    ),
    "rmsnorm": RecipeDescriptor(
        operands={"x": "R", "w": "R", "eps": "R", "inv_d": "R", "y": "RW"},
        scratch={
            "sq": lambda ops: (ops["x"].shape, "f32"),
            "ss": _rows, "den": _rows, "rms": _rows,
            "xn": lambda ops: (ops["x"].shape, "f32"),
        },
        primary_out="y",
        engine_seq=(
            EngineOp("mul", dst="sq", src_a="x", src_b="x"),
            EngineOp("rsum", dst="ss", src="sq", reduce_axis=-1),
            EngineOp("fma", dst="den", src_a="ss", src_b="inv_d", src_c="eps"),
            EngineOp("sqrt", dst="rms", src="den"),
            EngineOp("div", dst="xn", src_a="x", src_b="rms"),
            EngineOp("mul", dst="y", src_a="xn", src_b="w"),
        ),
        doc="y = x / sqrt(mean(x^2, -1) + eps) * w per row of x (f32 math, y in its own "
            "dtype); y is bound to the GEMM's a",
    ),
}


_TEMPLATES: dict[int, list] = {}


def _template(recipe: RecipeDescriptor) -> list:
    """(kind, operand (field, slot) pairs, extra, dst slot) per micro-op, built once."""
    t = _TEMPLATES.get(id(recipe))
    if t is None:
        t = _TEMPLATES[id(recipe)] = [
            (e.op_kind,
             tuple((k, getattr(e, k)) for k in ("src", "src_a", "src_b", "src_c")
                   if getattr(e, k) is not None),
             tuple((k, getattr(e, k)) for k in ("reduce_axis", "bcast_axis")
                   if getattr(e, k) is not None),
             e.dst)
            for e in recipe.engine_seq]
    return t


def expand(item: dict, alloc: Callable[[tuple[int, ...], str], TensorHandle]
           ) -> tuple[list[OpSpec], list[TensorHandle], TensorHandle | None]:
    """Expand one prologue item into (ops, read-write handles, primary output)."""
    name = item.get("op")
    if name not in RECIPES:
        raise KernelMisuse(f"unknown prologue recipe {name!r} (known: {', '.join(sorted(RECIPES))})")
    recipe = RECIPES[name]
    extra_keys = set(item) - {"op"} - set(recipe.operands)
    if extra_keys:
        raise KernelMisuse(f"recipe {name!r} got unknown operand(s) {sorted(extra_keys)} "
                         f"(expects {', '.join(recipe.operands)})")
    slots: dict[str, TensorHandle] = {}
    for op_name in recipe.operands:
        h = item.get(op_name)
        if not isinstance(h, TensorHandle):
            raise KernelMisuse(f"recipe {name!r} needs operand {op_name!r} as a tensor handle")
        if h.space != "tcm":
            raise KernelMisuse(f"recipe {name!r} operand {op_name!r} must be TCM-resident "
                             f"(prologue MATH operands cannot stream from HBM), got {h}")
        slots[op_name] = h
    for slot, shape_fn in recipe.scratch.items():
        shape, dtype = shape_fn(slots)
        slots[slot] = alloc(shape, dtype)
    ops = [OpSpec(kind, Scope.KERNEL, {k: slots[v] for k, v in operands}, dict(extra), slots[dst])
           for kind, operands, extra, dst in _template(recipe)]
    rw = [slots[n] for n, mode in recipe.operands.items() if mode == "RW"]
    primary = slots[recipe.primary_out] if recipe.primary_out else None
    return ops, rw, primary
