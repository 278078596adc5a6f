"""The MoE FFN with expert parallelism: tokens travel to their experts and back by
all-to-all (``ExpertLayout`` "ep"; ``moe_run`` is the tensor-parallel one).

Each token has an owner rank (tokens dealt out over the ranks in equal blocks). After
the router (on every rank, as in ``tp``) and the host's routing, a layer runs:

1. ``pack``: each owner copies the normalised rows it sends into its send buffer, by
   destination: a row per (token, expert, rank holding a slice of that expert);
2. ``dispatch``: an uneven all-to-all carries them (``AllToAllBackend``, sizes from
   the routing);
3. ``experts``: each rank runs its expert slices over the rows it received and scales
   them by their routing weights, in the order they came;
4. ``combine``: the transposed all-to-all brings every result row back to its owner;
5. ``unpack``: each owner adds its tokens' rows to their residual; the layer's
   ``allreduce_ffn`` then gathers every token on every rank (the others write zeros).
"""

from __future__ import annotations

from kernbench.experiments.llm.moe_run import MoeFfn, expert_rows
from kernbench.experiments.llm.tensors import ptr
from kernbench.kernels.moe import moe_expert_rows, moe_pack
from kernbench.runtime_api.all_to_all import AllToAllBackend

PARTS = ("router", "pack", "dispatch", "experts", "combine", "unpack")


def moe_ffn(layer, settings) -> MoeFfn:
    """The MoE FFN of ``settings.parallel``."""
    return (EpMoeFfn if settings.parallel == "ep" else MoeFfn)(layer, settings)


class EpMoeFfn(MoeFfn):
    def __post_init__(self) -> None:
        super().__post_init__()
        lay = self.layer
        ranks = lay.m.ranks
        T, R = lay.T, len(ranks)
        self.owner = [ranks[t * R // T] for t in range(T)]
        self.a2a = AllToAllBackend(lay.ctx, self.settings.all_to_all, pes=tuple(range(lay.m.k)))
        self.parts: dict[str, float] = {}
        self.away = self.kept = 0  # kept assignments whose expert is on another SIP; all
        rows = T * lay.dims.top_k * self.layout.group  # at most, on one rank
        self.bufs = {name: lay.place.per_rank(f"moe_{name}", (rows * lay.dims.D,), "f16")
                     for name in ("send", "recv", "ret", "back")}

    def run(self, w, h: dict, partial: dict, rows: int) -> None:
        lay = self.layer
        m, D = lay.m, lay.dims.D
        env = lay.ctx.engine.env
        stamps = [env.now]
        lists = self._lists(self._router(w, h, rows))
        stamps.append(env.now)
        lay.launch("moe_pack", moe_pack, {
            r: (ptr(self.normed, r), ptr(self.bufs["send"], r), D,
                tuple(t for t, _, _ in lists[r]["send"])) for r in m.ranks})
        stamps.append(env.now)
        sizes = {k: n * D for k, n in self._counts(lists).items()}
        dispatch = self.a2a.all_to_all_all(self.bufs["send"], self.bufs["recv"], sizes)
        stamps.append(env.now)
        block = expert_rows(lay.ctx.spec, D, self.layout.cols)
        lay.launch("moe_ep_experts", moe_expert_rows, {
            r: (ptr(self.bufs["recv"], r), ptr(self.bufs["ret"], r), D,
                self._slots(w, r, lists[r]["recv"]), block) for r in m.ranks})
        stamps.append(env.now)
        combine = self.a2a.all_to_all_all(self.bufs["ret"], self.bufs["back"],
                                          {(b, a): n for (a, b), n in sizes.items()})
        self.moved_ns = dispatch.predicted_ns + combine.predicted_ns
        stamps.append(env.now)
        self.combine(self.bufs["back"], h, partial, lambda r: lists[r]["owned"],
                     lambda r: True)
        stamps.append(env.now)
        self.parts = {name: b - a for name, a, b in zip(PARTS, stamps[:-1], stamps[1:],
                                                         strict=True)}

    def _lists(self, tokens: list[tuple]) -> dict:
        """Per rank: the rows it sends (token, expert, destination) in all-to-all order,
        the rows it receives (source, token, expert, weight) in arrival order, and, for
        each token it owns, the rows of the combine's output that belong to it."""
        ranks = self.layer.m.ranks
        index = {r: i for i, r in enumerate(ranks)}
        send: dict = {r: [] for r in ranks}
        for e, pairs in enumerate(tokens):
            for t, w in pairs:
                for q in self.layout.members(e):
                    send[self.owner[t]].append((t, e, ranks[q], w))
        recv: dict = {r: [] for r in ranks}
        for o in ranks:  # a rank's input is by destination; its output by source
            send[o].sort(key=lambda x: (index[x[2]], x[0], x[1]))
            for t, e, q, w in send[o]:
                recv[q].append((o, t, e, w))
        back: dict = {r: [] for r in ranks}  # the combine's output at each owner
        for q in ranks:
            for o, t, _, _ in recv[q]:
                back[o].append(t)
        self._count_away(send, tokens)
        return {r: {"send": [(t, e, q) for t, e, q, _ in send[r]], "recv": recv[r],
                    "owned": self._owned(r, back[r])} for r in ranks}

    def _owned(self, r, arrived: list[int]) -> tuple:
        """(token, rows of the combine's output) for every token ``r`` owns (a token whose
        every assignment was dropped has none: it keeps its residual)."""
        rows: dict[int, list[int]] = {t: [] for t in range(self.layer.T) if self.owner[t] == r}
        for i, t in enumerate(arrived):
            rows[t].append(i)
        return tuple((t, tuple(v)) for t, v in sorted(rows.items()))

    def _count_away(self, send: dict, tokens: list[tuple]) -> None:
        """Dispatched rows, and those whose destination is on another SIP than their
        owner (a row per rank of the expert's group: an expert may span SIPs)."""
        self.away += sum(1 for o, rows in send.items() for _, _, q, _ in rows if q[0] != o[0])
        self.kept += sum(len(rows) for rows in send.values())

    def _counts(self, lists: dict) -> dict:
        counts: dict = {}
        for o, x in lists.items():
            for _, _, q in x["send"]:
                counts[(o, q)] = counts.get((o, q), 0) + 1
        return counts

    def _slots(self, w, r, recv: list) -> tuple:
        """This rank's expert slices with the rows (row, weight, row) each takes: a result
        row goes where its input row was, the combine's input in the same order."""
        by_expert: dict[int, list] = {}
        for i, (_, _, e, wt) in enumerate(recv):
            by_expert.setdefault(e, []).append((i, wt, i))
        return self.slices(w, self.layer.m.ranks.index(r),
                           lambda e: tuple(by_expert.get(e, ())))

    def record(self, dims) -> dict:
        return {**super().record(dims), "all_to_all": self.a2a.name, "parts_ns": self.parts,
                "dispersion": self.away / self.kept if self.kept else 0.0}
