"""Multi-task references and mode rules (icl_lib.paper1.multitask, chapter 7): closed forms against Monte
Carlo, optimality by perturbation, predictors against plain loops, modes on hand-built circuits."""

import math
from typing import Callable

import pytest
import torch

from icl_lib import AttentionEnsemble, DataConfig
from icl_lib.sampling import sample_batch
from icl_lib.circuits import mu_matrix
from icl_lib.estimators import debiased_gd_risk, model_risk
from icl_lib.paper1.multitask.head_modes import (
    classify_mode,
    effective_gamma,
    expected_mode,
    global_pattern,
    pattern_table,
)
from icl_lib.paper1.multitask.references import (
    bayes_task_risk,
    coordinate_groups,
    debiased_gd_diag_risk,
    optimal_gamma_shared,
    reference_gap,
    reference_risks,
    support_gamma,
    task_batch,
)
from icl_lib.sampling import Batch, sample_chunks
from icl_lib.estimators import debiased_gd_predict, ridge_predict
from icl_lib.validate import check_int
from tests.paper1.multitask_common import (
    DATA,
    SMALL,
    SUPER_MU,
    SUPER_OMEGA,
    _circuits,
    debiased_gd_diag_predict,
    per_task_risk,
)



# per-task reference predictors and their Monte Carlo risk, against which the closed forms are tested
def debiased_gd_support_predict(batch: Batch, data: DataConfig, task: int, eta: float) -> torch.Tensor:
    """Debiased GD on task ``task``'s true support: ``(eta/L) sum_i y_{i,n} (x_{i,S} - xbar_S)^T x_{q,S}``
    (paper 1, C.3 Mode III).  Returns ``(..., B)``."""
    return debiased_gd_predict(task_batch(batch, task, data.supports[task]), eta)


def debiased_gd_all_predict(batch: Batch, task: int, eta: float) -> torch.Tensor:
    """Debiased GD on all ``d`` coordinates for task ``task`` (paper 1, eq. 4.6 applied per task)."""
    return debiased_gd_predict(task_batch(batch, task), eta)


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
    # the rivals of chapter 7's loss claims: a reference's gap to another, the task nearest to 0
    shared = reference_gap(ref, "shared weighted dGD", "dGD on support")
    assert shared == pytest.approx(row["shared weighted dGD"] / row["dGD on support"] - 1) and shared > 0.05
    assert 0 < reference_gap(ref, "dGD on all coordinates", "shared weighted dGD") < 0.05
    ref2 = ref.copy()
    ref2.loc[2, "shared weighted dGD"] = ref2.loc[2, "dGD on support"] * 1.01  # task 2 nearer
    assert reference_gap(ref2, "shared weighted dGD", "dGD on support") == pytest.approx(0.01)
    with pytest.raises(ValueError, match="^column="):
        reference_gap(ref, "vanilla", "dGD on support")


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
