"""Chapter 3's library: stage rules on designed histories, Monte Carlo of reparameterised circuits
against independent estimators and closed forms, attention norms, gradient descent on (4.1)."""

import math

import numpy as np
import pytest
import torch

from icl_lib import kernel_regression_predict
from icl_lib.circuits import mu_of, omega_of
from icl_lib.sampling import sample_batch
from icl_lib.paper1.dynamics.landscape import reparam_circuits, symmetric_two_head, true_loss_mc
from icl_lib.paper1.dynamics.norms import attention_norm_lln, attention_norms
from icl_lib.paper1.dynamics.observations import peak_profile
from icl_lib.paper1.dynamics.stage_detection import StageRules, detect_stages, first_persistent_step
from icl_lib.estimators import debiased_gd_risk
from icl_lib.models import AttentionEnsemble
from tests.paper1.dynamics_common import DATA



# a second, independent estimator of the true loss (moved from the library: only the tests use it)
@torch.no_grad()
def conditional_loss(omega, mu, x: torch.Tensor, xq: torch.Tensor, sigma2: float) -> torch.Tensor:
    """``E[(y_hat - y_q)^2 | X, x_q]`` of the H-kernel predictor (3.2), averaged over ``beta`` and noise.

    With ``a = sum_h mu_h softmax(omega_h X x_q)`` the prediction is ``y_hat = a^T y``, so for
    ``beta ~ N(0, I/d)`` and noise variance ``sigma2``:
    ``E[.. | X, x_q] = ||X^T a - x_q||^2 / d + sigma2 (||a||^2 + 1)``.
    ``omega, mu (R, H)``, ``x (B, L, d)``, ``xq (B, d)``; returns ``(R, B)``.  Tests of chapter 3.
    """
    omega = torch.as_tensor(omega, dtype=x.dtype)
    mu = torch.as_tensor(mu, dtype=x.dtype)
    g = (x @ xq[..., None])[..., 0]  # (B, L) = x_i^T x_q
    p = torch.softmax(omega[:, None, :, None] * g[None, :, None, :], dim=-1)  # (R, B, H, L)
    a = (p * mu[:, None, :, None]).sum(2)  # (R, B, L)
    resid = (a[..., None] * x).sum(-2) - xq  # (R, B, d) = X^T a - x_q
    d = x.shape[-1]
    return resid.pow(2).sum(-1) / d + sigma2 * (a.pow(2).sum(-1) + 1.0)


# ----------------------------------------------------------------------------- stage rules
@pytest.mark.parametrize(
    "flags, want",
    [
        ([0, 0, 1, 1, 1], 20),
        ([1, 1, 0, 1, 1], 30),
        ([1, 1, 1, 1, 1], 0),
        ([1, 1, 1, 1, 0], None),
        ([0, 1, 0, 1, 0], None),
    ],
)
def test_first_persistent_step(flags, want):
    assert first_persistent_step([0, 10, 20, 30, 40], flags) == want


def test_first_persistent_step_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="flags.shape"):
        first_persistent_step([0, 1, 2], [True, False])


def designed_history(gen):
    """A two-head history with known stage boundaries (10 snapshots at steps 0, 10, ..., 90):

    t = 0, 1: large off-pattern noise (no pattern (3.1));
    t = 2:    pattern, single sign (omega, mu > 0 for both heads);
    t = 3:    Stage I holds, then breaks at t = 4 (mu no longer cancels), holds again from t = 5;
    t = 5:    Stage I: signs matched, mu = (1, -1), but |omega| = (0.1, 0.05) not homogeneous;
    t >= 7:   Stage II: |omega| = (0.1, 0.1).
    """
    omega = [[0.1, 0.05]] * 3 + [[0.1, -0.05], [0.1, -0.05], [0.1, -0.05], [0.1, -0.06]] + [[0.1, -0.1]] * 3
    mu = [[0.1, 0.1]] * 3 + [[1.0, -1.0], [1.0, -0.5], [1.0, -1.0], [1.0, -1.0]] + [[1.0, -1.0]] * 3
    omega, mu = torch.tensor(omega, dtype=torch.float64), torch.tensor(mu, dtype=torch.float64)
    KQ, OV = reparam_circuits(omega, mu, 5)  # (10, 2, 6, 6), (10, 2, 1, 6)
    noise = torch.randn(KQ.shape, generator=gen, dtype=torch.float64)
    scale = torch.tensor([1.0, 1.0] + [0.002] * 8, dtype=torch.float64)[:, None, None, None]
    KQ = KQ + scale * noise
    OV = OV + scale[:, :, :1] * torch.randn(OV.shape, generator=gen, dtype=torch.float64)
    return KQ, OV, torch.arange(10) * 10


