"""MoE routing on the host: top-k and its ties, the softmax over the selected logits,
seeded Zipf routes, the capacity factor's drop rule, expert placement and dispersion."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernbench.errors import UsageError
from kernbench.models import load_model
from kernbench.models.routing import (
    apply_capacity,
    capacity,
    dispersion,
    place_experts,
    sample_routes,
    top_k,
    zipf_weights,
)


def test_top_k_takes_the_largest_logits_and_ties_go_to_the_lower_expert():
    logits = np.array([[0.1, 3.0, 3.0, -1.0],
                       [2.0, 2.0, 2.0, 2.0],
                       [-5.0, 0.0, 1.0, 0.5]])
    idx, w = top_k(logits, 2)
    assert idx.tolist() == [[1, 2], [0, 1], [2, 3]]
    # the softmax is over the two selected logits only
    assert np.allclose(w[2], np.exp([1.0, 0.5]) / np.exp([1.0, 0.5]).sum())
    assert np.allclose(w[:2], 0.5) and np.allclose(w.sum(1), 1.0)


def test_top_k_against_a_brute_force_ranking():
    rng = np.random.default_rng(0)
    logits = rng.integers(-3, 3, (200, 8)).astype(float)  # many ties
    idx, _ = top_k(logits, 3)
    for t in range(200):
        ranked = sorted(range(8), key=lambda e: (-logits[t, e], e))
        assert idx[t].tolist() == ranked[:3]


def test_sampled_routes_are_distinct_seeded_and_skewed():
    a, w = sample_routes(2000, 8, 2, 1.0, seed=4)
    b, _ = sample_routes(2000, 8, 2, 1.0, seed=4)
    assert np.array_equal(a, b) and np.allclose(w, 0.5)
    assert all(len(set(row)) == 2 for row in a.tolist())
    counts = np.bincount(a.reshape(-1), minlength=8)
    assert counts[0] > 2 * counts[7]  # Zipf s = 1: expert 0 far more popular than 7
    u, _ = sample_routes(4000, 8, 1, 0.0, seed=1)
    share = np.bincount(u.reshape(-1), minlength=8) / 4000
    assert np.all(np.abs(share - 1 / 8) < 0.025)  # uniform
    assert np.allclose(zipf_weights(4, 1.0), np.array([1, 1 / 2, 1 / 3, 1 / 4]) / (25 / 12))


def test_capacity_drops_later_tokens_in_token_then_choice_order():
    assert capacity(6, 3, 1, 1.0) == 2 and capacity(5, 4, 2, 1.25) == math.ceil(3.125)
    routes = np.array([[0], [0], [1], [0], [2], [0]])
    keep = apply_capacity(routes, 3, 1.0)  # capacity 2 per expert
    assert keep[:, 0].tolist() == [True, True, True, False, True, False]
    # a token's first choice is served before its second
    routes = np.array([[0, 1], [1, 0]])
    keep = apply_capacity(routes, 2, 0.5)  # capacity ceil(0.5 * 2 * 2 / 2) = 1
    assert keep.tolist() == [[True, True], [False, False]]
    assert apply_capacity(routes, 2, 100.0).all()


def test_placement_and_dispersion():
    p = place_experts(8, 2, 16)
    assert p.sip == (0, 0, 0, 0, 1, 1, 1, 1) and p.cubes[5] == (4, 5, 6, 7)
    q = place_experts(128, 4, 16)
    assert q.sip[32] == 1 and q.cubes[33] == (0,) and q.cubes[63] == (15,)
    routes = np.array([[0, 4], [5, 6]])
    keep = np.array([[True, True], [True, False]])
    # token 0 lives on SIP 0: expert 4 is away; token 1 on SIP 1: both kept local
    assert dispersion(routes, keep, np.array([0, 1]), p) == pytest.approx(1 / 3)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: top_k(np.zeros((2, 4)), 5), "top-k 5: each token goes to 1..4 experts"),
    (lambda: capacity(4, 4, 1, 0.0), "capacity factor 0.0: must be a positive number"),
    (lambda: sample_routes(4, 4, 1, -0.5, 0), "routing skew -0.5: the Zipf exponent"),
    (lambda: place_experts(6, 4, 16), "6 experts do not split evenly over 4 SIPs"),
    (lambda: place_experts(24, 1, 16), "24 experts per SIP do not split evenly"),
])
def test_bad_settings_are_one_line(call, message):
    with pytest.raises(UsageError, match=message):
        call()


def test_moe_presets_read_the_mixtral_keys():
    m = load_model("mixtral-8x7b")
    assert (m.num_local_experts, m.num_experts_per_tok, m.intermediate_size) == (8, 2, 14336)
    assert 46e9 < m.param_count < 47.5e9  # Mixtral 8x7B: 46.7 B parameters
    f = load_model("moe-128x-top8")
    assert (f.num_local_experts, f.num_experts_per_tok) == (128, 8)
    assert f.intermediate_size < f.hidden_size  # fine-grained: small expert FFNs

