"""Anisotropic covariates: the optimal pre-conditioner of one-step GD and the learned one
(paper 1, B.3 and C.2, Figures 11 and 14; chapter 6).

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
All closed forms are checked by Monte Carlo and by direct minimisation in ``tests/test_anisotropic.py``.

The learned pre-conditioner: linearising the softmax of a two-head model with
``KQ_h[:d, :d] = omega_h Gamma`` and ``OV_h = (0, .., 0, mu_h)`` gives ``y_hat ~ g^T (sum_h mu_h
KQ_h[:d, :d]) x_q`` (paper 1, B.3), so ``sum_h mu_h KQ_h[:d, :d]`` is the model's effective
``Gamma`` (learning rate included); shapes are compared after dividing by ``tr / d``.
"""

from __future__ import annotations

import torch

from ..circuits import kq_blocks, omega_of
from ..data import Batch
from ..validate import check_float, check_int

__all__ = [
    "pgd_moments",
    "pgd_risk",
    "optimal_preconditioner",
    "optimal_pgd_risk",
    "optimal_eta",
    "posterior_mean_predict",
    "trace_normalise",
    "rel_dist",
    "band_mean",
    "min_eig_sym",
    "head_split",
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


def posterior_mean_predict(batch: Batch, prior_cov, sigma2: float) -> torch.Tensor:
    """Bayes posterior-mean prediction ``x_q^T P X^T (X P X^T + sigma2 I)^{-1} y`` for the prior
    ``beta ~ N(0, P)``, by Gaussian conditioning of ``beta`` on ``y`` (the kernel form; chapter 6
    uses it to check that ridge with penalty ``sigma2 d`` is the posterior mean also when ``Sigma != I``)."""
    x, y, xq = batch.x, batch.y[..., 0], batch.xq  # (B, L, d), (B, L), (B, d)
    P = torch.as_tensor(prior_cov, dtype=x.dtype, device=x.device)
    K = x @ P @ x.transpose(-1, -2) + sigma2 * torch.eye(x.shape[-2], dtype=x.dtype, device=x.device)  # (B, L, L)
    alpha = torch.linalg.solve(K, y[..., None])[..., 0]  # (B, L)
    beta_hat = (alpha[..., None] * (x @ P)).sum(-2)  # (B, d) = P X^T alpha
    return (beta_hat * xq).sum(-1)


# ------------------------------------------------------------------------------- learned Gamma
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


# ------------------------------------------------------------------------------- figure helper
