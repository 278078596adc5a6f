"""GEMM kernels C[M, N] = A[M, K] @ B[K, N] (f16 or bf16 inputs, f32 accumulation and output).

Pointers are virtual byte addresses of row-major matrices. Three variants:

* ``gemm_primitive``: per supertile, load the A and B tiles, ``tl.dot`` into an
  accumulator, store the output tile; every load is consumed at once, so the
  DMA latency and PE_CPU dispatch are on the critical path.
* ``gemm_prefetch``: the same loop with the next step's tiles loaded into a
  second pair of buffers while the current step computes (lazy ``tl.load``).
* ``gemm_composite``: one ``tl.composite(op="gemm")``; PE_SCHEDULER tiles and
  pipelines it, the CPU issues one descriptor.
"""

from __future__ import annotations

F32 = 4


def _output_tiles(M: int, K: int, N: int, tile: tuple[int, int, int]):
    """(m0, n0, m, n, [(k0, k), ...]) for each output tile, row-major."""
    tm, tk, tn = tile
    ks = [(k0, min(tk, K - k0)) for k0 in range(0, K, tk)]
    for m0 in range(0, M, tm):
        for n0 in range(0, N, tn):
            yield m0, n0, min(tm, M - m0), min(tn, N - n0), ks


def gemm_primitive(a: int, b: int, c: int, M: int, K: int, N: int, *, tl, tile=None,
                   dtype: str = "f16", stationary: str = "b") -> None:
    tile = tile or tl.supertile(K, N)  # the scheduler's tile: same DMA sizes as the composite
    e = tl.element_size(dtype)
    for m0, n0, m, n, ks in _output_tiles(M, K, N, tile):
        with tl.scratch_scope():
            acc = tl.zeros((m, n), "f32")
            for k0, k in ks:
                with tl.scratch_scope():
                    at = tl.load(a + (m0 * K + k0) * e, (m, k), dtype, row_stride=K)
                    bt = tl.load(b + (k0 * N + n0) * e, (k, n), dtype, row_stride=N)
                    tl.dot(at, bt, acc=acc, stationary=stationary)
            tl.store(c + (m0 * N + n0) * F32, acc, row_stride=N)


def gemm_prefetch(a: int, b: int, c: int, M: int, K: int, N: int, *, tl, tile=None,
                  dtype: str = "f16", stationary: str = "b") -> None:
    tile = tile or tl.supertile(K, N)
    e = tl.element_size(dtype)
    steps = [(m0, n0, k0, m, n, k) for m0, n0, m, n, ks in _output_tiles(M, K, N, tile)
             for k0, k in ks]
    shapes = {(m, k) for _, _, _, m, _, k in steps} | {(k, n) for _, _, _, _, n, k in steps}
    buffers = {(p, s): tl.zeros(s, dtype) for p in (0, 1) for s in sorted(shapes)}

    def issue(i: int):
        m0, n0, k0, m, n, k = steps[i]
        return (tl.load(a + (m0 * K + k0) * e, (m, k), dtype, row_stride=K,
                        out=buffers[(i % 2, (m, k))]),
                tl.load(b + (k0 * N + n0) * e, (k, n), dtype, row_stride=N,
                        out=buffers[(i % 2, (k, n))]))

    nxt = issue(0)
    i = 0
    for m0, n0, m, n, ks in _output_tiles(M, K, N, tile):
        with tl.scratch_scope():
            acc = tl.zeros((m, n), "f32")
            for _ in ks:
                cur = nxt
                if i + 1 < len(steps):
                    nxt = issue(i + 1)  # in flight while this step computes
                tl.dot(cur[0], cur[1], acc=acc, stationary=stationary)
                i += 1
            tl.store(c + (m0 * N + n0) * F32, acc, row_stride=N)


def gemm_composite(a: int, b: int, c: int, M: int, K: int, N: int, *, tl, epilogue=None,
                   tile=None, dtype: str = "f16", stationary: str = "b") -> None:
    out = tl.composite("gemm", a=tl.ref(a, (M, K), dtype), b=tl.ref(b, (K, N), dtype),
                       out_ptr=c, out_dtype="f32", epilogue=epilogue, tile_shape=tile,
                       stationary=stationary)
    tl.wait(out)


VARIANTS = {"primitive": gemm_primitive, "prefetch": gemm_prefetch, "composite": gemm_composite}
