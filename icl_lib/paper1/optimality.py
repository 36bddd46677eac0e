"""What the trained attention computes and how good it is (paper 1, Section 4.3, Theorem 4.2, B.1, B.2).

Chapter 5's measurements, built on :mod:`icl_lib.estimators`:

* :func:`length_sweep` -- ICL loss of every model of an ensemble at several context lengths ``L``,
  on independent test sets (Figure 3, B.1, Figure 10);
* :func:`reference_curves` -- the risks of vanilla GD and debiased GD at a given step, of debiased
  GD at its optimal step ``eta*(L)``, and the Bayes risk, at every ``L``;
* :func:`effective_preconditioner`, :func:`effective_rate` -- the linearised predictor of trained
  circuits: ``y_hat ~ (1/L) sum_i y_i (x_i - xbar)^T Gamma x_q`` with
  ``Gamma = c_f sum_h mu_h KQ_h[:d, :d]`` and ``eta = c_f sum_h mu_h omega_h`` (Theorem 4.2 (i), B.2);
* :func:`realised_rate` -- the step of the debiased GD closest to a model's predictions, and
  :func:`rate_correction`, its third-order relation to ``c_f sum_h mu_h omega_h`` (derived in chapter 5);
* :func:`prediction_gaps` -- mean squared difference between a model's predictions and reference
  predictors on the same sequences (prediction-level agreement);
* :func:`paired_losses` -- models' and reference predictors' ICL losses on the same sequences, with
  the paired differences (single head against the best kernel regressor);
* :func:`kernel_regressor_search` -- the best Nadaraya-Watson bandwidth (``mu = 1``) or the best
  scaled kernel regressor ``mu NW_omega`` (free ``mu``) on a fixed Monte Carlo sample;
* :func:`bayes_ratio_grid` -- optimal debiased GD risk over the Bayes risk in the proportional
  regime, at finite ``d`` and in the limit (Theorem 4.2 (iii));
* :func:`plot_against_L` -- the chapter's loss-against-L figures in the book's style.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from .. import estimators as est
from ..config import DataConfig
from ..data import Batch, sample_batch, sample_chunks
from ..models import ACTIVATIONS
from ..seeding import derive_seed
from ..validate import check_float, check_int

__all__ = [
    "check_lengths",
    "length_sweep",
    "reference_curves",
    "activation_coefficient",
    "TAYLOR",
    "rate_correction",
    "realised_rate",
    "prediction_gaps",
    "paired_losses",
    "kernel_regressor_search",
    "bayes_ratio_grid",
]


def check_lengths(Ls: Sequence[int]) -> list[int]:
    """A chapter's list of context lengths as sorted distinct ints >= 2."""
    if isinstance(Ls, (int, float)) and not isinstance(Ls, bool):
        Ls = [Ls]
    if not isinstance(Ls, (list, tuple)) or not Ls:
        raise ValueError(f"Ls={Ls!r} is invalid: accepted a non-empty list of integers >= 2")
    return sorted({check_int("L", L, 2) for L in Ls})


# ----------------------------------------------------------------------------- losses against L
@torch.no_grad()
def length_sweep(model, data: DataConfig, Ls: Sequence[int], n: int, n_sets: int, seed: int) -> torch.Tensor:
    """ICL loss of every model of ``model`` (an :class:`~icl_lib.models.AttentionEnsemble`) at every
    ``L`` of ``Ls`` on ``n_sets`` independent test sets of ``n`` sequences each, shared by all models.

    Returns ``(R, len(Ls), n_sets)``.  Paper 1, Figure 3 (length generalisation); chapter 5.
    """
    Ls = check_lengths(Ls)
    n_sets = check_int("n_sets", n_sets, 1)
    out = torch.empty(model.R, len(Ls), n_sets, dtype=torch.float64)
    for j, L in enumerate(Ls):
        for k in range(n_sets):
            m, _ = est.model_risk(model, data, n=n, seed=derive_seed(seed, "length-sweep", j, k), L=L)
            out[:, j, k] = m
    return out


