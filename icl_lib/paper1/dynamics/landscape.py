"""The true ICL loss of two symmetric heads against the approximate loss (4.1) (paper 1, Prop. 4.1, Figure 5).

* :func:`symmetric_two_head`, :func:`reparam_circuits` -- circuits in the reparameterised form
  (3.1): ``KQ_h = [[omega_h I_d, 0], [0, 0]]``, ``OV_h = mu_h e_y``;
* :func:`true_loss_mc`, :func:`true_loss_cv` -- Monte Carlo of the true ICL loss of such circuits,
  one ensemble for a whole grid, plain or with debiased GD as a control variate;
* :func:`valley_floor`, :func:`landscape_mc`, :func:`landscape_statistics`, :func:`valley_table`,
  :func:`valley_statistics` -- chapter 3's grid (Figure 5) and the valley floor ``m = mu*(w)`` of
  (4.1), with the values and estimates of its claims.

Used by chapter 3; chapter 1 builds hand-set circuits with :func:`reparam_circuits`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from ...config import DataConfig
from ...sampling import sample_chunks
from ...estimators import debiased_gd_predict, debiased_gd_risk, model_risk
from ...models import AttentionEnsemble
from ...seeding import derive_seed
from ...stats import Estimate, mean_se_from_sums
from ...validate import check_int
from ..approx_loss import ApproxLossConfig, approx_loss, loss_star, mu_star, s_star

__all__ = [
    "symmetric_two_head",
    "reparam_circuits",
    "true_loss_mc",
    "valley_floor",
    "landscape_mc",
    "landscape_statistics",
    "valley_table",
    "valley_statistics",
    "true_loss_cv",
]


# ------------------------------------------------------------------------------- true loss by Monte Carlo
def symmetric_two_head(w, m) -> tuple[torch.Tensor, torch.Tensor]:
    """``omega = (w, -w)``, ``mu = (m, -m)`` for broadcast ``w``, ``m``: shapes ``(..., 2)`` (Prop. 4.1, Fig. 5)."""
    w, m = torch.broadcast_tensors(torch.as_tensor(w, dtype=torch.float64), torch.as_tensor(m, dtype=torch.float64))
    return torch.stack([w, -w], -1), torch.stack([m, -m], -1)


def reparam_circuits(omega: torch.Tensor, mu: torch.Tensor, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Circuits of the reparameterised form (3.1): ``KQ_h = [[omega_h I_d, 0], [0, 0]]``,
    ``OV_h = (0, ..., 0, mu_h)``; ``omega, mu (R, H)`` give ``KQ (R, H, D, D)``, ``OV (R, H, 1, D)``.

    The free last column of ``KQ_h`` is set to 0.  Chapter 3.
    """
    d = check_int("d", d, 1)
    omega = torch.as_tensor(omega, dtype=torch.float64)
    mu = torch.as_tensor(mu, dtype=omega.dtype)
    if omega.ndim != 2 or omega.shape != mu.shape:
        raise ValueError(f"omega.shape={tuple(omega.shape)} is invalid: accepted (R, H) equal to mu.shape={tuple(mu.shape)}")
    R, H = omega.shape
    D = d + 1
    KQ = torch.zeros(R, H, D, D, dtype=omega.dtype)
    idx = torch.arange(d)
    KQ[:, :, idx, idx] = omega[..., None]  # (R, H, d) on the diagonal of the d x d block
    OV = torch.zeros(R, H, 1, D, dtype=omega.dtype)
    OV[:, :, 0, d] = mu
    return KQ, OV


