"""Mixture-of-experts routing on the host: which experts each token goes to, with what
weight, which assignments a capacity factor drops, and where the experts live.

Pure numpy, shared by data mode (routes from the router's logits) and timing mode
(routes drawn from a seeded distribution), so both take the same decisions:

* ``top_k``: each token's ``k`` largest logits, ties to the lower expert index,
  weighted by a softmax over those ``k`` logits only (Mixtral's rule);
* ``sample_routes``: ``k`` distinct experts per token drawn without replacement
  from a Zipf law of exponent ``s`` over the experts (``s = 0``: uniform; expert 0
  the most popular);
* ``capacity`` / ``apply_capacity``: an expert takes at most
  ``ceil(factor * tokens * k / experts)`` assignments. Drop rule: assignments are
  served in token order, a token's choices in rank order (its first choice
  first); an expert that is full drops the rest. A dropped assignment adds
  nothing and the kept weights are not renormalised, so a token whose every
  choice was dropped passes through the layer on its residual alone;
* ``place_experts``: experts dealt to SIPs, then CUBEs, in blocks of equal size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kernbench.errors import UsageError


def check_routing(experts: int, k: int, factor: float = 1.0, skew: float = 0.0) -> None:
    """One line for each impossible setting: top-k against the experts, a capacity factor
    that is not positive, a negative skew."""
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= experts:
        raise UsageError(f"top-k {k!r}: each token goes to 1..{experts} experts "
                         f"(the model's num_local_experts)")
    if not (isinstance(factor, int | float) and factor > 0 and math.isfinite(factor)):
        raise UsageError(f"capacity factor {factor!r}: must be a positive number")
    if not (isinstance(skew, int | float) and skew >= 0 and math.isfinite(skew)):
        raise UsageError(f"routing skew {skew!r}: the Zipf exponent must be >= 0 "
                         f"(0: uniform)")


def top_k(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(experts [T, k], weights [T, k]) of router ``logits`` [T, E]: the k largest per
    token in descending order, equal logits to the lower expert index; the weights are
    a softmax over the selected logits."""
    z = np.asarray(logits, np.float64)
    check_routing(z.shape[1], k)
    order = np.argsort(-z, axis=1, kind="stable")[:, :k]  # stable: ties keep index order
    chosen = np.take_along_axis(z, order, axis=1)
    e = np.exp(chosen - chosen[:, :1])
    return order, e / e.sum(axis=1, keepdims=True)


def zipf_weights(experts: int, skew: float) -> np.ndarray:
    """P(expert i) proportional to (i + 1)^-skew."""
    w = (np.arange(experts, dtype=np.float64) + 1.0) ** -float(skew)
    return w / w.sum()


def sample_routes(tokens: int, experts: int, k: int, skew: float,
                  seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Timing-mode routes: (experts [T, k], weights [T, k]) with k distinct experts per
    token from a Zipf law of exponent ``skew``; weights are equal (1/k): timing does
    not depend on them."""
    check_routing(experts, k, 1.0, skew)
    rng = np.random.default_rng(seed)
    p = zipf_weights(experts, skew)
    idx = np.stack([rng.choice(experts, size=k, replace=False, p=p) for _ in range(tokens)]
                   ) if tokens else np.zeros((0, k), np.int64)
    return idx.astype(np.int64), np.full((tokens, k), 1.0 / k)


def capacity(tokens: int, experts: int, k: int, factor: float) -> int:
    """Assignments one expert takes at most: ceil(factor * tokens * k / experts)."""
    check_routing(experts, k, factor)
    return math.ceil(factor * tokens * k / experts)


def apply_capacity(routes: np.ndarray, experts: int, factor: float) -> np.ndarray:
    """Mask [T, k] of the assignments kept under the drop rule (module docstring)."""
    T, k = routes.shape
    cap = capacity(T, experts, k, factor)
    taken = np.zeros(experts, np.int64)
    keep = np.zeros((T, k), bool)
    for t in range(T):
        for j in range(k):
            e = routes[t, j]
            if taken[e] < cap:
                taken[e] += 1
                keep[t, j] = True
    return keep


@dataclass(frozen=True)
class Placement:
    """Which SIP and CUBEs hold each expert."""

    sip: tuple[int, ...]  # expert -> its SIP
    cubes: tuple[tuple[int, ...], ...]  # expert -> the CUBEs of that SIP holding it


def place_experts(experts: int, sips: int, cubes_per_sip: int) -> Placement:
    """Experts dealt out in equal blocks: SIP ``s`` holds experts ``s * E/S`` onwards;
    inside it an expert spans ``C / (E/S)`` CUBEs when the SIP has fewer experts than
    CUBEs, else each CUBE holds ``(E/S) / C`` experts. Whatever does not split evenly is
    refused in one line."""
    if experts % sips:
        raise UsageError(f"{experts} experts do not split evenly over {sips} SIPs "
                         f"(expert parallelism places whole experts on each SIP)")
    per_sip = experts // sips
    if per_sip > cubes_per_sip and per_sip % cubes_per_sip:
        raise UsageError(f"{per_sip} experts per SIP do not split evenly over its "
                         f"{cubes_per_sip} CUBEs")
    if per_sip <= cubes_per_sip and cubes_per_sip % per_sip:
        raise UsageError(f"{cubes_per_sip} CUBEs per SIP do not split evenly among its "
                         f"{per_sip} experts")
    sip, cubes = [], []
    for e in range(experts):
        s, i = divmod(e, per_sip)
        sip.append(s)
        if per_sip <= cubes_per_sip:
            span = cubes_per_sip // per_sip
            cubes.append(tuple(range(i * span, (i + 1) * span)))
        else:
            cubes.append((i // (per_sip // cubes_per_sip),))
    return Placement(tuple(sip), tuple(cubes))


def dispersion(routes: np.ndarray, keep: np.ndarray, token_sip: np.ndarray,
               placement: Placement) -> float:
    """Share of the kept assignments whose expert is on another SIP than the token."""
    kept = int(keep.sum())
    if not kept:
        return 0.0
    expert_sip = np.asarray(placement.sip)[routes]
    away = (expert_sip != np.asarray(token_sip)[:, None]) & keep
    return float(away.sum()) / kept
