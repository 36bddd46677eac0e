"""Chapter 3's library: stage rules on designed histories, Monte Carlo of reparameterised circuits
against independent estimators and closed forms, attention norms, gradient descent on (4.1)."""

import math

import numpy as np
import pytest
import torch
from scipy.integrate import solve_ivp

from icl_lib import DataConfig, kernel_regression_predict
from icl_lib.paper1.approx_loss import ApproxLossConfig, approx_loss, kernel_matrix
from icl_lib.circuits import mu_of, omega_of
from icl_lib.data import sample_batch
from icl_lib.paper1.dynamics import (
    ApproxGDConfig,
    StageRules,
    approx_gd,
    approx_hessian,
    attention_norm_lln,
    attention_norms,
    conditional_loss,
    detect_stages,
    first_persistent_step,
    group_labels,
    peak_profile,
    reparam_circuits,
    same_groups,
    symmetric_two_head,
    true_loss_mc,
)
from icl_lib.estimators import debiased_gd_risk
from icl_lib.models import AttentionEnsemble

CFG = ApproxLossConfig(5, 40, 0.1)
DATA = DataConfig(d=5, L=40, sigma2=0.1)


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


# ----------------------------------------------------------------------------- gradient descent on (4.1)
def test_first_gd_step_matches_autograd(gen):
    mu0 = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    omega0 = 0.2 * torch.randn(3, 4, generator=gen, dtype=torch.float64)
    out = approx_gd(mu0, omega0, CFG, ApproxGDConfig(lr=0.01, steps=1, n_log=2))
    mu, om = mu0.clone().requires_grad_(), omega0.clone().requires_grad_()
    approx_loss(mu, om, CFG).sum().backward()
    np.testing.assert_allclose(out["mu"][1], (mu0 - 0.01 * mu.grad).numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out["omega"][1], (omega0 - 0.01 * om.grad).numpy(), rtol=1e-12, atol=1e-14)
    assert out["step"].tolist() == [0, 1] and out["loss"].shape == (2, 3)


def reduced_rhs(t, y, d, L, s2):
    """Symmetric two-head flow (dm/dt, dw/dt), written out by hand from
    1 + s2 - 4 m w + 4 m^2 w^2 + 4 c m^2 sinh(d w^2) with dm/dt = -(1/2) dL/dm."""
    m, w = y
    c = (1 + s2) / L
    return [2 * w - 4 * m * w**2 - 4 * c * m * math.sinh(d * w**2),
            2 * m - 4 * m**2 * w - 4 * c * d * m**2 * w * math.cosh(d * w**2)]


def test_small_step_gd_follows_the_gradient_flow():
    eps, lr, steps = 1e-2, 2e-4, 30_000  # time lr * steps = 6, through the growth phase
    out = approx_gd(np.array([eps, -eps]), np.array([eps, -eps]), CFG, ApproxGDConfig(lr=lr, steps=steps, n_log=40))
    # the symmetric set is preserved exactly
    np.testing.assert_allclose(out["mu"][:, 0], -out["mu"][:, 1], rtol=1e-12)
    np.testing.assert_allclose(out["omega"][:, 0], -out["omega"][:, 1], rtol=1e-12)
    t = out["step"] * lr
    ref = solve_ivp(reduced_rhs, (0, t[-1]), [eps, eps], t_eval=t, method="DOP853", rtol=1e-11, atol=1e-13,
                    args=(5, 40, 0.1))
    np.testing.assert_allclose(out["mu"][:, 0], ref.y[0], rtol=0.02, atol=1e-4)
    np.testing.assert_allclose(out["omega"][:, 0], ref.y[1], rtol=0.02, atol=1e-4)
    assert np.all(np.diff(out["loss"]) <= 1e-12)  # small steps: the loss never increases


def test_gd_diverges_loudly():
    with pytest.raises(FloatingPointError, match="lr=5"):
        approx_gd(np.array([3.0, -3.0]), np.array([1.0, -1.0]), CFG, ApproxGDConfig(lr=5.0, steps=200))


def test_gd_config_is_validated():
    with pytest.raises(ValueError, match="steps=0"):
        ApproxGDConfig(steps=0)
    with pytest.raises(ValueError, match="lr=-1"):
        ApproxGDConfig(lr=-1)
    with pytest.raises(ValueError, match="mu0.shape"):
        approx_gd(np.zeros(3), np.zeros(2), CFG)


def test_approx_hessian_mu_block_is_twice_the_kernel_matrix():
    mu, omega = np.array([1.0, -0.5, 0.2]), np.array([0.3, -0.1, 0.4])
    Hs = approx_hessian(mu, omega, CFG)
    torch.testing.assert_close(Hs[:3, :3], 2 * kernel_matrix(torch.tensor(omega), CFG), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(Hs, Hs.T)


# ----------------------------------------------------------------------------- groups
def test_group_labels_and_same_groups():
    g = group_labels([0.2, -0.2, 0.01, 0.19], [2.0, -2.1, 0.05, 1.0])
    assert g == ["positive", "negative", "dummy", "positive"]
    assert group_labels([0.3], [1.0]) == ["positive"]  # one head is never dummy
    assert same_groups(g, g) == (True, False)
    flipped = ["negative", "positive", "dummy", "negative"]
    assert same_groups(g, flipped) == (True, True)
    other = ["negative", "positive", "positive", "negative"]
    assert same_groups(g, other) == (False, False)
    assert same_groups(flipped, other, heads=[True, True, False, True]) == (True, False)
    with pytest.raises(ValueError, match="len"):
        same_groups(g, g[:3])
