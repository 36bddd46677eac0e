"""Multi-task references and mode rules (icl_lib.paper1.multitask, chapter 7): closed forms against Monte
Carlo, optimality by perturbation, predictors against plain loops, modes on hand-built circuits."""

import math

import pytest
import torch

from icl_lib import AttentionEnsemble, DataConfig
from icl_lib.data import sample_batch
from icl_lib.circuits import mu_matrix
from icl_lib.estimators import debiased_gd_risk, model_risk
from icl_lib.config import ModelConfig, RunSpec
from icl_lib.engine import Run
from icl_lib.paper1.multitask.head_modes import (
    classify_mode,
    effective_gamma,
    expected_mode,
    gamma_off_estimates,
    global_pattern,
    global_pattern_estimates,
    global_pattern_table,
    mode_estimates,
    mode_history_fractions,
    paper_mode_fractions,
    paper_mode_table,
    pattern_table,
    per_model_table,
    shared_ratio_estimates,
    shown_seeds,
)
from icl_lib.paper1.multitask.references import (
    bayes_task_risk,
    check_supports,
    coordinate_groups,
    debiased_gd_diag_risk,
    loss_gap_estimates,
    max_bayes_draws,
    max_test_prompts,
    optimal_gamma_shared,
    predicted_shared_ratio,
    reference_risks,
    shared_and_single,
    support_gamma,
    task_batch,
    task_loss_table,
)
from icl_lib.stats import median_ci, proportion_ci

from typing import Callable

from icl_lib.data import Batch, sample_chunks
from icl_lib.estimators import debiased_gd_predict, ridge_predict
from icl_lib.validate import check_int

# per-task reference predictors and their Monte Carlo risk, against which the closed forms are tested
def debiased_gd_support_predict(batch: Batch, data: DataConfig, task: int, eta: float) -> torch.Tensor:
    """Debiased GD on task ``task``'s true support: ``(eta/L) sum_i y_{i,n} (x_{i,S} - xbar_S)^T x_{q,S}``
    (paper 1, C.3 Mode III).  Returns ``(..., B)``."""
    return debiased_gd_predict(task_batch(batch, task, data.supports[task]), eta)

def debiased_gd_all_predict(batch: Batch, task: int, eta: float) -> torch.Tensor:
    """Debiased GD on all ``d`` coordinates for task ``task`` (paper 1, eq. 4.6 applied per task)."""
    return debiased_gd_predict(task_batch(batch, task), eta)

def debiased_gd_diag_predict(batch: Batch, task: int, gamma: torch.Tensor) -> torch.Tensor:
    """Debiased GD with pre-conditioner ``diag(gamma)`` (step included) for task ``task``:
    ``(1/L) sum_i y_{i,n} (x_i - xbar)^T diag(gamma) x_q`` (weighted debiased GD, C.3 Mode II)."""
    gamma = torch.as_tensor(gamma, dtype=batch.x.dtype, device=batch.x.device)
    return debiased_gd_predict(task_batch(batch, task), 1.0, Gamma=torch.diag(gamma))

def bayes_task_predict(batch: Batch, data: DataConfig, task: int) -> torch.Tensor:
    """Bayes posterior mean of task ``task``: ridge on ``x_{S_n}`` with penalty ``sigma2 * s_n``
    (prior ``N(0, I / s_n)``; the other tasks' labels are independent of ``beta_n``)."""
    S = data.supports[task]
    return ridge_predict(task_batch(batch, task, S), data.sigma2 * len(S))


# ------------------------------------------------------------------------------ closed forms

@torch.no_grad()
def mc_task_risk(
    predict: Callable[[Batch], torch.Tensor], data: DataConfig, n: int = 100_000, seed: int = 0, chunk: int = 20_000
) -> tuple[torch.Tensor, torch.Tensor]:
    """Monte Carlo per-task risk of ``predict`` (multi-task batch -> ``(B, N)``): (mean (N,), se (N,))."""
    n = check_int("n", n, 2)
    e = torch.cat([(predict(b) - b.yq) ** 2 for b in sample_chunks(data, n, seed, chunk)])  # (n, N)
    return e.mean(0), e.std(0) / math.sqrt(e.shape[0])


DATA = DataConfig(d=6, L=40, sigma2=0.1, supports=[[0, 1, 2, 3], [2, 3, 4, 5]])
SMALL = DataConfig(d=5, L=10, sigma2=0.3, supports=[[0, 1], [1, 2, 3]])  # coordinate 4 unused


