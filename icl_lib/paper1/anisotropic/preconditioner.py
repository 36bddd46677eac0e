"""The optimal pre-conditioner of one-step GD on anisotropic covariates, in closed form
(paper 1, B.3, C.2 and G.4; chapter 6).

Data: ``x_i, x_q ~ N(0, Sigma)``, ``beta ~ N(0, I_d / d)``, ``y = beta^T x + eps``,
``eps ~ N(0, sigma2)``.  A one-step pre-conditioned GD predictor (``eta`` absorbed into ``Gamma``)

    y_hat = g^T Gamma x_q,     g = (1/L) sum_i y_i (x_i - xbar)   (debiased, paper 1 B.3)
                               g = (1/L) sum_i y_i x_i            (vanilla)

has the ICL risk, quadratic in ``Gamma``,

    R(Gamma) = tr(Gamma Sigma Gamma^T A) - 2 tr(Gamma Sigma B^T) + tr(Sigma)/d + sigma2,
    A = E[g g^T],  B = E[g beta^T],

whose normal equations ``A Gamma Sigma = B Sigma`` give ``Gamma* = A^{-1} B``.  With Gaussian
fourth moments (Isserlis; for the debiased form through the Wishart matrix of the centred pairs
``(x_i, y_i)``, ``L - 1`` degrees of freedom), writing ``c = (tr Sigma + d sigma2) / L``:

    debiased:  A = (L-1)/L^2 (L Sigma^2 / d + (tr Sigma / d + sigma2) Sigma),  B = (L-1)/(L d) Sigma,
               Gamma* = (Sigma + c I)^{-1},
    vanilla:   A = (1 + 1/L) Sigma^2 / d + (tr Sigma / d + sigma2) Sigma / L,  B = Sigma / d,
               Gamma* = ((1 + 1/L) Sigma + c I)^{-1},

and ``R(Gamma*) = tr(Sigma)/d + sigma2 - tr(Gamma* Sigma B^T)``.  For ``Sigma = I`` these are the
optimal steps ``eta*`` of :mod:`icl_lib.estimators`.  ``Gamma*`` is a resolvent of ``Sigma``: for
the Kac-Murdock-Szego ``Sigma``, whose inverse is tridiagonal, ``(Sigma + c I)^{-1}`` is not, and
``Gamma*`` has small ``(i, i+2)`` entries that ``Sigma^{-1}`` lacks (paper 1, C.2).
All closed forms are checked by Monte Carlo and by direct minimisation in
``tests/paper1/test_anisotropic.py``.

* :func:`pgd_moments`, :func:`pgd_risk`, :func:`optimal_preconditioner`, :func:`optimal_pgd_risk`,
  :func:`optimal_eta` -- the moments, the risk, ``Gamma*`` and its risk, and the best plain step;
* :func:`trace_normalise`, :func:`rel_dist`, :func:`band_mean`, :func:`min_eig_sym`,
  :func:`head_split` -- shapes and distances of matrices (also :mod:`icl_lib.figures.heatmaps`);
* :func:`reference_values`, :func:`risk_check`, :func:`risk_estimates` -- the numbers chapter 6
  quotes about ``Gamma*`` and its check of the closed form by Monte Carlo.

Used by chapter 6.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ...circuits import kq_blocks, omega_of
from ...config import DataConfig
from ...sampling import sample_chunks
from ...estimators import debiased_gd_predict
from ...seeding import derive_seed, generator
from ...stats import LEVEL, Estimate, smallest
from ...stats.combine import _z
from ...validate import check_float, check_int

__all__ = [
    "pgd_moments",
    "pgd_risk",
    "optimal_preconditioner",
    "optimal_pgd_risk",
    "optimal_eta",
    "trace_normalise",
    "rel_dist",
    "band_mean",
    "min_eig_sym",
    "head_split",
    "reference_values",
    "risk_check",
    "risk_estimates",
]


def _sigma(Sigma) -> torch.Tensor:
    S = torch.as_tensor(Sigma, dtype=torch.float64)
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(f"Sigma of shape {tuple(S.shape)} is invalid: accepted a square (d, d) matrix")
    if not torch.allclose(S, S.T) or torch.linalg.eigvalsh(S).min() <= 0:
        raise ValueError("Sigma is invalid: accepted a symmetric positive-definite matrix")
    return S


def _check(L, sigma2):
    return check_int("L", L, 1), check_float("sigma2", sigma2, 0.0)


def pgd_moments(Sigma, L: int, sigma2: float, debiased: bool = True) -> tuple[torch.Tensor, torch.Tensor, float]:
    """``(A, B, c0)`` with ``A = E[g g^T]``, ``B = E[g beta^T]``, ``c0 = E[y_q^2] = tr(Sigma)/d + sigma2``
    for the GD direction ``g`` of the (debiased) one-step predictor, Gaussian data (paper 1, G.3,
    Lemma G.4; chapter 6).  Derivation in the module docstring."""
    S = _sigma(Sigma)
    L, s2 = _check(L, sigma2)
    d = S.shape[0]
    t = float(S.trace()) / d + s2  # E[beta^T Sigma beta] + sigma2
    S2 = S @ S
    if debiased:
        A = (L - 1) / L**2 * (L * S2 / d + t * S)
        B = (L - 1) / (L * d) * S
    else:
        A = (1 + 1 / L) * S2 / d + t * S / L
        B = S / d
    return A, B, t


def pgd_risk(Gamma, Sigma, L: int, sigma2: float, debiased: bool = True) -> float:
    """Exact ICL risk ``E (g^T Gamma x_q - y_q)^2`` of one-step pre-conditioned (debiased) GD
    (paper 1, B.3 and Lemma G.4; chapter 6).  ``Gamma`` may be any ``(d, d)`` matrix."""
    A, B, c0 = pgd_moments(Sigma, L, sigma2, debiased)
    S = _sigma(Sigma)
    G = torch.as_tensor(Gamma, dtype=torch.float64)
    return float(torch.trace(G @ S @ G.T @ A) - 2 * torch.trace(G @ S @ B.T) + c0)


def optimal_preconditioner(Sigma, L: int, sigma2: float, debiased: bool = True) -> torch.Tensor:
    """The risk-minimising pre-conditioner ``Gamma*`` (learning rate included; chapter 6):
    ``(Sigma + c I)^{-1}`` (debiased) or ``((1 + 1/L) Sigma + c I)^{-1}`` (vanilla),
    ``c = (tr Sigma + d sigma2) / L``.  Paper 1's Gamma* of eq. (B.6), derived in closed form here."""
    S = _sigma(Sigma)
    L, s2 = _check(L, sigma2)
    d = S.shape[0]
    c = (float(S.trace()) + d * s2) / L
    scale = 1.0 if debiased else 1.0 + 1.0 / L
    return torch.linalg.inv(scale * S + c * torch.eye(d, dtype=S.dtype))