def test_detect_stages_finds_the_designed_boundaries(gen):
    KQ, OV, steps = designed_history(gen)
    st = detect_stages(KQ, OV, steps, 5)
    assert st.shape_step == 20
    assert st.stage1_step == 50
    assert st.stage2_step == 70
    assert st.groups == ["positive", "negative"] and st.kind == "pos/neg"
    np.testing.assert_allclose(st.omega[2:, 0], 0.1, atol=0.01)  # the diagonal mean of KQ, not its noise
    assert st.marks() == {"(3.1)": 20, "I": 50, "II": 70}
    gm = st.group_mu()
    np.testing.assert_allclose(gm[-1], [1.0, 1.0], atol=0.01)
    np.testing.assert_allclose(gm[2], [0.1, 0.1], atol=0.01)


def test_detect_stages_thresholds_matter(gen):
    KQ, OV, steps = designed_history(gen)
    loose = detect_stages(KQ, OV, steps, 5, StageRules(spread_tol=0.7))  # (0.1 - 0.05) / 0.075 = 0.67 < 0.7
    assert loose.stage2_step == 30
    assert loose.merged_marks() == {"(3.1)": 20, "II": 30, "I": 50}


def test_stage_rules_are_validated():
    with pytest.raises(ValueError, match="spread_tol=0"):
        StageRules(spread_tol=0)
    with pytest.raises(ValueError, match="rules="):
        detect_stages(torch.zeros(2, 2, 6, 6), torch.zeros(2, 2, 1, 6), [0, 1], 5, rules="strict")


def test_peak_profile_against_a_plain_loop():
    steps = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8])
    vals = np.array([[0.1, -0.2], [0.5, -0.4], [0.9, -0.8], [0.7, -1.0], [0.6, -1.1],
                     [0.5, -1.2], [0.45, -1.3], [0.42, -1.35], [0.4, -1.4]])
    p = peak_profile(steps, vals)
    for h in range(2):
        a = [abs(v) for v in vals[:, h]]
        k = max(range(len(a)), key=lambda i: a[i])
        assert p["peak_step"][h] == steps[k]
        assert p["peak"][h] == a[k] and p["final"][h] == a[-1] and p["start"][h] == a[0] and p["mid"][h] == a[4]
        assert math.isclose(p["drop"][h], 1 - a[-1] / a[k])
    assert p["drop"][1] == 0.0 and p["drop"][0] > 0.5


# ----------------------------------------------------------------------------- reparameterised circuits
def test_reparam_circuits_implement_the_kernel_predictor(gen):
    omega = torch.tensor([[0.3, -0.2, 0.05], [0.1, 0.1, -0.4]], dtype=torch.float64)
    mu = torch.tensor([[1.0, -2.0, 0.3], [0.5, 0.7, -1.1]], dtype=torch.float64)
    KQ, OV = reparam_circuits(omega, mu, 5)
    assert torch.equal(omega_of(KQ, 5), omega) and torch.equal(mu_of(OV, 5), mu)
    b = sample_batch(DATA, 64, gen)
    got = AttentionEnsemble.from_circuits(KQ, OV, 5)(b)[..., 0]  # (R, B)
    want = kernel_regression_predict(omega, mu, b.x, b.y, b.xq)  # (R, B), paper eq. (3.2)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_reparam_circuits_rejects_bad_shapes():
    with pytest.raises(ValueError, match="omega.shape"):
        reparam_circuits(torch.zeros(3, 2), torch.zeros(3, 3), 5)


def test_conditional_loss_matches_averaging_over_tasks_and_noise(gen):
    """E[(y_hat - y_q)^2 | X, x_q] in closed form against an explicit average over beta and noise."""
    B, K, d, L = 3, 200_000, 5, 40
    x = torch.randn(B, L, d, generator=gen, dtype=torch.float64)
    xq = torch.randn(B, d, generator=gen, dtype=torch.float64)
    omega = torch.tensor([[0.3, -0.3], [0.6, 0.1]], dtype=torch.float64)
    mu = torch.tensor([[2.0, -2.0], [0.8, 0.4]], dtype=torch.float64)
    want = conditional_loss(omega, mu, x, xq, 0.1)  # (R, B)
    beta = torch.randn(K, d, generator=gen, dtype=torch.float64) / math.sqrt(d)
    for b in range(B):
        y = beta @ x[b].T + math.sqrt(0.1) * torch.randn(K, L, generator=gen, dtype=torch.float64)  # (K, L)
        yq = beta @ xq[b] + math.sqrt(0.1) * torch.randn(K, generator=gen, dtype=torch.float64)  # (K,)
        for r in range(2):
            pred = kernel_regression_predict(omega[r], mu[r], x[b].expand(K, L, d), y, xq[b].expand(K, d))
            e = (pred - yq) ** 2
            se = float(e.std() / math.sqrt(K))
            assert abs(float(e.mean()) - float(want[r, b])) < 4 * se