def test_coordinate_groups():
    g = coordinate_groups(DATA)
    assert [(x.name, x.coords, x.tasks) for x in g] == [
        ("task 1 only", (0, 1), (0,)), ("shared", (2, 3), (0, 1)), ("task 2 only", (4, 5), (1,))]
    g = coordinate_groups(SMALL)
    assert [(x.name, x.coords) for x in g] == [("task 1 only", (0,)), ("shared", (1,)), ("task 2 only", (2, 3)),
                                                ("unused", (4,))]


def test_task_predictors_match_a_plain_loop():
    b = sample_batch(DATA, 3, 7)
    for n, S in enumerate(DATA.supports):
        for k in range(3):
            x, y, xq = b.x[k], b.y[k, :, n], b.xq[k]  # (L, d), (L,), (d,)
            xc = x - x.mean(0)
            want_S = sum(float(y[i]) * float(xc[i, list(S)] @ xq[list(S)]) for i in range(DATA.L)) * 0.7 / DATA.L
            want_all = sum(float(y[i]) * float(xc[i] @ xq) for i in range(DATA.L)) * 0.7 / DATA.L
            assert abs(float(debiased_gd_support_predict(b, DATA, n, 0.7)[k]) - want_S) < 1e-10
            assert abs(float(debiased_gd_all_predict(b, n, 0.7)[k]) - want_all) < 1e-10
            XS = x[:, list(S)]
            beta = torch.linalg.solve(XS.T @ XS + DATA.sigma2 * len(S) * torch.eye(len(S), dtype=torch.float64), XS.T @ y)
            assert abs(float(bayes_task_predict(b, DATA, n)[k]) - float(beta @ xq[list(S)])) < 1e-10
    tb = task_batch(b, 1, [5, 2])
    assert torch.equal(tb.x, b.x[..., [5, 2]]) and torch.equal(tb.yq[..., 0], b.yq[..., 1])


@pytest.mark.parametrize("data", [DATA, SMALL])
def test_diag_risk_matches_monte_carlo(data):
    gen = torch.Generator().manual_seed(0)
    gammas = [support_gamma(data, 0), support_gamma(data, 1, "all"), optimal_gamma_shared(data),
              torch.randn(data.d, generator=gen, dtype=torch.float64)]
    for gamma in gammas:
        def predict(b, g=gamma):
            return torch.stack([debiased_gd_diag_predict(b, n, g) for n in range(data.n_tasks)], -1)

        m, se = mc_task_risk(predict, data, n=20_000, seed=3)
        for n in range(data.n_tasks):
            want = debiased_gd_diag_risk(gamma, data, n)
            assert abs(float(m[n]) - want) < 4 * float(se[n]), (gamma, n, float(m[n]), want)


def test_diag_risk_reduces_to_the_isotropic_forms():
    # on the support: the isotropic debiased GD risk with d -> s_n; on all coordinates: with d
    for data in (DATA, SMALL):
        for n, S in enumerate(data.supports):
            for eta in (0.5, 0.9):
                g = torch.zeros(data.d, dtype=torch.float64)
                g[list(S)] = eta
                assert abs(debiased_gd_diag_risk(g, data, n) - debiased_gd_risk(eta, len(S), data.L, data.sigma2)) < 1e-12
                g = torch.full((data.d,), eta, dtype=torch.float64)
                assert abs(debiased_gd_diag_risk(g, data, n) - debiased_gd_risk(eta, data.d, data.L, data.sigma2)) < 1e-12


def test_optimal_preconditioners_minimise_the_risks():
    gen = torch.Generator().manual_seed(1)
    for data in (DATA, SMALL):
        for n in range(data.n_tasks):
            g0 = support_gamma(data, n)
            r0 = debiased_gd_diag_risk(g0, data, n)
            s = len(data.supports[n])
            eta = data.L / (data.L + s * (1 + data.sigma2))
            assert abs(r0 - (1 + data.sigma2 - eta * (data.L - 1) / data.L)) < 1e-12
            for _ in range(20):
                g = g0 + 0.05 * torch.randn(data.d, generator=gen, dtype=torch.float64)
                assert debiased_gd_diag_risk(g, data, n) > r0
            assert debiased_gd_diag_risk(support_gamma(data, n, "all"), data, n) > r0

        def avg(g):
            return sum(debiased_gd_diag_risk(g, data, n) for n in range(data.n_tasks)) / data.n_tasks

        gs = optimal_gamma_shared(data)
        for _ in range(20):
            assert avg(gs + 0.05 * torch.randn(data.d, generator=gen, dtype=torch.float64)) > avg(gs)
    gs = optimal_gamma_shared(DATA)
    assert gs[2] > gs[0] and torch.allclose(gs[[0, 1, 4, 5]], gs[0].expand(4)) and gs[2] == gs[3]
    assert optimal_gamma_shared(SMALL)[4] == 0


