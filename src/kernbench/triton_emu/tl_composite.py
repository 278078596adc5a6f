"""``tl.composite``: lowering a composite request into a flat-ops command (docs/tl-api.md).

The kernel names a head op (a GEMM or an elementwise MATH op), optional
prologue recipes and epilogues; this turns them into one ``CompositeCmd``
(recipes expanded, the recipe's primary output bound to the GEMM's ``a``,
read-write handles collected), checks the descriptor cap, and returns the
output handle. Mixed into :class:`TLContext`.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernbench.components.numerics import ALL_MATH_OPS, UNARY
from kernbench.components.tiling import STREAM
from kernbench.errors import KernelMisuse, KernelTypeError
from kernbench.isa.commands import CompositeCmd
from kernbench.isa.handles import TensorHandle
from kernbench.isa.ops import OpSpec, Scope
from kernbench.triton_emu import tl_recipes

EPILOGUE_OPS = {"bias": ("bias",), "scale": ("factor",), "add": ("other",), "mul": ("other",),
                "relu": (),
                "gelu": (), "silu": ()}
_SCOPES = {"k_tile": Scope.K_TILE, "output_tile": Scope.OUTPUT_TILE, "kernel": Scope.KERNEL}
_TENSOR_FIELDS = {"bias", "other"}  # epilogue fields that name tensors; the rest are numbers
STATIONARY = ("b", "a", "auto")  # the MAC array holds B (weights), A, or the cheaper of the two


def check_stationary(verb: str, stationary) -> None:
    if stationary not in STATIONARY:
        raise KernelMisuse(f"{verb}: stationary must be one of {', '.join(STATIONARY)}, "
                           f"got {stationary!r}")


def check_tile_shape(tile_shape) -> None:
    if tile_shape is None or tile_shape == STREAM:
        return
    if (not isinstance(tile_shape, tuple) or len(tile_shape) != 3
            or not all(isinstance(v, int) and v > 0 for v in tile_shape)):
        raise KernelMisuse(f"tl.composite: tile_shape must be None, {STREAM!r} or three "
                           f"positive ints (m, k, n), got {tile_shape!r}")


class CompositeMixin:
    def composite(self, op: str = "gemm", a: TensorHandle | None = None,
                  b: TensorHandle | None = None, out: TensorHandle | None = None,
                  out_ptr: int | None = None, math_op: str | None = None,
                  epilogue: Sequence[dict | OpSpec] | None = None,
                  prologue: Sequence[dict] | None = None, acc_dtype: str = "f32",
                  out_dtype: str | None = None, tile_shape: tuple[int, int, int] | str | None = None,
                  stationary: str = "b") -> TensorHandle:
        """Issue a tiled composite and return its output handle (non-blocking).
        ``stationary``: the operand the MAC array holds in each GEMM supertile ("b",
        "a" or "auto": the scheduler takes the cheaper one per supertile); ``tile_shape``:
        the GEMM's supertile, None for the scheduler's, ``"stream"`` for large weight
        tiles (``pe.scheduler.stream_tile_kb``) when few rows meet a whole weight."""
        check_stationary("tl.composite", stationary)
        check_tile_shape(tile_shape)
        pro_ops, rw, primary = self._prologue(prologue)
        if op == "gemm":
            head = self._gemm_head(a, b, primary, out, out_ptr, out_dtype or acc_dtype,
                                   stationary)
        elif op == "math":
            head = self._math_head(math_op, a, out, out_ptr, out_dtype)
        else:
            raise KernelMisuse(f"tl.composite op must be 'gemm' or 'math', got {op!r}")
        out = head.out
        epi_ops = [self._epilogue(item, out) for item in epilogue or ()]
        ops = tuple(pro_ops) + (head,) + tuple(epi_ops)
        if sum(1 for o in ops if o.kind == "gemm") > 1:
            raise KernelMisuse("a composite may hold at most one GEMM op")
        accumulate = any(o.kind == "add" and o.operands.get("other") is out for o in epi_ops)
        if accumulate and out not in rw:
            rw.append(out)
        cmd = CompositeCmd(ops, tuple(rw), tile_shape)
        self.cost_model.check_composite(cmd.logical_bytes)
        comp = self._emit(cmd)
        for h in (out, *rw):  # everything the composite writes is pending until it ends
            h.pending = comp
        return out

    def _prologue(self, prologue) -> tuple[list[OpSpec], list[TensorHandle], TensorHandle | None]:
        """The prologue recipes expanded: (ops, read-write handles, primary output)."""
        pro_ops: list[OpSpec] = []
        rw: list[TensorHandle] = []
        primary = None
        for item in prologue or ():
            self._check(*(v for v in (item.values() if isinstance(item, dict) else ())
                          if isinstance(v, TensorHandle)))
            ops, item_rw, item_primary = tl_recipes.expand(item, self._alloc)
            pro_ops += ops
            rw += [h for h in item_rw if h not in rw]
            if item_primary is not None:
                primary = item_primary
        return pro_ops, rw, primary

    def _gemm_head(self, a, b, primary, out, out_ptr, out_dtype: str, stationary: str) -> OpSpec:
        """The head GEMM (``a`` bound to the prologue's primary output, if any)."""
        if primary is not None:
            if a is not None:
                raise KernelMisuse("auto-bind conflict: the prologue recipe's primary output "
                                   "binds the GEMM's 'a'; do not pass a= as well")
            a = primary
        if a is None or b is None:
            raise KernelMisuse("tl.composite(op='gemm') needs a and b")
        self._check(a, b)
        if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
            raise KernelMisuse(f"composite gemm shapes do not chain: {a.shape} x {b.shape}")
        M, K, N = a.shape[0], a.shape[1], b.shape[1]
        out = self._composite_out(out, out_ptr, (M, N), out_dtype)
        extra = {"m": M, "k": K, "n": N}
        if stationary != "b":  # a descriptor flag; the default costs no byte
            extra["stationary"] = stationary
        return OpSpec("gemm", Scope.KERNEL, {"a": a, "b": b}, extra, out)

    def _math_head(self, math_op, a, out, out_ptr, out_dtype) -> OpSpec:
        """The head elementwise op, streamed in chunks (contiguous HBM operands only)."""
        if math_op not in ALL_MATH_OPS or math_op not in UNARY:
            raise KernelMisuse(f"composite math_op must be an elementwise unary op "
                               f"({', '.join(sorted(UNARY))}), got {math_op!r}")
        if a is None:
            raise KernelMisuse("tl.composite(op='math') needs a")
        self._check(a)
        out = self._composite_out(out, out_ptr, a.shape, out_dtype or a.dtype)
        for h in (a, out):
            if h.space == "hbm" and (h.transposed or h.row_stride not in (None, h.shape[-1])):
                raise KernelMisuse(f"a math composite streams its operands in chunks, so an "
                                   f"HBM operand must be contiguous, got {h}")
        return OpSpec(math_op, Scope.KERNEL, {"a": a}, {}, out)

    def _composite_out(self, out, out_ptr, shape, dtype) -> TensorHandle:
        if out is not None and out_ptr is not None:
            raise KernelMisuse("pass either out= or out_ptr=, not both")
        if out is not None:
            self._check(out)
            if tuple(out.shape) != tuple(shape):
                raise KernelMisuse(f"composite out has shape {out.shape}, expected {shape}")
            return out
        if out_ptr is not None:
            return self.ref(out_ptr, shape, dtype)
        return self._alloc(tuple(shape), dtype)

    def _epilogue(self, item: dict | OpSpec, out: TensorHandle) -> OpSpec:
        if isinstance(item, OpSpec):
            return item
        if not isinstance(item, dict) or "op" not in item:
            raise KernelMisuse(f"epilogue items are dicts with an 'op', got {item!r}")
        kind = item["op"]
        if kind not in EPILOGUE_OPS:
            raise KernelMisuse(f"unknown epilogue op {kind!r} (allowed: {', '.join(EPILOGUE_OPS)})")
        scope_name = item.get("scope", "output_tile")
        if scope_name not in _SCOPES:
            raise KernelMisuse(f"epilogue scope must be one of {', '.join(_SCOPES)}, got {scope_name!r}")
        needed = EPILOGUE_OPS[kind]
        missing = [f for f in needed if f not in item]
        if missing:
            raise KernelMisuse(f"epilogue {kind!r} needs field(s) {missing}")
        if len(item) > len(needed) + 1 + ("scope" in item):
            unknown = set(item) - {"op", "scope", *needed}
            raise KernelMisuse(f"epilogue {kind!r} got unknown field(s) {sorted(unknown)}")
        if scope_name == "kernel" and out.space != "tcm":
            raise KernelMisuse(f"a kernel-scope epilogue ({kind!r}) runs once over the whole "
                               f"output, which must then be in TCM; use scope 'output_tile' "
                               f"for an output in HBM")
        operands, extra = {}, {}
        for f in needed:
            value = item[f]
            if f in _TENSOR_FIELDS:
                if not isinstance(value, TensorHandle):
                    raise KernelTypeError(f"epilogue {kind!r} field {f!r} must be a tensor "
                                          f"handle, got {type(value).__name__}")
                self._check(value)
                operands[f] = value
            else:
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise KernelTypeError(f"epilogue {kind!r} field {f!r} must be a number, "
                                          f"got {type(value).__name__}")
                extra[f] = value
        return OpSpec(kind, _SCOPES[scope_name], operands, extra)


