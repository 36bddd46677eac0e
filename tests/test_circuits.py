"""Pattern metrics on circuits whose answer is known by construction (paper 1, Section 3)."""

import math

import pytest
import torch

from icl_lib import AttentionEnsemble, DataConfig, summarize_pattern
from icl_lib.circuits import dummy_heads, kq_offdiag_ratio, ov_offlast_ratio, pattern_history, pattern_kinds
from icl_lib.estimators import model_risk, mc_risk, debiased_gd_risk

d, D = 5, 6


def circuits(omega, mu, noise=0.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    H = len(omega)
    KQ = noise * torch.randn(H, D, D, generator=g, dtype=torch.float64)
    OV = noise * torch.randn(H, 1, D, generator=g, dtype=torch.float64)
    for h in range(H):
        KQ[h, :d, :d] += omega[h] * torch.eye(d, dtype=torch.float64)
        OV[h, 0, d] = mu[h]
    return KQ, OV


def test_exact_pattern():
    KQ, OV = circuits([0.2, -0.2, 0.0], [2.0, -2.0, 0.0])
    KQ[:, :, d] = 5.0  # the last column never meets the query (its label slot is 0): ignored
    p = summarize_pattern(KQ, OV, d)
    assert p.groups == ["positive", "negative", "dummy"] and p.kind == "pos/neg" and p.n_dummy == 1
    assert p.kq_offdiag == 0 and p.ov_offlast == 0 and p.sign_matched
    assert p.zero_sum == 0 and p.omega_spread == 0
    assert math.isclose(p.eta, 0.8)


def test_metrics_measure_what_they_say():
    KQ, OV = circuits([0.2, -0.1], [1.0, -3.0])
    KQ[0, 0, 1] = 0.2 * math.sqrt(5) * 0.5  # off-diagonal mass half of head 0's diagonal mass
    OV[1, 0, 0] = 1.5  # half of |mu_2|
    torch.testing.assert_close(kq_offdiag_ratio(KQ, d), torch.tensor([0.5, 0.0], dtype=torch.float64))
    torch.testing.assert_close(ov_offlast_ratio(OV, d), torch.tensor([0.0, 0.5], dtype=torch.float64))
    p = summarize_pattern(KQ, OV, d)
    assert math.isclose(p.omega_spread, 0.1 / 0.15)  # (0.2 - 0.1) / mean(0.2, 0.1)
    assert math.isclose(p.zero_sum, 2.0 / 4.0)
    # pooled over heads: off mass 0.2*sqrt(5)/2 against diagonal masses 0.2*sqrt(5), 0.1*sqrt(5)
    assert math.isclose(p.kq_offdiag, 0.1 / math.sqrt(0.04 + 0.01))


def test_sign_mismatch_and_single_sign():
    KQ, OV = circuits([0.3, 0.25], [1.0, -0.5])
    p = summarize_pattern(KQ, OV, d)
    assert not p.sign_matched and p.kind == "single-sign"
    single = summarize_pattern(*circuits([0.5], [1.2]), d)
    assert single.kind == "single-head" and math.isnan(single.zero_sum) and single.n_dummy == 0


def test_a_head_is_dummy_when_either_of_its_contributions_is_small():
    omega = torch.tensor([0.2, 0.01, 0.01, 0.2])
    mu = torch.tensor([2.0, 0.01, 1.0, 0.01])
    assert dummy_heads(omega, mu).tolist() == [False, True, True, True]


def test_the_one_definition_of_the_pattern_on_hand_built_circuits():
    # a true pattern: two positive heads, one negative, (3.1) exactly
    true = summarize_pattern(*circuits([0.13, 0.13, -0.13], [1.0, 0.9, -1.9]), d)
    assert true.kind == "pos/neg" and true.sign_matched and true.n_dummy == 0
    # a trapped model: every live head of one sign, (3.1) exactly
    trapped = summarize_pattern(*circuits([0.5, 0.6], [0.7, 0.8]), d)
    assert trapped.kind == "single-sign"
    # a dying head: its OV has died (mu near 0) while its KQ keeps a third of the largest scale; the
    # sign of its mu is noise, so it is dummy and the model is sign-matched and in the pattern
    dying = summarize_pattern(*circuits([0.13, 0.04, -0.13, -0.12], [1.0, -1e-4, -0.5, -0.5]), d)
    assert dying.groups[1] == "dummy" and dying.sign_matched and dying.kind == "pos/neg"
    # both signs without the OV shape (OV mass off the label entry 100 times |mu|): not the pattern
    KQ, OV = circuits([1e-3, -1e-3], [0.01, -0.01])
    OV[:, 0, :d] = 1.0
    shapeless = summarize_pattern(KQ, OV, d)
    assert shapeless.kind == "unformed" and shapeless.ov_offlast > 50
    # nor without the KQ shape
    KQ, OV = circuits([0.1, -0.1], [1.0, -1.0])
    KQ[:, 0, 1:d] = 0.5
    assert summarize_pattern(KQ, OV, d).kind == "unformed"
    # the vectorised form over a history agrees with the one-model summaries
    models = [circuits([0.13, 0.13, -0.13], [1.0, 0.9, -1.9]), circuits([0.5, 0.6, 0.55], [0.7, 0.8, 0.9])]
    kinds, live = pattern_kinds(torch.stack([k for k, _ in models]), torch.stack([o for _, o in models]), d)
    assert kinds.tolist() == ["pos/neg", "single-sign"] and live.all()


def test_pattern_history_follows_time():
    KQ0, OV0 = circuits([0.01, 0.02], [0.01, 0.03])
    KQ1, OV1 = circuits([0.2, -0.2], [2.0, -2.0])
    hist = pattern_history(torch.stack([KQ0, KQ1]), torch.stack([OV0, OV1]), d)
    assert [h.kind for h in hist] == ["single-sign", "pos/neg"]


def test_model_risk_of_two_symmetric_heads_near_debiased_gd():
    """Two heads (w, -w), (m, -m) with small w implement debiased GD with eta = 2 m w (Section 4.3):
    the model's risk (model_risk) is close to the closed form, and agrees with mc_risk."""
    w, eta = 0.02, 0.8
    KQ, OV = circuits([w, -w], [eta / (2 * w), -eta / (2 * w)])
    m = AttentionEnsemble.from_circuits(KQ[None], OV[None], d)
    data = DataConfig(d=d, L=40)
    mean, se = model_risk(m, data, n=40_000, seed=1)
    mean2, se2 = mc_risk(lambda b: m(b)[0, :, 0], data, n=40_000, seed=1)
    assert abs(mean.item() - mean2) < 1e-9
    assert abs(mean.item() - debiased_gd_risk(eta, d, 40, 0.1)) < 0.01


def test_max_sequences_at_once_counts_the_numbers_a_draw_holds():
    """The bound on chapter 1's n_mc: a draw of n sequences holds n ((d+1)(L+1) + d) numbers (tokens and
    the task vector); the largest n within the budget, checked on a real draw."""
    from icl_lib import sample_batch
    from icl_lib.estimators import max_sequences_at_once

    assert max_sequences_at_once(5, 40) == 100_000_000 // (6 * 41 + 5)
    data = DataConfig(d=3, L=7)
    n = max_sequences_at_once(3, 7, budget=1000)
    b = sample_batch(data, n, 0)
    assert b.tokens.numel() + b.beta.numel() <= 1000 < (n + 1) * (b.tokens[0].numel() + b.beta[0].numel())
    assert max_sequences_at_once(3, 7, n_tasks=2, budget=1000) == 1000 // (5 * 8 + 6)
    with pytest.raises(ValueError, match="^L="):
        max_sequences_at_once(3, 0)


def test_reparameterised_circuits_are_the_sum_of_kernel_regressors():
    """Circuits of the form (3.1) (reparam_circuits) in the full model give (3.2) exactly, at
    round-off, for three heads of mixed signs and scales (chapter 1's identity, a test of the code)."""
    from icl_lib import kernel_regression_predict, sample_batch
    from icl_lib.paper1.dynamics.landscape import reparam_circuits

    omega = torch.tensor([0.35, -0.2, 0.05], dtype=torch.float64)
    mu = torch.tensor([1.4, -0.9, 0.3], dtype=torch.float64)
    KQ, OV = reparam_circuits(omega[None], mu[None], d)  # (1, 3, D, D), (1, 3, 1, D)
    m = AttentionEnsemble.from_circuits(KQ, OV, d)
    b = sample_batch(DataConfig(d=d, L=40, sigma2=0.1), 4096, 11)
    gap = (m(b)[0, :, 0] - kernel_regression_predict(omega, mu, b.x, b.y, b.xq)).abs().max().item()
    assert gap < 1e-12