def test_bayes_risk_matches_monte_carlo_of_the_posterior_mean():
    def predict(b):
        return torch.stack([bayes_task_predict(b, SMALL, k) for k in range(SMALL.n_tasks)], -1)

    m, se_mc = mc_task_risk(predict, SMALL, n=40_000, seed=6)
    for n in range(SMALL.n_tasks):
        r, se = bayes_task_risk(SMALL, n, n=40_000, seed=5)
        assert abs(float(m[n]) - r) < 4 * math.hypot(float(se_mc[n]), se)
        assert r < debiased_gd_diag_risk(support_gamma(SMALL, n), SMALL, n)


def test_reference_table_orders_the_predictors():
    ref = reference_risks(DATA, n_bayes=20_000)
    assert list(ref.index) == [1, 2]
    row = ref.loc[1]
    assert row["Bayes"] < row["dGD on support"] < row["shared weighted dGD"] < row["dGD on all coordinates"]
    assert abs(row["dGD on support"] - (1.1 - 39 / 40 * 40 / 44.4)) < 1e-12


def _circuits(omegas, mus, d=6, N=2):
    """KQ (H, D, D) with diagonal block diag(omega_h), OV (H, N, D) with OV[h, n, d+n] = mu_{h,n}."""
    omegas = torch.tensor(omegas, dtype=torch.float64)
    mus = torch.tensor(mus, dtype=torch.float64)
    H, D = omegas.shape[0], d + N
    KQ = torch.zeros(H, D, D, dtype=torch.float64)
    KQ[:, :d, :d] = torch.diag_embed(omegas)
    OV = torch.zeros(H, N, D, dtype=torch.float64)
    for n in range(N):
        OV[:, n, d + n] = mus[:, n]
    return KQ, OV


# A sign-matched superposition (paper 1, C.3 Mode IV) solved by hand: per coordinate group (task 1
# only, shared, task 2 only) head 1 has omega = -(1, 1.5, 0.5), head 2 (0.5, 1.5, 1), head 3
# (-2.5, 0, 2.5); mu = (-1, -2), (2, 1), (-1, 1).  Then sum_h mu_{h,n} = 0 and Gamma_1 = 4.5 on S_1,
# 0 on task 2's own coordinates (and the mirror image for task 2).
SUPER_OMEGA = [[-1, -1, -1.5, -1.5, -0.5, -0.5], [0.5, 0.5, 1.5, 1.5, 1, 1], [-2.5, -2.5, 0, 0, 2.5, 2.5]]
SUPER_MU = [[-1, -2], [2, 1], [-1, 1]]


def test_effective_gamma_is_the_first_order_model():
    b = sample_batch(DATA, 500, 11)
    errs = []
    for eps in (1e-2, 1e-3):
        KQ, OV = _circuits([[eps * v for v in w] for w in SUPER_OMEGA], SUPER_MU)
        model = AttentionEnsemble.from_circuits(KQ[None], OV[None], 6).requires_grad_(False)
        gamma, msum = effective_gamma(KQ, OV, 6)
        assert torch.allclose(msum, torch.zeros(2, dtype=torch.float64))
        assert torch.allclose(mu_matrix(OV, 6), torch.tensor(SUPER_MU, dtype=torch.float64))
        pred = model(b)[0]  # (B, N)
        lin = torch.stack([debiased_gd_diag_predict(b, n, gamma[n]) for n in range(2)], -1)
        errs.append(float((pred - lin).norm() / lin.norm()))
    assert errs[0] < 0.05 and errs[1] < errs[0] / 5  # the remainder is of higher order in omega
    KQ, OV = _circuits(SUPER_OMEGA, SUPER_MU)
    gamma, _ = effective_gamma(KQ, OV, 6)
    assert torch.allclose(gamma, 4.5 * DATA.support_mask())