def test_true_loss_mc_agrees_with_the_conditional_estimator(gen):
    omega, mu = symmetric_two_head(torch.tensor([0.1, 0.3, 0.5]), torch.tensor([3.0, 1.5, 0.8]))
    mean, se = true_loss_mc(omega, mu, DATA, n=20_000, seed=5, models_per_call=2)  # two ensemble calls
    x = torch.randn(20_000, 40, 5, generator=gen, dtype=torch.float64)
    xq = torch.randn(20_000, 5, generator=gen, dtype=torch.float64)
    c = conditional_loss(omega, mu, x, xq, 0.1)  # (3, n), independent sequences
    c_mean, c_se = c.mean(1), c.std(1) / math.sqrt(c.shape[1])
    assert torch.all((mean - c_mean).abs() < 4 * torch.sqrt(se**2 + c_se**2))


def test_true_loss_mc_tends_to_debiased_gd_as_omega_vanishes():
    """Heads (w, -w), (m, -m) with 2 m w = eta fixed become debiased GD as w -> 0 (Section 4.3)."""
    w = 0.003
    etas = torch.tensor([0.3, 0.88, 1.4], dtype=torch.float64)
    omega, mu = symmetric_two_head(torch.full_like(etas, w), etas / (2 * w))
    mean, se = true_loss_mc(omega, mu, DATA, n=30_000, seed=9)
    for k, eta in enumerate(etas.tolist()):
        assert abs(float(mean[k]) - debiased_gd_risk(eta, 5, 40, 0.1)) < 4 * float(se[k]) + 0.003


def test_true_loss_mc_float32_matches_float64():
    """float32 draws its own sequences (the sampler works in the model's dtype): equal within Monte Carlo error."""
    omega, mu = symmetric_two_head(torch.tensor([0.2, 0.4]), torch.tensor([2.0, 1.0]))
    m64, s64 = true_loss_mc(omega, mu, DATA, n=10_000, seed=1)
    m32, s32 = true_loss_mc(omega, mu, DATA, n=10_000, seed=1, dtype=torch.float32)
    assert m32.dtype == torch.float64
    assert torch.all((m32 - m64).abs() < 4 * torch.sqrt(s32**2 + s64**2))


# ----------------------------------------------------------------------------- attention norms
def test_attention_norms_bounds_and_uniform_limit():
    L = 37
    n0 = attention_norms(5, L, 0.0, n=50, seed=1)
    torch.testing.assert_close(n0, torch.full((50,), 1 / math.sqrt(L), dtype=torch.float64))
    n = attention_norms(5, L, 2.0, n=500, seed=1)
    assert torch.all(n >= 1 / math.sqrt(L) - 1e-12) and torch.all(n <= 1 + 1e-12)
    torch.testing.assert_close(attention_norms(5, L, 2.0, n=500, seed=1), n)  # reproducible


def test_attention_norms_follow_the_large_L_law():
    d, L, omega = 5, 4000, 0.3
    n = attention_norms(d, L, omega, n=2000, seed=3)
    for q in (0.5, 0.9):
        law = attention_norm_lln(d, L, omega, q)
        assert abs(float(torch.quantile(n, q)) / law - 1) < 0.04


def test_attention_norm_lln_closed_form():
    # omega = 0: uniform attention, norm 1/sqrt(L) whatever the quantile
    assert math.isclose(attention_norm_lln(5, 100, 0.0, 0.9), 0.1)
    # median of chi^2_2 is 2 log 2: law = sqrt(exp(omega^2 2 log 2) / L) = sqrt(4^(omega^2) / L)
    assert math.isclose(attention_norm_lln(2, 50, 1.0, 0.5), math.sqrt(4.0 / 50), rel_tol=1e-9)
    with pytest.raises(ValueError, match="q=1"):
        attention_norm_lln(5, 40, 1.0, 1.0)