def true_loss_mc(
    omega,
    mu,
    data: DataConfig,
    n: int = 100_000,
    seed: int = 0,
    chunk: int = 1_000,
    models_per_call: int = 128,
    dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Monte Carlo ICL loss of reparameterised circuits ``omega, mu (R, H)``: ``(mean (R,), std error (R,))``.

    Builds :meth:`AttentionEnsemble.from_circuits` models for ``models_per_call`` grid points at a
    time and evaluates each group with :func:`icl_lib.estimators.model_risk` on the same ``n``
    sequences (same ``seed``), so all grid points share one test set and their differences are
    paired.  This is the "true population loss" of Proposition 4.1 / Figure 5.  ``dtype`` is the
    evaluation precision (float32 halves the time; its rounding is far below the Monte Carlo error).
    Chapter 3.
    """
    n = check_int("n", n, 2)
    means, ses = [], []
    for model in _grid_ensembles(omega, mu, data, models_per_call, dtype):
        m, s = model_risk(model, data, n=n, seed=seed, chunk=chunk)
        means.append(m.double())
        ses.append(s.double())
    return torch.cat(means), torch.cat(ses)


def _grid_ensembles(omega, mu, data: DataConfig, models_per_call: int, dtype) -> list[AttentionEnsemble]:
    """The reparameterised circuits ``omega, mu (R, H)`` as frozen ensembles of at most
    ``models_per_call`` models each, in order (for :func:`true_loss_mc` and :func:`true_loss_cv`)."""
    models_per_call = check_int("models_per_call", models_per_call, 1)
    if data.n_tasks != 1:
        raise ValueError(f"data.n_tasks={data.n_tasks} is invalid: accepted a single-task DataConfig")
    KQ, OV = reparam_circuits(omega, mu, data.d)
    KQ, OV = KQ.to(dtype), OV.to(dtype)
    return [AttentionEnsemble.from_circuits(KQ[i : i + models_per_call], OV[i : i + models_per_call],
                                            data.d).requires_grad_(False)
            for i in range(0, KQ.shape[0], models_per_call)]


@torch.no_grad()
def true_loss_cv(
    omega,
    mu,
    data: DataConfig,
    n: int = 100_000,
    seed: int = 0,
    chunk: int = 1_000,
    models_per_call: int = 128,
    dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Monte Carlo ICL loss of reparameterised circuits ``omega, mu (R, H)`` with debiased GD as a
    control variate: ``(mean (R,), std error (R,))``.

    For each grid point ``r`` with ``eta_r = sum_h mu_h omega_h``, the estimate is
    ``mean_i [(y_hat_r - y_q)^2 - (y_dGD(eta_r) - y_q)^2] + R_dGD(eta_r)``: the paired difference
    from debiased GD on the same ``n`` sequences plus debiased GD's exact risk
    (:func:`icl_lib.estimators.debiased_gd_risk`).  It is unbiased for the true loss whatever the
    circuits; its standard error is that of the paired difference, small where the model is
    close to debiased GD (small ``omega``, Section 4.3).  All grid points share the sequences
    (``seed``) as in :func:`true_loss_mc`.  Chapter 3 (Proposition 4.1, Figure 5).
    """
    n = check_int("n", n, 2)
    models = _grid_ensembles(omega, mu, data, models_per_call, dtype)
    eta = (torch.as_tensor(omega, dtype=torch.float64) * torch.as_tensor(mu, dtype=torch.float64)).sum(-1)  # (R,)
    R = eta.shape[0]
    s1, s2 = torch.zeros(R, dtype=torch.float64), torch.zeros(R, dtype=torch.float64)
    for b in sample_chunks(data, n, seed, chunk, dtype=dtype):
        g = debiased_gd_predict(b, 1.0).double()  # (B,) debiased GD with step 1
        yq = b.yq[..., 0].double()  # (B,)
        pred = torch.cat([m(b)[..., 0].double() for m in models])  # (R, B)
        diff = (pred - yq) ** 2 - (eta[:, None] * g - yq) ** 2  # (R, B) paired differences
        s1 += diff.sum(1)
        s2 += (diff**2).sum(1)
    mean, se = mean_se_from_sums(s1, s2, n)
    ref = torch.tensor([debiased_gd_risk(float(e), data.d, data.L, data.sigma2) for e in eta], dtype=torch.float64)
    return mean + ref, se


# ------------------------------------------------------------------------------- Figure 5 and the valley
LANDSCAPE_W = np.round(np.arange(1, 13) * 0.05, 2)  # (12,) w of the grid, heads omega = (w, -w)
LANDSCAPE_M = np.round(np.arange(1, 11) * 0.5, 2)  # (10,) m of the grid, heads mu = (m, -m)
VALLEY_W = np.geomspace(0.01, 0.6, 8)  # (8,) points of the valley floor m = mu*(w) of (4.1)


def valley_floor(w, cfg: ApproxLossConfig) -> tuple[np.ndarray, np.ndarray]:
    """The valley floor of (4.1) for two symmetric heads ``omega = (w, -w)``: ``m*(w)`` (eq. D.17,
    the first head's ``mu``) and the approximate loss there, both of shape ``w.shape``.  Chapter 3."""
    omega = symmetric_two_head(w, 0.0)[0]  # (n, 2)
    mu = mu_star(omega, cfg)  # (n, 2) = (m*, -m*)
    return mu[:, 0].numpy(), approx_loss(mu, omega, cfg).numpy()


def landscape_mc(data: DataConfig, n: int, seed: int) -> dict:
    """The true ICL loss by Monte Carlo and the approximate loss (4.1) for two symmetric heads
    (paper 1, Proposition 4.1, Figure 5), on the grid ``LANDSCAPE_W x LANDSCAPE_M`` and on the
    valley floor at ``VALLEY_W``.

    All points are evaluated on the same ``n`` sequences drawn from ``derive_seed(seed,
    "landscape")`` (float32), with debiased GD as control variate (:func:`true_loss_cv`).
    Returns ``w (12,)``, ``m (10,)``, the grid's
    ``true``, ``se``, ``approx``, ``diff = true - approx`` (each ``(10, 12)``: rows ``m``,
    columns ``w``), and on the valley ``valley_w``, ``valley_m``, ``valley_true``, ``valley_se``,
    ``valley_approx`` (each ``(8,)``).  Chapter 3.
    """
    cfg = ApproxLossConfig(d=data.d, L=data.L, sigma2=data.sigma2)
    W, M = np.meshgrid(LANDSCAPE_W, LANDSCAPE_M)  # (10, 12): rows m, columns w
    omega_g, mu_g = symmetric_two_head(W.ravel(), M.ravel())  # (120, 2)
    omega_v = symmetric_two_head(VALLEY_W, 0.0)[0]  # (8, 2)
    mu_v = mu_star(omega_v, cfg)  # (8, 2): the valley floor mu*(omega) of (4.1)
    omega_all, mu_all = torch.cat([omega_g, omega_v]), torch.cat([mu_g, mu_v])
    true_all, se_all = true_loss_cv(
        omega_all, mu_all, data, n=n, seed=derive_seed(seed, "landscape"), dtype=torch.float32
    )
    approx_all = approx_loss(mu_all, omega_all, cfg)
    G = len(omega_g)
    true = true_all[:G].reshape(W.shape).numpy()
    approx = approx_all[:G].reshape(W.shape).numpy()
    return {
        "w": LANDSCAPE_W, "m": LANDSCAPE_M, "true": true, "se": se_all[:G].reshape(W.shape).numpy(),
        "approx": approx, "diff": true - approx, "valley_w": VALLEY_W, "valley_m": mu_v[:, 0].numpy(),
        "valley_true": true_all[G:].numpy(), "valley_se": se_all[G:].numpy(),
        "valley_approx": approx_all[G:].numpy(),
    }


def landscape_statistics(land: dict, cfg: ApproxLossConfig | None = None) -> dict:
    """Chapter 3's summary of :func:`landscape_mc`'s grid: the medians and maxima of the standard
    error (``se_med``, ``se_max``) and of ``|true - (4.1)|`` (``diff_med``, ``diff_max``); for
    ``w <= 0.15`` the largest difference ``err_small`` and standard error ``se_small``; the mean
    ``|difference|`` over ``m`` at the smallest and largest ``w`` (``err_w0``, ``err_w1``).  With
    ``cfg``, the claims' estimates (Proposition 4.1):

    * ``small``: ``max |true - (4.1)|`` over the points with ``w <= 0.15``, with the interval
      ``[max_i (|d_i| - 1.96 se_i), max_i (|d_i| + 1.96 se_i)]`` (each point's 95% interval);
    * ``degrade``: ``err_w1 / err_w0`` with the interval of the two means from their points'
      intervals (lower: smallest numerator over largest denominator);
    * ``gap_limit``: the largest ``1/L`` gap ``eta (2 - eta (1 + c d)) / L`` between debiased GD's
      risk and (4.1)'s small-``w`` limit, ``s* / L`` (derived in the chapter).
    """
    diff, se = land["diff"], land["se"]  # (10, 12)
    small = land["w"] <= 0.15 + 1e-9
    col_err = np.abs(diff).mean(0)  # (12,) mean |difference| per w
    out = {
        "se_med": float(np.median(se)), "se_max": float(se.max()),
        "diff_med": float(np.median(np.abs(diff))), "diff_max": float(np.abs(diff).max()),
        "excess": float((np.abs(diff[:, small]) - 3 * se[:, small]).max()),
        "err_small": float(np.abs(diff[:, small]).max()), "se_small": float(se[:, small].max()),
        "err_w0": float(col_err[0]), "err_w1": float(col_err[-1]),
    }
    if cfg is not None:
        z = 1.96
        a, e = np.abs(diff[:, small]), se[:, small]
        out["small"] = Estimate(out["err_small"], float(max((a - z * e).max(), 0.0)), float((a + z * e).max()),
                                what="largest |true - (4.1)| at w <= 0.15, per-point 95% intervals")
        lo0 = np.clip(np.abs(diff[:, 0]) - z * se[:, 0], 0, None).mean()
        hi0 = (np.abs(diff[:, 0]) + z * se[:, 0]).mean()
        lo1 = np.clip(np.abs(diff[:, -1]) - z * se[:, -1], 0, None).mean()
        hi1 = (np.abs(diff[:, -1]) + z * se[:, -1]).mean()
        out["degrade"] = Estimate(out["err_w1"] / out["err_w0"], float(lo1 / hi0),
                                  float(hi1 / lo0) if lo0 > 0 else math.inf,
                                  what="ratio of mean |true - (4.1)| at the largest and smallest w")
        out["gap_limit"] = s_star(cfg) / cfg.L
    return out


def valley_table(land: dict) -> pd.DataFrame:
    """:func:`landscape_mc` on the valley floor: ``w``, ``m*(w)``, the true loss, its standard
    error and (4.1), one row per point (paper 1, Figure 5's river valley).  Chapter 3."""
    return pd.DataFrame({"w": land["valley_w"], "m*(w)": land["valley_m"], "true (MC)": land["valley_true"],
                         "se": land["valley_se"], "(4.1)": land["valley_approx"]})


def valley_statistics(land: dict, cfg: ApproxLossConfig) -> dict:
    """The values of chapter 3's valley claims: whether (4.1) decreases as ``w`` decreases
    (``approx_decreasing``), (4.1) and the true loss at the smallest ``w`` (``approx_v0``,
    ``true_v0``, standard error ``se_v0``) and the true loss at the largest (``true_v1``), the
    standard error ``se_pair`` of their difference (the two estimates' errors added in
    quadrature, which overstates it: they share sequences), the infimum ``l_star = 1 + sigma2 -
    s*`` of (4.1) and the optimal debiased GD risk ``r_dgd`` (Section 4.3); and the claims'
    estimates with 95% normal intervals: ``decrease = true(w_max) - true(w_min)`` and
    ``limit = true(w_min) - r_dgd``.  Paper 1, Section 4.2."""
    true_v, se_v, approx_v = land["valley_true"], land["valley_se"], land["valley_approx"]  # (8,)
    r_dgd = debiased_gd_risk(s_star(cfg), cfg.d, cfg.L, cfg.sigma2)
    se_pair = math.sqrt(se_v[0] ** 2 + se_v[-1] ** 2)
    dec, lim = float(true_v[-1] - true_v[0]), float(true_v[0] - r_dgd)
    z = 1.96
    return {
        "approx_decreasing": bool(np.all(np.diff(approx_v) > 0)),  # valley_w increases, so must (4.1)
        "approx_v0": float(approx_v[0]), "true_v0": float(true_v[0]), "se_v0": float(se_v[0]),
        "true_v1": float(true_v[-1]), "se_pair": se_pair,
        "l_star": loss_star(cfg), "r_dgd": r_dgd,
        "decrease": Estimate(dec, dec - z * se_pair, dec + z * se_pair, what="true(0.6) - true(0.01)"),
        "limit": Estimate(lim, lim - z * float(se_v[0]), lim + z * float(se_v[0]), what="true(0.01) - R_dGD*"),
    }