def reference_curves(
    eta: float, d: int, Ls: Sequence[int], sigma2: float, n_bayes: int = 2000, seed: int = 0
) -> dict[str, np.ndarray]:
    """Exact risks at every ``L``: vanilla GD and debiased GD at step ``eta`` (the learned rate),
    debiased GD at its optimal step ``eta*(L)``, and the Bayes risk (design-only Monte Carlo, its
    standard error under ``"Bayes se"``).  Paper 1, Figure 3; chapter 5."""
    Ls = check_lengths(Ls)
    bayes = [est.bayes_risk(d, L, sigma2, n=n_bayes, seed=derive_seed(seed, "bayes-at-L", j)) for j, L in enumerate(Ls)]
    return {
        "vanilla GD": np.array([est.vanilla_gd_risk(eta, d, L, sigma2) for L in Ls]),
        "debiased GD": np.array([est.debiased_gd_risk(eta, d, L, sigma2) for L in Ls]),
        "debiased GD, eta*(L)": np.array(
            [est.debiased_gd_risk(est.optimal_eta_debiased(d, L, sigma2), d, L, sigma2) for L in Ls]
        ),
        "Bayes": np.array([b[0] for b in bayes]),
        "Bayes se": np.array([b[1] for b in bayes]),
    }


# ----------------------------------------------------------------------------- linearised circuits
def activation_coefficient(attention: str) -> float:
    """``c_f``: first-order coefficient of the normalised activation, ``f(s) ~ f(0)(1 + c_f s)``
    (paper 1, B.2); 1 for linear attention, whose weights are ``s_i / N`` (B.1)."""
    if attention == "linear":
        return 1.0
    return ACTIVATIONS[attention][1]


# f(s) = 1 + c s + a s^2 + b s^3 + ...: (c, a, b) of every normalised activation (paper 1, B.2)
TAYLOR = {
    "softmax": (1.0, 0.5, 1.0 / 6.0),  # exp
    "one_plus_tanh": (1.0, 0.0, -1.0 / 3.0),  # 1 + tanh s = 1 + s - s^3/3 + ...
    "quadratic": (1.0, 0.5, 0.0),  # 1 + s + s^2/2
    "square": (2.0, 1.0, 0.0),  # (1 + s)^2
}


def rate_correction(attention: str, omega: float, d: int) -> float:
    """Third-order factor between the parameter-level rate ``c_f sum_h mu_h omega_h`` of two symmetric
    heads ``(omega, mu), (-omega, -mu)`` and the rate they realise (:func:`realised_rate`):

        eta_realised ~ c_f 2 mu omega (1 + (3 b / c - a) omega^2 (d + 2)),   f = 1 + c s + a s^2 + b s^3.

    Derivation (chapter 5): with ``g_i = x_i^T x_q``, the two heads' weights differ by
    ``(2/L)[c omega g_i (1 - a omega^2 m_2) + b omega^3 g_i^3]`` (``m_2 = mean_j g_j^2 ~ |x_q|^2``, even
    terms cancel between the heads); projecting ``g^3`` on ``g`` gives ``3 |x_q|^2``, and weighting by
    the debiased GD prediction's ``|x_q|^2`` turns ``|x_q|^2`` into ``E|x|^4 / E|x|^2 = d + 2``.
    It is 1 for ``exp`` (``3b/c = a``), below 1 for the other activations of the book."""
    c, a, b = TAYLOR[attention]
    return 1.0 + (3.0 * b / c - a) * omega**2 * (d + 2)


@torch.no_grad()
def realised_rate(model, data: DataConfig, n: int = 20_000, seed: int = 0, L: int | None = None) -> np.ndarray:
    """Per model, the step ``eta`` whose debiased GD prediction is closest to the model's in mean
    square: ``E[y_hat u] / E[u^2]`` with ``u = (1/L) sum_i y_i (x_i - xbar)^T x_q`` (the effective
    learning rate measured at the level of predictions; paper 1, Table 1; chapter 5).  ``(R,)``."""
    n = check_int("n", n, 2)
    num = torch.zeros(model.R, dtype=torch.float64)
    den = 0.0
    for b in sample_chunks(data, n, seed, 5_000, L=L, dtype=model.Q.dtype):
        u = est.debiased_gd_predict(b, 1.0)  # (B,)
        num += (model(b)[..., 0] * u).sum(-1).double().cpu()
        den += float((u * u).sum())
    return (num / den).numpy()