def optimal_pgd_risk(Sigma, L: int, sigma2: float, debiased: bool = True) -> float:
    """``R(Gamma*) = tr(Sigma)/d + sigma2 - tr(Gamma* Sigma B^T)`` (chapter 6)."""
    A, B, c0 = pgd_moments(Sigma, L, sigma2, debiased)
    G = optimal_preconditioner(Sigma, L, sigma2, debiased)
    return float(c0 - torch.trace(G @ _sigma(Sigma) @ B.T))


def optimal_eta(Sigma, L: int, sigma2: float, debiased: bool = True) -> float:
    """Best step of *un*-preconditioned GD (``Gamma = eta I``) on data with covariance ``Sigma``:
    ``eta* = tr(Sigma B) / tr(Sigma A)`` (chapter 6; equals :func:`icl_lib.estimators.optimal_eta_debiased`
    for ``Sigma = I``)."""
    A, B, _ = pgd_moments(Sigma, L, sigma2, debiased)
    S = _sigma(Sigma)
    return float(torch.trace(S @ B) / torch.trace(S @ A))


def trace_normalise(M: torch.Tensor) -> torch.Tensor:
    """``M / (tr M / d)``: unit mean diagonal, sign removed (the shape normalisation of chapter 6)."""
    M = torch.as_tensor(M, dtype=torch.float64)
    d = M.shape[-1]
    return M / (M.diagonal(dim1=-2, dim2=-1).sum(-1)[..., None, None] / d)