def test_modes_on_hand_built_circuits():
    w = 0.3
    kernel = _circuits([[2, 2, 3, 3, 2, 2]], [[0.9, 0.9]])
    shared = _circuits([[w, w, 1.1 * w, 1.1 * w, w, w], [-w, -w, -1.1 * w, -1.1 * w, -w, -w]], [[2, 2], [-2, -2]])
    alloc = _circuits([[w, w, w, w, 0, 0], [-w, -w, -w, -w, 0, 0], [0, 0, w, w, w, w], [0, 0, -w, -w, -w, -w]],
                      [[2, 0], [-2, 0], [0, 2], [0, -2]])
    superpos = _circuits([[w * v for v in om] for om in SUPER_OMEGA], SUPER_MU)
    modes = {name: classify_mode(*c, DATA) for name, c in
             [("kernel", kernel), ("shared-dGD", shared), ("allocated", alloc), ("superposition", superpos)]}
    for name, s in modes.items():
        assert s.mode == name, (name, s.mode, s.reason)
    assert modes["kernel"].shared_ratio == pytest.approx(1.5)
    assert modes["shared-dGD"].shared_ratio == pytest.approx(1.1)
    assert modes["allocated"].labels == ["+1", "-1", "+2", "-2"]
    assert modes["superposition"].labels == ["-1 -2", "+1 +2", "-1 +2"]
    assert all(s.sign_matched for s in modes.values())
    assert max(modes["allocated"].gamma_off_ratio) == 0 and max(modes["superposition"].gamma_off_ratio) < 1e-12
    assert min(modes["shared-dGD"].gamma_off_ratio) > 0.9
    # a head writing to both tasks with opposite signs, but a task without a negative head: not Mode IV
    s = classify_mode(*_circuits([[w] * 6, [w] * 6, [w] * 6], [[1, 1], [1, -1], [1, 1]]), DATA)
    assert s.mode == "other"
    # allocated heads whose KQ still reads the other task's coordinates: not Mode III
    leaky = _circuits([[w] * 6, [-w] * 6, [w] * 6, [-w] * 6], [[2, 0], [-2, 0], [0, 2], [0, -2]])
    s = classify_mode(*leaky, DATA)
    assert s.mode == "other" and "support" in s.reason
    # a dummy head is ignored
    alloc_dummy = _circuits([[w, w, w, w, 0, 0], [-w, -w, -w, -w, 0, 0], [0, 0, w, w, w, w], [0, 0, -w, -w, -w, -w],
                             [0.01] * 6], [[2, 0], [-2, 0], [0, 2], [0, -2], [0.1, 0.1]])
    assert classify_mode(*alloc_dummy, DATA).mode == "allocated"
    # unstructured circuits (a fresh initialisation) have no mode, whatever their signs
    gen = torch.Generator().manual_seed(3)
    s = classify_mode(torch.randn(3, 8, 8, generator=gen), torch.randn(3, 2, 8, generator=gen), DATA)
    assert s.mode == "other" and "global pattern" in s.reason
    tab = pattern_table(*alloc, DATA)
    assert list(tab.columns) == ["KQ task 1 only", "KQ shared", "KQ task 2 only", "OV task 1", "OV task 2", "role"]
    assert tab.loc[3, "KQ task 1 only"] == 0 and tab.loc[3, "KQ shared"] == pytest.approx(w)


@torch.no_grad()
def per_task_risk(model, data: DataConfig, n: int, seed: int, chunk: int = 2_000):
    """Per-task squared errors of every model of an ensemble on ``n`` fresh prompts, written
    directly: ``(mean (R, N), std error (R, N), errors (R, n, N))``."""
    e = torch.cat([((model(b) - b.yq) ** 2) for b in sample_chunks(data, n, seed, chunk, dtype=model.Q.dtype)], 1)
    return e.mean(1), e.std(1) / math.sqrt(e.shape[1]), e


def test_per_task_risk_splits_model_risk():
    gen = torch.Generator().manual_seed(2)
    model = AttentionEnsemble([1, 3], 6, n_tasks=2, R=2, dtype=torch.float64)
    model.reset_parameters([gen, gen])
    per_task, _, _ = per_task_risk(model, DATA, n=3000, seed=4)
    total, _ = model_risk(model, DATA, n=3000, seed=4)
    assert per_task.shape == (2, 2)
    assert torch.allclose(per_task.mean(-1), total, rtol=1e-10)