# ----------------------------------------------------------------------------- prediction level
@torch.no_grad()
def prediction_gaps(
    model,
    data: DataConfig,
    predictors: Mapping[str, Callable[[Batch], torch.Tensor]],
    n: int = 20_000,
    seed: int = 0,
    L: int | None = None,
    chunk: int = 5_000,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Mean squared difference ``E (y_hat_model - y_hat_ref)^2`` between every model of an ensemble
    and every reference predictor, on the same ``n`` fresh sequences; ``(mean (R,), std error (R,))``
    per reference.  A predictor maps a single-task batch to ``(B,)`` (shared) or ``(R, B)`` (one per
    model, e.g. GD at each model's own rate).  The key ``"target"`` holds the models' own ICL loss.
    Paper 1, Section 4.3 (the learned predictor is debiased GD); chapter 5."""
    n = check_int("n", n, 2)
    sq: dict[str, list[torch.Tensor]] = {k: [] for k in [*predictors, "target"]}
    for b in sample_chunks(data, n, seed, chunk, L=L, dtype=model.Q.dtype):
        pred = model(b)[..., 0]  # (R, B)
        sq["target"].append((pred - b.yq[..., 0]) ** 2)
        for name, p in predictors.items():
            sq[name].append((pred - p(b).to(pred)) ** 2)  # (R, B)
    out = {}
    for name, parts in sq.items():
        e = torch.cat(parts, dim=-1)
        out[name] = (e.mean(-1).numpy(), (e.std(-1) / math.sqrt(e.shape[-1])).numpy())
    return out


@torch.no_grad()
def paired_losses(
    model,
    data: DataConfig,
    predictors: Mapping[str, Callable[[Batch], torch.Tensor]],
    n: int = 20_000,
    seed: int = 0,
    L: int | None = None,
    chunk: int = 5_000,
) -> dict[str, dict[str, np.ndarray]]:
    """ICL losses of every model of an ensemble and of every reference predictor on the same ``n``
    fresh sequences.  Returns ``{"model": {"loss", "se"}}`` (arrays ``(R,)``) and, per predictor,
    ``{"loss", "se", "diff", "diff_se"}`` where ``diff = loss(model) - loss(predictor)`` per model
    with its paired standard error (negative: the model is better).  Chapter 5."""
    n = check_int("n", n, 2)
    err_m: list[torch.Tensor] = []
    err_p: dict[str, list[torch.Tensor]] = {k: [] for k in predictors}
    for b in sample_chunks(data, n, seed, chunk, L=L, dtype=model.Q.dtype):
        yq = b.yq[..., 0]  # (B,)
        err_m.append((model(b)[..., 0] - yq) ** 2)  # (R, B)
        for name, p in predictors.items():
            err_p[name].append((p(b).to(yq) - yq) ** 2)  # (B,) or (R, B)
    em = torch.cat(err_m, dim=-1)
    sqrt_n = math.sqrt(em.shape[-1])
    out = {"model": {"loss": em.mean(-1).numpy(), "se": (em.std(-1) / sqrt_n).numpy()}}
    for name, parts in err_p.items():
        ep = torch.cat(parts, dim=-1)
        diff = em - ep  # (R, n)
        out[name] = {"loss": ep.mean(-1).numpy(), "se": (ep.std(-1) / sqrt_n).numpy(),
                     "diff": diff.mean(-1).numpy(), "diff_se": (diff.std(-1) / sqrt_n).numpy()}
    return out


# ----------------------------------------------------------------------------- kernel regressors
@torch.no_grad()
def kernel_regressor_search(
    data: DataConfig,
    free_mu: bool,
    n: int = 20_000,
    seed: int = 0,
    L: int | None = None,
    omega_max: float = 3.0,
    grid: int = 61,
) -> dict[str, float]:
    """Best kernel regressor ``mu sum_i y_i softmax_i(omega x_i^T x_q)`` on one fixed Monte Carlo
    sample of ``n`` sequences: Nadaraya-Watson (``mu = 1``, ``free_mu=False``; paper 1, Section 4.3)
    or with the risk-minimising ``mu(omega) = E[k y_q] / E[k^2]`` (``free_mu=True``; the family of
    a single head of pattern (3.1)).  A grid over ``omega in [0, omega_max]`` then a bounded scalar
    search (``scipy.optimize.minimize_scalar``) around the best grid point.  Returns ``omega``, ``mu``
    and the in-sample risk ``risk_search`` (evaluate the result on a fresh sample).  Chapter 5."""
    from scipy.optimize import minimize_scalar

    n = check_int("n", n, 2)
    omega_max = check_float("omega_max", omega_max, 0.0, lo_open=True)
    b = sample_batch(data, n, seed, L=L)
    g = (b.x @ b.xq[..., None])[..., 0]  # (n, L) x_i^T x_q
    y, yq = b.y[..., 0], b.yq[..., 0]  # (n, L), (n,)

    def fit(omega: float) -> tuple[float, float]:
        k = (torch.softmax(omega * g, dim=-1) * y).sum(-1)  # (n,) NW predictions
        if not free_mu:
            return float(((k - yq) ** 2).mean()), 1.0
        ky, kk = float((k * yq).mean()), float((k * k).mean())
        return float((yq * yq).mean()) - ky * ky / kk, ky / kk

    omegas = np.linspace(0.0, omega_max, check_int("grid", grid, 3))
    risks = [fit(float(w))[0] for w in omegas]
    i = int(np.argmin(risks))
    lo, hi = omegas[max(i - 1, 0)], omegas[min(i + 1, len(omegas) - 1)]
    res = minimize_scalar(lambda w: fit(float(w))[0], bounds=(lo, hi), method="bounded", options={"xatol": 1e-4})
    omega = float(res.x) if res.fun <= risks[i] else float(omegas[i])
    risk, mu = fit(omega)
    return {"omega": omega, "mu": mu, "risk_search": risk}


# ----------------------------------------------------------------------------- Theorem 4.2 (iii)
def bayes_ratio_grid(xis: Sequence[float], sigma2s: Sequence[float], d: int, n: int = 200, seed: int = 0):
    """Risk of debiased GD at its optimal step over the Bayes risk, at ``d`` and ``L = round(d / xi)``
    for every ``(xi, sigma2)``, with both proportional limits at ``xi = d / L`` (paper 1, Theorem 4.2
    (iii); chapter 5).  Returns a :class:`pandas.DataFrame` (one row per grid point)."""
    import pandas as pd

    d = check_int("d", d, 1)
    rows = []
    for s2 in sigma2s:
        for xi in xis:
            xi = check_float("xi", xi, 0.0, lo_open=True)
            L = max(2, round(d / xi))
            xi_eff = d / L
            r_dgd = est.debiased_gd_risk(est.optimal_eta_debiased(d, L, s2), d, L, s2)
            r_b, se_b = est.bayes_risk(d, L, s2, n=n, seed=derive_seed(seed, "bayes-grid", len(rows)))
            lim_dgd, lim_b = est.gd_risk_proportional(xi_eff, s2), est.bayes_risk_proportional(xi_eff, s2)
            rows.append({"xi": xi_eff, "sigma2": s2, "d": d, "L": L, "R_dGD*": r_dgd, "R_Bayes": r_b,
                         "R_Bayes se": se_b, "ratio": r_dgd / r_b, "R_dGD* limit": lim_dgd,
                         "R_Bayes limit": lim_b, "ratio limit": lim_dgd / lim_b})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- figure helper
