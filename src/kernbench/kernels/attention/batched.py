"""Batched decode over stacked users: their softmax states in one buffer, their KV
tiles swept a block of users at a time, their tree reduce one merge per edge.

Every user of a rank keeps (m, l, O) in rows ``u*G .. (u+1)*G`` of three stacked
buffers (:class:`Stacked`), so work that is elementwise over users is one command:
the log-sum-exp merge of a tree edge (``fused_reduce``, ADR 0052) and, with
``sweep_users`` > 1, opt3's softmax steps over a block of users whose KV blocks
hold as many tokens (:func:`sweep_blocks`, ADR 0053). The GEMMs stay per user (each
has its own K and V). Views of the stacked rows cost no command.
"""

from __future__ import annotations

from kernbench.kernels.attention.helpers import init_running, merge_into, view_as
from kernbench.kernels.attention.kv_tiles import F16, KvTiles, pair_buffers

F32 = 4


def rows(tl, x, r0: int, n: int):
    """Rows ``r0 .. r0+n`` of a contiguous 2-D TCM tensor, as a view (no command)."""
    return view_as(tl, x, r0 * x.shape[1], (n, x.shape[1]))


def _pieces(tl, x, G: int, users: int, d: int) -> list:
    """``x`` (``users`` x G rows) in messages of at most one user's O (G x d f32)."""
    per = max(1, d // x.shape[1])  # users per message
    if per >= users:
        return [x]
    return [rows(tl, x, u * G, min(per, users - u) * G) for u in range(0, users, per)]


class Stacked:
    """Every user's (m, l, O) stacked by rows, reduced once per tree edge."""

    def __init__(self, tl, r) -> None:
        self.tl, self.r, self.U = tl, r, len(r.users)
        self.state = init_running(tl, self.U * r.G, r.d)
        self.users = [tuple(rows(tl, x, u * r.G, r.G) for x in self.state)
                      for u in range(self.U)]
        # one inbox for every child's stacked state, reused edge after edge
        self.inbox = [tl.zeros((self.U * r.G, cols), "f32") for cols in (1, 1, r.d)] \
            if r.pe_children or r.cube_children else []

    def receive_merge(self, direction: str) -> None:
        tl, r = self.tl, self.r
        for buf in self.inbox:
            for piece in _pieces(tl, buf, r.G, self.U, r.d):
                tl.recv(direction, dst=piece)
        merge_into(tl, self.state, *self.inbox)

    def send(self, direction: str) -> None:
        for h in self.state:
            for piece in _pieces(self.tl, h, self.r.G, self.U, self.r.d):
                self.tl.send(direction, piece)

    def finish(self) -> None:
        """Normalise at the group root: one store when the users' outputs are adjacent."""
        tl, r = self.tl, self.r
        _, l, O = self.state
        step = r.G * r.d * F32
        if all(u.o == r.users[0].o + i * step for i, u in enumerate(r.users)):
            tl.store(r.users[0].o, O / l)
            return
        for u, (_, l_u, o_u) in zip(r.users, self.users, strict=True):
            tl.store(u.o, o_u / l_u)


# -- the sweep over blocks of users (ADR 0053) ----------------------------------------------
def users_per_sweep(scratch_bytes: int, users: int, G: int, d: int, tile: int) -> int:
    """How many users one block sweep can take within a kernel scratch of
    ``scratch_bytes``: each needs two (K^T, V) buffer pairs and its rows of the score,
    probability, P.V and correction buffers; the stacked states, the inbox and the
    queries are held besides, and 64 KiB are left for alignment."""
    held = users * G * ((d + 2) * F32 * 2 + d * F16)
    per_user = 4 * d * tile * F16 + G * F32 * (5 * tile + 2 * d + 2)
    return max(1, min(users, (scratch_bytes - held - 65536) // per_user))


def _blocks(users, n: int) -> list[range]:
    """Consecutive users in blocks of at most ``n`` whose KV blocks hold as many tokens."""
    out, first = [], 0
    for i in range(1, len(users) + 1):
        if i == len(users) or i - first == n or users[i].valid != users[first].valid:
            out.append(range(first, i))
            first = i
    return out


def sweep_blocks(tl, r, stacked: Stacked) -> None:
    """opt3's software pipeline, a block of ``r.sweep_users`` users at a time: each
    user's Q.K^T into its rows of one score buffer, the softmax steps once over the
    block, each user's P.V into its rows of one P.V buffer, O rescaled one tile late."""
    qs = [tl.load(u.q, (r.G, r.d), "f16") for u in r.users]
    n = min(r.sweep_users, len(r.users))
    bufs = [[pair_buffers(tl, r) for _ in range(2)] for _ in range(n)]
    for block in _blocks(r.users, n):
        with tl.scratch_scope():
            _BlockSweep(tl, r, stacked, qs, block, bufs).run()


class _BlockSweep:
    def __init__(self, tl, r, stacked: Stacked, qs: list, block: range, bufs: list) -> None:
        self.tl, self.r, self.qs, self.block = tl, r, qs, block
        self.kvs = [KvTiles(tl, r, r.users[i], 0, bufs[k]) for k, i in enumerate(block)]
        self.todo = self.kvs[0].todo
        self.n_rows = len(block) * r.G
        self.m, self.l, self.O = (rows(tl, x, block[0] * r.G, self.n_rows)
                                  for x in stacked.state)
        self.vs: dict[int, list] = {}

    def _gemm(self, a, b, out, epilogue=None) -> None:
        self.tl.composite("gemm", a=a, b=b, out=out, epilogue=epilogue,
                          tile_shape=self.r.tile_shape, stationary=self.r.stationary)

    def _with_rows(self, buf) -> tuple:
        """(buffer, each user's rows of it as views): made once per buffer, not per
        tile (a view is bookkeeping, no command)."""
        G = self.r.G
        return buf, [rows(self.tl, buf, k * G, G) for k in range(len(self.block))]

    def _issue(self, j: int, s_rows: list) -> None:
        """Tile j's Q.K^T of every user of the block, into its rows of a score buffer."""
        epi = [{"op": "scale", "factor": self.r.scale}]
        self.vs[j] = []
        for k, kv in enumerate(self.kvs):
            kt, v = kv.get(j)
            self._gemm(self.qs[self.block[k]], kt, s_rows[k], epi)
            self.vs[j].append(v)

    def run(self) -> None:
        tl, r, todo, n_rows = self.tl, self.r, self.todo, self.n_rows
        if not todo:
            return
        m, l = self.m, self.l
        # score buffers with each user's rows of them: (buffer, [views])
        full = [self._with_rows(tl.zeros((n_rows, r.tile), "f32")) for _ in range(2)]
        last_w = todo[-1][1]
        last = self._with_rows(tl.zeros((n_rows, last_w), "f32")) if last_w != r.tile else None
        scores = [last if (j == len(todo) - 1 and last is not None) else full[j % 2]
                  for j in range(len(todo))]
        self._issue(0, scores[0][1])
        pv = [self._with_rows(tl.zeros((n_rows, r.d), "f32")) for _ in range(2)]
        corrs = [tl.zeros((n_rows, 1), "f32") for _ in range(2)]
        for j in range(len(todo)):
            if j + 1 < len(todo):  # keeps the GEMM engine busy during this tile's softmax
                self._issue(j + 1, scores[j + 1][1])
            with tl.scratch_scope():
                m2 = tl.maximum(m, tl.max(scores[j][0], -1))
                p = tl.exp(scores[j][0] - m2)
                tl.copy_to(corrs[j % 2], tl.exp(m - m2))
                tl.copy_to(l, l * corrs[j % 2] + tl.sum(p, -1))
                for k, v in enumerate(self.vs.pop(j)):
                    self._gemm(rows(tl, p, k * r.G, r.G), v, pv[j % 2][1][k])
                tl.copy_to(m, m2)
            if j:
                self._fold(pv, corrs, j - 1)
        self._fold(pv, corrs, len(todo) - 1)

    def _fold(self, pv: list, corrs: list, j: int) -> None:
        with self.tl.scratch_scope():
            self.tl.copy_to(self.O, self.O * corrs[j % 2] + pv[j % 2][0])