def test_label_rescaling_is_undone_by_the_label_columns_of_k_v_and_the_rows_of_o():
    """The authors' multi-task data is this book's with task n's labels multiplied by c_n = sqrt(s_n)
    (and a noiseless query label): K_h, V_h with their label columns divided by c_n and O_h with row n
    multiplied by c_n predict c_n times the original model's output on the rescaled tokens."""
    gen = torch.Generator().manual_seed(5)
    model = AttentionEnsemble([3], 6, n_tasks=2, R=1, dtype=torch.float64)
    model.reset_parameters([gen])
    with torch.no_grad():  # make the label columns of K and V matter
        model.K.add_(0.3 * torch.randn(model.K.shape, generator=gen, dtype=torch.float64))
    b = sample_batch(DATA, 64, 3, dtype=torch.float64)
    c = torch.tensor([2.0, 0.5], dtype=torch.float64)  # per-task label scales
    scale = torch.cat([torch.ones(6, dtype=torch.float64), c])  # (D,) on the token rows
    scaled = b._replace(tokens=b.tokens * scale[:, None])
    other = AttentionEnsemble([3], 6, n_tasks=2, R=1, dtype=torch.float64)
    with torch.no_grad():
        other.Q.copy_(model.Q)
        other.K.copy_(model.K / scale)  # columns of K_h: divide the label columns by c_n
        other.V.copy_(model.V / scale)
        other.O.copy_(model.O * c[:, None])  # row n of O_h times c_n
        want = model(b) * c  # (1, B, N)
        torch.testing.assert_close(other(scaled), want, rtol=1e-10, atol=1e-12)
        assert not torch.allclose(model(scaled), want, rtol=1e-3)  # the plain model is not invariant


def test_global_pattern_and_expected_modes():
    KQ, OV = _circuits(SUPER_OMEGA, SUPER_MU)
    assert global_pattern(KQ, OV, DATA) == (0.0, 0.0)
    KQ[0, 0, 1] = 3.0  # one off-diagonal entry: sqrt(9 / sum of squared diagonals)
    OV[1, 0, 7] = 1.0  # task 1's output reads task 2's label
    kq_off, ov_off = global_pattern(KQ, OV, DATA)
    diag2 = sum(v * v for w in SUPER_OMEGA for v in w)
    assert kq_off == pytest.approx(math.sqrt(9 / diag2))
    assert ov_off == pytest.approx(math.sqrt(1 / sum(m * m for mu in SUPER_MU for m in mu)))
    assert [expected_mode(H, 2) for H in (1, 2, 3, 4, 5)] == ["kernel", "shared-dGD", "superposition", "allocated",
                                                              "allocated"]
    assert expected_mode(5, 3) == "superposition"
    with pytest.raises(ValueError, match="N=1 is invalid"):
        expected_mode(2, 1)




# ------------------------------------------------------------------------------ chapter 7's parameters and tables
def test_check_supports_names_the_bad_entry():
    assert check_supports([[0, 1, 2, 3], [2, 3, 4, 5]], 6) == ((0, 1, 2, 3), (2, 3, 4, 5))
    assert check_supports(((0,), (0,), (1,)), 2) == ((0,), (0,), (1,))
    for bad, name in [([[0, 1]], "supports"), ([[0]] * 9, "supports"), ("01", "supports"), (3, "supports"),
                      ([[0], []], r"supports\[1\]"), ([[0], [6]], r"supports\[1\]\[0\]"),
                      ([[0], [1, 1]], r"supports\[1\]"), ([[0], [0.5]], r"supports\[1\]\[0\]"),
                      ([[0], 1], r"supports\[1\]")]:
        with pytest.raises(ValueError, match=rf"^{name}=.* is invalid: accepted"):
            check_supports(bad, 6)