def rel_dist(M: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Relative Frobenius distance ``||M - ref||_F / ||ref||_F`` over the last two dims."""
    M, ref = torch.as_tensor(M, dtype=torch.float64), torch.as_tensor(ref, dtype=torch.float64)
    return torch.linalg.matrix_norm(M - ref) / torch.linalg.matrix_norm(ref)


def band_mean(M: torch.Tensor, k: int) -> torch.Tensor:
    """Mean of the ``(i, i+k)`` and ``(i+k, i)`` entries of ``M (..., d, d)``."""
    M = torch.as_tensor(M, dtype=torch.float64)
    return (M.diagonal(k, -2, -1).mean(-1) + M.diagonal(-k, -2, -1).mean(-1)) / 2


def min_eig_sym(M: torch.Tensor) -> torch.Tensor:
    """Smallest eigenvalue of the symmetric part ``(M + M^T) / 2`` (positive: ``M`` is positive definite)."""
    M = torch.as_tensor(M, dtype=torch.float64)
    return torch.linalg.eigvalsh((M + M.transpose(-1, -2)) / 2)[..., 0]


def head_split(KQ: torch.Tensor, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """How far two heads are from the mirror pair ``KQ_1 = omega Gamma``, ``KQ_2 = -omega Gamma``
    (paper 1, B.3; chapter 6), for ``KQ (..., 2, D, D)`` (e.g. a run's history ``(T, 2, D, D)``):

    * scale spread ``(max - min) / mean`` of ``|omega_h|`` (mean diagonal of ``KQ_h[:d, :d]``),
    * shape distance: relative Frobenius distance between the two blocks divided by ``tr / d``.

    Both ``(...)``; both 0 for an exact mirror pair."""
    if KQ.shape[-3] != 2:
        raise ValueError(f"KQ has {KQ.shape[-3]} heads: accepted exactly 2")
    w = omega_of(KQ.double(), d).abs()  # (..., 2)
    spread = (w.amax(-1) - w.amin(-1)) / w.mean(-1)
    shapes = trace_normalise(kq_blocks(KQ.double(), d))  # (..., 2, d, d)
    return spread, rel_dist(shapes[..., 0, :, :], shapes[..., 1, :, :])


# ------------------------------------------------------------------------------- chapter 6: Gamma*
def reference_values(Sigma, L: int, sigma2: float) -> dict[str, float]:
    """The numbers chapter 6 quotes about ``Gamma* = (Sigma + c I)^{-1}`` (paper 1, B.3, eq. B.6):

    * ``c = (tr Sigma + d sigma2) / L``;
    * ``band_star``: mean ``(i, i+2)`` entry of ``Gamma*`` (nan for ``d < 3``);
    * ``d_star_I``: relative Frobenius distance of ``Gamma* / (tr / d)`` to ``I_d``, and
      ``shape_thr = 0.25 d_star_I``, the threshold of the same-shape rule;
    * ``inv_star_S``: distance of ``Gamma*^{-1} / (tr / d)`` to ``Sigma`` (Figure 14)."""
    S = _sigma(Sigma)  # (d, d)
    d = S.shape[0]
    G = optimal_preconditioner(S, L, sigma2)  # (d, d)
    d_star_I = float(rel_dist(trace_normalise(G), torch.eye(d, dtype=torch.float64)))
    return {
        "c": (float(S.trace()) + d * sigma2) / L,
        "band_star": float(band_mean(G, 2)) if d >= 3 else float("nan"),
        "d_star_I": d_star_I,
        "shape_thr": 0.25 * d_star_I,
        "inv_star_S": float(rel_dist(trace_normalise(torch.linalg.inv(G)), S)),
    }


def risk_check(data: DataConfig, n: int, seed: int, scale: float = 0.1) -> "pandas.DataFrame":  # noqa: F821
    """Closed-form risk :func:`pgd_risk` against the Monte Carlo risk of debiased GD
    pre-conditioned by ``Gamma*`` and by two random perturbations ``Gamma* + scale ||Gamma*||_F / d
    N(0, 1)^{d x d}`` (stream ``"perturbations"``), all on the same ``n`` prompts (stream
    ``"mc-check"``).  Paper 1, B.3 and G.4; chapter 6.  Rows ``Gamma*``, ``perturbation 1``,
    ``perturbation 2``; columns ``closed form``, ``Monte Carlo``, ``std error`` and, paired on the
    same prompts, ``minus Gamma*`` (the mean of the squared error minus ``Gamma*``'s) with its
    ``paired se`` (0 on the row of ``Gamma*``)."""
    Sigma, d = data.covariance_matrix(), data.d  # (d, d)
    G_star = optimal_preconditioner(Sigma, data.L, data.sigma2)  # (d, d)
    gen = generator(seed, "perturbations")
    noise = [torch.randn(d, d, generator=gen, dtype=torch.float64) for _ in range(2)]
    Gs = [G_star] + [G_star + scale * G_star.norm() / d * z for z in noise]
    errs = [[] for _ in Gs]
    for b in sample_chunks(data, check_int("n", n, 2), derive_seed(seed, "mc-check"), 20_000):
        for k, G in enumerate(Gs):
            errs[k].append((debiased_gd_predict(b, 1.0, G) - b.yq[..., 0]) ** 2)  # (B,)
    e = torch.stack([torch.cat(x) for x in errs])  # (3, n) squared errors on shared prompts
    diff = e - e[0]  # paired with Gamma*
    rows = []
    for k, G in enumerate(Gs):
        rows.append({"Gamma": "Gamma*" if k == 0 else f"perturbation {k}",
                     "closed form": pgd_risk(G, Sigma, data.L, data.sigma2), "Monte Carlo": float(e[k].mean()),
                     "std error": float(e[k].std() / np.sqrt(e.shape[1])), "minus Gamma*": float(diff[k].mean()),
                     "paired se": float(diff[k].std() / np.sqrt(e.shape[1]))})
    return pd.DataFrame(rows).set_index("Gamma")


def risk_estimates(mc: "pandas.DataFrame", level: float = LEVEL) -> dict[str, Estimate]:  # noqa: F821
    """The two claims of chapter 6 on :func:`risk_check`'s table (paper 1, G.4): ``"closed form"``,
    the relative error ``MC / closed - 1`` of the closed-form risk at ``Gamma*`` (normal interval
    from the Monte Carlo std error), and ``"minimum"``, the smaller paired Monte Carlo excess risk
    of the perturbations over ``Gamma*`` (:func:`~icl_lib.stats.smallest` of their normal intervals)."""
    z, star = _z(level), mc.loc["Gamma*"]
    rel = star["Monte Carlo"] / star["closed form"] - 1
    half = z * star["std error"] / star["closed form"]
    closed = Estimate(float(rel), float(rel - half), float(rel + half), level, "Monte Carlo, normal interval")
    pert = mc.iloc[1:]
    excess = {k: Estimate(float(r["minus Gamma*"]), float(r["minus Gamma*"] - z * r["paired se"]),
                          float(r["minus Gamma*"] + z * r["paired se"]), level, "paired mean, normal interval")
              for k, r in pert.iterrows()}
    return {"closed form": closed, "minimum": smallest(excess)}