def test_monte_carlo_caps_bound_the_work():
    from icl_lib.paper1.multitask.references import BAYES_WORK, TEST_WORK

    # the defaults (L = 40, supports of 4 + 4, heads 1..4 x 6 seeds, D = 8) are far below the caps
    assert max_bayes_draws(40, [[0, 1, 2, 3], [2, 3, 4, 5]]) == BAYES_WORK // (40 * 8) > 1_000_000
    assert max_test_prompts([1, 2, 3, 4], 6, 40, 8) == TEST_WORK // (24 * 4 * 40 * 8) > 200_000
    # L = 512 with 8 tasks of 32 coordinates: 38,146 draws; 16 heads x 32 seeds at L = 512, D = 40: 2,384 prompts
    assert max_bayes_draws(512, [list(range(32))] * 8) == 5 * 10**9 // (512 * 256) == 38_146
    assert max_test_prompts([16], 32, 512, 40) == max(2, 25 * 10**9 // (32 * 16 * 512 * 40)) == 2_384


def test_shared_and_single_coordinates_and_the_predicted_ratio():
    assert shared_and_single(DATA) == ([2, 3], [0, 1, 4, 5])
    assert shared_and_single(SMALL) == ([1], [0, 2, 3])  # the unused coordinate is on neither side
    # a_j = 1/4 + 1/4 on the shared coordinates, 1/4 on the others; gamma_j = L a_j / (L a_j + N (1 + s2))
    want = (40 * 0.5 / (40 * 0.5 + 2 * 1.1)) / (40 * 0.25 / (40 * 0.25 + 2 * 1.1))
    assert predicted_shared_ratio(DATA) == pytest.approx(want, rel=1e-12)
    same = DataConfig(d=3, L=10, supports=[[0, 1, 2], [0, 1, 2]])
    assert shared_and_single(same) == ([0, 1, 2], []) and math.isnan(predicted_shared_ratio(same))


def _run(KQ, OV, seed, history=None):
    """A Run of one hand-built model: K = V = I, Q = sqrt(D) KQ, O = OV (the model whose circuits these are);
    ``history`` is a list of (KQ, OV) at the logged steps 0, 10, 20, ... (default: the final circuits only)."""
    H, D, _ = KQ.shape
    spec = RunSpec(data=DATA, model=ModelConfig(heads=H), seed=seed)
    eye = torch.eye(D, dtype=torch.float64).expand(H, D, D).clone()
    params = {"Q": KQ * math.sqrt(D), "K": eye, "V": eye.clone(), "O": OV.clone()}
    history = history or [(KQ, OV)]
    hist = {"step": torch.arange(len(history)) * 10, "KQ": torch.stack([h[0] for h in history]),
            "OV": torch.stack([h[1] for h in history])}
    return Run(spec=spec, params=params, history=hist)


W = 0.3
KERNEL = _circuits([[2 * W, 2 * W, 3 * W, 3 * W, 2 * W, 2 * W]], [[0.9, 0.9]])
ALLOC = _circuits([[W, W, W, W, 0, 0], [-W, -W, -W, -W, 0, 0], [0, 0, W, W, W, W], [0, 0, -W, -W, -W, -W]],
                  [[2, 0], [-2, 0], [0, 2], [0, -2]])
LEAKY = _circuits([[W] * 6, [-W] * 6, [W] * 6, [-W] * 6], [[2, 0], [-2, 0], [0, 2], [0, -2]])  # "other"
SUPERPOS = _circuits([[W * v for v in om] for om in SUPER_OMEGA], SUPER_MU)


def _sweep():
    """H = 1: two kernel seeds; H = 3: one superposed seed; H = 4: a leaky seed ("other") then an allocated one,
    whose KQ gets a small off-diagonal entry 0.1 W (global pattern ratio 0.1 W / sqrt(sum omega^2))."""
    alloc = (ALLOC[0].clone(), ALLOC[1])
    alloc[0][0, 0, 1] = 0.1 * W
    sweep = {1: [_run(*KERNEL, 5), _run(*KERNEL, 6)], 3: [_run(*SUPERPOS, 5)], 4: [_run(*LEAKY, 5), _run(*alloc, 6)]}
    return sweep, {H: [classify_mode(r.KQ, r.OV, DATA) for r in runs] for H, runs in sweep.items()}


def test_chapter7_mode_tables_on_hand_built_models():
    sweep, modes = _sweep()
    assert [s.mode for H in modes for s in modes[H]] == ["kernel", "kernel", "superposition", "other", "allocated"]
    tab = paper_mode_table(modes, 2)
    assert tab.loc[4, "allocated"] == 1 and tab.loc[4, "other"] == 1 and tab.loc[4, "seeds"] == 2
    assert tab.loc[1, "kernel"] == 2 and list(tab["paper's mode"]) == ["kernel", "superposition", "allocated"]
    frac = paper_mode_fractions(modes, 2)
    assert list(frac.columns) == ["mode", "in mode", "seeds", "fraction"]
    assert frac.loc[4].tolist() == ["allocated", 1, 2, 0.5] and frac.loc[1, "fraction"] == 1.0
    assert shown_seeds(modes, 2) == {1: 0, 3: 0, 4: 1}
    assert shown_seeds(modes, 3) == {1: 0, 3: 0, 4: 0}  # N = 3: H = 3, 4 want superposition; H = 4 has none
    per = per_model_table(sweep, modes)
    assert list(per.index) == [(1, 5), (1, 6), (3, 5), (4, 5), (4, 6)]
    assert per.loc[(4, 6), "heads"] == "+1  |  -1  |  +2  |  -2" and per.loc[(4, 6), "mode"] == "allocated"
    assert per.loc[(1, 5), "shared/single KQ"] == pytest.approx(1.5)
    # leaky: Gamma_n = 4 W on every coordinate, so off/on = 1 for both tasks; allocated: 0
    assert per.loc[(4, 5), "Gamma_1 off/on"] == pytest.approx(1.0) and per.loc[(4, 6), "Gamma_2 off/on"] == 0
    off = gamma_off_estimates(modes)
    assert off[4].value == pytest.approx(0.5) and off[3].value < 1e-12
    assert off[4] == median_ci([max(s.gamma_off_ratio) for s in modes[4]])


def test_global_pattern_table_rows_follow_the_sweep():
    sweep, _ = _sweep()
    gp = global_pattern_table(sweep, DATA)
    assert list(gp.index) == [(1, 5), (1, 6), (3, 5), (4, 5), (4, 6)]
    assert list(gp.columns) == ["KQ off-diagonal", "OV off-pattern"]
    assert gp.drop(index=[(4, 6)]).abs().max().max() < 1e-6  # round-off of the KQ mass off the diagonal
    assert gp.loc[(4, 6), "KQ off-diagonal"] == pytest.approx(0.1 * W / math.sqrt(16 * W * W))
    assert gp.loc[(4, 6), "OV off-pattern"] == 0


def test_task_loss_table_matches_each_model_alone():
    """Each row is that model's loss on the shared prompts, computed here for the model alone."""
    sweep, modes = _sweep()
    tab = task_loss_table(sweep, modes, DATA, n=500, seed=9)
    assert len(tab) == 5 * 2 and list(tab.columns)[:6] == ["H", "seed", "task", "loss", "se", "mode"]
    assert "gap H4" not in tab.columns  # no pair_H
    k = 0
    for H, runs in sweep.items():
        for r, s in zip(runs, modes[H]):
            model = AttentionEnsemble.from_circuits(r.KQ[None], r.OV[None], 6).requires_grad_(False)
            risk, se, _ = per_task_risk(model, DATA, n=500, seed=9)  # (1, N)
            for t in range(2):
                row = tab.iloc[2 * k + t]
                assert (row["H"], row["seed"], row["task"], row["mode"]) == (H, r.spec.seed, t + 1, s.mode)
                assert row["loss"] == pytest.approx(float(risk[0, t]), rel=1e-9)
                assert row["se"] == pytest.approx(float(se[0, t]), rel=1e-9)
            k += 1


def test_task_loss_table_paired_columns_against_a_direct_computation():
    """Each gap is the mean per-prompt difference of squared errors (model minus reference, or minus
    the same seed's H = 4 model) over the reference's closed-form risk, its se that of the
    differences; "prefers shared" is +1 for the shared-weighted debiased GD itself and -1 for the
    all-coordinate one."""
    sweep, modes = _sweep()
    n, seed = 600, 9
    tab = task_loss_table(sweep, modes, DATA, n=n, seed=seed, pair_H=4, chunk=250)
    runs = [r for rs in sweep.values() for r in rs]
    alone = [AttentionEnsemble.from_circuits(r.KQ[None], r.OV[None], 6).requires_grad_(False) for r in runs]
    e = torch.cat([per_task_risk(m, DATA, n=n, seed=seed, chunk=250)[2] for m in alone])  # (5, n, N)
    g_all = [support_gamma(DATA, t, "all") for t in range(2)]
    g_sh = optimal_gamma_shared(DATA)
    b = torch.cat([x.tokens for x in sample_chunks(DATA, n, seed, 250)])
    b = sample_chunks(DATA, n, seed, n).__next__()._replace(tokens=b)
    p_all = torch.stack([debiased_gd_diag_predict(b, t, g_all[t]) for t in range(2)], -1)  # (n, N)
    p_sh = torch.stack([debiased_gd_diag_predict(b, t, g_sh) for t in range(2)], -1)
    with torch.no_grad():
        outs = [torch.cat([m(x)[0] for x in sample_chunks(DATA, n, seed, 250, dtype=m.Q.dtype)]) for m in alone]
    for k, r in enumerate(runs):
        for t in range(2):
            row = tab[(tab.H == r.spec.model.heads) & (tab.seed == r.spec.seed) & (tab.task == t + 1)].iloc[0]
            diff = e[k, :, t] - (p_all[:, t] - b.yq[:, t]) ** 2
            R_all = debiased_gd_diag_risk(g_all[t], DATA, t)
            assert row["gap all"] == pytest.approx(float(diff.mean()) / R_all, rel=1e-6)
            assert row["gap all se"] == pytest.approx(float(diff.std() / math.sqrt(n)) / R_all, rel=1e-6)
            pref = ((outs[k][:, t] - p_all[:, t]) ** 2 - (outs[k][:, t] - p_sh[:, t]) ** 2).mean()
            assert row["prefers shared"] == pytest.approx(float(pref / ((p_sh[:, t] - p_all[:, t]) ** 2).mean()),
                                                          rel=1e-6)
            partner = {5: 3, 6: 4}.get(r.spec.seed)  # the H = 4 run of the same seed
            if r.spec.seed in (5, 6):
                d4 = e[k, :, t] - e[partner, :, t]
                R_sup = debiased_gd_diag_risk(support_gamma(DATA, t, "support"), DATA, t)
                assert row["gap H4"] == pytest.approx(float(d4.mean()) / R_sup, rel=1e-6, abs=1e-12)
    h4 = tab[tab.H == 4]
    assert (h4["gap H4"] == 0).all() and (h4["gap H4 se"] == 0).all()


def test_task_loss_table_prefers_shared_is_plus_one_on_the_reference_itself():
    """A model that is (to first order) the shared-weighted debiased GD prefers it: +1 up to the
    softmax's linearisation error; the all-coordinate one gives about -1."""
    from icl_lib.paper1.multitask.head_modes import classify_mode as cm
    L, s = DATA.L, 1e-3  # omega = s gamma, mu = +-1/s: Gamma_n = gamma up to O(s)
    out = {}
    for name, g in (("shared", optimal_gamma_shared(DATA)), ("all", support_gamma(DATA, 0, "all"))):
        om = [[s * v / 2 for v in g.tolist()], [-s * v / 2 for v in g.tolist()]]
        KQ, OV = _circuits(om, [[1 / s, 1 / s], [-1 / s, -1 / s]])
        run = _run(KQ, OV, 0)
        sweep = {2: [run]}
        tab = task_loss_table(sweep, {2: [cm(run.KQ, run.OV, DATA)]}, DATA, n=4000, seed=1)
        out[name] = tab["prefers shared"].tolist()
    assert out["shared"] == pytest.approx([1, 1], abs=0.1) and out["all"] == pytest.approx([-1, -1], abs=0.1)


def test_chapter7_estimates_are_the_stats_intervals_of_the_tables():
    import pandas as pd
    from icl_lib.stats import largest, seed_median_ci

    sweep, modes = _sweep()
    frac = mode_estimates(modes, 2)
    assert frac[4] == proportion_ci(1, 2) and frac[1] == proportion_ci(2, 2) and frac[3] == proportion_ci(1, 1)
    gp = global_pattern_table(sweep, DATA)
    ge = global_pattern_estimates(gp)
    want = largest({f"H={H}": median_ci(g["KQ off-diagonal"]) for H, g in gp.groupby(level="H")})
    assert ge["KQ off-diagonal"] == want and ge["KQ off-diagonal"].value == pytest.approx(0.1 * W / (4 * W) / 2)
    ratios = shared_ratio_estimates(modes)
    assert set(ratios) == {(1, "mode"), (1, "all")}  # no H = 2 in the sweep
    assert ratios[(1, "mode")] == median_ci([s.shared_ratio for s in modes[1]])
    rows = pd.DataFrame({"H": [2] * 8, "task": [1, 2] * 4, "gap shared": [0.01, 0.02, 0.03, -0.01, 0.0, 0.05, 0.02, 0.0],
                         "gap shared se": [0.001] * 7 + [0.004]})
    rows.loc[8] = [3, 1, 9.0, 0.1]  # another H: left out
    est = loss_gap_estimates(rows, 2, "gap shared")
    assert set(est) == {1, 2}
    assert est[1] == seed_median_ci([0.01, 0.03, 0.0, 0.02], [0.001] * 4)
    assert est[2] == seed_median_ci([0.02, -0.01, 0.05, 0.0], [0.001] * 3 + [0.004])
    assert loss_gap_estimates(rows, 4, "gap shared") == {}


def test_mode_history_fractions_count_the_seeds_in_the_paper_mode():
    gen = torch.Generator().manual_seed(3)
    noise = (torch.randn(4, 8, 8, generator=gen, dtype=torch.float64),
             torch.randn(4, 2, 8, generator=gen, dtype=torch.float64))  # no global pattern: "other"
    sweep = {1: [_run(*KERNEL, 0, [KERNEL, KERNEL, KERNEL])],
             4: [_run(*ALLOC, 0, [noise, ALLOC, ALLOC]), _run(*ALLOC, 1, [noise, noise, ALLOC])]}
    steps, frac, first = mode_history_fractions(sweep, DATA)
    assert steps.tolist() == [0, 10, 20] and first == 10.0
    assert list(frac) == ["H = 1 (kernel)", "H = 4 (allocated)"]
    assert frac["H = 1 (kernel)"].tolist() == [1, 1, 1] and frac["H = 4 (allocated)"].tolist() == [0, 0.5, 1]
    _, _, first = mode_history_fractions({1: sweep[1]}, DATA)
    assert first is None
